"""The DDP probes' ``--device``: a CUDA rank that cannot run refuses in one line (no CUDA device, no NCCL, more
ranks than GPUs), under torchrun too, where the launcher finds the refusal on stdout; a CPU rank's records keep
their keys. Real torchrun (Gloo) on this host; on a machine with a GPU the refusal checked is LOCAL_RANK's."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from autotuner.frameworks.ddp.launch import run_ddp
from autotuner.frameworks.ddp.rankside import REFUSED_TAG

PROBES = [("sweepprobe", ["--sizes", "4096,8192"]), ("burstprobe", ["--sizes", "4096"]),
          ("replay", ["--model", "resnet18"])]


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _refusal_env() -> tuple[dict, str]:
    """The environment a CUDA rank refuses in, and the words of its refusal: here (no CUDA device) any; on a GPU
    machine a LOCAL_RANK beyond its GPUs."""
    env = {k: v for k, v in os.environ.items() if k != "RANK"}
    if _cuda():
        return env | {"LOCAL_RANK": "4096"}, "LOCAL_RANK 4096"
    return env, "sees no CUDA device"


@pytest.mark.parametrize("module, args", PROBES)
def test_a_cuda_rank_that_cannot_run_refuses_in_one_line(module, args):
    env, words = _refusal_env()
    p = subprocess.run([sys.executable, "-m", f"autotuner.frameworks.ddp.{module}", *args, "--device", "cuda"],
                       capture_output=True, text=True, timeout=60, env=env)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and "--device cuda" in lines[0] and words in lines[0], p.stderr
    assert p.stdout.strip() == f"{REFUSED_TAG} {lines[0]}", p.stdout


@pytest.mark.parametrize("module, args, msg", [("sweepprobe", ["--sizes", "8", "--backend", "nccl"], "--device cuda"),
                                               ("sweepprobe", ["--sizes", "8", "--device", "cuda", "--backend",
                                                               "gloo"], "nccl"),
                                               ("burstprobe", ["--device", "tpu"], "--device")])
def test_a_backend_or_device_that_does_not_fit_is_one_line(module, args, msg):
    env = {k: v for k, v in os.environ.items() if k != "RANK"}
    p = subprocess.run([sys.executable, "-m", f"autotuner.frameworks.ddp.{module}", *args], capture_output=True,
                       text=True, timeout=60, env=env)
    assert p.returncode == 2 and msg in p.stderr, p.stderr


@pytest.mark.real
def test_under_torchrun_a_cuda_ranks_refusal_reaches_the_launcher():
    """2 ranks of the sweep with ``--device cuda`` where torch sees no GPU (none here; on a GPU machine
    ``CUDA_VISIBLE_DEVICES`` hides them): every rank exits 2 before its process group starts, and the refusal is on
    torchrun's stdout behind its tag."""
    r = run_ddp("autotuner.frameworks.ddp.sweepprobe", ["--sizes", "4096,8192", "--device", "cuda"],
                ranks_per_host=2, timeout_s=120, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    refused = [x for x in r.stdout.splitlines() if REFUSED_TAG in x]
    assert refused and "sees no CUDA device" in refused[0], (r.stdout, r.stderr[-600:])
    assert any(c != 0 for c in r.returncodes), r.returncodes


@pytest.mark.real
def test_a_cpu_sweep_job_keeps_its_keys_and_the_schema_reads_both_devices():
    """The sweep on 2 CPU ranks (the default device): the record's keys are the CPU sweep's (no device keys) and
    its schema reads it as device cpu; the same record said to come from CUDA ranks reads as cuda (one rank too),
    an unknown device and a one-rank CPU job are refused."""
    from autotuner.errors import AutotunerError
    from autotuner.frameworks.ddp.schemas import DdpSweepRecord
    from autotuner.schemas import check

    r = run_ddp("autotuner.frameworks.ddp.sweepprobe", ["--sizes", "4096,65536", "--repeats", "2"],
                ranks_per_host=2, timeout_s=120)
    line = next(x for x in r.stdout.splitlines() if "AUTOTUNER_DDP_SWEEP " in x)
    rec = json.loads(line.split("AUTOTUNER_DDP_SWEEP ", 1)[1])
    assert set(rec) == {"ranks", "backend", "sizes", "fp32_ms", "fp16_ms", "copy", "casts"}, sorted(rec)
    assert rec["backend"] == "gloo" and [c[0] for c in rec["copy"]] == [4096, 65536]
    assert all(len(s) == 2 for s in rec["fp32_ms"] + rec["fp16_ms"])
    full = {**rec, "setup": {"np": 2}}
    assert check(DdpSweepRecord, full, "sweep").device == "cpu"
    cuda = check(DdpSweepRecord, {**full, "device": "cuda", "casts_bf16": rec["casts"]}, "sweep")
    assert cuda.device == "cuda" and cuda.casts_bf16 == cuda.casts
    with pytest.raises(AutotunerError):
        check(DdpSweepRecord, {**full, "device": "tpu"}, "sweep")
    # one rank: a GPU's job (its copies and casts, NCCL's one-rank floor), never a CPU one
    assert check(DdpSweepRecord, {**full, "ranks": 1, "device": "cuda"}, "sweep").ranks == 1
    with pytest.raises(AutotunerError, match="at least 2 ranks"):
        check(DdpSweepRecord, {**full, "ranks": 1}, "sweep")
