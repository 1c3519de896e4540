"""Search strategies share one interface and one ranking; fixed knobs stay fixed."""
from __future__ import annotations

import pytest

from autotuner.frameworks.horovod.predict import make_scenario, suggest_configs
from autotuner.frameworks.horovod.search.bayes import BayesStrategy
from autotuner.frameworks.horovod.predict import suggest_scenario as suggest
from autotuner.frameworks.horovod.knobs import DEFAULTS_0_28, MIB
from autotuner.frameworks.horovod.search.grid import GridStrategy
from autotuner.frameworks.horovod.search.ranking import Origin

from tests.cli_helpers import ROOT

MODEL_DIR = ROOT / "autotuner" / "models"


@pytest.fixture(scope="module")
def sc():
    return make_scenario(MODEL_DIR, "local-gloo-1gbit", "resnet50")[0]


def test_fixed_knobs_are_kept_by_every_proposal(sc):
    fixed = {"cache_capacity": 0, "cycle_time_ms": 10.0}
    trials, best = suggest_configs(sc, top=3, n_calls=6, fixed=fixed)
    assert best and all(t.config.cache_capacity == 0 and t.config.cycle_time_ms == 10.0 for t in best)
    ref = [t for t in trials if t.origin == Origin.default]
    assert len(ref) == 1 and ref[0].config.cache_capacity == 0 and ref[0].config.cycle_time_ms == 10.0


def test_a_grid_stays_on_its_grid_and_bayes_pooled_with_the_exact_grid_finds_at_least_what_the_grid_finds(sc):
    """A custom grid's best is on that grid (4 MiB steps) and no slower than Horovod's defaults; suggest's default
    strategy is the exact grid; the Bayesian strategy's trials, pooled with that grid, never give a worse best than
    the grid alone."""
    grid = GridStrategy(fusion_mb=tuple(range(0, 65, 4)), cycle_ms=(1.0, 2.0, 5.0, 10.0, 20.0))
    _, g = suggest_configs(sc, top=1, strategy=grid)
    res = suggest(sc, top=1)
    assert g[0].step_time_s <= sc.simulate(DEFAULTS_0_28).step_time_s
    assert g[0].config.fusion_threshold_bytes % (4 * MIB) == 0
    assert res["strategy"] == "grid" and res["proposals"][0]["horovodrun_flags"]
    bayes = suggest(sc, top=1, strategy=BayesStrategy(n_calls=6, seed=0))
    assert bayes["strategy"] == "BayesStrategy" and bayes["evaluations"] > res["evaluations"]
    # the Bayesian trials are pooled with the exact grid: never a worse best than the grid alone
    assert bayes["pick"]["best_step_time_ms"] <= res["pick"]["best_step_time_ms"] + 1e-9


def test_grid_strategy_with_every_knob_fixed_returns_that_configuration(sc):
    fixed = {"fusion_threshold_bytes": 8 * MIB, "cycle_time_ms": 5.0, "cache_capacity": 1024}
    trials, best = suggest_configs(sc, top=2, fixed=fixed, strategy=GridStrategy())
    assert {(t.config.fusion_threshold_bytes, t.config.cycle_time_ms, t.config.cache_capacity) for t in best} == \
        {(8 * MIB, 5.0, 1024)}
