"""The step phase: a replay of small gradients, Horovod's defaults against fusion off and cache off, which prices a step's small responses.

Part of the sweep fit (:func:`autotuner.frameworks.horovod.fit.sweep.fit_sweep_env`).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ....model.costmodel import Cluster


MIN_STEP_ROUNDS = 3
#: the small-response latency searched (ms per small response, ``2(p-1)·alpha``): 0 to this
MAX_STEP_FIXED_MS = 20.0


def _step_delta_sim_ms(cost, cluster: Cluster, fixed_ms: float, job: str, backend: str | None,
                       compute_ms: float | None = None, after_ms: float | None = None) -> float:
    """The simulator's step-time difference (ms) ``job`` - defaults of the ``step`` phase's replay
    (:mod:`autotuner.frameworks.horovod.stepprobe`: its layout, its emulated compute, ``compute_ms`` or the phase's
    first, split forward 1/3 and backward 2/3 as the replay sleeps it) on ``cost`` with the tier's small-message
    latency set to ``fixed_ms / (2(p-1))`` and a response that starts after the backward costing ``after_ms`` in its
    place (:attr:`autotuner.model.costmodel.CostModel.after_backward_s` = ``after_ms - fixed_ms``; None: the same
    ``fixed_ms``), ``cluster``: the phase's ranks."""
    from ..simulator import simulate_step
    from ..stepprobe import COMPUTE_MS, JOBS, layout
    from .fitters import workload_for

    p = cluster.size
    c = replace(cost, inter=replace(cost.inter, alpha_s=fixed_ms * 1e-3 / (2 * (p - 1))),
                after_backward_s=0.0 if after_ms is None else (after_ms - fixed_ms) * 1e-3)
    L = layout()
    wl = workload_for((COMPUTE_MS if compute_ms is None else compute_ms) * 1e-3)

    def t(name: str) -> float:
        return simulate_step(L.sizes_bytes, L.ready_fraction, wl, JOBS[name], c, cluster, backend=backend).step_time_s

    return (t(job) - t("defaults")) * 1e3


#: the grid of latencies during the backward searched by the two-compute fit (:func:`_long_curve`), ms per small
#: response; it spans 0 to twice the one-latency answer
STEP_GRID_MS = 0.1


def _long_curve(cost, cluster: Cluster, backend: str | None, d_short: float,
                hi_ms: float) -> list[tuple[float, float, float]]:
    """``[(a, b, d_long), ...]``: for each latency during the backward ``a`` (ms, a grid of :data:`STEP_GRID_MS` over
    0..``hi_ms``) the latency after it ``b`` at which the simulated fusion-off - defaults difference at
    :data:`~autotuner.frameworks.horovod.stepprobe.COMPUTE_MS` equals ``d_short`` (ms; scipy ``brentq``, ``b`` in
    0..:data:`MAX_STEP_FIXED_MS`; an ``a`` with no such ``b`` is left out), and the simulated difference ``d_long``
    (ms) those two give at ``LONG_COMPUTE_MS``. A grid, not a root finder, on ``a``: the simulator's 1 ms cycles make
    ``d_long`` a step function of it, and not a monotone one."""
    from scipy.optimize import brentq

    from ..stepprobe import LONG_COMPUTE_MS

    out = []
    for a in np.round(np.arange(0.0, hi_ms + STEP_GRID_MS / 2, STEP_GRID_MS), 6):
        def f(b: float) -> float:
            return _step_delta_sim_ms(cost, cluster, float(a), "fusion-off", backend, after_ms=b) - d_short

        if f(0.0) > 0 or f(MAX_STEP_FIXED_MS) < 0:
            continue
        b = float(brentq(f, 0.0, MAX_STEP_FIXED_MS, xtol=1e-3))
        out.append((float(a), b, _step_delta_sim_ms(cost, cluster, float(a), "fusion-off", backend, LONG_COMPUTE_MS,
                                                   after_ms=b)))
    return out


