"""Ranking evaluated configurations: the tie rule and the distinct top proposals.

Shared by every search strategy (:mod:`autotuner.frameworks.horovod.search.bayes`, :mod:`autotuner.frameworks.horovod.search.grid`)
and by the views.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Mapping, Protocol

from ..knobs import DEFAULTS_0_28, MIB, Config


class Origin(StrEnum):
    """Where a trial came from: the reference (Horovod's defaults), one of autotune's start
    points, a Bayesian-optimization proposal, or a move of the batch refinement."""

    default = "default"
    autotune_start = "autotune-start"
    search = "search"
    refine = "refine"


class Strategy(Protocol):
    """A search strategy: every strategy (:class:`autotuner.frameworks.horovod.search.bayes.BayesStrategy`,
    :class:`autotuner.frameworks.horovod.search.grid.GridStrategy`) evaluates configurations of a scenario and
    returns them as trials; :func:`top_distinct` ranks them the same way for all.

    ``trials(sc, reference, fixed)``: ``reference`` is the configuration the proposals are
    compared with (Horovod's defaults with the ``fixed`` knobs applied), returned as a trial of
    origin ``default``; ``fixed`` maps field names to values (internal units) every trial keeps.
    """

    def trials(self, sc: Any, reference: Config, fixed: Mapping[str, Any]) -> list["Trial"]: ...


@dataclass(frozen=True)
class Trial:
    """One evaluated configuration: its step time (s) and where it came from."""

    config: Config
    step_time_s: float
    origin: "Origin"


def _distance(c: Config, ref: Config) -> float:
    """How far ``c`` moves the knobs from ``ref``: log-ratio of threshold and cycle time, + 1 per flag."""
    import math

    f = math.log((c.fusion_threshold_bytes + MIB) / (ref.fusion_threshold_bytes + MIB))
    return (abs(f) + abs(math.log(c.cycle_time_ms / ref.cycle_time_ms))
            + (c.cache_enabled != ref.cache_enabled) + (c.hierarchical_allreduce != ref.hierarchical_allreduce))


#: Predicted gains smaller than this fraction of the defaults' step time are treated as ties:
#: the validated models are accurate to a few percent (docs/accuracy.md, docs/how-to/validate.md), and
#: step time is jagged in cycle time, so a 0.3 % predicted gain is not worth changing a knob for.
MIN_GAIN = 0.005


def top_distinct(trials: list[Trial], k: int, default: Config | None = None,
                 min_gain: float = MIN_GAIN) -> list[Trial]:
    """The ``k`` best trials with distinct (whole-MiB threshold, cycle to 0.01 ms, cache, hier).

    Trials predicted faster than the defaults' trial by more than ``min_gain`` (a fraction)
    rank by step time. All others are ties with the defaults and rank by how far they move the
    knobs from ``default`` (:func:`_distance`), so the defaults themselves come first among them:
    a proposal never changes a knob that is not predicted to help. Without a trial of the
    defaults, ties are step times equal to the microsecond.
    """
    ref = default or DEFAULTS_0_28
    base = next((t.step_time_s for t in trials if t.config == ref), None)
    cut = base * (1 - min_gain) if base is not None else None

    def rank(t: Trial):
        if cut is not None and t.step_time_s >= cut:
            return (1, 0.0, _distance(t.config, ref))
        return (0, round(t.step_time_s, 6), _distance(t.config, ref))

    seen, out = set(), []
    for t in sorted(trials, key=rank):
        c = t.config
        key = (c.fusion_threshold_bytes // MIB, round(c.cycle_time_ms, 2), c.cache_capacity > 0, c.hierarchical_allreduce)
        if key in seen:
            continue
        seen.add(key)
        out.append(t)
        if len(out) == k:
            break
    return out



@dataclass(frozen=True)
class Pick:
    """The noise-aware choice among evaluated configurations (:func:`minimal_change`).

    ``config`` / ``step_time_s``: the proposal (the reference itself when ``keep_defaults``);
    ``best`` / ``best_step_time_s``: the fastest configuration; ``reference_step_time_s``: the
    reference's; ``band``: the error band used (fraction of the step time); ``gain``: predicted
    gain of the best over the reference (fraction of the reference's step time); ``equivalent``:
    configurations within the band of the best with the proposal's on/off knobs, whose fusion
    thresholds (MiB) and cycle times (ms) span ``threshold_mib`` and ``cycle_ms`` (min, max)."""

    config: Config
    step_time_s: float
    best: Config
    best_step_time_s: float
    reference_step_time_s: float
    band: float
    gain: float
    keep_defaults: bool
    equivalent: int
    threshold_mib: tuple[float, float]
    cycle_ms: tuple[float, float]


def minimal_change(df, ref: Config, band: float) -> Pick:
    """The noise-aware rule over a table of evaluated configurations.

    ``df``: a table (:func:`autotuner.frameworks.horovod.search.grid.grid_table`: column -> array) or a pandas
    DataFrame with the columns of :data:`autotuner.frameworks.horovod.search.grid.COLUMNS`
    (``fusion_threshold_mb``, ``cycle_time_ms``, ``cache_capacity``, ``hierarchical_allreduce``,
    ``hierarchical_allgather``, ``step_time_ms``), one row per configuration, ``ref`` among them.
    A proposal is made only when the best row is predicted faster than the reference by more than
    ``band`` (a fraction of the reference's step time): otherwise the reference is kept. Among the
    rows within ``band`` of the best (step <= best · (1 + band)) it takes the one closest to the
    reference: fewest knobs changed (threshold, cycle time, cache on/off, hierarchical allreduce,
    hierarchical allgather), then the smallest fusion threshold (Horovod allocates the fusion
    buffer per device: horovod/common/fusion_buffer_manager.cc), then the shortest step.
    Raises ValueError when ``ref`` has no row or ``band`` < 0.
    """
    import numpy as np

    from ..knobs import config_from_values

    if not band >= 0:
        raise ValueError(f"band must be >= 0, got {band}")
    thr = np.rint(np.asarray(df["fusion_threshold_mb"], dtype=float) * MIB).astype(np.int64)
    cyc = np.asarray(df["cycle_time_ms"], dtype=float)
    capacity = np.asarray(df["cache_capacity"])
    cache = capacity > 0
    har = np.asarray(df["hierarchical_allreduce"], dtype=bool)
    hag = np.asarray(df["hierarchical_allgather"], dtype=bool)
    st = np.asarray(df["step_time_ms"], dtype=float) * 1e-3
    changed = ((thr != ref.fusion_threshold_bytes).astype(int) + (cyc != ref.cycle_time_ms)
               + (cache != ref.cache_enabled) + (har != ref.hierarchical_allreduce) + (hag != ref.hierarchical_allgather))
    is_ref = np.flatnonzero(changed == 0)
    if is_ref.size == 0:
        raise ValueError("minimal_change needs a row of the reference configuration")
    ref_s = float(st[is_ref].min())
    b = int(np.argmin(st))
    cut = st[b] * (1.0 + band)
    gain = 1.0 - st[b] / ref_s
    keep = gain <= band or ref_s <= cut
    within = np.flatnonzero(st <= cut)
    k = int(is_ref[np.argmin(st[is_ref])]) if keep else int(within[np.lexsort((st[within], thr[within], changed[within]))[0]])

    def config(i: int) -> Config:
        return config_from_values({"fusion_threshold_bytes": int(thr[i]), "cycle_time_ms": float(cyc[i]),
                                   "cache_capacity": int(capacity[i]),
                                   "hierarchical_allreduce": bool(har[i]), "hierarchical_allgather": bool(hag[i])})
    same = within[(cache[within] == cache[k]) & (har[within] == har[k])]
    if same.size == 0:
        same = np.array([k])
    return Pick(config(k), float(st[k]), config(b), float(st[b]), ref_s, float(band), float(gain), bool(keep),
                int(same.size), (float(thr[same].min()) / MIB, float(thr[same].max()) / MIB),
                (float(cyc[same].min()), float(cyc[same].max())))


def knobs_changed(c: Config, ref: Config) -> int:
    """How many knobs ``c`` sets differently from ``ref`` (fusion threshold, cycle time, response
    cache on/off, hierarchical allreduce, hierarchical allgather): the count
    :func:`minimal_change` minimises."""
    return int((c.fusion_threshold_bytes != ref.fusion_threshold_bytes) + (c.cycle_time_ms != ref.cycle_time_ms)
               + (c.cache_enabled != ref.cache_enabled) + (c.hierarchical_allreduce != ref.hierarchical_allreduce)
               + (c.hierarchical_allgather != ref.hierarchical_allgather))
