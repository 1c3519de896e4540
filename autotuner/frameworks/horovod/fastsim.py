"""Fast batch simulator: :func:`~autotuner.frameworks.horovod.simulator.simulate_step`'s step time for many configurations.

Pure and deterministic like the reference (no I/O, no randomness, no clocks); numpy only.
:func:`simulate_batch` runs the reference's background-loop rules (module docstring of
:mod:`autotuner.frameworks.horovod.simulator`, with its Horovod sources: operations.cc ``RunLoopOnce``,
controller.cc ``ComputeResponseList`` / ``FuseResponses`` / ``TensorFusionThresholdBytes``,
v0.20.3 operations.cc ``PerformOperation`` WAIT_FOR_DATA, ops/nccl_operations.cc and
ops/gpu_operations.cc ``FinalizeGPUQueue``) in **lockstep** over configurations: configuration
arrays of shape (M,), one iteration of the Python loop performs one fused response of every
configuration still inside the step, so the loop runs at most T iterations per step (T = number
of gradient tensors) whatever M is. Only the step time is computed (no responses list, comm or
overlap figures: use the reference for those).

Arithmetic is done in the reference's order on float64, so step times agree with
:func:`~autotuner.frameworks.horovod.simulator.simulate_step` to rounding (tests/test_fastsim.py checks 1e-9
relative on random layouts, workloads and knobs; in practice they are equal). Per-layout
tables are computed with the reference's own functions, so a change there is picked up:

- fusion plan: ``nxt[a]`` = end of the greedy fused response that starts at tensor ``a`` when
  nothing limits it but the threshold (controller.cc ``FuseResponses``; a tensor larger than
  the threshold goes alone); inside a cycle that negotiated tensors ``[i, j)`` the response is
  ``[a, min(j, nxt[a]))``, which is exactly what :func:`~autotuner.frameworks.horovod.simulator.fuse` returns;
- collective time of the response ``[a, b)`` (tabulated for every ``[a, b)`` up to
  :data:`DUR_TABLE_MAX_T` tensors, computed on demand above: ``_Tables.durations``) from
  :meth:`~autotuner.model.costmodel.CostModel.allreduce_s` (hierarchical ``h``) × ``comm_scale``
  + the fusion-buffer memcpy (MEMCPY_IN/OUT_FUSION_BUFFER, ``CostModel.memcpy_s``) when
  ``b - a > 1`` + the untimed host gap (``CostModel.host_gap_s``), as the reference adds them;
- negotiation time per cycle from :meth:`~autotuner.model.costmodel.Negotiation.cycle_s` for each
  tensor count and cache state (off, on with misses, on with every tensor a hit).

Exact shortcuts (``dedupe=True``): configurations that the reference cannot tell apart are
simulated once and the result broadcast. The reference reads the knobs only through: the
fusion plan ``nxt`` (so two thresholds with the same plan, e.g. every threshold at or above
the layout's total bytes, are the same configuration), the cycle time, the cache state (off /
on, capacity < tensor count / on, capacity >= tensor count) and the effective hierarchical
allreduce flag (``hierarchical_allreduce and nodes > 1`` and a backend with hierarchical allreduce,
:func:`autotuner.frameworks.horovod.knobs.hierarchical_allreduce_supported`). Hierarchical allgather is not read
at all (it only changes allgather ops, ops/mpi_operations.cc ``MPIHierarchicalAllgather``).

Array shapes (M = configurations, T = tensors):
    sizes_bytes, ready_fraction: (T,)
    knob arrays: broadcastable to a common shape S; the result has shape S (seconds).
"""
from __future__ import annotations

import numpy as np

from ...errors import KnobError
from .knobs import KNOB_BY_FIELD, hierarchical_allreduce_supported
from ...model.costmodel import Cluster, CostModel
from .simulator import effective_threshold
from ...model.workload import Workload, hand_over_times

#: layouts up to this many tensors tabulate every response's time once (2·T·(T+1) floats: 16 MiB at
#: 1,024); larger ones compute each response's time when it is performed, so memory stays linear in T
DUR_TABLE_MAX_T = 1024

