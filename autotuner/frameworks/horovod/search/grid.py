"""Exhaustive knob grids evaluated on the fast simulator (:mod:`autotuner.frameworks.horovod.fastsim`).

Every configuration of the grid is evaluated (exact shortcuts only: configurations the
simulator cannot tell apart are simulated once, see :mod:`autotuner.frameworks.horovod.fastsim`). Pure: no I/O.

The default grid: fusion threshold 0-512 MiB in 1 MiB steps (513 values) ×
cycle time 0.1-99.6 ms in 0.5 ms steps (200 values) × the on/off knobs (response cache
on with Horovod's default capacity 1024 / off, hierarchical allreduce off/on, hierarchical
allgather off/on: 8 combinations) = 820,800 configurations.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import product
from typing import Any, Mapping

import numpy as np

from ..knobs import CACHE_ON, KNOB_BY_FIELD, MIB, Config, config_from_values, pin_unsupported_off
from ..scenario import Scenario
from .ranking import Origin, Trial

_FUSION, _CYCLE = KNOB_BY_FIELD["fusion_threshold_bytes"], KNOB_BY_FIELD["cycle_time_ms"]
#: fusion thresholds (MiB) of the default grid: every whole MiB of the knob's range, 0, 1, ..., 512
GRID_FUSION_MB = np.arange(int(_FUSION.low // _FUSION.flag_scale), int(_FUSION.high // _FUSION.flag_scale) + 1,
                           dtype=np.int64)
#: cycle times (ms) of the default grid: 0.5 ms steps over the knob's range, 0.1, 0.6, ..., 99.6
GRID_CYCLE_MS = np.round(np.arange(_CYCLE.low, _CYCLE.high, 0.5), 6)


@dataclass(frozen=True)
class Combo:
    """One setting of the on/off knobs (the one combination type: the grid, the explorer and its
    plots use it): response cache capacity (0: off), hierarchical allreduce, hierarchical allgather."""

    cache_capacity: int
    hierarchical_allreduce: bool
    hierarchical_allgather: bool = False

    @property
    def cache(self) -> bool:
        """Whether the response cache is on."""
        return self.cache_capacity > 0

    @property
    def label(self) -> str:
        """``cache on, flat`` / ``cache off, hierarchical`` (hierarchical allgather is not named: it
        does not touch gradient allreduce)."""
        return f"cache {'on' if self.cache else 'off'}, " + ("hierarchical" if self.hierarchical_allreduce else "flat")

    def apply(self, cfg: Config) -> Config:
        """``cfg`` with this combination's on/off knobs."""
        return replace(cfg, cache_capacity=self.cache_capacity, hierarchical_allreduce=self.hierarchical_allreduce,
                       hierarchical_allgather=self.hierarchical_allgather)

    @classmethod
    def of(cls, cfg: Config, *, cache_capacity: int = CACHE_ON) -> "Combo":
        """``cfg``'s on/off setting, a cache that is on spelled with ``cache_capacity`` (Horovod's
        default capacity), hierarchical allgather left out (the explorer's convention)."""
        return cls(cache_capacity if cfg.cache_capacity > 0 else 0, bool(cfg.hierarchical_allreduce))


#: cache on (capacity 1024, Horovod's default) / off × hierarchical allreduce × allgather
ALL_COMBOS: tuple[Combo, ...] = tuple(
    Combo(cache, har, hag) for cache, har, hag in product((CACHE_ON, 0), (False, True), (False, True)))

COLUMNS = ["fusion_threshold_mb", "cycle_time_ms", "cache_capacity", "hierarchical_allreduce",
           "hierarchical_allgather", "step_time_ms"]