def _nearest(curve: list[tuple[float, float, float]], d_long: float) -> tuple[float, float, float]:
    """The point of :func:`_long_curve`'s ``curve`` whose ``d_long`` comes nearest the measured ``d_long`` (ms):
    ``(a, b, simulated - measured)``; the smaller ``a`` on a tie."""
    a, b, d = min(curve, key=lambda x: (abs(x[2] - d_long), x[0]))
    return a, b, d - d_long


def _paired_rounds(by: dict[int, dict[str, float]]) -> list[tuple[int, dict[str, float]]]:
    """The step phase's rounds (repeat -> job -> median step, ms) that ran both the defaults and fusion off, by
    repeat."""
    return sorted((k, j) for k, j in by.items() if "defaults" in j and "fusion-off" in j)


def _deltas(rounds: list[tuple[int, dict[str, float]]]) -> tuple[float, list[float]]:
    """``(D, [min, max])``: the median over ``rounds`` (:func:`_paired_rounds`) of fusion off - defaults (ms) and
    the rounds' extremes."""
    d = [j["fusion-off"] - j["defaults"] for _, j in rounds]
    return float(np.median(d)), [float(min(d)), float(max(d))]


def step_small_response(recs: list[dict[str, Any]], cost, cluster: Cluster, backend: str | None) -> dict[str, Any]:
    """The price of a training step's small response, from the ``step`` phase (:mod:`autotuner.frameworks.horovod.stepprobe`):
    replay jobs of a synthetic layout of 32 x (one 256 KiB weight + three 1 KiB vectors), Horovod's defaults
    and fusion off interleaved per round, wall clock, no timeline, the ranks waiting and sleeping through an
    emulated backward as a step's do.

    Per round, the measured difference ``d = median step (fusion off) - median step (defaults)`` (ms); ``D``:
    the median over rounds. The simulator runs both jobs on ``cost`` (:func:`_step_delta_sim_ms`; everything
    fitted except the tier's latency) and ``brentq`` (scipy) finds the small-message latency ``a = 2(p-1)·alpha``
    (ms per small response) at which its difference equals ``D``; the rounds' smallest and largest ``d`` give
    the range. The difference cancels what both jobs share (the compute, the defaults' few fused responses, a
    testbed's offset). ``cluster``: the ranks the phase ran (the records' ``ranks`` must match). Returns the
    model file's ``fit.small_responses.step``: ``fixed_ms`` (``a``; None with a ``note`` below
    :data:`MIN_STEP_ROUNDS` rounds, or where no ``a`` in 0..:data:`MAX_STEP_FIXED_MS` ms gives ``D``),
    ``fixed_range_ms``, ``alpha_us``, ``delta_ms``, ``delta_range_ms``, ``rounds`` (``[repeat, defaults ms,
    fusion off ms, cache off ms or None]``, medians), ``cache_off_delta_ms`` (recorded: cache off - defaults,
    median over rounds), ``layout``, ``regime``, ``form``. Only the records at ``COMPUTE_MS`` (100 ms) price it; those
    at ``LONG_COMPUTE_MS`` (300 ms) give ``long`` (:func:`_long_compute`, recorded, not charged)."""
    from scipy.optimize import brentq

    from ..stepprobe import COMPUTE_MS, LAYOUT_NAME, LONG_COMPUTE_MS

    out: dict[str, Any] = {"regime": "a training step's small responses, wall clock without the timeline (step phase: "
                                     "a replay of many small gradients, defaults against fusion off)",
                           "form": "a = 2(p-1)·alpha at which the simulated step-time difference fusion off - "
                                   "defaults equals the median measured one (scipy brentq)",
                           "layout": LAYOUT_NAME, "fixed_ms": None, "fixed_range_ms": None, "alpha_us": None,
                           "delta_ms": None, "delta_range_ms": None, "cache_off_delta_ms": None, "rounds": []}
    p = cluster.size
    recs = [r for r in recs if r.get("layout") == LAYOUT_NAME and int(r["ranks"]) == p]
    if not recs:
        out["note"] = (f"no step phase of {LAYOUT_NAME} on {p} ranks measured "
                       "(autotuner measure --step-rounds; scripts/probe_phase.py --phase step)")
        return out
    at: dict[float, dict[int, dict[str, float]]] = {COMPUTE_MS: {}, LONG_COMPUTE_MS: {}}  # compute -> repeat -> job
    for r in recs:
        if float(r["compute_ms"]) in at:
            at[float(r["compute_ms"])].setdefault(int(r["repeat"]), {})[r["job"]] = float(np.median(r["step_times_ms"]))
    by, long_by = at[COMPUTE_MS], at[LONG_COMPUTE_MS]
    rounds = _paired_rounds(by)
    out["rounds"] = [[k, j["defaults"], j["fusion-off"], j.get("cache-off")] for k, j in sorted(by.items())
                     if "defaults" in j]
    cache = [j["cache-off"] - j["defaults"] for _, j in rounds if "cache-off" in j]
    out["cache_off_delta_ms"] = float(np.median(cache)) if cache else None
    if len(rounds) < MIN_STEP_ROUNDS:
        out["note"] = f"{len(rounds)} round(s) with defaults and fusion off, fewer than {MIN_STEP_ROUNDS}: not used"
        return out
    D, out["delta_range_ms"] = _deltas(rounds)
    out["delta_ms"] = D

    def g(a: float) -> float:
        return _step_delta_sim_ms(cost, cluster, a, "fusion-off", backend)

    g_lo, g_hi = g(0.0), g(MAX_STEP_FIXED_MS)  # the bracket's ends, the same for every target

    def solve(target: float) -> float | None:
        if g_lo > target or g_hi < target:
            return None
        return float(brentq(lambda a: g(a) - target, 0.0, MAX_STEP_FIXED_MS, xtol=1e-4))

    a = solve(D)
    if a is None:
        out["note"] = (f"no latency in 0-{MAX_STEP_FIXED_MS:g} ms per small response gives the measured difference "
                       f"{D:.1f} ms: not used")
        return out
    out["fixed_ms"], out["alpha_us"] = a, a * 1e3 / (2 * (p - 1))
    ends = [solve(x) for x in out["delta_range_ms"]]
    out["fixed_range_ms"] = [0.0 if ends[0] is None else ends[0], MAX_STEP_FIXED_MS if ends[1] is None else ends[1]]
    # recorded, not charged: the two latencies it identifies moved apart between two sittings (fresh-3gbit 0.80 /
    # 2.21 ms, then 0.30 / 3.92 ms) and made the held-out rows worse on the whole (research/notes/accuracy.md, "The step phase
    # at 300 ms of compute")
    out["long"] = _long_compute(long_by, cost, cluster, backend, D, a)
    return out


