"""The GPU readiness records under runs/gpu-profiles/ as the package and scripts read them."""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from autotuner.readers.layouts import load_layout

ROOT = Path(__file__).resolve().parents[1]
PROFILE_DIR = ROOT / "runs" / "gpu-profiles" / "h100-torch2.11"
MEASURED = sorted((PROFILE_DIR / "layouts").glob("*.json"))


def test_measured_layout_files_are_the_batch_64_profiles():
    profiles = json.loads((PROFILE_DIR / "profiles.json").read_text())["profiles"]
    b64 = {(p["model"], p["precision"]): p for p in profiles if p["batch_size"] == 64}
    assert len(MEASURED) == len(b64) == 10
    for path in MEASURED:
        model, _, rest = path.stem.partition("-")
        prof = b64[(model, rest.rsplit("-b", 1)[0])]
        layout = load_layout(str(path))
        assert list(layout.names) == prof["order"]
        # the shares are the increments of the measured ready times
        ready = np.array(prof["ready_ms"]) / prof["ready_ms"][-1]
        assert np.allclose(layout.ready_fraction, ready, atol=1e-4)  # ready_ms kept to 0.1 µs


@pytest.mark.parametrize("path", MEASURED, ids=lambda p: p.stem)
def test_measured_layouts_hold_the_shipped_tensors(path):
    measured = load_layout(str(path))
    shipped = load_layout(path.stem.split("-")[0])
    assert sorted(measured.names) == sorted(shipped.names)
    assert measured.total_bytes == shipped.total_bytes


def test_readiness_impact_rows_for_every_calibrated_pair():
    spec = importlib.util.spec_from_file_location("readiness_impact", ROOT / "scripts" / "readiness_impact.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    profiles = json.loads((PROFILE_DIR / "profiles.json").read_text())["profiles"]
    df = mod.rows(profiles, ROOT / "autotuner" / "models", {64})
    assert {(r.env, r.model) for r in df.itertuples()} == {
        ("local-gloo-1gbit", "resnet50"), ("v100-16gbit", "resnet50"),
        ("v100-5gbit", "resnet50"), ("v100-5gbit", "vgg16"),
        ("laptop-cpu", "resnet50"), ("laptop-cpu", "resnet18")}  # CPU ranks: a what-if of the GPU order
    assert len(df) == 12  # fp32 and bf16 autocast each
    assert np.isfinite(df[["defaults FLOP ms", "defaults measured ms", "pick regret %"]].to_numpy()).all()
    assert (df["pick regret %"] >= 0).all()
