"""What the judged fresh environments' replays measured of the pick suggest made before any replay, read from their
own records (runs/fresh-poll-*/validation/: the replays and ``pick-<layout>.json``): facts about those sittings,
which no change to the package can move. Their predictions are checked in ``tests/test_fresh_env.py``.

Not part of the product's suite (``testpaths = ["tests"]``); run from the repository root with
``python -m pytest research/tests``."""
import json
from pathlib import Path

import pytest

from autotuner.frameworks.horovod.readers.runs import parse_records
from autotuner.frameworks.horovod.views.protocol import rows_from_records

RUNS = Path(__file__).resolve().parents[2] / "runs"
#: the judged envs (measured and replayed with polling waits) and the layout each replayed
JUDGED = {"fresh-poll-2gbit": "vit_s16", "fresh-poll-0.75gbit": "mobilenet_v2", "fresh-poll-2x1-2gbit": "distilbert"}


@pytest.mark.parametrize("env", sorted(JUDGED))
def test_judged_env_pick_beats_or_keeps_the_defaults_within_its_band(env):
    """The pick (made before any replay) measured >= the defaults and >= autotune's best at the median,
    or it kept the defaults and they measured within the stated band of the best configuration."""
    f = RUNS / env / "validation" / f"fresh-{JUDGED[env]}.jsonl"
    recs, problems = parse_records(f.read_text(), f.name)
    assert not problems
    by = {r.label: r for r in rows_from_records(recs, lambda cfg, setup: 0.0)}  # measured medians only
    pick = json.loads((RUNS / env / "validation" / f"pick-{JUDGED[env]}.json").read_text())
    if pick["keep_defaults"]:
        best = min(r.measured_median_ms for r in by.values())
        assert by["default"].measured_median_ms <= best * (1 + pick["pick"]["band"]), (env, pick["pick"])
    else:
        p = by["proposal-1"].measured_median_ms
        assert p <= by["default"].measured_median_ms and p <= by["autotune_best"].measured_median_ms
