"""Step times read from a training command's output (autotuner.readers.replay_output)."""
import pytest

from autotuner.readers.replay_output import ReplayOutputError, parse_output


def test_replay_summary_line_with_horovodrun_prefixes():
    text = ("[1]<stdout>:AUTOTUNER_RESULT {\"step_times_ms\": [9.0]}\n"
            "[0]<stdout>:step 0 time_ms 12.0 (warmup)\n"
            "[0]<stdout>:AUTOTUNER_RESULT {\"step_times_ms\": [10.5, 11.5], \"bytes_per_step\": 42}\n")
    r = parse_output(text)
    assert r.form == "replay"
    assert r.step_times_ms == (10.5, 11.5)  # rank 0's line, not rank 1's
    assert r.extra["bytes_per_step"] == 42


def test_user_script_step_lines():
    r = parse_output("warming up\nAUTOTUNER_STEP_TIME_MS 101.5\nAUTOTUNER_STEP_TIME_MS=99\nAUTOTUNER_STEP_TIME_MS nan?\n")
    assert r.form == "step_lines" and r.step_times_ms == (101.5, 99.0)


def test_synthetic_benchmark_lines_need_batch_size_for_step_time():
    text = "Iter #0: 100.0 img/sec per CPU\nIter #1: 50.0 img/sec per CPU\nImg/sec per CPU: 75.0 +-35.4\n"
    assert parse_output(text).step_times_ms == ()
    r = parse_output(text, batch_size=32)
    assert r.img_per_sec == (100.0, 50.0)
    assert r.step_times_ms == pytest.approx((320.0, 640.0))


@pytest.mark.parametrize("text", ["", "nothing here\n", "AUTOTUNER_RESULT {not json\n",
                                  "AUTOTUNER_RESULT {\"step_times_ms\": []}\n",
                                  "AUTOTUNER_RESULT {\"step_times_ms\": [-1]}\n", "AUTOTUNER_RESULT [1, 2]\n"])
def test_no_step_time_is_one_clear_error(text):
    with pytest.raises(ReplayOutputError) as e:
        parse_output(text)
    assert "\n" not in str(e.value)
