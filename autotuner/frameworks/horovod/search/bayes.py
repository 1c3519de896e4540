"""Bayesian search over Horovod knobs with scikit-optimize (ask/tell).

The objective is any callable ``Config -> step time (s)``: the simulator here, a real
``horovodrun`` trial later. The space comes from the knob table (:mod:`autotuner.frameworks.horovod.knobs`):
fusion threshold 0-512 whole MiB (its horovodrun flag takes an integer), cycle time
0.1-100 ms (log-uniform), response cache on (capacity 1024) / off, and hierarchical
allreduce only when the cluster has more than one node (Horovod ignores it otherwise,
operations.cc) and the scenario's backend has it (not on gloo or mpi:
:func:`autotuner.frameworks.horovod.knobs.hierarchical_allreduce_supported`; there it is pinned off).
Hierarchical allgather is not searched: it only changes allgather ops
(ops/mpi_operations.cc MPIHierarchicalAllgather), which data-parallel gradient layouts do not
issue, so it cannot change the predicted step.

Horovod's defaults and autotune's four start points (for each categorical combination) are
always evaluated first, as controls, and told to the optimizer.

With a ``batch_objective`` (many configurations at once, e.g. :meth:`autotuner.frameworks.horovod.scenario.Scenario.step_times`
on the fast simulator), the Bayesian proposals are followed by a coordinate refinement of the
best point: each knob in turn is swept over its whole range (every whole MiB 0-512; 1,000
log-spaced cycle times 0.1-100 ms, rounded to 0.001 ms; every on/off combination) with the others fixed, moving to
the best value, until a full round improves nothing (at most ``refine_rounds`` rounds, a few
thousand simulations, milliseconds on the fast simulator). Each move is recorded as a trial of
origin ``"refine"``.

The Gaussian process is scikit-optimize's default for this space (``cook_estimator("GP")``:
constant × Matern 5/2, normalized targets) with one kernel-hyperparameter optimization per fit
instead of three (``n_restarts_optimizer=0``): it halves ``suggest``'s CPU time with the same
regret (research/notes/benchmarks.md). The fits use one BLAS thread (``threadpoolctl``): the matrices are
tiny (at most a few dozen points) and OpenBLAS threads only spin on a shared machine.
"""
from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, replace
from itertools import product
from typing import Any, Callable, Mapping

import numpy as np
from skopt import Optimizer
from skopt.space import Categorical, Integer, Real
from skopt.utils import cook_estimator

from ..knobs import KNOBS, Config, Knob, autotune_start_configs, pin_unsupported_off
from .ranking import Origin, Trial, top_distinct  # noqa: F401 (re-exported)


def searched_knobs(multi_node: bool, fixed: Mapping[str, Any] = {}) -> list[Knob]:
    """The knobs a search varies: those with a search ``space`` in :data:`autotuner.frameworks.horovod.knobs.KNOBS`,
    less the multi-node-only ones on one node and the ``fixed`` ones (field names)."""
    return [k for k in KNOBS if k.space and k.field not in fixed and (multi_node or not k.multi_node_only)]


