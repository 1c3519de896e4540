"""What the real runs on two emulated hosts x 2 ranks (runs/local-gloo-2x2/validation/) measured, read from their
own records: suggest's picks against the defaults and the hierarchical flags against plain defaults. Facts about
those sittings, which no change to the package can move; the model's predictions for the same records are checked
in ``tests/test_local_gloo_2x2.py``.

Not part of the product's suite (``testpaths = ["tests"]``); run from the repository root with
``python -m pytest research/tests``."""
import json
from pathlib import Path

import numpy as np

RUNS = Path(__file__).resolve().parents[2] / "runs"
VALIDATION = RUNS / "local-gloo-2x2" / "validation"


def _records(name: str, vdir: Path = VALIDATION) -> list[dict]:
    recs = [json.loads(line) for line in (vdir / f"{name}.jsonl").read_text().splitlines()]
    return [r for r in recs if r.get("status") == "ok"]


def _by_label(name: str, vdir: Path = VALIDATION) -> dict[str, list[float]]:
    by: dict[str, list[float]] = {}
    for r in _records(name, vdir):
        if r["kind"] != "autotune":
            by.setdefault(r["label"], []).append(r["measured_step_time_ms"])
    return by


def _throughput(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """a's throughput against b's: the median ratio (b/a of step times) and its min-max over repeat pairs."""
    ratios = [y / x for x in a for y in b]
    return float(np.median(b) / np.median(a)), min(ratios), max(ratios)


def test_the_bert_medium_pick_measured_slower_than_the_defaults_within_their_repeat_spread():
    """BERT-Medium: the pick (230 MiB, 0.24 ms cycle, predicted 1.6 % faster) measured 3.8 % slower than the
    defaults at the median, a gain below the testbed's repeat spread (0.90-1.01x over repeat pairs): a 0.24 ms cycle
    wakes 4 ranks' background loops on 2 cores."""
    by = _by_label("suggest-bert_medium")
    med, lo, hi = _throughput(by["proposal-1"], by["default"])
    assert 0.95 < med < 1.0 and lo < med < hi and hi > 1.0


def test_the_resnet50_pick_measured_as_the_defaults_and_autotunes_best():
    """ResNet50: the model kept Horovod's defaults (nothing predicted meaningfully faster); measured, the pick is
    within its repeats' range of both the defaults and autotune's best, and no slower than the defaults at the
    median."""
    by = _by_label("suggest-resnet50")
    for ref in ("default", "autotune_best"):
        med, lo, hi = _throughput(by["proposal-1"], by[ref])
        assert lo <= 1.0 <= hi and med >= 0.99, (ref, med, lo, hi)
    assert np.median(by["proposal-1"]) <= np.median(by["default"])


def test_the_hierarchical_flags_measured_inside_the_plain_defaults_spread():
    """Defaults with --hierarchical-allreduce --hierarchical-allgather on 2 hosts x 2 ranks (Gloo ignores them):
    the measured step is inside the plain defaults' own spread over repeats."""
    groups: dict[tuple, list[float]] = {}
    for r in _records("knobs-resnet50"):
        c = r["config"]
        key = (c["fusion_threshold_mb"], c["cycle_time_ms"], c["cache_capacity"] > 0, c["hierarchical_allreduce"])
        groups.setdefault(key, []).append(r["measured_step_time_ms"])
    on, off = groups[(128, 1.0, True, True)], groups[(128, 1.0, True, False)]
    assert abs(np.median(on) - np.median(off)) <= max(off) - min(off)


def test_with_polling_waits_both_picks_measured_at_least_the_defaults_and_autotunes_best():
    """runs/local-gloo-2x2-poll (the same cluster, each rank's waiter sleeping): for both models suggest's pick
    measured >= Horovod's defaults and >= autotune's best at the median over repeats."""
    for model in ("resnet50", "bert_medium"):
        by = _by_label(f"suggest-{model}", RUNS / "local-gloo-2x2-poll" / "validation")
        for ref in ("default", "autotune_best"):
            med, lo, hi = _throughput(by["proposal-1"], by[ref])
            assert med >= 1.0, (model, ref, med, lo, hi)
