"""Horovod's ``autotuner measure --device cuda``: the sweep workload's tensors on each rank's GPU where torch sees
one and Horovod was built with NCCL, else one line and exit status 2 (the workload's own, a real horovodrun job's
as measure reports it, and measure's before any job starts); CPU sweeps' setup and command line unchanged."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from cli_helpers import need, run

from autotuner.frameworks.horovod.measure import SweepSetup, _last_error, sweep_command

KEYS = [("single", "main", "allreduce", 1024, 1), ("single", "main", "negotiation", 4, 1)]


#: the environment every test runs the CUDA path in (any GPU hidden), and the words of its refusal there
NO_GPU = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
REFUSAL = "sees no CUDA device"


def test_the_sweep_command_and_setup_name_the_device_only_for_cuda():
    cpu = sweep_command(KEYS, 5, 1)
    assert "--device" not in cpu and sweep_command(KEYS, 5, 1, device="cpu") == cpu
    assert sweep_command(KEYS, 5, 1, device="cuda")[-2:] == ("--device", "cuda")
    base = dict(np=2, hosts="", bandwidth_gbit=None, repeats=5, warmup=1)
    assert "device" not in SweepSetup(**base).to_dict()  # sweeps recorded before stay comparable
    assert SweepSetup(**base, device="cuda").to_dict()["device"] == "cuda"


def test_the_workload_refuses_cuda_without_a_gpu_in_one_line():
    need("Horovod")
    p = subprocess.run([sys.executable, "-m", "autotuner.frameworks.horovod.sweepprobe", "--sizes", "1024",
                        "--device", "cuda"], capture_output=True, text=True, timeout=120, env=NO_GPU)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and REFUSAL in lines[0], p.stderr


def test_measure_refuses_cuda_here_before_anything_is_written(tmp_path):
    need("Horovod")
    p = run("measure", "--env", "gpu", "--np", "2", "--device", "cuda", "--sizes", "4K:8K", "--runs-dir",
            tmp_path / "runs", env=NO_GPU, timeout=120)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and REFUSAL in lines[0], p.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.real
def test_a_real_horovodrun_jobs_failure_is_reported_by_the_ranks_refusal():
    """2 ranks under horovodrun (Gloo) with --device cuda and no GPU visible: horovodrun exits non-zero after its
    own traceback, and what measure reports of the job is the ranks' one line."""
    need("Horovod")
    from autotuner.frameworks.horovod.launch import horovodrun_path

    p = subprocess.run([horovodrun_path(), "-np", "2", "-H", "localhost:2", "--gloo", sys.executable, "-m",
                        "autotuner.frameworks.horovod.sweepprobe", "--sizes", "1024", "--device", "cuda"],
                       capture_output=True, text=True, timeout=180, env=NO_GPU)
    assert p.returncode != 0
    said = _last_error(p.stderr + p.stdout)
    assert said.startswith("error: --device cuda") and REFUSAL in said, said
