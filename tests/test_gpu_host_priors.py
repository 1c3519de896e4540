"""The shipped GPU priors of DDP's Reducer host cost against the committed real-GPU records they come from
(runs/gpu-profiles/h100-ddp, h200-ddp and the same GPUs' elementwise records), and what
:func:`autotuner.frameworks.ddp.host_priors.gpu_host_prior` answers from them."""
from __future__ import annotations

import fnmatch
import json
import statistics
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from autotuner.errors import ScenarioError
from autotuner.frameworks.ddp.host_priors import (PRIORS_FILE, RECORDS, device_ms, device_ns_per_elem, derive,
                                                  gpu_host_prior, load_priors)

ROOT = Path(__file__).resolve().parents[1]


def _records():
    return {g: (json.loads((ROOT / a).read_text()), json.loads((ROOT / b).read_text()), a, b)
            for g, (a, b) in RECORDS.items()}


def test_the_shipped_priors_are_what_the_records_give():
    """Re-derived from the records, every figure of the shipped file agrees (the script's own check, 1e-6
    relative); the shipped file is in the wheel's package data."""
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_host_priors.py"), "--check"],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-1000:]
    shipped, fresh = load_priors(), derive(_records())
    for gpu in RECORDS:
        assert shipped["gpus"][gpu]["prior"]["per_tensor_us"] == pytest.approx(
            fresh["gpus"][gpu]["prior"]["per_tensor_us"], rel=1e-6)
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    rel = PRIORS_FILE.relative_to(ROOT / "autotuner" / "frameworks" / "ddp").as_posix()
    assert any(fnmatch.fnmatch(rel, g) for g in globs["autotuner.frameworks.ddp"])


def test_the_copies_are_the_records_own_figures():
    """The device's passes of DDP's default on the H100 are the copies the records' README states (ResNet-50,
    ResNet-101, VGG-16: 0.13, 0.22, 0.69 ms at ~3 TB/s; rounded there, so within 10 %); the view saves the copy
    back (half), and a hook adds its casts."""
    ddp, rates, _, _ = _records()["H100-SXM"]
    ns = device_ns_per_elem(rates)
    by = {m["model"]: m["elements"] for m in ddp["ddp"]}
    for model, ms in (("resnet50", 0.13), ("resnet101", 0.22), ("vgg16", 0.69)):
        assert device_ms("default", by[model], ns) == pytest.approx(ms, rel=0.1), model
        assert device_ms("view", by[model], ns) == pytest.approx(device_ms("default", by[model], ns) / 2)
        assert device_ms("fp16_hook", by[model], ns) > device_ms("default", by[model], ns)


def test_a_models_residual_is_its_steps_minus_plain_minus_copies():
    """One row by hand from the raw record: the H200's DenseNet-121 under DDP's default."""
    ddp, rates, _, _ = _records()["H200"]
    m = next(x for x in ddp["ddp"] if x["model"] == "densenet121")
    step = statistics.median(r["step_ms"] for r in m["settings"]["default"])
    plain = statistics.median(r["step_ms"] for r in m["settings"]["plain"])
    want = step - plain - 2 * device_ns_per_elem(rates)["copy"] * m["elements"] * 1e-6
    row = next(x for x in load_priors()["gpus"]["H200"]["models"] if x["model"] == "densenet121")
    assert row["settings"]["default"]["residual_ms"] == pytest.approx(want, abs=1e-3)
    assert row["settings"]["default"]["buckets"] == len(m["settings"]["default"][0]["ddp_logging"]
                                                         ["rebuilt_bucket_sizes"].split(","))


def test_the_models_disagree_and_the_prior_keeps_their_range():
    """Per tensor the models span MobileNetV2's few µs to DenseNet-121's tens (the records' README: 'no one
    per-tensor figure carries from model to model'): each prior's range holds every model's own figure of its
    GPU and its central figure; every figure is >= 0."""
    d = load_priors()
    rows = {(g, m["model"]): m for g, v in d["gpus"].items() for m in v["models"]}
    assert rows[("H200", "mobilenet_v2")]["per_tensor_us"] < 10 < 30 < rows[("H200", "densenet121")]["per_tensor_us"]
    for gpu, v in [*((g, v["prior"]) for g, v in d["gpus"].items()), ("all", d["all"])]:
        mine = [m for (g, _), m in rows.items() if gpu in (g, "all")]
        lo, hi = v["per_tensor_range_us"]
        assert lo <= v["per_tensor_us"] <= hi and all(lo <= m["per_tensor_us"] <= hi for m in mine), gpu
        lo, hi = v["per_bucket_range_us"]
        assert lo <= v["per_bucket_us"] <= hi and all(lo <= m["per_bucket_us"] <= hi for m in mine), gpu
        assert v["per_tensor_us"] > 0 and lo >= 0


def test_gpu_host_prior_by_gpu_all_and_borrowed():
    h100, h200, every = gpu_host_prior("H100"), gpu_host_prior("H200"), gpu_host_prior()
    d = load_priors()
    assert h100.per_tensor_s == pytest.approx(d["gpus"]["H100-SXM"]["prior"]["per_tensor_us"] * 1e-6)
    assert "h100-ddp/ddp-h100.json" in h100.source and "h200" not in h100.source
    assert "h200-ddp/ddp-h200.json" in h200.source and h200.per_tensor_s != h100.per_tensor_s
    assert every.per_tensor_s == pytest.approx(d["all"]["per_tensor_us"] * 1e-6)
    lo, hi = every.per_tensor_range_s
    assert lo <= every.per_tensor_s <= hi and every.at("high").per_tensor_s == hi
    a100 = gpu_host_prior("A100")
    assert a100.per_tensor_s == every.per_tensor_s and "A100-40GB (never measured)" in a100.source
    with pytest.raises(ScenarioError, match="--gpu"):
        gpu_host_prior("no-such-gpu")
