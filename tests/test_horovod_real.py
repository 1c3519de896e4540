"""Real Horovod: 2 ranks, Gloo, on this machine (horovodrun, not a stand-in).

Needs Horovod 0.28.1 built by scripts/install_horovod.sh (``.ci/run`` does it). Without it the
tests are skipped locally but fail under CI (CI=true), so a broken install cannot pass silently.
"""
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autotuner.frameworks.horovod.knobs import MIB, Config
from autotuner.readers.layouts import load_layout
from autotuner.readers.replay_output import parse_output
from autotuner.readers.timeline import read_timeline
from autotuner.frameworks.horovod.launch import Job, replay_command, run_job
from tests.cli_helpers import need_horovod

TINY = str(Path(__file__).parent / "data" / "tiny_layout.json")
# tests marked `real` start real horovodrun/torchrun jobs: alone under pytest-xdist (conftest.py)


@pytest.mark.real
def test_replay_under_horovodrun_and_its_timeline_read_back(tmp_path):
    need_horovod()
    layout = load_layout(TINY)
    steps, warmup = 3, 1
    tl = tmp_path / "timeline.json"
    job = Job(np=2, command=replay_command(TINY, 30.0, steps, warmup),
              config=Config(fusion_threshold_bytes=0, cycle_time_ms=2.0), timeline=tl)
    res = run_job(job, timeout_s=110)
    assert res.returncode == 0 and not res.timed_out, res.stderr[-2000:]
    out = parse_output(res.stdout)
    assert len(out.step_times_ms) == steps
    assert all(t >= 30.0 for t in out.step_times_ms)  # the emulated compute is inside every step
    assert out.extra["bytes_per_step"] == layout.total_bytes
    timeline = read_timeline(tl)
    allreduces = [r for r in timeline.responses if r.op == "allreduce"]
    # fusion off: one response per tensor per step, named and sized exactly as the layout says.
    # Horovod's timeline writer is a background thread: the last step's records can be lost
    # when the job ends (seen once in CI), so at least every step but the last must be there.
    assert len(allreduces) % layout.n_tensors == 0
    assert steps + warmup - 1 <= len(allreduces) // layout.n_tensors <= steps + warmup
    assert all(len(r.tensors) == 1 for r in allreduces)
    sizes = dict(zip(layout.names, layout.sizes_bytes.tolist()))
    for r in allreduces:
        name = r.tensors[0].removeprefix("allreduce.")
        assert r.nbytes == sizes[name]
        assert r.activity == "GLOO_ALLREDUCE" and r.duration_us >= 0
    assert timeline.cycle_starts_us  # --timeline-mark-cycles