def small_price_range(step: dict[str, Any], burst: dict[str, Any], p: int) -> dict[str, Any]:
    """The small-response price the env's phases leave open: the charged step phase's fixed cost per response ``a``
    (``step["fixed_ms"]``, :func:`step_small_response`) and the burst phase's (``burst["fixed_ms"]``,
    :func:`burst_small_response`), both by the wall clock without the timeline, low to high.

    Why a range: the two phases time small responses in two regimes (a training step's, handed over one by one
    through a backward and after it; a burst's, 32 queued at once from a busy loop) and differ by up to 2x on the
    committed envs (fresh-poll-2x1-4.5gbit 0.77 / 1.46 ms, fresh-poll-4gbit 0.64 / 0.36 ms); on the held-out
    fusion-off replays neither is right everywhere, and which one a real layout's step meets is not identified by
    them (research/notes/accuracy.md, "The small-response price the phases leave open"). ``p``: the ranks the phases ran.

    Returns ``{"ms": [low, high] | None, "alpha_us": [low, high] | None, "from": {"step": ms, "burst": ms},
    "note"}``: ``ms`` in ms per response (``a = 2(p-1)·alpha``), ``alpha_us`` the tier's latency in µs. None where
    the step phase is not charged or the burst phase did not price a response. Raises nothing."""
    a, b = step.get("fixed_ms") if step.get("charged") else None, burst.get("fixed_ms")
    out = {"ms": None, "alpha_us": None, "from": {"step": a, "burst": b}}
    if a is None or b is None:
        out["note"] = ("no range: " + ("the step phase's price is not charged" if a is None else
                                       "the burst phase priced no response"))
        return out
    lo, hi = sorted((float(a), float(b)))
    out.update(ms=[lo, hi], alpha_us=[x * 1e3 / (2 * (p - 1)) for x in (lo, hi)],
               note="recorded, not charged: predictions give the step time at both ends")
    return out


