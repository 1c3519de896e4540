"""The best configuration of a scenario at one size: the scale view's search (searches
live in :mod:`autotuner.search`), and the pieces the views share to evaluate and rank grids.

Pure: a scenario in, configurations and step times (ms) out; every prediction goes through
:func:`step_times_ms` (the batch simulator, :mod:`autotuner.frameworks.horovod.fastsim`).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import numpy as np

from ..knobs import CACHE_ON, DEFAULTS_0_28, KNOB_BY_FIELD, MIB, Config
from ..fastsim import configs_to_arrays
from .ranking import Trial, top_distinct

#: ``(scenario, configs) -> step times in ms, shape (len(configs),)``.
Evaluator = Callable[[Any, Sequence[Config]], np.ndarray]

#: Thresholds within this (relative) of the best step time count as "as good" in the scale view.
NEAR_REL = 0.01

_CYCLE = KNOB_BY_FIELD["cycle_time_ms"]
#: the fusion threshold's largest whole MiB (the knob table's bound)
_MAX_MB = int(KNOB_BY_FIELD["fusion_threshold_bytes"].high // MIB)
#: Scale view's search grid: whole-MiB thresholds (flag-expressible), cycle times (ms).
SCALE_THRESHOLDS_MB: tuple[int, ...] = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
SCALE_CYCLES_MS: tuple[float, ...] = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)


def step_times_ms(sc, configs: Sequence[Config]) -> np.ndarray:
    """Predicted steady-state step time (ms) of each configuration on scenario ``sc``.

    Shape (len(configs),), float64. This is the one function every view calls to evaluate a
    grid. It uses the batch simulator (:meth:`Scenario.step_times`, :mod:`autotuner.frameworks.horovod.fastsim`),
    which tests/test_fastsim.py holds equal to :func:`autotuner.frameworks.horovod.simulator.simulate_step`.
    """
    if not len(configs):
        return np.zeros(0)
    return 1e3 * sc.step_times(**configs_to_arrays(configs))


def has_hierarchical(sc) -> bool:
    """Whether ``sc``'s backend has hierarchical allreduce
    (:attr:`~autotuner.frameworks.horovod.scenario.Scenario.has_hierarchical_allreduce`; True for a scenario
    that does not say)."""
    return bool(getattr(sc, "has_hierarchical_allreduce", True))


def best_closest_to_defaults(configs: Sequence[Config], ms: np.ndarray) -> tuple[Config, float]:
    """Fastest configuration; ties (to the µs) go to the one closest to Horovod's defaults."""
    t = top_distinct([Trial(c, float(m) * 1e-3, "grid") for c, m in zip(configs, ms)], 1, DEFAULTS_0_28)[0]
    return t.config, t.step_time_s * 1e3


@dataclass(frozen=True)
class BestAtSize:
    """Search result for one (nodes, link rate): best overall, best flat, best hierarchical (ms)."""

    config: Config
    step_time_ms: float
    flat: Config
    flat_ms: float
    hier: Config | None
    hier_ms: float | None
    near_thresholds_mb: tuple[int, int]  # smallest and largest grid threshold within NEAR_REL of best
    evaluations: int


def best_at_size(sc, *, evaluate: Evaluator = step_times_ms) -> BestAtSize:
    """Best configuration of ``sc`` by a two-stage grid search.

    Stage 1: :data:`SCALE_THRESHOLDS_MB` × :data:`SCALE_CYCLES_MS` with the response cache on,
    for each hierarchical setting (off, and on when nodes > 1 and the backend has hierarchical
    allreduce, :func:`~autotuner.frameworks.horovod.views.explore.has_hierarchical`). Stage 2, around the best of
    each hierarchical setting: threshold × {2^-½, 1, 2^½} (whole MiB) × cycle × {10^-⅙, 1,
    10^⅙} × cache on/off (the cache's cost is a per-cycle negotiation term, nearly independent
    of the other knobs, so it is searched only here). About 240 simulations per call.
    Ties (to the µs) go to the configuration closest to Horovod's defaults.
    """
    hiers = (False, True) if sc.cluster.nodes > 1 and has_hierarchical(sc) else (False,)
    configs = [Config(fusion_threshold_bytes=f * MIB, cycle_time_ms=c, cache_capacity=CACHE_ON,
                      hierarchical_allreduce=h)
               for h in hiers for f in SCALE_THRESHOLDS_MB for c in SCALE_CYCLES_MS]
    ms = evaluate(sc, configs)
    allc, allm = list(configs), list(ms)
    per_h: dict[bool, tuple[Config, float]] = {}
    for h in hiers:
        idx = [i for i, c in enumerate(configs) if c.hierarchical_allreduce == h]
        b, _ = best_closest_to_defaults([configs[i] for i in idx], ms[idx])
        mb = b.fusion_threshold_bytes // MIB
        fs = sorted({mb, *(max(1, min(_MAX_MB, round(mb * s))) for s in (2 ** -0.5, 2 ** 0.5))}) if mb else [0]
        cs = sorted({b.cycle_time_ms, *(min(_CYCLE.high, max(_CYCLE.low, round(b.cycle_time_ms * s, 3)))
                                        for s in (10 ** (-1 / 6), 10 ** (1 / 6)))})
        extra = [replace(b, fusion_threshold_bytes=f * MIB, cycle_time_ms=c, cache_capacity=cap)
                 for f in fs for c in cs for cap in (CACHE_ON, 0)]
        extra = [c for c in extra if c != b]
        em = evaluate(sc, extra) if extra else np.empty(0)
        allc += extra
        allm += list(em)
        sub = [(c, m) for c, m in zip(allc, allm) if c.hierarchical_allreduce == h]
        per_h[h] = best_closest_to_defaults([c for c, _ in sub], np.array([m for _, m in sub]))
    best, best_ms = best_closest_to_defaults(allc, np.array(allm))
    near = [c.fusion_threshold_bytes // MIB for c, m in zip(allc, allm)
            if m <= best_ms * (1 + NEAR_REL) and c.cycle_time_ms == best.cycle_time_ms
            and c.cache_capacity == best.cache_capacity and c.hierarchical_allreduce == best.hierarchical_allreduce]
    flat, flat_ms = per_h[False]
    hier, hier_ms = per_h.get(True, (None, None))
    return BestAtSize(best, best_ms, flat, flat_ms, hier, hier_ms, (min(near), max(near)), len(allc))


__all__ = ["Evaluator", "step_times_ms", "has_hierarchical", "best_closest_to_defaults", "BestAtSize", "best_at_size",
           "NEAR_REL", "SCALE_THRESHOLDS_MB", "SCALE_CYCLES_MS"]
