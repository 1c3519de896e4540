"""``autotuner tune`` on real horovodrun jobs: a SIGKILLed tune resumes without running a trial twice,
Ctrl-C ends it with one line and 130 leaving nothing running, a job without step times is one line and exit 2
with its record kept; bad input is one line and exit 2 before anything starts.

Short jobs on plain loopback (a 6-tensor layout, 10 ms of emulated compute, 3 steps a trial), each trial ~5 s.
"""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.cli_helpers import need_horovod
from tests.test_realrun_faults import MARK, ROOT, TINY, _ranks, env_with, left_after, mark, marked, wait_until  # noqa: F401

ENV = "fresh-poll-2gbit"


def tune_argv(runs, *extra):
    return [sys.executable, "-m", "autotuner.cli", "tune", "--env", ENV, "--model", TINY, "--compute-ms", "10",
            "--steps", "2", "--warmup", "1", "--wait", "sleep", "--runs-dir", str(runs), "--timeout", "120",
            *extra]


def records(runs, name="tune-tiny_layout"):
    p = runs / ENV / "tune" / f"{name}.jsonl"
    return [json.loads(ln) for ln in p.read_text().splitlines() if ln.strip()] if p.exists() else []


# tests marked `real` start real horovodrun/torchrun jobs: alone under pytest-xdist (conftest.py)


@pytest.mark.parametrize("args, says", [
    (("--budget-steps", "0"), "--budget-steps"),
    (("--budget-steps", "5"), "at least 2 trials of 3 steps"),
    (("--compression", "int8"), "tune runs none or fp16"),
])
def test_bad_tune_input_is_one_line_and_exit_2(tmp_path, args, says):
    r = subprocess.run(tune_argv(tmp_path, *args), capture_output=True, text=True, env=env_with("x"), timeout=60)
    assert r.returncode == 2 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / ENV / "tune").exists() or not records(tmp_path)


def test_an_env_without_a_fitted_model_is_one_line_and_exit_2(tmp_path):
    r = subprocess.run([*tune_argv(tmp_path, "--budget-steps", "30")[:5], "nosuch-env", *tune_argv(tmp_path)[6:]],
                       capture_output=True, text=True, env=env_with("x"), timeout=60)
    assert r.returncode == 2 and "fitted model" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.real
def test_a_job_without_step_times_is_one_line_and_exit_2_with_its_record_kept(tmp_path, mark):
    need_horovod()
    r = subprocess.run(tune_argv(tmp_path, "--budget-steps", "30", "--", sys.executable, "-c", "print('no steps')"),
                       capture_output=True, text=True, env=env_with(mark), timeout=300)
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.strip().splitlines()[-1].startswith("error: tune-1") and "records kept" in r.stderr
    recs = records(tmp_path)
    assert [x["status"] for x in recs] == ["failed"] and recs[0]["tune"]["steps"] == 3
    assert left_after(mark) == []


@pytest.mark.real
@pytest.mark.long
def test_a_killed_tune_resumes_where_it_stopped_and_starts_at_the_simulators_choice(tmp_path, mark):
    need_horovod()
    argv = tune_argv(tmp_path, "--budget-steps", "9")  # 3 trials of 3 steps
    p = subprocess.Popen(argv, env=env_with(mark), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: len(records(tmp_path)) >= 1 or p.poll() is not None, 240, "the first trial's record")
        assert p.poll() is None, p.communicate()[1][-2000:]
        wait_until(lambda: _ranks(mark) == 2 or p.poll() is not None, 120, "the second trial's ranks")
        p.kill()
        p.communicate(timeout=10)
        assert left_after(mark) == []
        first = records(tmp_path)
        assert len(first) == 1 and first[0]["trial"] == "tune-1"
        r = subprocess.run(argv + ["--json"], capture_output=True, text=True, env=env_with(mark), timeout=400)
        assert r.returncode == 0, r.stderr[-2000:]
    finally:
        if p.poll() is None:
            p.kill()
    recs = records(tmp_path)
    assert [x["trial"] for x in recs] == ["tune-1", "tune-2", "tune-3"]  # tune-1 was not run again
    assert recs[0] == first[0]
    # the first trial is the simulator's best: the argmin of the prior the record carries for every candidate
    from autotuner.frameworks.horovod.predict import make_scenario
    from autotuner.frameworks.horovod.tune_space import candidate_grid, prior_ms

    sc = make_scenario(None, ENV, TINY, compute_ms=10)[0]
    cands = candidate_grid(("none",))
    assert recs[0]["tune"]["candidate"] == cands[int(np.argmin(prior_ms(sc, cands)))].key
    assert recs[1]["tune"]["candidate"] == "f128-c1-cacheon"  # then Horovod's defaults, the baseline
    assert recs[2]["tune"]["candidate"] in (recs[0]["tune"]["candidate"], "f128-c1-cacheon")  # a repeat: the noise
    out = json.loads(r.stdout)
    # 3 trials: the budget, or the noise (the third trial is a repeat: the stop rule may end it there too)
    assert out["steps"] == 9 and out["trials"] == 3 and out["stop"].startswith(("step budget", "no candidate's"))
    assert len(out["refits"]) == 3 and out["refits"][0]["bandwidth_scale"] == 1.0
    assert (tmp_path / ENV / "tune" / "tune-tiny_layout-report.md").exists()
    assert left_after(mark) == []


@pytest.mark.real
def test_ctrl_c_ends_a_tune_with_one_line_and_130_leaving_nothing_running(tmp_path, mark):
    need_horovod()
    p = subprocess.Popen(tune_argv(tmp_path, "--budget-steps", "30"), env=env_with(mark), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        wait_until(lambda: _ranks(mark) == 2 or p.poll() is not None, 120, "the first trial's ranks")
        assert p.poll() is None, p.communicate()[1][-2000:]
        time.sleep(0.5)
        os.kill(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err[-2000:]
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("interrupted"), err[-1000:]
    assert left_after(mark) == []
    assert all(r["trial"].startswith("tune-") for r in records(tmp_path))  # whatever was written is whole
