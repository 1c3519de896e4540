"""The batch version of :func:`autotuner.frameworks.ddp.reducer.simulate_ddp_step`: many DDP settings of one
layout at once, for the grid and the per-bucket search. Pure; the same model as the reference (its module
docstring), in lockstep over the gradients in ready order with one vector entry per setting, so a 300-tensor
layout costs about 300 small numpy steps per comm hook, whatever the number of settings.
``tests/test_ddp_reducer.py`` holds it equal to the reference on every setting it is given.

Layouts with more than one dtype (one open bucket each) go through the reference, setting by setting.
"""
from __future__ import annotations

import numpy as np

from ...errors import ScenarioError
from ...model.costmodel import Cluster, CostModel
from ...model.workload import Workload, hand_over_times
from .hostcost import ReducerHostCost
from .knobs import DdpConfig, sends_half_precision
from .reducer import _checked, simulate_ddp_step


def simulate_ddp_batch(sizes_bytes, ready_fraction, workload: Workload, configs, cost: CostModel, cluster: Cluster,
                       dtypes=None, host: ReducerHostCost | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Steady-state step time, first-iteration step time (s) and bucket count of each of ``configs`` (a sequence of
    :class:`DdpConfig`, length C): three arrays of shape (C,). Arguments and errors as
    :func:`~autotuner.frameworks.ddp.reducer.simulate_ddp_step`."""
    configs = list(configs)
    sizes, ready, dt = _checked(sizes_bytes, ready_fraction, dtypes)
    C = len(configs)
    step, first, count = np.zeros(C), np.zeros(C), np.zeros(C, dtype=np.int64)
    if len(set(dt)) > 1 or any(not c.rebuilds for c in configs):
        for j, c in enumerate(configs):
            r = simulate_ddp_step(sizes, ready, workload, c, cost, cluster, dt, host)
            step[j], first[j], count[j] = r.step_time_s, r.first_step_time_s, len(r.buckets)
        return step, first, count

    if any(c.comm_hook == "powerSGD" for c in configs):
        raise ScenarioError("the powerSGD hook is lossy and not simulated (shown, never proposed)")
    ready_t = hand_over_times(workload.forward_s + ready * workload.backward_s, workload.forward_s,
                              workload.host_backward_s)
    order = np.argsort(ready_t, kind="stable")
    s_t = sizes.astype(float)
    copy = np.array([cost.memcpy_s(float(x)) / 2 for x in s_t])
    copy_all = float(copy.sum())
    pt = host.per_tensor_s if host is not None else 0.0  # the Reducer's own work per hook, beside its copy
    pb = host.per_bucket_s if host is not None else 0.0
    marked_t = np.empty(sizes.size)  # each hook's copy (and host work) delays every later hook
    marked_t[order] = ready_t[order] + np.cumsum(copy[order] + pt)
    bwd_end = workload.forward_s + workload.backward_s
    T = sizes.size
    cpu = cost.collective_cpu if workload.cpu_bound else None
    walk = (ready_t, copy + pt, cpu, bwd_end)
    for hook in dict.fromkeys(c.comm_hook for c in configs):
        idx = np.array([j for j, c in enumerate(configs) if c.comm_hook == hook])
        compressed = sends_half_precision(hook)
        wire_cost = cost.for_fp16() if compressed else cost
        fp = cost.fp16 if compressed else None

        def comm(nbytes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            wire = np.floor(nbytes / 2) if compressed else nbytes
            return np.asarray(wire_cost.allreduce_s(wire, cluster, False), dtype=float) * workload.comm_scale, wire

        def casts(nbytes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            if fp is None:
                z = np.zeros_like(nbytes)
                return z, z
            return (nbytes / 4 * fp.cast_down_s_per_elem + fp.cast_down_s_per_tensor,
                    nbytes / 4 * fp.cast_up_s_per_elem + fp.cast_up_s_per_tensor)

        cs = [configs[j] for j in idx]
        view = np.array([c.gradient_as_bucket_view for c in cs])
        link_free, buckets, b_end = _lockstep(order, marked_t, s_t, [c.rebuild_limits() for c in cs], comm, casts,
                                              cost.queued_saving_s, walk, pb)
        step[idx] = np.maximum(b_end, link_free) + np.where(view, 0.0, copy_all) + workload.update_s
        count[idx] = buckets
        # the first iteration: the constructor's buckets (tensors in layout order), no gradient a view yet, and no
        # collective's CPU charged to its backward (its one-off costs are not modelled either)
        link1, _, b1 = _lockstep(np.arange(T), marked_t, s_t, [c.first_iteration_limits() for c in cs], comm, casts,
                                 cost.queued_saving_s, None, pb)
        first[idx] = np.maximum(bwd_end + copy_all + T * pt + b1, link1) + copy_all + workload.update_s
    return step, first, count


class _InFlight:
    """Each setting's collectives scheduled so far, ``[end, share]`` in launch order (arrays of shape (C, T)), and
    the first one not yet over: the batch form of :func:`.reducer._advance`'s list."""

    def __init__(self, n: int, cap: int):
        self.end = np.zeros((n, cap))
        self.share = np.zeros((n, cap))
        self.count = np.zeros(n, dtype=np.int64)
        self.head = np.zeros(n, dtype=np.int64)
        self.rows = np.arange(n)

    def add(self, c, end, share) -> None:
        self.end[c, self.count[c]] = end
        self.share[c, self.count[c]] = share
        self.count[c] += 1

    def advance(self, w, d, c=None):
        """:func:`.reducer._advance` for every setting (or those in ``c``) at once: the wall times after ``d`` s of
        the backward thread's work from ``w`` (arrays of the settings' shape)."""
        rows = self.rows if c is None else c
        w, d = np.array(w, dtype=float), np.array(d, dtype=float) * np.ones(len(rows))
        h = self.head[rows].copy()
        cnt = self.count[rows]
        last = self.end.shape[1] - 1
        while True:
            m = (h < cnt) & (d > 0)
            if not m.any():
                break
            e = self.end[rows, np.minimum(h, last)]
            f = self.share[rows, np.minimum(h, last)]
            over = m & (e <= w)
            cur = m & ~over
            room = (e - w) * (1.0 - f)
            fin = cur & (d <= room)
            part = cur & ~fin
            w = np.where(fin, w + d / np.where(fin, 1.0 - f, 1.0), np.where(part, e, w))
            d = np.where(fin, 0.0, np.where(part, d - room, d))
            h = np.where(over | part, h + 1, h)
        # collectives over before this point are never read again: start there next time (one before the one in
        # flight, since w may sit exactly at its end)
        self.head[rows] = np.maximum(self.head[rows], np.maximum(0, h - 1))
        return w + d


def _lockstep(order, marked_t, sizes, limit_lists, comm, casts, queued_saving_s=0.0, walk=None, per_bucket_s=0.0):
    """One bucket plan per setting, walked together: tensors taken in ``order``, setting j closing a bucket when
    its bytes reach its next cap (``limit_lists[j]``, the last repeating); a bucket is ready at the latest mark of
    its tensors, launched in order, its collective after the previous one, ``queued_saving_s`` cheaper when it had
    to wait for it; each launch first costs the backward's thread ``per_bucket_s`` (the Reducer's host work per
    bucket, :class:`~.hostcost.ReducerHostCost`), then a compress hook's cast.

    Marks: without ``walk``, ``marked_t`` (ready, plus the copies and host work of every earlier hook) plus the
    launch work and casts down of every earlier bucket of that setting. With ``walk = (ready_t, hook, cpu,
    backward_end)`` (``order`` the ready order; ``hook`` each gradient's copy plus host work) each setting's
    backward thread is walked as the reference does (:func:`.reducer._advance`): each gradient's compute since the
    last and its hook, then a closing bucket's launch work and cast, slowed by that setting's collectives in
    flight by their :class:`~autotuner.model.costmodel.CollectiveCpu` share (``cpu``; None: not slowed). Returns
    (each setting's last collective end, its bucket count, its backward's end: with ``walk`` the walked end, else
    the casts down alone, to which the caller adds the backward and the copies), arrays of shape (C,)."""
    n = len(limit_lists)
    L = max(len(x) for x in limit_lists)
    lims = np.array([list(x) + [x[-1]] * (L - len(x)) for x in limit_lists], dtype=float)
    acc = np.zeros(n)
    shift = np.zeros(n)  # each setting's compress-hook casts so far, run on the backward's thread
    latest = np.full(n, -np.inf)
    pos = np.zeros(n, dtype=np.int64)
    prev_launch = np.zeros(n)
    link_free = np.zeros(n)
    buckets = np.zeros(n, dtype=np.int64)
    w = np.zeros(n)
    t_prev = 0.0
    fly = _InFlight(n, len(order)) if walk is not None else None
    cpu = walk[2] if walk is not None else None
    last = len(order) - 1
    for k, i in enumerate(order):
        acc += sizes[i]
        if walk is None:
            np.maximum(latest, marked_t[i] + shift, out=latest)
        else:
            ready_t, copy = walk[0], walk[1]
            w = fly.advance(w, (ready_t[i] - t_prev) + copy[i])
            t_prev = ready_t[i]
            np.maximum(latest, w, out=latest)
        close = (acc >= lims[np.arange(n), np.minimum(pos, L - 1)]) if k < last else np.ones(n, dtype=bool)
        if not close.any():
            continue
        c = np.nonzero(close)[0]
        nb = acc[c]
        launch = np.maximum(latest[c], prev_launch[c])
        down, up = casts(nb)
        if walk is None:
            host_w, cast_w = per_bucket_s, down
        else:
            w1 = fly.advance(w[c], per_bucket_s, c)
            w2 = fly.advance(w1, down, c)
            host_w, cast_w = w1 - w[c], w2 - w1
            w[c] = w2
        shift[c] += host_w + cast_w
        queued = link_free[c] > launch + host_w + cast_w
        start = np.maximum(launch + host_w + cast_w, link_free[c])
        dur, wire = comm(nb)
        if queued_saving_s:
            dur = np.where(queued, np.maximum(0.0, dur - queued_saving_s), dur)
        link_free[c] = start + dur + up
        if fly is not None:
            fly.add(c, link_free[c], 0.0 if cpu is None else cpu.share(wire, link_free[c] - start))
        prev_launch[c] = launch
        acc[c] = 0.0
        latest[c] = -np.inf
        pos[c] += 1
        buckets[c] += 1
    if walk is None:
        return link_free, buckets, shift
    return link_free, buckets, fly.advance(w, max(0.0, walk[3] - t_prev))