def _dimension(k: Knob):
    if k.space == "flag-int":  # whole flag units: what horovodrun can spell
        return Integer(int(k.low // k.flag_scale), int(k.high // k.flag_scale), name=k.param)
    if k.space == "log":
        return Real(k.low, k.high, prior="log-uniform", name=k.param)
    if k.space == "on-off":
        return Categorical([True, False], name=k.field)
    return Categorical([False, True], name=k.field)


def _space(knobs: list[Knob]) -> list:
    return [_dimension(k) for k in knobs]


def _to_config(x: list, knobs: list[Knob], base: Config) -> Config:
    kw = {}
    for k, v in zip(knobs, x):
        if k.space == "flag-int":
            kw[k.field] = int(v) * k.flag_scale
        elif k.space == "log":
            kw[k.field] = float(v)
        elif k.space == "on-off":
            kw[k.field] = k.default if v else 0
        else:
            kw[k.field] = bool(v)
    return replace(base, **kw)


def _to_point(c: Config, knobs: list[Knob]) -> list:
    x: list = []
    for k in knobs:
        v = getattr(c, k.field)
        if k.space == "flag-int":
            x.append(int(min(k.high // k.flag_scale, round(v / k.flag_scale))))
        elif k.space == "log":
            x.append(float(min(max(v, k.low), k.high)))
        else:
            x.append(bool(v))
    return x


def _combos(knobs: list[Knob], base: Config) -> list[dict[str, Any]]:
    """Every setting of the searched on/off knobs (cache on first, switches off first); the
    knobs not searched keep ``base``'s value."""
    axes = [[(k.field, v) for v in ((k.default, 0) if k.space == "on-off" else (False, True))]
            for k in knobs if k.space in ("on-off", "switch")]
    return [dict(c) for c in product(*axes)]


def search(objective: Callable[[Config], float], default: Config, *, multi_node: bool,
           n_calls: int = 24, seed: int | None = 0, progress: Callable[[int, int], None] | None = None,
           batch_objective: Callable[..., np.ndarray] | None = None, refine_rounds: int = 4,
           fixed: Mapping[str, Any] | None = None) -> list[Trial]:
    """Run the controls, then ``n_calls`` Bayesian-optimization proposals; return all trials.

    Args:
        objective: Config -> step time in seconds (lower is better).
        default: the reference configuration (Horovod's defaults, with any ``fixed`` knobs
            applied by the caller), evaluated first as a control of origin "default".
        multi_node: whether hierarchical allreduce takes effect (nodes > 1).
        n_calls: proposals asked from the optimizer after the controls.
        seed: seeds the optimizer's own generator (no global random state).
        progress: called as progress(done, total) after each evaluation.
        batch_objective: optional, knob arrays (keyword arguments ``fusion_threshold_bytes``,
            ``cycle_time_ms``, ``cache_capacity``, ``hierarchical_allreduce``; broadcastable) ->
            step times (s) of the same shape; enables the refinement (module docstring).
        refine_rounds: most coordinate rounds of the refinement.
        fixed: knobs the search must not change (field name -> value, internal units); every
            trial has them.
    """
    fixed = dict(fixed or {})
    default = replace(default, **fixed)
    knobs = searched_knobs(multi_node, fixed)
    with _one_blas_thread():
        trials = _bayes(objective, default, knobs=knobs, n_calls=n_calls, seed=seed, progress=progress)
    if batch_objective is not None:
        trials += _refine(min(trials, key=lambda t: t.step_time_s), batch_objective, knobs, default, refine_rounds)
    return trials


def _one_blas_thread():
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # scikit-learn depends on it; without it, run as is
        return nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _bayes(objective, default: Config, *, knobs: list[Knob], n_calls: int, seed, progress) -> list[Trial]:
    space = _space(knobs)
    gp = cook_estimator("GP", space=space, random_state=seed, n_restarts_optimizer=0)
    opt = Optimizer(space, base_estimator=gp, n_initial_points=8, acq_func="EI",
                    acq_optimizer="sampling", acq_optimizer_kwargs={"n_points": 2000}, random_state=seed)
    searched = {k.field for k in knobs}
    starts = [replace(c, **{f: getattr(default, f) for f in ("fusion_threshold_bytes", "cycle_time_ms")
                            if f not in searched}) for c in autotune_start_configs(default)]
    controls = [(default, Origin.default)]
    for combo in _combos(knobs, default):
        for c in starts:
            cfg = replace(c, **combo)
            if all(cfg != x for x, _ in controls):
                controls.append((cfg, Origin.autotune_start))
    total = len(controls) + n_calls
    trials: list[Trial] = []
    for cfg, origin in controls:
        trials.append(Trial(cfg, objective(cfg), origin))
        if progress:
            progress(len(trials), total)
    if not knobs:  # everything fixed: nothing to search
        return trials
    opt.tell([_to_point(t.config, knobs) for t in trials], [t.step_time_s for t in trials])  # one fit
    for _ in range(n_calls):
        x = opt.ask()
        cfg = _to_config(x, knobs, default)
        y = objective(cfg)
        trials.append(Trial(cfg, y, Origin.search))
        opt.tell(x, y)
        if progress:
            progress(len(trials), total)
    return trials


def _sweep_values(k: Knob) -> np.ndarray:
    """A refinement sweep (internal units): every whole flag unit (threshold: 0-512 MiB), or
    1,000 log-spaced values rounded to what the flag spells (cycle time: 3 decimals)."""
    if k.space == "flag-int":
        return np.arange(int(k.low // k.flag_scale), int(k.high // k.flag_scale) + 1) * k.flag_scale
    return np.unique(np.round(np.geomspace(k.low, k.high, 1000), 3))


def _coord(k: Knob, v) -> np.ndarray:
    """Where a value sits on its sweep, for "closest to the current value" among ties."""
    return np.log1p(np.asarray(v) / k.flag_scale) if k.space == "flag-int" else np.log(np.asarray(v, dtype=float))


def _refine(start: Trial, batch: Callable[..., np.ndarray], knobs: list[Knob], base: Config,
            rounds: int) -> list[Trial]:
    """Coordinate refinement of ``start`` with a batch objective (module docstring).

    A move needs a strict improvement of more than 1 ns; among equally good values the one
    closest to the current value is taken, so tied knobs do not wander.
    """
    cur, y = start.config, start.step_time_s
    out: list[Trial] = []
    combos = _combos(knobs, base)
    numeric = [k for k in knobs if k.space in ("flag-int", "log")]

    def args(c: Config) -> dict:
        return {f: getattr(c, f) for f in ("fusion_threshold_bytes", "cycle_time_ms", "cache_capacity",
                                           "hierarchical_allreduce")}

    on_off = [k for k in knobs if k.space in ("on-off", "switch")]

    def combo_of(c: Config) -> dict:
        """``c``'s on/off knobs as :func:`_combos` spells them (a cache that is on: the default capacity)."""
        return {k.field: (k.default if getattr(c, k.field) else 0) if k.space == "on-off" else bool(getattr(c, k.field))
                for k in on_off}

    for _ in range(rounds):
        moved = False
        for k in [*numeric, None]:
            a = args(cur)
            if k is None:
                if len(combos) < 2:
                    continue
                for f in combos[0]:
                    a[f] = np.array([c[f] for c in combos])
                here_c = combo_of(cur)
                here = combos.index(here_c) if here_c in combos else 0
                coord = np.arange(len(combos))
            else:
                values = _sweep_values(k)
                a[k.field] = values
                here, coord = _coord(k, getattr(cur, k.field)), _coord(k, values)
            ys = np.asarray(batch(**a), dtype=float)
            best = ys.min()
            if not best < y - 1e-9:
                continue
            cand = np.flatnonzero(ys <= best + 1e-9)
            i = int(cand[np.argmin(np.abs(coord[cand] - here))])
            if k is None:
                cur = replace(cur, **combos[i])
            else:
                v = values[i]
                cur = replace(cur, **{k.field: int(v) if k.type is int else float(v)})
            y = float(ys[i])
            out.append(Trial(cur, y, Origin.refine))
            moved = True
        if not moved:
            break
    return out


@dataclass(frozen=True)
class BayesStrategy:
    """:class:`~autotuner.frameworks.horovod.search.ranking.Strategy` of :func:`search` on a scenario: the
    reference simulator as objective, the batch simulator for the refinement."""

    n_calls: int = 24
    seed: int | None = 0
    refine_rounds: int = 4
    progress: Callable[[int, int], None] | None = None

    def trials(self, sc, reference: Config, fixed: Mapping[str, Any]) -> list[Trial]:
        # a knob the backend ignores (hierarchical allreduce on gloo/mpi) is pinned off: not searched, never on
        fixed = pin_unsupported_off(fixed, getattr(sc, "effective_backend", None))
        return search(lambda c: sc.simulate(c).step_time_s, reference, multi_node=sc.cluster.nodes > 1,
                      n_calls=self.n_calls, seed=self.seed, progress=self.progress, batch_objective=sc.step_times,
                      refine_rounds=self.refine_rounds, fixed=fixed)


__all__ = ["BayesStrategy", "Trial", "search", "top_distinct"]
