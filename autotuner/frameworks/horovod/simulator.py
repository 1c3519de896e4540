"""Simulator of one Horovod training step: backward, background loop, fusion, collectives.

Pure and deterministic: arrays and dataclasses in, a :class:`StepResult` out; no I/O, no
randomness, no clocks. Times are seconds inside; :class:`StepResult` also gives ms.

Semantics, each from Horovod's source (read at v0.28.1 and v0.20.3; cited, not copied):

- **Readiness.** Backward runs for ``backward_s`` after ``forward_s``; gradient ``i`` is
  ready at ``forward_s + backward_s · ready_fraction[i]`` (layout order = reverse of forward).
- **Hand-over** (horovod/torch/optimizer.py ``_make_hook`` → ``allreduce_async_``): a gradient
  reaches Horovod when its autograd hook fires on the host. With ``Workload.host_backward_s``
  set (GPU training: kernels launch asynchronously, the host runs ahead) the hooks fire
  uniformly per tensor over the host-side backward and never after device readiness
  (:func:`hand_over_times`); otherwise at device readiness.
- **Cycles** (operations.cc ``RunLoopOnce``): the background thread sleeps until
  ``last_cycle_start + cycle_time``, then negotiates the handed-over tensors and performs the
  cycle's responses. Before each response it busy-waits for the entries' ready events
  (v0.20.3 operations.cc ``PerformOperation``, WAIT_FOR_DATA). NCCL collectives
  (``Workload.async_collectives``) are then enqueued on Horovod's single CUDA stream and
  completed on the finalizer thread (ops/nccl_operations.cc, ops/gpu_operations.cc
  ``FinalizeGPUQueue`` returns InProgress): a collective starts at ``max(data ready, previous
  collective's end)`` and does not hold the loop. CPU collectives (Gloo/MPI) hold it. The next
  cycle starts at ``max(cycle_start + cycle_time, end of this cycle's work on the loop)``.
- **Negotiation** (controller.cc ``ComputeResponseList``): a tensor enqueued before a cycle
  starts is negotiated in that cycle. Cost per cycle from :class:`~autotuner.model.costmodel.Negotiation`:
  response-cache hits (cache capacity >= number of tensors, steady state) use bit-vector
  allreduces; otherwise requests are gathered at the coordinator (cost per tensor). A
  capacity below the tensor count thrashes the LRU cache every step (all misses).
- **Fusion** (controller.cc ``FuseResponses``): responses in readiness order are fused
  greedily while ``fused_bytes + next_bytes <= threshold``; a tensor larger than the threshold
  goes alone; threshold 0 disables fusion. The threshold is first rounded up to a multiple of
  ``local_size · 8 · 64`` bytes (controller.cc ``TensorFusionThresholdBytes``,
  FUSION_BUFFER_ATOMIC_UNIT = 64, float64 size 8).
- **Execution**: a fused response of more than one tensor pays MEMCPY_IN_FUSION_BUFFER and
  MEMCPY_OUT_FUSION_BUFFER (:meth:`~autotuner.model.costmodel.CostModel.memcpy_s`: 2 · bytes / memcpy
  bandwidth, or the size-dependent host passes where fitted) plus its collective, costed by the
  :class:`~autotuner.model.costmodel.CostModel` and multiplied by the workload's ``comm_scale``; every
  response also pays :meth:`~autotuner.model.costmodel.CostModel.host_gap_s` (the untimed host work
  between responses, 0 unless fitted; :class:`~autotuner.model.costmodel.HostPasses`), and one that starts
  after the backward has ended :attr:`~autotuner.model.costmodel.CostModel.after_backward_s` (0 unless fitted).
- **Overlap** (:attr:`Workload.overlap`): with time-shared compute and communication, a
  collective running during backward pauses backward, delaying the gradients not yet ready.
- **Step** = forward + max(backward end, last allreduce end) + update (``synchronize`` waits
  for every handle before ``optimizer.step``). The loop keeps cycling between steps, so the
  phase of the cycle grid carries over: ``warmup_steps`` steps are simulated first and the
  reported step time is the mean of the next ``measure_steps``.
- **Score** (parameter_manager.cc ``Update``/``Tune``): allreduced bytes divided by the
  elapsed microseconds of the sample = bytes per step / step time in µs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .knobs import Config, hierarchical_allreduce_supported
from ...model.costmodel import Cluster, CostModel
from ...model.workload import Workload, hand_over_times

FUSION_BUFFER_ATOMIC_UNIT = 64  # horovod/common/common.h
FLOAT64_BYTES = 8


@dataclass(frozen=True)
class Response:
    """One fused response of the measured step: bytes, tensor count, start and duration (s)."""

    nbytes: int
    n_tensors: int
    start_s: float
    duration_s: float


@dataclass(frozen=True)
class TracedResponse:
    """One fused response as the background loop performed it (trace; times in s since the
    simulation started, warm-up steps included).

    Attributes:
        first, end: half-open range of tensor indices (layout readiness order) it carries.
        nbytes: bytes on the wire (after compression), sum over its tensors.
        cycle: index into :attr:`StepTrace.cycles` of the cycle that negotiated it.
        loop_s: when the background loop took it up (Horovod ``Timeline::Start``, the top-level
            ``ALLREDUCE`` begin): after the cycle's negotiation and the previous response.
        ready_s: when its last tensor's data was ready (end of ``WAIT_FOR_DATA``, >= loop_s).
        start_s: start of its work (memcpy-in, else the collective); > ready_s only when an
            asynchronous (NCCL) collective queues behind the previous one (``QUEUE``).
        duration_s: memcpy-in + collective + memcpy-out + the untimed host gap
            (:meth:`~autotuner.model.costmodel.CostModel.host_gap_s`), = :attr:`Response.duration_s`.
        memcpy_s: memcpy-in + memcpy-out part of ``duration_s`` (0 for a single tensor).
    """

    first: int
    end: int
    nbytes: int
    cycle: int
    loop_s: float
    ready_s: float
    start_s: float
    duration_s: float
    memcpy_s: float

    @property
    def collective_s(self) -> float:
        return self.duration_s - self.memcpy_s


@dataclass(frozen=True)
class TracedCycle:
    """A background-loop cycle that negotiated tensors ``first:end`` (s since the simulation
    started): it began at ``start_s`` and its negotiation ended at ``negotiation_end_s``.
    ``idle_starts_s`` are the starts of the idle cycles (nothing handed over) since the previous
    traced cycle, shape (k,)."""

    start_s: float
    negotiation_end_s: float
    first: int
    end: int
    idle_starts_s: tuple[float, ...]


@dataclass(frozen=True)
class StepTrace:
    """Everything the loop did in one measured step (s since the simulation started).

    ``hand_over_s``: shape (T,), when each gradient reached Horovod; ``ready_s``: shape (T,),
    when its data was ready (after stalls); ``next_cycle_s``: when the loop's next cycle starts
    after this step's last traced cycle (idle cycles follow every ``SimTrace.period_s``).
    """

    start_s: float
    end_s: float
    next_cycle_s: float
    hand_over_s: tuple[float, ...]
    ready_s: tuple[float, ...]
    cycles: tuple[TracedCycle, ...]
    responses: tuple[TracedResponse, ...]


@dataclass(frozen=True)
class SimTrace:
    """Detailed record of the measured steps (``simulate_step(..., trace=True)``).

    ``ranks``: number of ranks; ``coordinated``: True when negotiation gathered requests at
    the coordinator (response cache off or thrashing: Horovod marks each rank's readiness),
    False for response-cache hits; ``cycle_s``: the cycle time; ``period_s``: spacing of idle
    cycles (max of cycle time and an idle negotiation).
    """

    steps: tuple[StepTrace, ...]
    ranks: int
    coordinated: bool
    cycle_s: float
    period_s: float


@dataclass(frozen=True)
class StepResult:
    """Outcome of :func:`simulate_step`.

    Attributes:
        step_time_s: steady-state step time (s).
        responses: fused responses of the last measured step, times relative to its start.
        comm_s: total collective time per step (s), memcpy included.
        overlap: fraction of ``comm_s`` that ran during backward, in [0, 1].
        bytes_per_step: allreduced bytes per step.
        n_cycles: background-loop cycles that carried at least one response, last step.
        trace: the measured steps in detail with ``simulate_step(..., trace=True)``, else None.
    """

    step_time_s: float
    responses: tuple[Response, ...]
    comm_s: float
    overlap: float
    bytes_per_step: int
    n_cycles: int
    trace: SimTrace | None = None

    @property
    def step_time_ms(self) -> float:
        return self.step_time_s * 1e3

    @property
    def score_bytes_per_us(self) -> float:
        """Autotune-equivalent score: allreduced bytes per microsecond (parameter_manager.cc)."""
        return self.bytes_per_step / (self.step_time_s * 1e6)


def effective_threshold(threshold_bytes: int, local_size: int) -> int:
    """Fusion threshold after Horovod's rounding (controller.cc TensorFusionThresholdBytes)."""
    if threshold_bytes <= 0:
        return 0
    div = local_size * FLOAT64_BYTES * FUSION_BUFFER_ATOMIC_UNIT
    return -(-threshold_bytes // div) * div


def fuse(sizes: np.ndarray, threshold: int) -> list[tuple[int, int]]:
    """Greedy fusion of consecutive tensors: list of (first index, end index) half-open groups.

    ``sizes`` shape (k,), bytes, in readiness order (controller.cc FuseResponses).
    """
    groups: list[tuple[int, int]] = []
    k = len(sizes)
    i = 0
    while i < k:
        acc = int(sizes[i])
        j = i + 1
        while j < k and acc + int(sizes[j]) <= threshold:
            acc += int(sizes[j])
            j += 1
        groups.append((i, j))
        i = j
    return groups


def _slip(times: np.ndarray, t: float, dur: float, stall: float) -> np.ndarray:
    """Delay, in place, backward events after ``t`` when backward runs at rate ``1 - stall``
    during a collective occupying [t, t + dur]: an event due ``x`` after ``t`` (in full-speed
    time) happens at ``t + x / rate`` if that is within the collective, else ``stall * dur`` late.
    """
    rate = 1.0 - stall
    late = times > t
    x = times[late] - t
    inside = x < rate * dur
    if rate > 0:
        times[late] = np.where(inside, t + x / max(rate, 1e-12), times[late] + stall * dur)
    else:
        times[late] = times[late] + dur
    return times


def _single_rank(workload: Workload, nbytes: int, warmup_steps: int, measure_steps: int, loop_phase_s: float,
                 trace: bool) -> StepResult:
    """One rank: Horovod does nothing. ``hvd.DistributedOptimizer`` registers its gradient hooks
    only when ``size() > 1`` (0.28.1 horovod/torch/optimizer.py L105,
    ``if self.process_set.included() and (size() > 1 or ...HOROVOD_ELASTIC...)``; 0.19.4 horovod/torch/__init__.py
    ``if size() > 1``), so nothing is enqueued, negotiated or reduced and the step is the compute."""
    step = workload.forward_s + workload.backward_s + workload.update_s
    steps = tuple(StepTrace(k * step, (k + 1) * step, loop_phase_s, (), (), (), ())
                  for k in range(warmup_steps, warmup_steps + measure_steps))
    return StepResult(step_time_s=step, responses=(), comm_s=0.0, overlap=0.0, bytes_per_step=nbytes, n_cycles=0,
                      trace=SimTrace(steps, 1, False, 0.0, 0.0) if trace else None)


#: loop phases a jittering compute's step is averaged over (:func:`simulate_step_phases`)
PHASES = 4


def simulate_step_phases(sizes_bytes: np.ndarray, ready_fraction: np.ndarray, workload: Workload,
                         config: Config, cost: CostModel, cluster: Cluster, *, phases: int = PHASES,
                         compression_ratio: float = 1.0, backend: str | None = None) -> StepResult:
    """One step with the background loop's phase at the step's start random: the mean step time
    of ``phases`` single steps (:func:`simulate_step` with no warm-up), the loop's next cycle at
    ``(k + 0.5) · period / phases`` after the step starts (period: ``max(cycle time, idle
    negotiation)``, k = 0 .. phases - 1).

    Why: Horovod's loop restarts its timer at every cycle (operations.cc ``RunLoopOnce``), so with
    a compute that takes the same time every step the loop keeps one alignment against the step
    (the steady state of :func:`simulate_step`, which may be a lucky one: the first busy cycle
    right after the first gradient). A compute that varies from step to step (CPU ranks: ±6 %
    between steps of the CPU transformer) moves the first busy cycle anywhere in the period, which
    matters once the cycle time is long (research/notes/fresh-environments.md section 8). Returns the middle
    phase's result (responses, comm) with ``step_time_s`` the mean. Raises ValueError as
    :func:`simulate_step` and for ``phases`` < 1."""
    if phases < 1:
        raise ValueError("phases must be >= 1")
    p = cluster.size
    cache_on = config.cache_capacity > 0
    period = max(config.cycle_time_ms * 1e-3,
                 cost.negotiation.cycle_s(0, p, cache_on, cache_on and config.cache_capacity >= len(sizes_bytes)))
    runs = [simulate_step(sizes_bytes, ready_fraction, workload, config, cost, cluster,
                          compression_ratio=compression_ratio, warmup_steps=0, measure_steps=1,
                          loop_phase_s=(k + 0.5) * period / phases, backend=backend) for k in range(phases)]
    return replace(runs[phases // 2], step_time_s=float(np.mean([r.step_time_s for r in runs])))


def simulate_step(sizes_bytes: np.ndarray, ready_fraction: np.ndarray, workload: Workload,
                  config: Config, cost: CostModel, cluster: Cluster, *,
                  compression_ratio: float = 1.0, warmup_steps: int = 1,
                  measure_steps: int = 2, loop_phase_s: float = 0.0, trace: bool = False,
                  backend: str | None = None) -> StepResult:
    """Simulate steady-state training steps; see the module docstring for the rules.

    Args:
        sizes_bytes: shape (T,), bytes of each gradient in readiness order (uncompressed).
        ready_fraction: shape (T,), non-decreasing in [0, 1], backward fraction elapsed when
            each gradient is ready (:attr:`autotuner.model.layout.Layout.ready_fraction`).
        workload: compute times (s) and comm scale.
        config: Horovod knobs.
        cost: collective cost model.
        cluster: nodes × GPUs per node.
        compression_ratio: bytes on the wire / uncompressed bytes (fp16 compression: 0.5).
        warmup_steps, measure_steps: steps simulated before / averaged for the result.
        trace: also record every measured step in detail (:attr:`StepResult.trace`: cycles,
            negotiation, per-response tensor ranges and memcpy); results are unchanged.
        backend: the collective backend (``nccl``, ``gloo``, ``mpi``; None: one with
            hierarchical allreduce). Where Horovod 0.28.1 has none
            (:func:`autotuner.frameworks.horovod.knobs.hierarchical_allreduce_supported` is False) the
            ``hierarchical_allreduce`` knob is read as off, as Horovod ignores it there.

    Raises:
        ValueError: for mismatched shapes, an empty layout or non-positive measure_steps.
    """
    sizes = np.asarray(sizes_bytes, dtype=np.int64)
    frac = np.asarray(ready_fraction, dtype=float)
    if sizes.ndim != 1 or sizes.shape != frac.shape or sizes.size == 0:
        raise ValueError("sizes_bytes and ready_fraction must be non-empty 1-D arrays of equal length")
    if measure_steps < 1 or warmup_steps < 0:
        raise ValueError("measure_steps must be >= 1 and warmup_steps >= 0")
    wire = np.maximum(1, np.round(sizes * compression_ratio)).astype(np.int64)
    T = int(wire.size)
    p = cluster.size
    if p == 1:
        return _single_rank(workload, int(wire.sum()), warmup_steps, measure_steps, loop_phase_s, trace)
    cycle = config.cycle_time_ms * 1e-3
    thr = effective_threshold(int(config.fusion_threshold_bytes), cluster.gpus_per_node)
    hier = bool(config.hierarchical_allreduce) and cluster.nodes > 1 and hierarchical_allreduce_supported(backend)
    cache_on = config.cache_capacity > 0
    cache_hits = cache_on and config.cache_capacity >= T
    neg = cost.negotiation
    idle_neg = neg.cycle_s(0, p, cache_on, cache_hits)
    period = max(cycle, idle_neg)
    fwd, bwd = workload.forward_s, workload.backward_s
    ready_rel = fwd + bwd * frac
    scale = workload.comm_scale
    cum = np.concatenate(([0], np.cumsum(wire)))

    stall = 1.0 - min(max(workload.overlap, 0.0), 1.0)
    delay = cost.compute_delay if workload.cpu_bound else None
    after = cost.after_backward_s
    hook_rel = hand_over_times(ready_rel, fwd, workload.host_backward_s)
    asyn = workload.async_collectives
    step_start = 0.0
    loop_t = loop_phase_s  # start of the next background-loop cycle
    step_times: list[float] = []
    responses: list[Response] = []
    comm_s = overlap_s = 0.0
    n_cycles = 0
    traced: list[StepTrace] = []
    for step in range(warmup_steps + measure_steps):
        ready_abs = step_start + ready_rel  # a fresh array: stalls below shift it in place
        hook_abs = step_start + hook_rel
        bwd_start, bwd_end = step_start + fwd, step_start + fwd + bwd
        measuring = step == warmup_steps + measure_steps - 1
        responses_step: list[Response] = []
        comm = ovl = 0.0
        cycles = 0
        stream_free = step_start
        tracing = trace and step >= warmup_steps
        if tracing:
            t_cycles: list[TracedCycle] = []
            t_resps: list[TracedResponse] = []
        i = 0
        t = step_start
        while i < T:
            idle_from = loop_t
            if loop_t < hook_abs[i]:  # idle cycles until the next gradient is handed over
                loop_t += math.ceil((hook_abs[i] - loop_t) / period - 1e-12) * period
            c = loop_t
            j = int(np.searchsorted(hook_abs, c, side="right"))
            t = c + neg.cycle_s(j - i, p, cache_on, cache_hits)
            if tracing:
                n_idle = int(round((c - idle_from) / period)) if c > idle_from else 0
                t_cycles.append(TracedCycle(c, t, i, j, tuple(idle_from + k * period for k in range(n_idle))))
            for a, b in fuse(wire[i:j], thr):
                nbytes = int(cum[i + b] - cum[i + a])
                dur = cost.allreduce_s(nbytes, cluster, hier) * scale
                mem = cost.memcpy_s(nbytes) if b - a > 1 else 0.0
                dur += mem
                dur += cost.host_gap_s(nbytes)
                t_loop = t
                t = max(t, float(ready_abs[i + b - 1]))  # WAIT_FOR_DATA on the ready events
                start = max(t, stream_free)
                if delay is not None and start < bwd_end:  # the compute holds the cores meanwhile
                    dur += delay.extra_s(float(nbytes))
                if after and start >= bwd_end:  # the main threads wait for it beside the loop
                    dur += after
                if tracing:
                    t_resps.append(TracedResponse(i + a, i + b, nbytes, len(t_cycles) - 1, t_loop, t, start, dur,
                                                  mem))
                if measuring:
                    responses_step.append(Response(nbytes, b - a, start - step_start, dur))
                comm += dur
                if stall > 0 and bwd_end > start:  # backward slowed to rate `overlap` meanwhile
                    tail = ready_abs[i + b:]
                    _slip(tail, start, dur, stall)
                    bwd_end = float(_slip(np.array([bwd_end]), start, dur, stall)[0])
                ovl += max(0.0, min(start + dur, bwd_end) - max(start, bwd_start))
                stream_free = start + dur
                if not asyn:
                    t = stream_free
            cycles += 1
            i = j
            loop_t = max(c + cycle, t)
        step_end = max(bwd_end, stream_free, t) + workload.update_s
        if step >= warmup_steps:
            step_times.append(step_end - step_start)
        if tracing:
            traced.append(StepTrace(step_start, step_end, loop_t, tuple(hook_abs.tolist()), tuple(ready_abs.tolist()),
                                    tuple(t_cycles), tuple(t_resps)))
        if measuring:
            responses, comm_s, overlap_s, n_cycles = responses_step, comm, ovl, cycles
        step_start = step_end
    return StepResult(
        step_time_s=float(np.mean(step_times)),
        responses=tuple(responses),
        comm_s=comm_s,
        overlap=overlap_s / comm_s if comm_s > 0 else 0.0,
        bytes_per_step=int(cum[-1]),
        n_cycles=n_cycles,
        trace=SimTrace(tuple(traced), p, not cache_hits, cycle, period) if trace else None,
    )
