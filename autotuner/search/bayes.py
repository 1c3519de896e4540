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

With a ``batch_objective`` (many configurations at once, e.g. :meth:`autotuner.api.Scenario.step_times`
on the fast simulator), the Bayesian proposals are followed by a coordinate refinement of the
best point: each knob in turn is swept over its whole range (every whole MiB 0-512; 1,000
log-spaced cycle times 0.1-100 ms, rounded to 0.001 ms; every on/off combination) with the others fixed, moving to
the best value, until a full round improves nothing (at most ``refine_rounds`` rounds, a few
thousand simulations, milliseconds on the fast simulator). Each move is recorded as a trial of
origin ``"refine"``.

The Gaussian process is scikit-optimize's default for this space (``cook_estimator("GP")``:
constant × Matern 5/2, normalized targets) with one kernel-hyperparameter optimization per fit
instead of three (``n_restarts_optimizer=0``): it halves ``suggest``'s CPU time with the same
regret (docs/benchmarks.md). The fits use one BLAS thread (``threadpoolctl``): the matrices are
tiny (at most a few dozen points) and OpenBLAS threads only spin on a shared machine.
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace
from typing import Callable

import numpy as np
from skopt import Optimizer
from skopt.space import Categorical, Integer, Real
from skopt.utils import cook_estimator

from ..knobs import KNOB_BY_FIELD, MIB, Config, autotune_start_configs
from .ranking import Trial, top_distinct  # noqa: F401 (re-exported)

CACHE_ON = 1024


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
           n_calls: int = 24, seed: int | None = 0, progress: Callable[[int, int], None] | None = None,
           batch_objective: Callable[..., np.ndarray] | None = None, refine_rounds: int = 4) -> list[Trial]:
    """Run the controls, then ``n_calls`` Bayesian-optimization proposals; return all trials.

    Args:
        objective: Config -> step time in seconds (lower is better).
        default: Horovod's defaults (evaluated as a control, origin "default").
        multi_node: whether hierarchical allreduce takes effect (nodes > 1).
        n_calls: proposals asked from the optimizer after the controls.
        seed: seeds the optimizer's own generator (no global random state).
        progress: called as progress(done, total) after each evaluation.
        batch_objective: optional, knob arrays (keyword arguments ``fusion_threshold_bytes``,
            ``cycle_time_ms``, ``cache_capacity``, ``hierarchical_allreduce``; broadcastable) ->
            step times (s) of the same shape; enables the refinement (module docstring).
        refine_rounds: most coordinate rounds of the refinement.
    """
    with _one_blas_thread():
        trials = _bayes(objective, default, multi_node=multi_node, n_calls=n_calls, seed=seed, progress=progress)
    if batch_objective is not None:
        trials += _refine(min(trials, key=lambda t: t.step_time_s), batch_objective, multi_node, refine_rounds)
    return trials


def _one_blas_thread():
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # scikit-learn depends on it; without it, run as is
        return nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _bayes(objective, default: Config, *, multi_node: bool, n_calls: int, seed, progress) -> list[Trial]:
    space = _space(multi_node)
    gp = cook_estimator("GP", space=space, random_state=seed, n_restarts_optimizer=0)
    opt = Optimizer(space, base_estimator=gp, n_initial_points=8, acq_func="EI",
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


#: refinement sweeps: 1,000 log-spaced cycle times rounded to what ``--cycle-time-ms`` spells (3 decimals)
CYCLE_SWEEP_MS = np.unique(np.round(np.geomspace(KNOB_BY_FIELD["cycle_time_ms"].low, KNOB_BY_FIELD["cycle_time_ms"].high, 1000), 3))
FUSION_SWEEP_MIB = np.arange(int(KNOB_BY_FIELD["fusion_threshold_bytes"].low // MIB),
                             int(KNOB_BY_FIELD["fusion_threshold_bytes"].high // MIB) + 1)


def _refine(start: Trial, batch: Callable[..., np.ndarray], multi_node: bool, rounds: int) -> list[Trial]:
    """Coordinate refinement of ``start`` with a batch objective (module docstring).

    A move needs a strict improvement of more than 1 ns; among equally good values the one
    closest to the current value is taken, so tied knobs do not wander.
    """
    cur, y = start.config, start.step_time_s
    out: list[Trial] = []
    combos = [(cache, h) for cache in (CACHE_ON, 0) for h in ((False, True) if multi_node else (False,))]

    def knobs(c: Config) -> dict:
        return {"fusion_threshold_bytes": c.fusion_threshold_bytes, "cycle_time_ms": c.cycle_time_ms,
                "cache_capacity": c.cache_capacity, "hierarchical_allreduce": c.hierarchical_allreduce}

    for _ in range(rounds):
        moved = False
        sweeps = [("fusion_threshold_bytes", FUSION_SWEEP_MIB * MIB, np.log1p(FUSION_SWEEP_MIB)),
                  ("cycle_time_ms", CYCLE_SWEEP_MS, np.log(CYCLE_SWEEP_MS)),
                  ("combo", np.arange(len(combos)), np.arange(len(combos)))]
        for name, values, coord in sweeps:
            k = knobs(cur)
            if name == "combo":
                k["cache_capacity"] = np.array([c for c, _ in combos])
                k["hierarchical_allreduce"] = np.array([h for _, h in combos])
                key = (CACHE_ON if cur.cache_capacity > 0 else 0, cur.hierarchical_allreduce and multi_node)
                here = combos.index(key) if key in combos else 0
            else:
                k[name] = values
                here = np.log1p(cur.fusion_threshold_bytes / MIB) if name == "fusion_threshold_bytes" else np.log(cur.cycle_time_ms)
            ys = np.asarray(batch(**k), dtype=float)
            best = ys.min()
            if not best < y - 1e-9:
                continue
            cand = np.flatnonzero(ys <= best + 1e-9)
            i = int(cand[np.argmin(np.abs(coord[cand] - here))])
            if name == "combo":
                cur = replace(cur, cache_capacity=combos[i][0], hierarchical_allreduce=combos[i][1])
            elif name == "fusion_threshold_bytes":
                cur = replace(cur, fusion_threshold_bytes=int(values[i]))
            else:
                cur = replace(cur, cycle_time_ms=float(values[i]))
            y = float(ys[i])
            out.append(Trial(cur, y, "refine"))
            moved = True
        if not moved:
            break
    return out


__all__ = ["Trial", "search", "top_distinct"]
