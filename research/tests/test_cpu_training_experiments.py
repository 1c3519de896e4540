"""What the real CPU training runs of ``examples/train_horovod.py`` on fresh-poll-2gbit found, read from their own
records under ``runs/fresh-poll-2gbit/validation/`` and the profiled layouts under ``examples/layouts/``: facts about
those sittings (their measured steps and the predictions recorded when they ran), which no change to the package
can move. The package's predictions for the same records are checked in ``tests/test_cycle_cpu.py``.

Not part of the product's suite (``testpaths = ["tests"]``); run from the repository root with
``python -m pytest research/tests``."""
import json
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VALIDATION = ROOT / "runs" / "fresh-poll-2gbit" / "validation"
LAYOUTS = ROOT / "examples" / "layouts"


def _by_label(name: str) -> dict[str, list[dict]]:
    by: dict[str, list[dict]] = {}
    for line in (VALIDATION / name).read_text().splitlines():
        r = json.loads(line)
        if r["status"] == "ok":
            by.setdefault(r["label"], []).append(r)
    return by


def test_the_first_cpu_runs_were_predicted_8_to_28_percent_low():
    """The first runs (``cpu-tiny_transformer.jsonl``: Horovod's timeline on, predicted before the cycle term): 5
    configurations x 3 repeats, every median above the profiled compute (312.8 ms), and the predictions recorded
    when they ran 8-28 % below the medians: short of the 10 % a CPU script was to be predicted within."""
    by = _by_label("cpu-tiny_transformer.jsonl")
    assert len(by) == 5 and all(len(rs) == 3 for rs in by.values())
    errs = []
    for rs in by.values():
        med = sorted(r["measured_step_time_ms"] for r in rs)[1]
        assert med > 312.8
        errs.append(rs[0]["predicted_step_time_ms"] / med - 1)
    assert all(-0.29 < e < -0.08 for e in errs) and min(errs) < -0.10, errs


def test_a_concurrent_profile_records_the_ranks_sharing_the_host():
    """The same model profiled with ``--threads 1 --concurrent 2`` (the other rank computing meanwhile) takes 2-10 %
    longer per forward + backward than profiled alone: caches and memory bandwidth shared with the other copy."""
    alone, c2 = (json.loads((LAYOUTS / n).read_text()) for n in ("tiny_transformer.json", "tiny_transformer_c2.json"))
    assert alone["threads"] == c2["threads"] == 1 and c2["concurrent"] == 2 and "concurrent" not in alone
    ratio = (c2["forward_ms"] + c2["backward_ms"]) / (alone["forward_ms"] + alone["backward_ms"])
    assert 1.02 < ratio < 1.10


def test_the_first_pick_for_the_cpu_script_measured_a_tie_with_the_defaults():
    """suggest's top pick then (128 MiB, 39.6 ms: only the cycle time changed), run against the defaults, 3
    interleaved repeats, no timeline: not slower at the median and the ranges overlap (a tie), where the prediction
    recorded before the run promised 8 % and was 7.9 % low."""
    by = _by_label("cpu-tiny_transformer_c2-pick.jsonl")
    d, p = (sorted(r["measured_step_time_ms"] for r in by[k]) for k in ("default", "proposal-1"))
    assert by["proposal-1"][0]["config"]["cycle_time_ms"] == 39.6 and len(d) == len(p) == 3
    assert p[1] <= d[1] and p[0] <= d[-1] and d[0] <= p[-1]
    pred = {k: by[k][0]["predicted_step_time_ms"] for k in ("default", "proposal-1")}
    assert pred["proposal-1"] < 0.93 * pred["default"]
    assert pred["proposal-1"] / p[1] - 1 < -0.07


def test_the_pick_with_all_three_terms_measured_faster_than_the_defaults():
    """suggest with the three terms picked 128 MiB / 11.1 ms; run against the defaults (3 interleaved repeats, no
    timeline) it was faster at the median (the ranges touch: 422.2 vs 417.7-421.6), and both predictions recorded
    before the run are within 5 % of their medians."""
    by = _by_label("cpu-tiny_transformer_c2-pick2.jsonl")
    med = {k: statistics.median(r["measured_step_time_ms"] for r in rs) for k, rs in by.items()}
    assert by["proposal-1"][0]["config"]["cycle_time_ms"] == 11.1 and med["proposal-1"] < 0.985 * med["default"]
    for k, rs in by.items():
        assert abs(rs[0]["predicted_step_time_ms"] / med[k] - 1) <= 0.05, k