#: configurations simulated together (bounds memory: ~25 arrays of this length, or an
#: (M, T) readiness matrix when overlap < 1)
DEFAULT_CHUNK = 1 << 16
_NEG_OFF, _NEG_MISS, _NEG_HIT = 0, 1, 2  # cache disabled / enabled with misses / all hits


def configs_to_arrays(configs) -> dict[str, np.ndarray]:
    """Knob arrays, shape (len(configs),), from a sequence of :class:`~autotuner.frameworks.horovod.knobs.Config`."""
    cs = list(configs)
    return {
        "fusion_threshold_bytes": np.array([c.fusion_threshold_bytes for c in cs], dtype=np.int64),
        "cycle_time_ms": np.array([c.cycle_time_ms for c in cs], dtype=float),
        "cache_capacity": np.array([c.cache_capacity for c in cs], dtype=np.int64),
        "hierarchical_allreduce": np.array([c.hierarchical_allreduce for c in cs], dtype=bool),
        "hierarchical_allgather": np.array([c.hierarchical_allgather for c in cs], dtype=bool),
    }


def fusion_plan(wire_bytes: np.ndarray, threshold: int) -> np.ndarray:
    """Greedy fusion ends for one effective threshold: shape (T,), int64.

    ``out[a]`` = end (exclusive) of the response starting at tensor ``a`` when the cycle holds
    every later tensor: the largest ``b > a`` with ``sum(wire[a:b]) <= threshold``, at least
    ``a + 1`` (controller.cc ``FuseResponses``). ``wire_bytes`` must be >= 1 each.
    """
    cum = np.concatenate(([0], np.cumsum(wire_bytes, dtype=np.int64)))
    T = wire_bytes.size
    m = np.searchsorted(cum, cum[:T] + int(threshold), side="right") - 1
    return np.maximum(np.arange(1, T + 1), m).astype(np.int64)


