"""Lab report 002 as the ``t4x4-pcie`` environment: the held-out wall times, the
backend what-if, bad rows. Reads the committed runs/t4x4-pcie (report 002 verbatim + env.toml)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autotuner.frameworks.horovod.predict import make_scenario
from autotuner.errors import ScenarioError
from autotuner.frameworks.horovod.fit.fitters import fit_env
from autotuner.frameworks.horovod.knobs import DEFAULTS_0_28
from autotuner.model.wallclock import RunShape
from autotuner.frameworks.horovod.readers.runs import read_env

ROOT = Path(__file__).resolve().parents[1]
ENV = ROOT / "runs" / "t4x4-pcie"


@pytest.fixture(scope="module")
def fitted():
    env = read_env(ENV)
    return env, fit_env(env)


@pytest.fixture(scope="module")
def model_dir(refit_all):
    p, out = refit_all
    assert p.returncode == 0, p.stderr
    return out


def test_steps_per_rank_follow_the_distributed_sampler():
    run = RunShape(60_000, 64, 10, 0.0)
    assert [run.steps_per_rank(n) for n in (1, 2, 3, 4)] == [9380, 4690, 3130, 2350]
    assert run.wall_s(4, 0.01) == pytest.approx(23.5)


def test_only_mpi_1_and_2_gpus_calibrate_compute_and_start_up(fitted):
    env, d = fitted
    f = d["fit"]
    assert (f["fit_backend"], f["fit_processes"]) == ("mpi", [1, 2])
    assert max(abs(r) for r in f["fit_residuals_percent"]) < 1e-3  # two runs, two unknowns
    # the MNIST example's per-step compute on a T4 and a start-up of ~20 s (arithmetic doc: 23-29 s)
    assert 8.0 < f["compute_ms"] < 12.0 and 15.0 < f["startup_s"] < 30.0
    assert d["workloads"]["mnist"]["run"] == {"train_images": 60000, "batch_size": 64, "epochs": 10,
                                              "startup_s": f["startup_s"]}
    # the CPU rows are named, not fitted
    assert any("6 CPU run(s)" in p for p in env.problems)


def test_held_out_wall_times_within_10_percent(fitted):
    held = {(h["backend"], h["processes"]): h for h in fitted[1]["fit"]["held_out"]}
    # MPI 3 and 4 GPUs; every backend's 4-process run; the 1-process runs of Gloo and NCCL
    assert set(held) == {("mpi", 3), ("mpi", 4), ("gloo", 1), ("gloo", 4), ("nccl", 1), ("nccl", 4)}
    for key, h in held.items():
        assert abs(h["error_percent"]) <= 10.0, (key, h)
        lo, hi = h["range_s"]
        assert abs(lo - h["measured_s"]) / h["measured_s"] <= 0.10 and abs(hi - h["measured_s"]) / h["measured_s"] <= 0.10


def test_one_process_is_compute_only(model_dir, fitted):
    sc, _ = make_scenario(model_dir, "t4x4-pcie", "mnist", gpus_per_node=1)
    r = sc.simulate(DEFAULTS_0_28)
    assert r.responses == () and r.comm_s == 0.0
    assert r.step_time_ms == pytest.approx(fitted[1]["fit"]["compute_ms"])
    assert sc.wall_s(r.step_time_s) == pytest.approx(113.525, rel=1e-6)  # the fit run, L29


def test_backend_what_if(model_dir):
    steps = {}
    for b in ("mpi", "gloo", "nccl"):
        sc, _ = make_scenario(model_dir, "t4x4-pcie", "mnist", backend=b)
        assert sc.backend == b
        steps[b] = sc.simulate(DEFAULTS_0_28).step_time_ms
    base, _ = make_scenario(model_dir, "t4x4-pcie", "mnist")
    assert base.simulate(DEFAULTS_0_28).step_time_ms == steps["nccl"]  # the env's build is NCCL
    with pytest.raises(ScenarioError, match="no fitted tier for backend 'ucx'"):
        make_scenario(model_dir, "t4x4-pcie", "mnist", backend="ucx")
    with pytest.raises(ScenarioError, match="was measured with gloo only"):
        make_scenario(model_dir, "local-gloo-1gbit", "resnet50", backend="mpi")


def test_bad_rows_are_named_and_the_rest_still_fits(tmp_path):
    env_dir = tmp_path / "t4x4-pcie"
    shutil.copytree(ENV, env_dir)
    lines = (env_dir / "report-002.md").read_text(encoding="utf-8").split("\n")
    # line 40 (Gloo, 4 GPUs): a wall-clock cell that is not a time; line 44 (NCCL, 4): cells cut off
    lines[39] = lines[39].replace("real\t0m49.046s", "real\t0m4x.046s")
    lines[43] = "   | NCCL     | 1          | 4                  |"
    (env_dir / "report-002.md").write_text("\n".join(lines), encoding="utf-8")
    env = read_env(env_dir)
    d = fit_env(env)
    text = "\n".join(env.problems)
    assert "report-002.md:40" in text and "report-002.md:44" in text
    held = {(h["backend"], h["processes"]) for h in d["fit"]["held_out"]}
    assert ("gloo", 4) not in held and ("nccl", 4) not in held and ("mpi", 4) in held
