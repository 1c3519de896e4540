"""``research/scripts/readiness_impact.py`` on the committed H100 readiness profiles: a row for every calibrated
(environment, model) pair whose layout has the profiled tensors, finite figures, and a pick never better than the
best (regret >= 0).

Not part of the product's suite (``testpaths = ["tests"]``); run from the repository root with
``python -m pytest research/tests``."""
import importlib.util
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
PROFILES = ROOT / "runs" / "gpu-profiles" / "h100-torch2.11" / "profiles.json"


def test_readiness_impact_rows_for_every_calibrated_pair():
    spec = importlib.util.spec_from_file_location("readiness_impact", ROOT / "research" / "scripts" / "readiness_impact.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    profiles = json.loads(PROFILES.read_text())["profiles"]
    df = mod.rows(profiles, ROOT / "autotuner" / "models", {64})
    assert {(r.env, r.model) for r in df.itertuples()} == {
        ("local-gloo-1gbit", "resnet50"), ("v100-16gbit", "resnet50"),
        ("v100-5gbit", "resnet50"), ("v100-5gbit", "vgg16"),
        ("laptop-cpu", "resnet50"), ("laptop-cpu", "resnet18")}  # CPU ranks: a what-if of the GPU order
    assert len(df) == 12  # fp32 and bf16 autocast each
    assert np.isfinite(df[["defaults FLOP ms", "defaults measured ms", "pick regret %"]].to_numpy()).all()
    assert (df["pick regret %"] >= 0).all()
