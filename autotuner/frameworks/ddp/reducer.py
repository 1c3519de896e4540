"""A simulator of DDP's Reducer (torch 2.13): which gradients go in which bucket, when each bucket's allreduce is
launched and ends, and the step time that gives. Pure: no I/O, deterministic. The reference version; the batch
version for grids is :mod:`autotuner.frameworks.ddp.fastsim` (``tests/test_ddp_reducer.py`` holds them equal).

What DDP does (torch 2.13.0; ``reducer.cpp`` is ``torch/csrc/distributed/c10d/reducer.cpp``):

- **Bucket assignment** (:func:`assign_buckets`, ``compute_bucket_assignment_by_size``): tensors are taken in the
  order given, one open bucket per dtype; a tensor joins its dtype's bucket, and the bucket closes once its bytes
  reach its cap (``>=``: a bucket holds at least its cap, by up to one tensor). The caps are taken in turn from
  a list, the last one repeating, per dtype. Without explicit indices the buckets are sorted by their smallest
  tensor index. ``tests/test_ddp_reducer.py`` checks this against torch's own
  ``torch.distributed._compute_bucket_assignment_by_size``.
- **Steady state**: with the common settings (no ``find_unused_parameters``, or ``static_graph``) the first
  iteration has one bucket of every gradient; then ``rebuild_buckets`` reassigns them in the order the gradients
  became ready, with the caps :meth:`DdpConfig.rebuild_limits` (``[first_bucket_bytes_cap, bucket_bytes_cap]``:
  1 MiB then 25 MiB by default; the user's cap for both when set; ``bucket_cap_mb_list`` as given).
- **Launch** (``mark_variable_ready`` / ``mark_bucket_ready``): a bucket is ready when its last gradient has been
  marked; buckets are launched in order (``next_bucket_``): bucket b when it is ready and b - 1 has been launched.
  Collectives run asynchronously on the process group; here they share the link one after another (a FIFO), as
  NCCL's one stream runs them. A bucket launched while the previous bucket's collective still runs starts the
  moment it ends and costs :attr:`CostModel.queued_saving_s` less than a lone allreduce: what the env's burst phase
  measured back-to-back calls to save (:mod:`autotuner.frameworks.ddp.burstprobe`; on Gloo the process group's 2
  worker threads, ``ProcessGroupGloo`` ``Options::threads``, let the next call start its exchange while the previous
  one finishes; 0 where not measured).
- **Copies**: each gradient is copied (and divided by the world size, ``at::mul_out``) into its bucket in its
  hook, on the backward's thread (``mark_variable_ready_dense``), unless it already is a view of the bucket; and
  copied back after every collective ended (``finalize_bucket_dense``) unless ``gradient_as_bucket_view``. A
  training loop's ``optimizer.zero_grad()`` sets every gradient to None (``set_to_none=True``, torch 2.x's
  default), so autograd makes a new gradient each step and the copy in runs with the view too ("the bucket view
  alias is destroyed every iteration", DDP's own docstring of ``batched_grad_copy``): the view saves the copy
  back. Each copy is one pass over the bytes: half the cost model's fusion-buffer copy (``memcpy_s``, in + out).
- **Comm hooks** (``default_hooks.py``): ``fp16_compress``/``bf16_compress`` cast each bucket down before its
  allreduce (in the hook, on the thread that launches it: the backward's, from ``mark_bucket_ready``, so on a CPU
  rank every later gradient waits for the cast as for the copies) and back in the future's callback; the wire carries half
  the bytes and a CPU sums 16-bit elements at the env's fitted float16 cost (:meth:`CostModel.for_fp16`); the
  casts at :class:`~autotuner.model.costmodel.Fp16Cost`'s rates. ``powerSGD`` is lossy and not simulated.
- **The step**: forward, backward (gradients ready at ``forward + ready_fraction * backward``, each hook's copy
  delaying the rest of the backward on CPU ranks), the wait for every collective, the copies back, the update.
- **The Reducer's host work** (:class:`~.hostcost.ReducerHostCost`, optional: None charges nothing): per gradient,
  ``autograd_hook`` -> ``mark_variable_ready`` -> ``mark_variable_ready_dense`` (its bookkeeping and the launch of
  the copy), on the backward's thread like the copy, so it delays every later gradient; per bucket, ``mark_bucket_ready``
  -> ``all_reduce_bucket`` (the ``GradBucket``, ``run_comm_hook``'s call and its future, the process group's
  enqueue), on the same thread before the collective can start (a compress hook's cast runs inside that call).
  ``finalize_backward``'s per-bucket wait and per-gradient loop after the last collective are in the same measured
  figures: the host phase (:mod:`.hostprobe`) times the whole of what DDP adds on a rank with no wire, where it all
  runs in series, and cannot split hook from finalize; both are charged at the hook and the launch.
- **Compute beside the collectives** (``Workload.cpu_bound``: a CPU-profiled layout whose ranks fill the host's
  cores): every collective in flight takes CPU from the backward's thread, which then runs at ``1 - share`` of its
  speed (:class:`~autotuner.model.costmodel.CollectiveCpu`, measured by the env's cpu phase; :func:`_advance`). Not
  in the first iteration.

Not modelled: ``find_unused_parameters``' per-step graph traversal (never measured here), the rebuild's own
one-off cost, and collectives slowed by compute on shared cores (measured by the cpu phase, not charged).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import ScenarioError
from ...model.costmodel import Cluster, CostModel
from ...model.workload import Workload, hand_over_times
from .hostcost import ReducerHostCost
from .knobs import DdpConfig, sends_half_precision


def assign_buckets(sizes_bytes, dtypes, limits, order=None) -> tuple[list[list[int]], list[int]]:
    """DDP's bucket assignment (``compute_bucket_assignment_by_size``, reducer.cpp).

    ``sizes_bytes``: shape (T,), bytes per tensor; ``dtypes``: length T, any hashable per tensor (one open bucket
    each); ``limits``: caps in bytes, taken in turn per dtype, the last repeating; ``order``: the tensor indices in
    the order to take them (the rebuild's ready order), or None: 0..T-1, and the buckets then sorted by their
    smallest index. Returns (buckets as lists of tensor indices, each bucket's cap in bytes).
    Raises ScenarioError for no limits or a non-positive one.
    """
    if not limits or min(limits) <= 0:
        raise ScenarioError(f"bucket caps must be positive bytes, got {list(limits)!r}")
    sizes = np.asarray(sizes_bytes, dtype=np.int64)
    idx = range(sizes.size) if order is None else [int(i) for i in order]
    open_: dict = {}
    closed: list[tuple[list[int], int]] = []
    for i in idx:
        key = dtypes[i]
        b = open_.get(key)
        if b is None:
            b = open_[key] = [[], 0, 0]  # indices, bytes, position in limits
        b[0].append(i)
        b[1] += int(sizes[i])
        cap = limits[min(b[2], len(limits) - 1)]
        if b[1] >= cap:
            closed.append((b[0], cap))
            open_[key] = [[], 0, b[2] + 1]
    # the open buckets last, as reducer.cpp walks its unordered_map of them: libstdc++ iterates a map that never
    # erased a key in the reverse order the keys were first inserted (one dtype: just the one left open)
    for b in reversed(list(open_.values())):
        if b[0]:
            closed.append((b[0], limits[min(b[2], len(limits) - 1)]))
    if order is None:
        closed.sort(key=lambda c: min(c[0]))
    return [c[0] for c in closed], [c[1] for c in closed]


@dataclass(frozen=True)
class DdpBucket:
    """One bucket of a simulated step: its tensors (indices into the layout), bytes (float32 as stored), cap (bytes),
    and times from the step's start (s): ready (its last gradient marked), launched, collective start and end."""

    tensors: tuple[int, ...]
    nbytes: int
    cap_bytes: int
    ready_s: float
    launch_s: float
    start_s: float
    end_s: float


@dataclass(frozen=True)
class DdpStepResult:
    """A simulated DDP step (seconds): ``step_time_s`` in the steady state (rebuilt buckets),
    ``first_step_time_s`` the first iteration (one bucket of every gradient unless
    ``find_unused_parameters``), ``backward_end_s``, ``comm_end_s`` (the last collective's end),
    ``exposed_comm_s`` (how long the last collective ends after the backward, its hooks' copies included),
    ``copy_s`` (copies into and out of the buckets),
    ``cast_s`` (a compress hook's casts), ``buckets`` (steady state, in launch order)."""

    step_time_s: float
    first_step_time_s: float
    backward_end_s: float
    comm_end_s: float
    exposed_comm_s: float
    copy_s: float
    cast_s: float
    buckets: tuple[DdpBucket, ...]

    @property
    def step_time_ms(self) -> float:
        return self.step_time_s * 1e3


def _checked(sizes_bytes, ready_fraction, dtypes):
    sizes = np.asarray(sizes_bytes, dtype=np.int64)
    ready = np.asarray(ready_fraction, dtype=float)
    if sizes.ndim != 1 or sizes.size == 0 or ready.shape != sizes.shape:
        raise ScenarioError(f"a layout needs T >= 1 sizes and T ready fractions, got {sizes.shape} and {ready.shape}")
    if (sizes <= 0).any() or not np.isfinite(ready).all():
        raise ScenarioError("tensor sizes must be positive bytes and ready fractions finite")
    dt = tuple(dtypes) if dtypes is not None else ("float32",) * sizes.size
    if len(dt) != sizes.size:
        raise ScenarioError(f"{len(dt)} dtypes for {sizes.size} tensors")
    return sizes, ready, dt


def _advance(w: float, d: float, inflight: list) -> float:
    """The wall time (s) when ``d`` s of the backward thread's own work (compute, a hook's copy or cast), started at
    ``w``, is done. ``inflight``: the collectives scheduled so far as ``[end_s, share]``, in launch order (FIFO, so
    after ``w`` they run back to back); while one runs the thread has ``1 - share`` of its core
    (:meth:`CollectiveCpu.share`), after the last one all of it."""
    for end, share in inflight:
        if end <= w:
            continue
        room = (end - w) * (1.0 - share)
        if d <= room:
            return w + d / (1.0 - share)
        d -= room
        w = end
    return w + d


def _timeline(sizes, ready_t, order, buckets, caps, cfg: DdpConfig, cost: CostModel, cluster: Cluster,
              workload: Workload, cpu_bound: bool = False, host: ReducerHostCost | None = None):
    """(result buckets, backward end, copy-in total, cast total) for one bucket plan: the backward's thread walked
    gradient by gradient in ready order (``order``), each hook's copy (and ``host.per_tensor_s``) and each bucket's
    launch (``host.per_bucket_s``, a compress hook's cast) on it; with ``cpu_bound`` and the env's
    :attr:`CostModel.collective_cpu`, slowed by each collective in flight (:func:`_advance`)."""
    hook = cfg.comm_hook
    if hook == "powerSGD":
        raise ScenarioError("the powerSGD hook is lossy and not simulated (shown, never proposed)")
    compressed = sends_half_precision(hook)
    wire_cost = cost.for_fp16() if compressed else cost
    fp16 = cost.fp16 if compressed and cost.fp16 is not None else None
    # the hooks' copies run on the backward's thread: every later gradient waits for them
    copy_in = np.asarray([cost.memcpy_s(float(s)) / 2 for s in sizes])
    per_tensor = host.per_tensor_s if host is not None else 0.0
    per_bucket = host.per_bucket_s if host is not None else 0.0
    nbytes = [int(sum(int(sizes[i]) for i in b)) for b in buckets]
    left = [len(b) for b in buckets]
    bucket_of = {int(i): k for k, b in enumerate(buckets) for i in b}
    ready_w = [0.0] * len(buckets)
    cast_w = [0.0] * len(buckets)
    host_w = [0.0] * len(buckets)
    out: list[DdpBucket] = []
    cpu = cost.collective_cpu if cpu_bound else None
    inflight: list = []  # [end, share] of every collective scheduled, in launch order
    link_free = prev_launch = cast_total = 0.0
    w = t_prev = 0.0  # the thread's wall clock, and the compute clock it has reached
    for i in order:
        i = int(i)
        w = _advance(w, (ready_t[i] - t_prev) + copy_in[i] + per_tensor, inflight)
        t_prev = ready_t[i]
        k = bucket_of[i]
        left[k] -= 1
        ready_w[k] = max(ready_w[k], w)
        if left[k]:
            continue
        # mark_bucket_ready -> all_reduce_bucket on this thread: the Reducer's work per bucket, then run_comm_hook
        # (a compress hook casts the bucket down there)
        down = 0.0 if fp16 is None else nbytes[k] / 4 * fp16.cast_down_s_per_elem + fp16.cast_down_s_per_tensor
        if down + per_bucket > 0:
            w1 = _advance(w, per_bucket, inflight)
            w2 = _advance(w1, down, inflight)
            host_w[k], cast_w[k], w = w1 - w, w2 - w1, w2
        while len(out) < len(buckets) and not left[len(out)]:  # launched in order (next_bucket_)
            b = len(out)
            launch = max(ready_w[b], prev_launch)
            start = max(launch + host_w[b] + cast_w[b], link_free)
            wire = nbytes[b] // 2 if compressed else nbytes[b]
            dur = float(wire_cost.allreduce_s(wire, cluster, False)) * workload.comm_scale
            if link_free > launch + host_w[b] + cast_w[b]:  # queued behind the previous bucket's collective: back to back
                dur = max(0.0, dur - cost.queued_saving_s)
            cast_up = 0.0
            if fp16 is not None:
                cast_up = nbytes[b] / 4 * fp16.cast_up_s_per_elem + fp16.cast_up_s_per_tensor
            end = start + dur + cast_up  # the callback casts back on the collective's thread
            link_free, prev_launch = end, launch
            inflight.append([end, 0.0 if cpu is None else cpu.share(wire, end - start)])
            cast_total += cast_w[b] + cast_up
            out.append(DdpBucket(tuple(int(x) for x in buckets[b]), nbytes[b], int(caps[b]), ready_w[b], launch,
                                 start, end))
    # the rest of the backward after its last gradient (none in a layout, whose last gradient ends it)
    bwd = workload.forward_s + workload.backward_s
    w = _advance(w, max(0.0, bwd - t_prev), inflight)
    return out, w, float(copy_in.sum()), cast_total


def simulate_ddp_step(sizes_bytes, ready_fraction, workload: Workload, cfg: DdpConfig, cost: CostModel,
                      cluster: Cluster, dtypes=None, host: ReducerHostCost | None = None) -> DdpStepResult:
    """One DDP step of a layout (reference version; module docstring for what is modelled).

    ``sizes_bytes``: shape (T,), each gradient's bytes, in the layout's (backward) order; ``ready_fraction``: shape
    (T,), when each is ready as a fraction of the backward; ``dtypes``: length T (one bucket per dtype), None =
    all float32. ``workload``: forward/backward/update seconds, ``comm_scale``, ``host_backward_s`` (GPU hosts);
    ``cost``: the env's fitted :class:`CostModel` (allreduce per size and tier, copy rates, fp16 costs);
    ``cluster``: nodes x ranks per node; ``host``: the Reducer's host work per gradient and per bucket
    (:class:`~.hostcost.ReducerHostCost`, seconds; None: not charged). Returns a :class:`DdpStepResult` (seconds).
    Raises ScenarioError for a malformed layout or the powerSGD hook.
    """
    sizes, ready, dt = _checked(sizes_bytes, ready_fraction, dtypes)
    ready_t = hand_over_times(workload.forward_s + ready * workload.backward_s, workload.forward_s,
                              workload.host_backward_s)
    order = np.argsort(ready_t, kind="stable")

    def one(buckets, caps, view_cfg, cpu_bound):
        bk, b_end, copy_in, cast = _timeline(sizes, ready_t, order, buckets, caps, view_cfg, cost, cluster, workload,
                                             cpu_bound, host)
        c_end = max((b.end_s for b in bk), default=0.0)
        copy_out = 0.0 if view_cfg.gradient_as_bucket_view else sum(cost.memcpy_s(float(s)) / 2 for s in sizes)
        step = max(b_end, c_end) + copy_out + workload.update_s
        return bk, b_end, c_end, copy_in + copy_out, cast, step

    if cfg.rebuilds:
        buckets, caps = assign_buckets(sizes, dt, cfg.rebuild_limits(), order)
    else:  # find_unused_parameters without static_graph: the constructor's buckets stay (reverse parameters())
        buckets, caps = assign_buckets(sizes, dt, cfg.first_iteration_limits())
        buckets_order = sorted(range(len(buckets)), key=lambda k: min(pos for pos in buckets[k]))
        buckets, caps = [buckets[k] for k in buckets_order], [caps[k] for k in buckets_order]
    bk, b_end, c_end, copies, cast, step = one(buckets, caps, cfg, workload.cpu_bound)
    # the first iteration: the constructor's buckets, and no gradient is yet a view of its bucket
    fb, fc = assign_buckets(sizes, dt, cfg.first_iteration_limits())
    first = one(fb, fc, DdpConfig(**{**cfg.to_dict(), "bucket_cap_mb_list": cfg.bucket_cap_mb_list,
                                     "gradient_as_bucket_view": False}), False)[5]
    # exposed: how long the last collective ends after the backward (copies in included) has
    return DdpStepResult(step, first, b_end, c_end, max(0.0, c_end - b_end), copies, cast, tuple(bk))
