"""Ranking evaluated configurations: the tie rule and the distinct top proposals.

Shared by every search strategy (:mod:`autotuner.search.bayes`, :mod:`autotuner.search.grid`)
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
    """A search strategy: every strategy (:class:`autotuner.search.bayes.BayesStrategy`,
    :class:`autotuner.search.grid.GridStrategy`) evaluates configurations of a scenario and
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
#: the validated models are accurate to a few percent (docs/accuracy.md, docs/validation.md), and
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