def step_cache_off(step: dict[str, Any], cost, cluster: Cluster, backend: str | None) -> tuple[dict[str, Any], Any]:
    """What a cache-off cycle's negotiation costs by the wall clock, from the ``step`` phase's cache-off rounds:
    ``(info, cost')``.

    The negotiation terms a cycle pays when it negotiates its tensors without the response cache
    (:meth:`autotuner.model.costmodel.Negotiation.cycle_s`: ``nocache_s`` in place of ``busy_s``, plus
    ``per_tensor_s`` x tensors x ranks; controller.cc ``ComputeResponseList`` in Horovod 0.28.1) are fitted from the
    sweep's timelines (:func:`cycle_negotiation_s`, :func:`_per_tensor`), whose writer does per-tensor work in
    exactly those cycles (a negotiation's start, each rank's ready mark and its end, per tensor). The step phase runs
    the same jobs without a timeline. One factor ``k`` in [0, 1] scales the extra over a busy cycle:
    ``nocache_s' = busy_s + k (nocache_s - busy_s)`` (left as it is where ``nocache_s <= busy_s``) and
    ``per_tensor_s' = k per_tensor_s``; scipy ``brentq`` finds the ``k`` at which the simulated cache off - defaults
    difference of the replay (:func:`_step_delta_sim_ms`, the charged ``step['fixed_ms']``) equals the measured
    median ``step['cache_off_delta_ms']`` (ms), and where the two ends of [0, 1] do not bracket it, the end nearer it
    (``k`` = 0: the timelines' extra is all the writer's; 1: the timelines' figure stands). ``cost'`` is ``cost``
    with the two terms replaced, or ``cost`` where not charged. ``step``: :func:`step_small_response`'s dict,
    ``charged`` set; ``cluster``: the phase's ranks. ``info`` is the model file's
    ``fit.small_responses.step.cache_off``: ``charged``, ``k``, ``rounds`` (cache-off rounds paired with a
    defaults round), ``measured_ms``, ``measured_range_ms`` (the rounds' extremes), ``simulated_before_ms``
    (k = 1), ``simulated_ms`` (at ``k``), ``nocache_us`` and ``per_tensor_us`` (``[before, after]``), ``regime``; a
    ``note`` where not charged (the step phase's price not charged, no cache-off rounds, fewer than
    :data:`MIN_STEP_ROUNDS`, or no ``nocache_s`` fitted)."""
    from scipy.optimize import brentq

    rounds = [(r[1], r[3]) for r in step.get("rounds", []) if r[2] is not None and r[3] is not None]
    d = [c - f for f, c in rounds]
    out: dict[str, Any] = {"charged": False, "k": None, "rounds": len(d), "measured_ms": None,
                           "measured_range_ms": None, "simulated_before_ms": None, "simulated_ms": None,
                           "nocache_us": None, "per_tensor_us": None,
                           "regime": "a step's cache-off cycles, wall clock without the timeline (step phase: cache off "
                                     "against the defaults, interleaved per round)"}
    neg = cost.negotiation
    if not step.get("charged"):
        out["note"] = "the step phase's price is not charged, so the timelines' negotiation terms stand"
        return out, cost
    if len(d) < MIN_STEP_ROUNDS:
        out["note"] = f"{len(d)} round(s) with cache off, fewer than {MIN_STEP_ROUNDS}: the timelines' terms stand"
        return out, cost
    if neg.nocache_s is None:
        out["note"] = "no cache-off cycle fitted from the timelines: nothing to scale"
        return out, cost
    measured = float(step["cache_off_delta_ms"])
    out["measured_ms"], out["measured_range_ms"] = measured, [float(min(d)), float(max(d))]
    base = neg.busy_s if neg.busy_s is not None else neg.cache_ops * neg.ctrl_op_s

    def scaled(k: float):
        nocache = neg.nocache_s if neg.nocache_s <= base else base + k * (neg.nocache_s - base)
        return replace(cost, negotiation=replace(neg, nocache_s=nocache, per_tensor_s=k * neg.per_tensor_s))

    def sim(k: float) -> float:
        return _step_delta_sim_ms(scaled(k), cluster, float(step["fixed_ms"]), "cache-off", backend)

    g0, g1 = sim(0.0), sim(1.0)
    if (g0 - measured) * (g1 - measured) < 0:
        k = float(brentq(lambda x: sim(x) - measured, 0.0, 1.0, xtol=1e-3))
    else:
        k = 0.0 if abs(g0 - measured) <= abs(g1 - measured) else 1.0
    new = scaled(k)
    out.update(charged=True, k=k, simulated_before_ms=g1, simulated_ms=sim(k),
               nocache_us=[neg.nocache_s * 1e6, new.negotiation.nocache_s * 1e6],
               per_tensor_us=[neg.per_tensor_s * 1e6, new.negotiation.per_tensor_s * 1e6])
    return out, new


