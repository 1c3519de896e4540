"""Bayesian search over Horovod knobs with scikit-optimize (ask/tell).

The objective is any callable ``Config -> step time (s)``: the simulator here, a real
``horovodrun`` trial later. The space comes from the knob table (:mod:`autotuner.knobs`):
fusion threshold 0-512 whole MiB (``--fusion-threshold-mb`` takes an integer), cycle time
0.1-100 ms (log-uniform), response cache on (capacity 1024) / off, and hierarchical
allreduce only when the cluster has more than one node (Horovod ignores it otherwise,
operations.cc). Hierarchical allgather is not searched: it only changes allgather ops
(ops/mpi_operations.cc MPIHierarchicalAllgather), which data-parallel gradient layouts do not
issue, so it cannot change the predicted step.

Horovod's defaults and autotune's four start points (for each categorical combination) are
always evaluated first, as controls, and told to the optimizer.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from skopt import Optimizer
from skopt.space import Categorical, Integer, Real

from .knobs import DEFAULTS_0_28, KNOB_BY_FIELD, MIB, Config, autotune_start_configs

CACHE_ON = 1024


@dataclass(frozen=True)
class Trial:
    """One evaluated configuration: its step time (s) and where it came from."""

    config: Config
    step_time_s: float
    origin: str  # "default" | "autotune-start" | "search"


def _space(multi_node: bool) -> list:
    fk, ck = KNOB_BY_FIELD["fusion_threshold_bytes"], KNOB_BY_FIELD["cycle_time_ms"]
    dims = [Integer(int(fk.low // MIB), int(fk.high // MIB), name="fusion_threshold_mb"),
            Real(ck.low, ck.high, prior="log-uniform", name="cycle_time_ms"),
            Categorical([True, False], name="cache")]
    if multi_node:
        dims.append(Categorical([False, True], name="hierarchical_allreduce"))
    return dims


def _to_config(x: list, multi_node: bool) -> Config:
    return Config(fusion_threshold_bytes=int(x[0]) * MIB, cycle_time_ms=float(x[1]),
                  cache_capacity=CACHE_ON if x[2] else 0,
                  hierarchical_allreduce=bool(x[3]) if multi_node else False)


def _to_point(c: Config, multi_node: bool) -> list:
    x = [int(min(512, round(c.fusion_threshold_bytes / MIB))), float(min(max(c.cycle_time_ms, 0.1), 100.0)),
         c.cache_capacity > 0]
    if multi_node:
        x.append(bool(c.hierarchical_allreduce))
    return x


def search(objective: Callable[[Config], float], default: Config, *, multi_node: bool,
           n_calls: int = 24, seed: int | None = 0, progress: Callable[[int, int], None] | None = None) -> list[Trial]:
    """Run the controls, then ``n_calls`` Bayesian-optimization proposals; return all trials.

    Args:
        objective: Config -> step time in seconds (lower is better).
        default: Horovod's defaults (evaluated as a control, origin "default").
        multi_node: whether hierarchical allreduce takes effect (nodes > 1).
        n_calls: proposals asked from the optimizer after the controls.
        seed: seeds the optimizer's own generator (no global random state).
        progress: called as progress(done, total) after each evaluation.
    """
    space = _space(multi_node)
    opt = Optimizer(space, base_estimator="GP", n_initial_points=8, acq_func="EI",
                    acq_optimizer="sampling", acq_optimizer_kwargs={"n_points": 2000}, random_state=seed)
    combos = [(cache, h) for cache in (CACHE_ON, 0) for h in ((False, True) if multi_node else (False,))]
    controls = [(default, "default")] + [
        (replace(c, cache_capacity=cache, hierarchical_allreduce=h), "autotune-start")
        for cache, h in combos for c in autotune_start_configs(default)]
    total = len(controls) + n_calls
    trials: list[Trial] = []
    for cfg, origin in controls:
        trials.append(Trial(cfg, objective(cfg), origin))
        if progress:
            progress(len(trials), total)
    opt.tell([_to_point(t.config, multi_node) for t in trials], [t.step_time_s for t in trials])  # one fit
    for _ in range(n_calls):
        x = opt.ask()
        cfg = _to_config(x, multi_node)
        y = objective(cfg)
        trials.append(Trial(cfg, y, "search"))
        opt.tell(x, y)
        if progress:
            progress(len(trials), total)
    return trials


def _distance(c: Config, ref: Config) -> float:
    """How far ``c`` moves the knobs from ``ref``: log-ratio of threshold and cycle time, + 1 per flag."""
    import math

    f = math.log((c.fusion_threshold_bytes + MIB) / (ref.fusion_threshold_bytes + MIB))
    return (abs(f) + abs(math.log(c.cycle_time_ms / ref.cycle_time_ms))
            + (c.cache_enabled != ref.cache_enabled) + (c.hierarchical_allreduce != ref.hierarchical_allreduce))


def top_distinct(trials: list[Trial], k: int, default: Config | None = None) -> list[Trial]:
    """The ``k`` fastest trials with distinct (whole-MiB threshold, cycle to 0.01 ms, cache, hier).

    Step times equal to the microsecond (e.g. every threshold that fuses all gradients into one
    response) are ties; a tie goes to the configuration closest to ``default`` (Horovod's
    defaults), so a proposal never changes a knob that is not predicted to help.
    """
    ref = default or DEFAULTS_0_28
    seen, out = set(), []
    for t in sorted(trials, key=lambda t: (round(t.step_time_s, 6), _distance(t.config, ref))):
        c = t.config
        key = (c.fusion_threshold_bytes // MIB, round(c.cycle_time_ms, 2), c.cache_capacity > 0, c.hierarchical_allreduce)
        if key in seen:
            continue
        seen.add(key)
        out.append(t)
        if len(out) == k:
            break
    return out


__all__ = ["Trial", "search", "top_distinct"]