def grid_table(sc: Scenario, fusion_mb=GRID_FUSION_MB, cycle_ms=GRID_CYCLE_MS,
               combos=ALL_COMBOS, *, fixed: Mapping[str, Any] | None = None, dedupe: bool = True) -> dict[str, np.ndarray]:
    """Predicted step time of every (combo, fusion threshold, cycle time) of ``sc``, as plain arrays.

    Args:
        sc: the scenario (layout, workload, cost model, cluster, compression).
        fusion_mb: shape (F,), fusion thresholds in MiB (may be fractional; converted to whole
            bytes as ``round(mb * 2**20)``).
        cycle_ms: shape (C,), cycle times in ms, > 0.
        combos: on/off knob settings (:class:`Combo`); None: the ones that matter for ``sc``
            (hierarchical allgather never: it does not touch gradient allreduce; hierarchical
            allreduce only on several nodes).
        fixed: knobs kept at one value (field name -> value, internal units): a fixed threshold
            or cycle time replaces its axis, a fixed on/off knob its value in every combination.
        dedupe: simulate configurations the simulator cannot tell apart once (exact; False
            simulates every row, for benchmarks).

    Returns:
        ``{column: array of shape (len(combos) * F * C,)}`` for each of :data:`COLUMNS`; rows
        ordered by combo, then threshold, then cycle time; ``step_time_ms`` in ms. No pandas:
        ``suggest`` answers from it in well under a second.
    """
    fixed = fixed or {}
    f = np.asarray(fusion_mb, dtype=float).reshape(-1)
    cy = np.asarray(cycle_ms, dtype=float).reshape(-1)
    if "fusion_threshold_bytes" in fixed:
        f = np.array([fixed["fusion_threshold_bytes"] / MIB])
    if "cycle_time_ms" in fixed:
        cy = np.array([float(fixed["cycle_time_ms"])])
    cs = list(_combos_for(sc, fixed) if combos is None else combos)
    K, F, C = len(cs), f.size, cy.size
    thr = np.rint(f * MIB).astype(np.int64)
    cap = np.array([c.cache_capacity for c in cs], dtype=np.int64)[:, None, None]
    har = np.array([c.hierarchical_allreduce for c in cs], dtype=bool)[:, None, None]
    hag = np.array([c.hierarchical_allgather for c in cs], dtype=bool)[:, None, None]
    st = sc.step_times(fusion_threshold_bytes=thr[None, :, None], cycle_time_ms=cy[None, None, :],
                       cache_capacity=cap, hierarchical_allreduce=har, hierarchical_allgather=hag, dedupe=dedupe)
    shape = (K, F, C)
    return {
        "fusion_threshold_mb": np.broadcast_to(f[None, :, None], shape).reshape(-1),
        "cycle_time_ms": np.broadcast_to(cy[None, None, :], shape).reshape(-1),
        "cache_capacity": np.broadcast_to(cap, shape).reshape(-1),
        "hierarchical_allreduce": np.broadcast_to(har, shape).reshape(-1),
        "hierarchical_allgather": np.broadcast_to(hag, shape).reshape(-1),
        "step_time_ms": np.asarray(st).reshape(-1) * 1e3,
    }


def grid_step_times(sc: Scenario, fusion_mb=GRID_FUSION_MB, cycle_ms=GRID_CYCLE_MS,
                    combos=ALL_COMBOS, *, fixed: Mapping[str, Any] | None = None, dedupe: bool = True):
    """:func:`grid_table` as a pandas DataFrame (columns :data:`COLUMNS`, same rows and units)."""
    import pandas as pd

    return pd.DataFrame(grid_table(sc, fusion_mb, cycle_ms, combos, fixed=fixed, dedupe=dedupe), columns=COLUMNS)