def _long_compute(long_by: dict[int, dict[str, float]], cost, cluster: Cluster, backend: str | None,
                  d_short: float, one_ms: float) -> dict[str, Any]:
    """The step phase's rounds at ``LONG_COMPUTE_MS`` (repeat -> job -> median step, ms): with at least
    :data:`MIN_STEP_ROUNDS` of them, what a small response costs during the backward (``during_ms``) and after
    it (``after_ms``), :func:`_long_curve` and :func:`_nearest` on the median differences (``d_short`` at the phase's
    first compute, ``one_ms`` the one latency that meets it alone), and their ranges over the median and the rounds'
    extreme long differences (``during_range_ms``, ``after_range_ms``; the curve is not monotone). Returns the
    model file's ``fit.small_responses.step.long``: ``compute_ms``, ``rounds`` (``[repeat, defaults ms, fusion off
    ms]``), ``delta_ms``, ``delta_range_ms``, ``during_ms``, ``after_ms``, ``after_backward_us`` (``(b - a)`` in µs,
    what :attr:`~autotuner.model.costmodel.CostModel.after_backward_s` would be), ``miss_ms`` (simulated - measured long
    difference), ``one_latency_delta_ms`` (what the one latency gives at the long compute); ``after_ms`` None with
    a ``note`` where not identified; ``charged``: False (recorded: the fit charges the one latency, ``one_ms``)."""
    from ..stepprobe import LONG_COMPUTE_MS

    out: dict[str, Any] = {"compute_ms": LONG_COMPUTE_MS, "rounds": [], "delta_ms": None, "delta_range_ms": None,
                           "during_ms": None, "after_ms": None, "after_backward_us": None, "miss_ms": None,
                           "during_range_ms": None, "after_range_ms": None, "one_latency_delta_ms": None,
                           "charged": False}
    rounds = _paired_rounds(long_by)
    out["rounds"] = [[k, j["defaults"], j["fusion-off"]] for k, j in rounds]
    if len(rounds) < MIN_STEP_ROUNDS:
        out["note"] = f"{len(rounds)} round(s) at {LONG_COMPUTE_MS:g} ms of compute, fewer than {MIN_STEP_ROUNDS}"
        return out
    D, out["delta_range_ms"] = _deltas(rounds)
    out["delta_ms"] = D
    out["one_latency_delta_ms"] = _step_delta_sim_ms(cost, cluster, one_ms, "fusion-off", backend, LONG_COMPUTE_MS)
    curve = _long_curve(cost, cluster, backend, d_short, 2.0 * one_ms)
    if not curve:
        out["note"] = "no latencies meet the measured difference at the first compute"
        return out
    a, b, miss = _nearest(curve, D)
    out.update(during_ms=a, after_ms=b, after_backward_us=(b - a) * 1e3, miss_ms=miss)
    pts = [(a, b)] + [_nearest(curve, x)[:2] for x in out["delta_range_ms"]]  # the curve is no monotone function
    out["during_range_ms"] = [min(x[0] for x in pts), max(x[0] for x in pts)]
    out["after_range_ms"] = [min(x[1] for x in pts), max(x[1] for x in pts)]
    return out


#: fewest complete (fast, reference) job pairs for the per-cycle compute cost
