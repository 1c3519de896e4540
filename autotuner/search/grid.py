"""Exhaustive knob grids evaluated on the fast simulator (:mod:`autotuner.model.fastsim`).

Every configuration of the grid is evaluated (exact shortcuts only: configurations the
simulator cannot tell apart are simulated once, see :mod:`autotuner.model.fastsim`). Pure: no I/O.

The default grid is issue 4's: fusion threshold 0-512 MiB in 1 MiB steps (513 values) ×
cycle time 0.1-99.6 ms in 0.5 ms steps (200 values) × the on/off knobs (response cache
on with Horovod's default capacity 1024 / off, hierarchical allreduce off/on, hierarchical
allgather off/on: 8 combinations) = 820,800 configurations.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import product

import numpy as np
import pandas as pd

from ..knobs import DEFAULTS_0_28, MIB, Config
from ..model.scenario import Scenario

#: fusion thresholds (MiB) of the default grid: 0, 1, ..., 512
GRID_FUSION_MB = np.arange(0, 513, dtype=np.int64)
#: cycle times (ms) of the default grid: 0.1, 0.6, ..., 99.6
GRID_CYCLE_MS = np.round(0.1 + 0.5 * np.arange(200), 6)


@dataclass(frozen=True)
class Combo:
    """One setting of the on/off knobs."""

    cache_capacity: int
    hierarchical_allreduce: bool
    hierarchical_allgather: bool


#: cache on (capacity 1024, Horovod's default) / off × hierarchical allreduce × allgather
ALL_COMBOS: tuple[Combo, ...] = tuple(
    Combo(cache, har, hag) for cache, har, hag in product((DEFAULTS_0_28.cache_capacity, 0), (False, True), (False, True)))

COLUMNS = ["fusion_threshold_mb", "cycle_time_ms", "cache_capacity", "hierarchical_allreduce",
           "hierarchical_allgather", "step_time_ms"]


def grid_step_times(sc: Scenario, fusion_mb=GRID_FUSION_MB, cycle_ms=GRID_CYCLE_MS,
                    combos=ALL_COMBOS, *, dedupe: bool = True) -> pd.DataFrame:
    """Predicted step time of every (combo, fusion threshold, cycle time) of ``sc``.

    Args:
        sc: the scenario (layout, workload, cost model, cluster, compression).
        fusion_mb: shape (F,), fusion thresholds in MiB (may be fractional; converted to whole
            bytes as ``round(mb * 2**20)``).
        cycle_ms: shape (C,), cycle times in ms, > 0.
        combos: on/off knob settings (:class:`Combo`).
        dedupe: simulate configurations the simulator cannot tell apart once (exact; False
            simulates every row, for benchmarks).

    Returns:
        DataFrame with ``len(combos) * F * C`` rows, columns :data:`COLUMNS`; rows ordered by
        combo, then threshold, then cycle time; ``step_time_ms`` in ms.
    """
    f = np.asarray(fusion_mb, dtype=float).reshape(-1)
    cy = np.asarray(cycle_ms, dtype=float).reshape(-1)
    cs = list(combos)
    K, F, C = len(cs), f.size, cy.size
    thr = np.rint(f * MIB).astype(np.int64)
    cap = np.array([c.cache_capacity for c in cs], dtype=np.int64)[:, None, None]
    har = np.array([c.hierarchical_allreduce for c in cs], dtype=bool)[:, None, None]
    hag = np.array([c.hierarchical_allgather for c in cs], dtype=bool)[:, None, None]
    st = sc.step_times(fusion_threshold_bytes=thr[None, :, None], cycle_time_ms=cy[None, None, :],
                       cache_capacity=cap, hierarchical_allreduce=har, hierarchical_allgather=hag, dedupe=dedupe)
    shape = (K, F, C)
    return pd.DataFrame({
        "fusion_threshold_mb": np.broadcast_to(f[None, :, None], shape).reshape(-1),
        "cycle_time_ms": np.broadcast_to(cy[None, None, :], shape).reshape(-1),
        "cache_capacity": np.broadcast_to(cap, shape).reshape(-1),
        "hierarchical_allreduce": np.broadcast_to(har, shape).reshape(-1),
        "hierarchical_allgather": np.broadcast_to(hag, shape).reshape(-1),
        "step_time_ms": st.reshape(-1) * 1e3,
    }, columns=COLUMNS)


def best_of_grid(df: pd.DataFrame) -> tuple[Config, float]:
    """The fastest row of a :func:`grid_step_times` frame: (config, step time ms); ties go to the
    first row (lowest combo index, threshold, cycle time)."""
    r = df.iloc[int(np.argmin(df["step_time_ms"].to_numpy()))]
    cfg = Config(fusion_threshold_bytes=int(round(r.fusion_threshold_mb * MIB)), cycle_time_ms=float(r.cycle_time_ms),
                 cache_capacity=int(r.cache_capacity), hierarchical_allreduce=bool(r.hierarchical_allreduce),
                 hierarchical_allgather=bool(r.hierarchical_allgather))
    return cfg, float(r.step_time_ms)


__all__ = ["grid_step_times", "best_of_grid", "Combo", "ALL_COMBOS", "GRID_FUSION_MB", "GRID_CYCLE_MS", "COLUMNS"]
