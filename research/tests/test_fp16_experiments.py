"""What the fp16 experiments found, read from their own records under ``runs/*/experiments/``.

Not part of the product's suite (``testpaths = ["tests"]``); run from the repository root with
``python -m pytest research/tests``."""
import json
import statistics
from pathlib import Path

RUNS = Path(__file__).resolve().parents[2] / "runs"


def test_gloo_sums_the_same_values_on_every_rank_faster_in_float16_only():
    """The measurement behind the records' ``same_values_on_every_rank`` (an fp16 replay whose ranks held the same
    values ran another job): ``research/scripts/fp16_rank_values.py --bandwidth-gbit 2``, 3 runs of 7 interleaved
    rounds, 16 MiB averaged on 2 ranks at 2 Gbit/s, each rank its own values against both ranks the same. float16:
    the same values 10-15 % faster in every run (176.5-181.0 against 154.7-159.7 ms); float32: within 3 % either way
    (the machine's noise)."""
    recs = [json.loads(x) for x in (RUNS / "fresh-poll-2gbit" / "experiments" / "fp16-rank-values.jsonl").read_text().splitlines()]
    assert len(recs) >= 3
    for r in recs:
        m = {k: statistics.median(v) for k, v in r["rounds_ms"].items()}
        assert all(len(v) >= 5 for v in r["rounds_ms"].values())
        assert 1.08 < m["float16 distinct"] / m["float16 same"] < 1.25
        assert abs(m["float32 distinct"] / m["float32 same"] - 1) < 0.03