def concat_tables(*tables: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Rows of several :func:`grid_table` results (or DataFrames with :data:`COLUMNS`), one after another."""
    return {k: np.concatenate([np.asarray(t[k]) for t in tables]) for k in COLUMNS}


def table_trials(table: Mapping[str, np.ndarray], n: int, origin: Origin) -> list[Trial]:
    """The ``n`` fastest rows of a table as trials (ties: the first row), fastest first."""
    st = np.asarray(table["step_time_ms"], dtype=float)
    order = np.argsort(st, kind="stable")[:n]
    return [Trial(_row_config({k: np.asarray(table[k])[i] for k in COLUMNS}), float(st[i]) * 1e-3, origin)
            for i in order]


def best_of_grid(df) -> tuple[Config, float]:
    """The fastest row of a :func:`grid_step_times` frame or :func:`grid_table`: (config, step time
    ms); ties go to the first row (lowest combo index, threshold, cycle time)."""
    t = table_trials(df, 1, Origin.search)[0]
    return t.config, t.step_time_s * 1e3


def _row_config(r: Mapping[str, Any]) -> Config:
    return config_from_values({"fusion_threshold_mb": float(r["fusion_threshold_mb"]),
                               "cycle_time_ms": float(r["cycle_time_ms"]), "cache_capacity": int(r["cache_capacity"]),
                               "hierarchical_allreduce": bool(r["hierarchical_allreduce"]),
                               "hierarchical_allgather": bool(r["hierarchical_allgather"])})


@dataclass(frozen=True)
class GridStrategy:
    """:class:`~autotuner.frameworks.horovod.search.ranking.Strategy` that simulates every configuration of the
    grid (default: :data:`GRID_FUSION_MB` × :data:`GRID_CYCLE_MS` × the on/off combinations,
    hierarchical ones only on more than one node and where the scenario's backend has
    hierarchical allreduce, :func:`autotuner.frameworks.horovod.knobs.hierarchical_allreduce_supported`; elsewhere
    it is pinned off). Knobs in ``fixed`` take their one value."""

    fusion_mb: tuple[float, ...] | None = None
    cycle_ms: tuple[float, ...] | None = None

    def trials(self, sc: Scenario, reference: Config, fixed: Mapping[str, Any]) -> list[Trial]:
        fixed = pin_unsupported_off(fixed, getattr(sc, "effective_backend", None))
        f = np.asarray(self.fusion_mb if self.fusion_mb is not None else GRID_FUSION_MB, dtype=float)
        c = np.asarray(self.cycle_ms if self.cycle_ms is not None else GRID_CYCLE_MS, dtype=float)
        ref = Trial(reference, sc.simulate(reference).step_time_s, Origin.default)
        return [ref] + table_trials(grid_table(sc, f, c, None, fixed=fixed), 64, Origin.search)


def _combos_for(sc: Scenario, fixed: Mapping[str, Any]) -> list[Combo]:
    """The on/off combinations that matter for ``sc``, every knob of ``fixed`` at its value."""
    out: list[Combo] = []
    for cb in ALL_COMBOS:
        if cb.hierarchical_allgather or (cb.hierarchical_allreduce and sc.cluster.nodes == 1):
            continue  # no effect on gradient allreduce / on one node (knobs.py)
        cb = Combo(fixed.get("cache_capacity", cb.cache_capacity),
                   fixed.get("hierarchical_allreduce", cb.hierarchical_allreduce),
                   fixed.get("hierarchical_allgather", False))
        if cb not in out:
            out.append(cb)
    return out


def neighbourhood(sc: Scenario, reference: Config, fixed: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Every configuration of the default grid plus the reference's own threshold and cycle time
    (so that one-knob changes from the reference are in it), on the on/off combinations of
    :class:`GridStrategy`, ``fixed`` knobs pinned (hierarchical allreduce off where the backend has
    none). The table (:func:`grid_table`'s form) :func:`autotuner.frameworks.horovod.search.ranking.minimal_change`
    chooses from; columns :data:`COLUMNS`. The reference's own row is included (its hierarchical allgather setting is
    added as a combination when it is on)."""
    fixed = dict(pin_unsupported_off(fixed, getattr(sc, "effective_backend", None)))
    f = np.union1d(GRID_FUSION_MB.astype(float), [reference.fusion_threshold_bytes / MIB])
    c = np.union1d(GRID_CYCLE_MS, [reference.cycle_time_ms])
    df = grid_table(sc, f, c, None, fixed=fixed)
    if reference.hierarchical_allgather or (reference.hierarchical_allreduce and sc.cluster.nodes == 1):
        ref_row = grid_table(sc, [reference.fusion_threshold_bytes / MIB], [reference.cycle_time_ms],
                             [Combo(reference.cache_capacity, reference.hierarchical_allreduce,
                                    reference.hierarchical_allgather)])
        df = concat_tables(df, ref_row)
    return df


__all__ = ["GridStrategy", "neighbourhood", "grid_table", "grid_step_times", "concat_tables", "table_trials", "best_of_grid", "Combo", "ALL_COMBOS", "GRID_FUSION_MB", "GRID_CYCLE_MS", "COLUMNS"]
