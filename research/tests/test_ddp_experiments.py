"""What the committed DDP runs found that is a fact about their sittings alone (measured steps, no prediction),
read from their own records under runs/: no change to the package can move these. The package's predictions for the
same records are checked in ``tests/test_ddp_real.py``.

Not part of the product's suite (``testpaths = ["tests"]``); run from the repository root with
``python -m pytest research/tests``."""
import json
import statistics
from pathlib import Path

RUNS = Path(__file__).resolve().parents[2] / "runs"


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_ddp_tune_found_a_setting_no_slower_than_the_best_of_the_bucket_sweep():
    """``autotuner ddp tune --env ddp-2gbit --model resnet18 --compute-ms 100 --link-gbit 2`` (committed under
    ddp-tune/): its final setting measured no slower than the best of the env's 11-setting sweep of the same job
    (ddp-validation/resnet18.jsonl, 33 trials), in fewer steps, and faster than DDP's defaults measured in it."""
    tune = _jsonl(RUNS / "ddp-2gbit" / "ddp-tune" / "resnet18.jsonl")
    sweep = [r for r in _jsonl(RUNS / "ddp-2gbit" / "ddp-validation" / "resnet18.jsonl") if r["status"] == "ok"]
    by: dict[str, list[float]] = {}
    for r in tune:
        if r["status"] == "ok":
            by.setdefault(r["label"], []).append(r["measured_step_time_ms"])
    final = min(by, key=lambda k: statistics.median(by[k]))
    best_sweep = min(statistics.median([r["measured_step_time_ms"] for r in sweep if r["label"] == lab])
                     for lab in {r["label"] for r in sweep})
    steps = sum(r["setup"]["steps"] + r["setup"]["warmup"] for r in tune)
    assert statistics.median(by[final]) <= best_sweep
    assert steps < sum(r["setup"]["steps"] + r["setup"]["warmup"] for r in sweep)
    assert statistics.median(by[final]) < statistics.median(by["25 MiB (default, first 1 MiB)"])