@pytest.mark.real
def test_fused_responses_with_a_large_threshold(tmp_path):
    need_horovod()
    layout = load_layout(TINY)
    tl = tmp_path / "timeline.json"
    job = Job(np=2, command=replay_command(TINY, 30.0, 2, 1),
              config=Config(fusion_threshold_bytes=64 * MIB, cycle_time_ms=50.0), timeline=tl)
    res = run_job(job, timeout_s=110)
    assert res.returncode == 0, res.stderr[-2000:]
    allreduces = [r for r in read_timeline(tl).responses if r.op == "allreduce"]
    # a 50 ms cycle and a 30 ms step: each step's tensors go out in few, fused responses
    total = sum(r.nbytes for r in allreduces)
    assert total % layout.total_bytes == 0 and total // layout.total_bytes in (2, 3)  # see above
    assert len(allreduces) < (total // layout.total_bytes) * layout.n_tensors
    assert max(len(r.tensors) for r in allreduces) > 1


def _validate_argv(runs: Path, proposals: Path) -> list[str]:
    return [sys.executable, "-m", "autotuner.cli", "validate", "--env", "ci-local", "--model", TINY,
            "--compute-ms", "20", "--steps", "2", "--warmup", "1", "--repeats", "2", "--no-autotune",
            "--proposals", str(proposals), "--runs-dir", str(runs), "--timeout", "100"]


@pytest.mark.real
def test_validate_killed_mid_trial_resumes_without_losing_or_repeating(tmp_path):
    need_horovod()
    proposals = tmp_path / "p.json"
    proposals.write_text(json.dumps([{"fusion_threshold_mb": 1, "cycle_time_ms": 2}]))
    runs = tmp_path / "runs"
    records = runs / "ci-local" / "validation" / "tiny_layout.jsonl"
    argv = _validate_argv(runs, proposals)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 100
    while time.monotonic() < deadline:  # wait for the first finished trial, then kill mid-second
        if records.exists() and records.read_text().count("\n") >= 1:
            break
        time.sleep(0.2)
    time.sleep(2.0)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    before = records.read_text().splitlines()
    assert 1 <= len(before) < 4, "killed too late: every trial had already finished"
    # no horovodrun left behind by the kill
    left = subprocess.run(["pgrep", "-f", f"--model {TINY}"], capture_output=True, text=True).stdout.split()
    assert not left
    res = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    after = records.read_text().splitlines()
    assert after[:len(before)] == before  # finished trials kept, byte for byte
    trials = [json.loads(line)["trial"] for line in after]
    assert sorted(trials) == sorted({"default/r0", "proposal-1/r0", "default/r1", "proposal-1/r1"})
    assert all(json.loads(line)["status"] == "ok" for line in after)
    assert "verdict: proposal-1 measured throughput" in res.stdout
    assert (runs / "ci-local" / "validation" / "tiny_layout-report.md").exists()
    # by default the production job, the one predicted: no Horovod timeline, and the records say so
    assert all(json.loads(line)["timeline_recorded"] is False and json.loads(line)["timeline"] is None
               for line in after)


@pytest.mark.real
@pytest.mark.long
def test_validate_timeline_when_asked_is_recorded_and_kept_out_of_the_error(tmp_path):
    """``--timeline`` records Horovod's timeline in every trial (responses/step); the report says its
    cost was measured into every trial and leaves the error out; a re-run without it measures again."""
    need_horovod()
    proposals = tmp_path / "p.json"
    proposals.write_text(json.dumps([{"fusion_threshold_mb": 1, "cycle_time_ms": 2}]))
    runs = tmp_path / "runs"
    argv = _validate_argv(runs, proposals)
    argv[argv.index("--repeats") + 1] = "1"
    res = subprocess.run(argv + ["--timeline"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    vdir = runs / "ci-local" / "validation"
    recs = [json.loads(line) for line in (vdir / "tiny_layout.jsonl").read_text().splitlines()]
    assert [r["timeline_recorded"] for r in recs] == [True, True]
    assert all(r["timeline"]["responses_per_step"] > 0 for r in recs)
    md = (vdir / "tiny_layout-report.md").read_text()
    assert "Horovod's timeline ran in every fixed-configuration trial (--timeline)" in md
    assert md.count("(with timeline) |") == 2  # ci-local has no fitted model: no prediction, no error either way
    res = subprocess.run(argv, capture_output=True, text=True, timeout=300)  # the default: the production job
    assert res.returncode == 0, res.stderr[-2000:]
    recs = [json.loads(line) for line in (vdir / "tiny_layout.jsonl").read_text().splitlines()]
    assert [r["timeline_recorded"] for r in recs] == [True, True, False, False]  # measured again, not reused
    md = (vdir / "tiny_layout-report.md").read_text()
    assert "with timeline" not in md and "2 other record(s) of this setup" in md


@pytest.mark.real
def test_crashing_and_hanging_ranks_are_failed_trials_and_the_batch_goes_on(tmp_path):
    need_horovod()
    proposals = tmp_path / "p.json"
    proposals.write_text(json.dumps([{"fusion_threshold_mb": 1, "cycle_time_ms": 2}]))
    runs = tmp_path / "runs"
    # rank 1 crashes, rank 0 waits forever in an allreduce that never completes -> Horovod aborts
    # the job, or our timeout kills it; either way the trial is recorded as not ok
    crash = ("import sys, horovod.torch as hvd, torch; hvd.init(); "
             "sys.exit(3) if hvd.rank() == 1 else hvd.allreduce(torch.ones(1)); print('AUTOTUNER_STEP_TIME_MS 1')")
    argv = [sys.executable, "-m", "autotuner.cli", "validate", "--env", "ci-fail", "--model", TINY, "--no-autotune",
            "--repeats", "1", "--proposals", str(proposals), "--runs-dir", str(runs), "--timeout", "40",
            "--name", "crash", "--", sys.executable, "-c", crash]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=200)
    assert res.returncode == 0, res.stderr[-2000:]
    recs = [json.loads(line) for line in (runs / "ci-fail" / "validation" / "crash.jsonl").read_text().splitlines()]
    assert [r["trial"] for r in recs] == ["default/r0", "proposal-1/r0"]  # the batch went on
    assert all(r["status"] in ("failed", "timeout") and r["error"] for r in recs)
    assert "no proposal was measured successfully" in res.stdout


@pytest.mark.real
def test_a_hanging_job_is_killed_at_the_timeout(tmp_path):
    need_horovod()
    job = Job(np=2, command=(sys.executable, "-c", "import time; time.sleep(120)"))
    t0 = time.monotonic()
    res = run_job(job, timeout_s=8)
    assert res.timed_out and time.monotonic() - t0 < 30
    left = subprocess.run(["pgrep", "-f", "time.sleep(120)"], capture_output=True, text=True).stdout.split()
    assert not left  # every rank of the process group is gone


@pytest.mark.real
def test_user_command_with_synthetic_benchmark_output_and_batch_size(tmp_path):
    need_horovod()
    # a user's own script, printed the way horovod/examples/pytorch/pytorch_synthetic_benchmark.py does
    script = ("import horovod.torch as hvd, torch; hvd.init(); hvd.allreduce(torch.ones(4)); "
              "[print(f'Iter #{i}: {v} img/sec per CPU') for i, v in enumerate((100.0, 200.0))] "
              "if hvd.rank() == 0 else None")
    runs = tmp_path / "runs"
    argv = [sys.executable, "-m", "autotuner.cli", "validate", "--env", "ci-user", "--model", TINY, "--no-autotune",
            "--repeats", "1", "--proposals", str(Path(__file__).parent / "data" / "one_proposal.json"),
            "--runs-dir", str(runs), "--timeout", "60", "--batch-size", "32", "--name", "user",
            "--", sys.executable, "-c", script]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=200)
    assert res.returncode == 0, res.stderr[-2000:]
    recs = [json.loads(line) for line in (runs / "ci-user" / "validation" / "user.jsonl").read_text().splitlines()]
    assert [r["status"] for r in recs] == ["ok", "ok"]
    assert recs[0]["step_times_ms"] == [320.0, 160.0]  # 1000 * 32 images / (img/sec)
    assert recs[0]["setup"]["batch_size"] == 32 and recs[0]["setup"]["command"][0] == sys.executable


def test_a_gloo_job_asks_the_builds_gloo_support_once_and_keeps_the_answer(tmp_path, monkeypatch):
    """autotuner/frameworks/horovod/horovodrun.py: the first job asks Horovod's own check (a forked import of
    horovod.torch), the next ones read the kept answer; another build (another key) asks again."""
    need_horovod()
    import horovod.common.util as hvd_util

    from autotuner.frameworks.horovod import horovodrun as H

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert H.gloo_built_cached() is True  # Horovod's real check, on the build scripts/install_horovod.sh made
    kept = json.loads(H.cache_path().read_text())
    assert kept == {"key": H.build_key(), "gloo_built": True} and kept["key"][1], kept

    def no_check():
        raise AssertionError("asked Horovod again")
    monkeypatch.setattr(hvd_util, "gloo_built", no_check)
    assert H.gloo_built_cached() is True  # read back, not asked
    asked = []
    monkeypatch.setattr(hvd_util, "gloo_built", lambda: asked.append(1) or False)
    H.cache_path().write_text(json.dumps({"key": ["0.0.0", []], "gloo_built": True}))  # another build's answer
    assert H.gloo_built_cached() is False and asked == [1]
    H.cache_path().write_text("{not json")
    assert H.gloo_built_cached() is False and asked == [1, 1]
    assert json.loads(H.cache_path().read_text())["gloo_built"] is False


def test_a_gloo_job_starts_through_the_checked_launcher_and_an_mpi_job_through_horovodrun():
    need_horovod()
    gloo = Job(np=2, command=("python", "train.py"))
    assert gloo.argv()[:3] == [sys.executable, "-m", "autotuner.frameworks.horovod.horovodrun"]
    assert gloo.argv()[3:] == ["-np", "2", "-H", "localhost:2", "--gloo", "python", "train.py"]
    mpi = Job(np=2, command=("python", "train.py"), gloo=False)
    assert Path(mpi.argv()[0]).name == "horovodrun" and "--gloo" not in mpi.argv()
    emulated = Job(np=2, command=("python", "train.py"), launcher=("python", "-m", "x"))
    assert emulated.argv()[:3] == ["python", "-m", "x"]
