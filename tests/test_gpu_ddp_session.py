"""The one-GPU DDP session's parts that run without a GPU: the shell script parses, and its check
(scripts/gpu_ddp_check.py) compares a prediction with a committed real-GPU record: DDP's rebuilt buckets there are
the Reducer simulator's, each model held out gets a prediction from the others' steps, and bad input is one line."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECK = ROOT / "scripts" / "gpu_ddp_check.py"
H200 = ROOT / "runs" / "gpu-profiles" / "h200-ddp" / "ddp-h200.json"
MODELS = ["resnet50", "resnet101", "vgg16", "mobilenet_v2"]


def test_the_session_script_parses():
    p = subprocess.run(["bash", "-n", str(ROOT / "scripts" / "gpu_ddp_session.sh")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def _check(*args, cwd=ROOT):
    return subprocess.run([sys.executable, str(CHECK), *map(str, args)], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def test_compare_against_the_h200_record(tmp_path):
    """predict's file built from the H200 record's own rates is not at hand without a GPU env, so the check file
    here carries the H200 elementwise record's rates (host_priors.device_ns_per_elem) and the simulator's buckets;
    compare then reads the real record: every bucket count matches DDP's own, and the held-out terms come from the
    other three models."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import gpu_ddp_check as g

    from autotuner.frameworks.ddp.host_priors import device_ns_per_elem

    ns = device_ns_per_elem(json.loads((ROOT / "runs/gpu-profiles/h200-device/fp16-h200.json").read_text()))
    models = {}
    for m in MODELS:
        T, E, L = g.layout_of(m)
        models[m] = {"tensors": T, "elements": E, "settings": {
            s: {"buckets": g.buckets(L, g.CONFIGS[s]), "device_ms": 0.0, "predicted_ms": {}} for s in
            ("default", "cap1", "cap100", "view", "fp16_hook")}}
    check = tmp_path / "check.json"
    check.write_text(json.dumps({"schema": g.SCHEMA, "rates_ns_per_elem": ns, "models": models}))
    p = _check("compare", "--check", check, "--measured", H200)
    assert p.returncode == 0, p.stderr
    d = json.loads(check.read_text())
    assert d["bucket_counts_match"] is True
    assert d["summary"]["held out"]["n"] == 4 * 5
    for m in MODELS:
        assert all(x >= 0 for x in d["models"][m]["held_out_terms_us"])
        r = d["models"][m]["settings"]["default"]
        assert r["measured_step_ms"] == pytest.approx(r["plain_ms"] + r["measured_ms"], abs=1e-3)


@pytest.mark.parametrize("args, msg", [(["predict", "--env-dir", "/nonexistent", "--out", "x.json"], "no sweep"),
                                       (["predict", "--env-dir", ".", "--settings", "cap7", "--out", "x.json"],
                                        "--settings cap7")])
def test_bad_input_is_one_line(args, msg, tmp_path):
    p = _check(*args, cwd=tmp_path)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and msg in lines[0], p.stderr
