"""Step times read from a training command's output (autotuner.readers.replay_output)."""
import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


# ---------------------------------------------------------------- bad numbers


@pytest.mark.parametrize("payload, shown", [
    ('{"step_times_ms": [1' + "0" * 400 + ']}', "step_times_ms[0]"),
    ('{"step_times_ms": [1e999]}', "step_times_ms[0]"),
    ('{"step_times_ms": [NaN]}', "NaN"),
    ('{"step_times_ms": [10.0, Infinity]}', "Infinity"),
    ('{"step_times_ms": [10.0, true]}', "step_times_ms[1] is True"),
    ('{"step_times_ms": [1' + "0" * 5000 + ']}', "unreadable"),
    ('{"step_times_ms": [10.0], "compute_ms": 1e999}', "compute_ms is inf"),
    ('{"step_times_ms": [10.0], "bytes_per_step": -1}', "bytes_per_step is -1"),
    ('{"step_times_ms": [10.0], "bytes_per_step": 1' + "0" * 30 + '}', "bytes_per_step is 1000"),
    ('{"step_times_ms": [10.0], "bytes_per_step": 1.5}', "bytes_per_step is 1.5"),
    ('{"step_times_ms": [10.0], "bytes_per_step": "42"}', "bytes_per_step is '42'"),
    ('[' * 100000, "unreadable"),
])
def test_result_line_with_a_bad_number_is_one_line_error_naming_field_and_value(payload, shown):
    with pytest.raises(ReplayOutputError) as e:
        parse_output(f"AUTOTUNER_RESULT {payload}\n")
    assert shown in str(e.value) and "\n" not in str(e.value) and len(str(e.value)) < 300


def test_bytes_per_step_is_kept_as_an_int():
    r = parse_output('AUTOTUNER_RESULT {"step_times_ms": [10.0], "bytes_per_step": 4.0e6}\n')
    assert r.extra["bytes_per_step"] == 4_000_000 and isinstance(r.extra["bytes_per_step"], int)


def test_skipped_step_and_iter_lines_are_named():
    r = parse_output("AUTOTUNER_STEP_TIME_MS 1e999\nAUTOTUNER_STEP_TIME_MS 12\nAUTOTUNER_STEP_TIME_MS -3\n")
    assert r.step_times_ms == (12.0,)
    assert [p.split(":")[0] for p in r.problems] == ["line 1", "line 3"]
    r = parse_output("Iter #0: 1e-320 img/sec per GPU\nIter #1: 100.0 img/sec per GPU\n", batch_size=32)
    assert r.step_times_ms == (320.0,) and r.problems[0].startswith("line 1: 'Iter' throughput '1e-320'")
    with pytest.raises(ReplayOutputError, match=r"1 line\(s\) skipped; first: line 1: AUTOTUNER_STEP_TIME_MS 'inf'"):
        parse_output("AUTOTUNER_STEP_TIME_MS inf\n")


# ---------------------------------------------------------------- in-process fuzz

_SAMPLE = ("[0]<stdout>:step 0 time_ms 12.0 (warmup)\n"
           "[0]<stdout>:AUTOTUNER_RESULT {\"step_times_ms\": [10.5, 11.5], \"bytes_per_step\": 42, \"ranks\": 2}\n"
           "AUTOTUNER_STEP_TIME_MS 101.5\nIter #0: 100.0 img/sec per CPU\n")
_NUM_RE = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_BAD = ["1e999", "-1e999", "NaN", "Infinity", "-Infinity", "1e308", "9" * 400, "9" * 5000, "0", "-1", "1e-320",
        "true", "null", '"7"', "[]", "{}", "x"]


@st.composite
def _mutated_output(draw):
    text = _SAMPLE
    for _ in range(draw(st.integers(1, 4))):
        spans = [m.span() for m in _NUM_RE.finditer(text)]
        a, b = spans[draw(st.integers(0, len(spans) - 1))]
        text = text[:a] + draw(st.sampled_from(_BAD)) + text[b:]
    if draw(st.booleans()):
        i = draw(st.integers(0, len(text) - 1))
        text = text[:i] + text[i + draw(st.integers(1, 30)):]
    return text


@settings(max_examples=300, deadline=None, derandomize=True)
@given(_mutated_output(), st.sampled_from([None, 1, 32, 10**400]))
def test_fuzz_mutated_output_only_replay_output_error_escapes(text, batch_size):
    """Only ReplayOutputError (one line) escapes; step times kept are finite and positive."""
    try:
        r = parse_output(text, batch_size=batch_size)
    except ReplayOutputError as e:
        assert "\n" not in str(e)
        return
    assert all(math.isfinite(t) and t > 0 for t in r.step_times_ms + r.img_per_sec)
    nb = r.extra.get("bytes_per_step")
    assert nb is None or (isinstance(nb, int) and 0 <= nb < 2**63)