def simulate_batch(sizes_bytes: np.ndarray, ready_fraction: np.ndarray, workload: Workload, cost: CostModel,
                   cluster: Cluster, *, fusion_threshold_bytes, cycle_time_ms, cache_capacity,
                   hierarchical_allreduce, hierarchical_allgather=False, compression_ratio: float = 1.0,
                   warmup_steps: int = 1, measure_steps: int = 2, loop_phase_s: float = 0.0,
                   dedupe: bool = True, chunk: int = DEFAULT_CHUNK, backend: str | None = None,
                   compute_scale=None, phases: int = 0) -> np.ndarray:
    """Steady-state step time (s) of every configuration, as :func:`~autotuner.frameworks.horovod.simulator.simulate_step`.

    Args:
        sizes_bytes: shape (T,), bytes of each gradient in readiness order (uncompressed).
        ready_fraction: shape (T,), non-decreasing in [0, 1] (:attr:`autotuner.model.layout.Layout.ready_fraction`).
        workload, cost, cluster, compression_ratio, warmup_steps, measure_steps, loop_phase_s, backend:
            as for :func:`~autotuner.frameworks.horovod.simulator.simulate_step` (``backend``: hierarchical
            allreduce is read as off where it has none).
        fusion_threshold_bytes: int bytes (before Horovod's rounding), >= 0.
        cycle_time_ms: float ms, > 0.
        cache_capacity: int entries, >= 0 (0 disables the cache).
        hierarchical_allreduce, hierarchical_allgather: bool (allgather has no effect, see module
            docstring; accepted so that a full knob grid can be passed).
            All knob arguments broadcast together to one shape S.
        dedupe: simulate each distinguishable configuration once (exact, see module docstring).
            False simulates every entry (for benchmarks of the simulator itself).
        chunk: configurations per lockstep batch.
        phases: > 0: the step with the loop's phase random, as
            :func:`autotuner.frameworks.horovod.simulator.simulate_step_phases` (that many single steps from
            evenly spread loop phases, averaged; ``warmup_steps``, ``measure_steps`` and
            ``loop_phase_s`` are then unused). 0: the steady state, as :func:`simulate_step`.
        compute_scale: None, or per configuration (broadcast with the knobs) the multiplier of the
            workload's forward, backward, update and host backward (the reference run on the
            workload scaled so: :meth:`autotuner.frameworks.horovod.scenario.Scenario.workload_at`).

    Returns:
        float64 array of shape S, seconds.

    Raises:
        ValueError: mismatched or empty layout arrays, bad step counts.
        KnobError: a knob out of range (as :meth:`~autotuner.frameworks.horovod.knobs.Config.validate`).
    """
    thr, cyc_ms, cap, hier, _, csc = np.broadcast_arrays(
        np.asarray(fusion_threshold_bytes), np.asarray(cycle_time_ms, dtype=float),
        np.asarray(cache_capacity), np.asarray(hierarchical_allreduce, dtype=bool),
        np.asarray(hierarchical_allgather, dtype=bool), np.asarray(1.0 if compute_scale is None else compute_scale,
                                                                   dtype=float))
    shape = thr.shape
    thr, cyc_ms, cap, hier, csc = (x.reshape(-1) for x in (thr, cyc_ms, cap, hier, csc))
    if compute_scale is not None and not np.all(np.isfinite(csc) & (csc > 0)):
        raise ValueError("compute_scale must be finite and > 0")
    for name, arr in (("fusion_threshold_bytes", thr), ("cycle_time_ms", cyc_ms), ("cache_capacity", cap)):
        k = KNOB_BY_FIELD[name]  # the knob table's range, as Config's validation
        bad = ~(np.isfinite(arr) & (arr >= k.low) & (arr <= k.high))
        if np.any(bad):
            raise KnobError(f"{name} must be in {k.low:g}..{k.high:g} {k.unit}, got {arr[bad][0]}")
    if chunk < 1:
        raise ValueError("chunk must be >= 1")
    sim = _Tables(sizes_bytes, ready_fraction, workload, cost, cluster, compression_ratio)
    if measure_steps < 1 or warmup_steps < 0:
        raise ValueError("measure_steps must be >= 1 and warmup_steps >= 0")
    if cluster.size == 1:  # one rank: Horovod does nothing (simulator._single_rank)
        return ((workload.forward_s * csc + workload.backward_s * csc + workload.update_s * csc).reshape(shape)
                if compute_scale is not None else np.full(shape, workload.forward_s + workload.backward_s
                                                          + workload.update_s))
    T = sim.T
    # knobs -> what the reference reads: plan id, cycle (s), negotiation class, hierarchical flag
    uthr, thr_inv = np.unique(thr, return_inverse=True)
    div_thr = [effective_threshold(int(x), cluster.gpus_per_node) for x in uthr]
    plans = np.stack([fusion_plan(sim.wire, int(e)) for e in div_thr]) if uthr.size else np.zeros((0, T), np.int64)
    if dedupe:
        plans, plan_of_thr = np.unique(plans, axis=0, return_inverse=True)
        plan_of_thr = plan_of_thr.reshape(-1)
    else:
        plan_of_thr = np.arange(uthr.size)
    plan = plan_of_thr[thr_inv.reshape(-1)]
    cycle = cyc_ms * 1e-3  # same expression as the reference
    negc = np.where(cap <= 0, _NEG_OFF, np.where(cap >= T, _NEG_HIT, _NEG_MISS)).astype(np.int64)
    hier_eff = (hier & (cluster.nodes > 1) & hierarchical_allreduce_supported(backend)).astype(np.int64)
    if dedupe:
        ucyc, cyc_inv = np.unique(cycle, return_inverse=True)
        key = ((plan * ucyc.size + cyc_inv.reshape(-1)) * 3 + negc) * 2 + hier_eff
        if compute_scale is not None:
            usc, sc_inv = np.unique(csc, return_inverse=True)
            key = key * usc.size + sc_inv.reshape(-1)
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
        inv = inv.reshape(-1)
    else:
        first, inv = np.arange(thr.size), np.arange(thr.size)
    out = np.empty(first.size)
    if sim.stall > 0 or compute_scale is not None:  # (M, T) matrices per chunk: keep them near 32 MiB
        chunk = max(1, min(chunk, (1 << 22) // T))
    for lo in range(0, first.size, chunk):
        sel = first[lo:lo + chunk]
        args = (plans, plan[sel], cycle[sel], negc[sel], hier_eff[sel])
        scl = None if compute_scale is None else csc[sel]
        if phases > 0:  # simulator.simulate_step_phases: single steps from evenly spread loop phases, averaged
            per = np.maximum(cycle[sel], sim.neg[negc[sel], 0])
            out[lo:lo + chunk] = np.mean(np.stack([sim.run(*args, 0, 1, (k + 0.5) * per / phases, scl)
                                                   for k in range(phases)], axis=1), axis=1)
        else:
            out[lo:lo + chunk] = sim.run(*args, warmup_steps, measure_steps, loop_phase_s, scl)
    return out[inv].reshape(shape)


def simulate_configs(sizes_bytes: np.ndarray, ready_fraction: np.ndarray, workload: Workload, configs,
                     cost: CostModel, cluster: Cluster, **kw) -> np.ndarray:
    """:func:`simulate_batch` for a sequence of :class:`~autotuner.frameworks.horovod.knobs.Config`: shape (len(configs),), s."""
    return simulate_batch(sizes_bytes, ready_fraction, workload, cost, cluster, **configs_to_arrays(list(configs)), **kw)


class _Tables:
    """Per-layout tables (see module docstring) and the lockstep loop over configurations."""

    def __init__(self, sizes_bytes, ready_fraction, workload: Workload, cost: CostModel, cluster: Cluster,
                 compression_ratio: float) -> None:
        sizes = np.asarray(sizes_bytes, dtype=np.int64)
        frac = np.asarray(ready_fraction, dtype=float)
        if sizes.ndim != 1 or sizes.shape != frac.shape or sizes.size == 0:
            raise ValueError("sizes_bytes and ready_fraction must be non-empty 1-D arrays of equal length")
        self.wire = wire = np.maximum(1, np.round(sizes * compression_ratio)).astype(np.int64)
        self.T = T = int(wire.size)
        p = cluster.size
        neg = cost.negotiation
        self.neg = np.array([[neg.cycle_s(n, p, c > _NEG_OFF, c == _NEG_HIT) for n in range(T + 1)]
                             for c in (_NEG_OFF, _NEG_MISS, _NEG_HIT)])  # (3, T + 1) s
        fwd, bwd = workload.forward_s, workload.backward_s
        self.fwd, self.bwd, self.update = fwd, bwd, workload.update_s
        self.ready_rel = fwd + bwd * frac
        self.hook_rel = hand_over_times(self.ready_rel, fwd, workload.host_backward_s)
        self.frac, self.host_bwd = frac, workload.host_backward_s
        self.stall = 1.0 - min(max(workload.overlap, 0.0), 1.0)
        self.delay = cost.compute_delay if workload.cpu_bound else None
        self.after = cost.after_backward_s
        self.asyn = workload.async_collectives
        cum = np.concatenate(([0], np.cumsum(wire)))
        self.cum = cum
        self.cost, self.cluster, self.comm_scale = cost, cluster, workload.comm_scale
        self.dur = None
        if T <= DUR_TABLE_MAX_T:  # small layouts: every response [a, b) tabulated once, looked up
            A, B = np.divmod(np.arange(2 * T * (T + 1)) % (T * (T + 1)), T + 1)
            H = np.repeat([0, 1], T * (T + 1))
            self.dur = self.durations(H, A, B)  # flat index (h * T + a) * (T + 1) + b

    def durations(self, h: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Time (s) of the responses ``[a, b)`` (arrays of one shape; ``h``: hierarchical allreduce
        0/1), as the reference adds it up: the collective (:meth:`CostModel.allreduce_s`) x
        ``comm_scale``, + the fusion-buffer copies when ``b - a > 1``, + the host gap."""
        nb = (self.cum[b] - self.cum[a]).astype(float)
        out = np.empty(nb.shape)
        for hv in (0, 1):
            m = h == hv
            if m.any():
                out[m] = np.asarray(self.cost.allreduce_s(nb[m], self.cluster, bool(hv)), dtype=float) * self.comm_scale
        fused = (b - a) > 1
        if fused.any():
            out[fused] += self.cost.memcpy_s(self.cum[b[fused]] - self.cum[a[fused]])
        return out + self.cost.host_gap_s(nb)

    def _count_handed(self, s0: np.ndarray, c: np.ndarray) -> np.ndarray:
        """Number of tensors with ``s0 + hook_rel[k] <= c`` (the reference's searchsorted on
        ``hook_abs``), exact under float rounding: a searchsorted guess, then fix-ups."""
        h, T = self.hook_rel, self.T
        j = np.searchsorted(h, c - s0, side="right")
        while True:
            up = j < T
            up[up] = s0[up] + h[j[up]] <= c[up]
            if not up.any():
                break
            j += up
        while True:
            dn = j > 0
            dn[dn] = s0[dn] + h[j[dn] - 1] > c[dn]
            if not dn.any():
                break
            j -= dn
        return j

    def _scaled(self, scale: np.ndarray):
        """Per configuration, the workload's times multiplied by ``scale`` (M,), as the reference
        computes them from a workload scaled so (:meth:`autotuner.frameworks.horovod.scenario.Scenario.workload_at`):
        forward, backward, update (M,), readiness and hand-over times (M, T), the same arithmetic."""
        fw, bw, up = self.fwd * scale, self.bwd * scale, self.update * scale
        ready = fw[:, None] + bw[:, None] * self.frac[None, :]
        if self.host_bwd is None:
            return fw, bw, up, ready, ready
        T = self.T
        host = fw[:, None] + np.maximum(self.host_bwd * scale, 0.0)[:, None] * np.arange(1, T + 1)[None, :] / T
        return fw, bw, up, ready, np.minimum(ready, host)

    def run(self, plans: np.ndarray, plan: np.ndarray, cycle: np.ndarray, negc: np.ndarray, hier: np.ndarray,
            warmup_steps: int, measure_steps: int, loop_phase_s, scale: np.ndarray | None = None) -> np.ndarray:
        """Mean measured step time (s), shape (M,).

        ``plans`` (P, T) fusion plans (:func:`fusion_plan`); per configuration, shape (M,): ``plan``
        row of ``plans``, ``cycle`` (s), ``negc`` negotiation class, ``hier`` effective flag (0/1),
        ``scale`` the compute's multiplier (None: 1 for all, the workload as given);
        ``loop_phase_s`` a scalar or shape (M,).
        """
        sc = None if scale is None else self._scaled(scale)
        M, T = cycle.size, self.T
        Tp1 = T + 1
        period = np.maximum(cycle, self.neg[negc, 0])
        neg_flat = self.neg.reshape(-1)
        nxt_flat = plans.reshape(-1)
        step_start = np.zeros(M)
        loop_t = np.broadcast_to(np.asarray(loop_phase_s, dtype=float), (M,)).copy()
        times = np.empty((M, measure_steps))
        cols = np.arange(T)[None, :]
        stall, rate = self.stall, 1.0 - self.stall
        for step in range(warmup_steps + measure_steps):
            ids = np.arange(M)  # live configurations (positions in the chunk)
            s0 = step_start.copy()
            lt = loop_t.copy()
            a = np.zeros(M, dtype=np.int64)  # start of the next response
            j = np.zeros(M, dtype=np.int64)  # end of the tensors negotiated in the current cycle
            c = np.zeros(M)  # start of the current cycle
            t = s0.copy()  # background thread's clock
            sf = s0.copy()  # collective stream free at
            if sc is None:
                be = s0 + self.fwd + self.bwd  # backward end
                R = s0[:, None] + self.ready_rel[None, :] if stall > 0 else None
                up = RR = HR = None
            else:  # per-configuration compute (the CPU stretch)
                be = s0 + sc[0] + sc[1]
                up, RR, HR = sc[2], sc[3], sc[4]
                R = s0[:, None] + RR if stall > 0 else None
            cyc, per, nc, hr, row = cycle, period, negc, hier, plan * T
            step_end = np.empty(M)
            while ids.size:
                new = np.flatnonzero(a == j)  # these start a cycle (RunLoopOnce)
                sl = slice(None)  # those performing a response in this iteration
                if new.size:
                    an, ln, sn = a[new], lt[new], s0[new]
                    h = sn + (self.hook_rel[an] if HR is None else HR[new, an])
                    idle = ln < h  # sleep whole periods until the next hand-over
                    pn = per[new][idle]
                    ln[idle] = ln[idle] + np.ceil((h[idle] - ln[idle]) / pn - 1e-12) * pn
                    jn = self._count_handed(sn, ln) if HR is None else ((sn[:, None] + HR[new]) <= ln[:, None]).sum(1)
                    c[new], j[new] = ln, jn
                    t[new] = ln + neg_flat[nc[new] * Tp1 + (jn - an)]
                    if np.any(jn == an):  # rounding left the hand-over just after the cycle start:
                        sl = np.flatnonzero(a < j)  # an empty cycle, as in the reference
                aa = a[sl]
                b = np.minimum(j[sl], nxt_flat[row[sl] + aa])  # FuseResponses
                dur = (self.dur[(hr[sl] * T + aa) * Tp1 + b] if self.dur is not None
                       else self.durations(hr[sl].astype(np.int64), aa, b))
                if R is None:
                    rd = s0[sl] + (self.ready_rel[b - 1] if RR is None else RR[np.arange(ids.size)[sl], b - 1])
                else:
                    rd = R[np.arange(ids.size)[sl], b - 1]
                tt = np.maximum(t[sl], rd)  # WAIT_FOR_DATA
                start = np.maximum(tt, sf[sl])
                if self.delay is not None:  # as the reference: responses starting before the backward ends
                    nb = (self.cum[b] - self.cum[aa]).astype(float)
                    dur = np.where(start < be[sl], dur + self.delay.extra_s(nb), dur)
                if self.after:  # as the reference: responses starting after the backward has ended
                    dur = np.where(start >= be[sl], dur + self.after, dur)
                if stall > 0:
                    self._slip(R, be, np.arange(ids.size)[sl], start, dur, b, cols, stall, rate)
                sf[sl] = start + dur
                t[sl] = tt if self.asyn else sf[sl]
                a[sl] = b
                endc = np.flatnonzero(a == j)
                if endc.size:
                    lt[endc] = np.maximum(c[endc] + cyc[endc], t[endc])
                    fin = a == T
                    if fin.any():
                        f = np.flatnonzero(fin)
                        g = ids[f]
                        step_end[g] = np.maximum(np.maximum(be[f], sf[f]), t[f]) + (self.update if up is None else up[f])
                        loop_t[g] = lt[f]
                        keep = ~fin
                        ids, s0, lt, a, j, c, t, sf, be = (x[keep] for x in (ids, s0, lt, a, j, c, t, sf, be))
                        cyc, per, nc, hr, row = (x[keep] for x in (cyc, per, nc, hr, row))
                        if R is not None:
                            R = R[keep]
                        if RR is not None:
                            up, RR, HR = up[keep], RR[keep], HR[keep]
            if step >= warmup_steps:
                times[:, step - warmup_steps] = step_end - step_start
            step_start = step_end
        return np.mean(times, axis=1)

    @staticmethod
    def _slip(R, be, idx, start, dur, b, cols, stall, rate) -> None:
        """Vectorized :func:`autotuner.frameworks.horovod.simulator._slip` on the readiness of tensors ``>= b`` and on the
        backward end, in place, for the rows ``idx`` (``start``, ``dur``, ``b`` aligned with it) whose
        backward is still running at ``start``."""
        k = np.flatnonzero(be[idx] > start)
        if not k.size:
            return
        rows = idx[k]
        s1, d1 = start[k], dur[k]
        st, du = s1[:, None], d1[:, None]
        sub = R[rows]
        late = (cols >= b[k][:, None]) & (sub > st)
        x = sub - st
        if rate > 0:
            new = np.where(x < rate * du, st + x / max(rate, 1e-12), sub + stall * du)
        else:
            new = sub + du
        R[rows] = np.where(late, new, sub)
        e = be[rows]
        xe = e - s1
        if rate > 0:
            be[rows] = np.where(xe < rate * d1, s1 + xe / max(rate, 1e-12), e + stall * d1)
        else:
            be[rows] = e + d1


__all__ = ["simulate_batch", "simulate_configs", "configs_to_arrays", "fusion_plan", "DEFAULT_CHUNK"]
