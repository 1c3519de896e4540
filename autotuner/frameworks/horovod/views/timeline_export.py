"""Simulated steps as Horovod timeline events (pure: a traced :class:`StepResult` in, dicts out).

The events are those ``horovod/common/timeline.cc`` (v0.28.1) writes on rank 0, in the order it
writes them, so that the file opens in Perfetto / ``chrome://tracing`` next to a real timeline
and reads back through :func:`autotuner.readers.timeline.read_timeline`:

- ``{"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros": N}}``
  and ``process_sort_index`` for pid 0 first (``TimelineWriter::WriteAtFileStart``);
- each tensor is a "process": before its first event, ``process_name`` (``args.name`` =
  ``allreduce.<parameter name>``, the name ``horovod/torch/optimizer.py`` gives it) and
  ``process_sort_index`` (``DoWriteEvent``); pids are 1, 2, ... in order of first event;
- ``NEGOTIATE_ALLREDUCE`` ``B`` at the cycle that negotiates the tensor, ``E`` when the cycle's
  negotiation ends (``NegotiateStart``/``NegotiateEnd``); when requests go through the
  coordinator (response cache off or thrashing) one ``X`` mark per rank, named by the rank,
  ``dur`` 0 (``NegotiateRankReady``). Cache hits write no ``X`` marks, as in the real 0.28.1
  timelines under ``runs/local-gloo-1gbit``;
- the top-level ``ALLREDUCE`` ``B`` when the loop takes the response up (``Timeline::Start``), then
  activities, each ``B`` for every tensor of the response before any ``E``
  (``ActivityStartAll``/``ActivityEndAll``): ``WAIT_FOR_DATA`` (data not ready yet),
  ``QUEUE`` (an asynchronous NCCL collective waiting for the previous one),
  ``MEMCPY_IN_FUSION_BUFFER`` (fused responses only), the collective (``GLOO_ALLREDUCE``,
  ``NCCL_ALLREDUCE`` or ``MPI_ALLREDUCE``, see :func:`collective_activity`),
  ``MEMCPY_OUT_FUSION_BUFFER``; then the top-level ``E`` with ``args`` ``{"dtype": ..., "shape":
  "[d0, d1]"}`` (``Timeline::End``: ``DataType_Name``, ``TensorShape::DebugString``);
- ``{"ph": "i", "name": "CYCLE_START", "ts": T, "s": "g"}`` at every background-loop cycle,
  idle ones included (``MarkCycleStart``, written with ``--timeline-mark-cycles``).

Times: the simulator works in seconds; ``ts`` is integer microseconds since the first exported
step began (Horovod: since the timeline started). Each time is rounded on its own, so a span
read back may differ from the simulated one by 1 µs.

Simplifications (the simulator has no such detail): every tensor of a response shares one
timestamp per event (Horovod's are ~1 µs apart); the memcpy-in and memcpy-out take half the
simulated memcpy time each; ``INIT_FUSION_BUFFER`` (first use of the buffer only) is not
written; hierarchical allreduce is written as one collective activity.
"""
from __future__ import annotations

from ....model.layout import DTYPE_BYTES, Layout
from ..simulator import StepResult

#: collective activity names, ``horovod/common/common.h`` (GLOO_ALLREDUCE, NCCL_ALLREDUCE, MPI_ALLREDUCE)
COLLECTIVE_BY_BACKEND = {"gloo": "GLOO_ALLREDUCE", "nccl": "NCCL_ALLREDUCE", "mpi": "MPI_ALLREDUCE"}
TENSOR_PREFIX = "allreduce."


def collective_activity(backend: str | None) -> str:
    """The collective activity name Horovod writes for an environment's backend (``gloo``,
    ``nccl``, anything else: ``MPI_ALLREDUCE``)."""
    return COLLECTIVE_BY_BACKEND.get(str(backend or "").lower(), "MPI_ALLREDUCE")


def _shape_str(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(int(d)) for d in shape) + "]"  # TensorShape::DebugString


def _wire_dtype(dtype: str, ratio: float) -> str:
    """The dtype whose element size is ``ratio`` times ``dtype``'s (fp16 compression: float32 ->
    float16), so that ``prod(shape) x size`` is the simulated bytes on the wire; ``dtype`` when
    none fits."""
    if ratio == 1.0:
        return dtype
    want = DTYPE_BYTES[dtype] * ratio
    for cand in ("float16", "float32", "float64"):
        if DTYPE_BYTES[cand] == want:
            return cand
    return dtype


def timeline_events(result: StepResult, layout: Layout, *, collective: str = "MPI_ALLREDUCE",
                    compression_ratio: float = 1.0, mark_cycles: bool = True,
                    start_time_since_epoch_us: int = 0) -> list[dict]:
    """Horovod timeline records for the traced steps of ``result``, in file order.

    Args:
        result: from ``simulate_step(..., trace=True)`` on ``layout``'s sizes.
        layout: names, shapes and dtypes of the T tensors (readiness order).
        collective: the collective activity name (:func:`collective_activity`).
        compression_ratio: as given to the simulator; 0.5 writes float32 gradients as float16.
        mark_cycles: write ``CYCLE_START`` instant events.
        start_time_since_epoch_us: value for the pid-0 header record (µs since the Unix epoch).

    Returns:
        list of event dicts (keys in Horovod's order; ``ts`` int µs), metadata included.

    Raises:
        ValueError: ``result`` has no trace, or its tensor count differs from the layout's.
    """
    tr = result.trace
    if tr is None:
        raise ValueError("the step result has no trace: simulate with trace=True")
    if not tr.steps:
        raise ValueError("the trace has no steps")
    T = layout.n_tensors
    if len(tr.steps[0].hand_over_s) != T:
        raise ValueError(f"the trace has {len(tr.steps[0].hand_over_s)} tensors, layout {layout.name!r} has {T}")
    t0 = tr.steps[0].start_s
    names = [TENSOR_PREFIX + n for n in layout.names]
    end_args = [{"dtype": _wire_dtype(d, compression_ratio), "shape": _shape_str(s)}
                for d, s in zip(layout.dtypes, layout.shapes)]
    ranks = [str(r) for r in range(tr.ranks)]

    def us(t: float) -> int:
        return int(round((t - t0) * 1e6))

    keyed: list[tuple[int, int, int, dict]] = []  # (ts, seq, tensor index or -1, event)

    def add(tensor: int, ev: dict) -> None:
        keyed.append((ev["ts"], len(keyed), tensor, ev))

    def cycle_mark(t: float) -> None:
        if mark_cycles and t >= t0:
            add(-1, {"ph": "i", "name": "CYCLE_START", "ts": us(t), "s": "g"})

    def span_all(first: int, end: int, name: str, b: float, e: float) -> None:
        tb, te = us(b), us(e)
        for k in range(first, end):
            add(k, {"ph": "B", "name": name, "ts": tb, "pid": 0})
        for k in range(first, end):
            add(k, {"ph": "E", "ts": te, "pid": 0})

    for si, step in enumerate(tr.steps):
        by_cycle: dict[int, list] = {}
        for r in step.responses:
            by_cycle.setdefault(r.cycle, []).append(r)
        for ci, cyc in enumerate(step.cycles):
            for t in cyc.idle_starts_s:
                cycle_mark(t)
            cycle_mark(cyc.start_s)
            tb, te = us(cyc.start_s), us(cyc.negotiation_end_s)
            for k in range(cyc.first, cyc.end):
                add(k, {"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "ts": tb, "pid": 0})
                if tr.coordinated:
                    for rk in ranks:
                        add(k, {"ph": "X", "name": rk, "ts": tb, "pid": 0, "dur": 0})
            for k in range(cyc.first, cyc.end):
                add(k, {"ph": "E", "ts": te, "pid": 0})
            for r in by_cycle.get(ci, ()):
                tl = us(r.loop_s)
                for k in range(r.first, r.end):
                    add(k, {"ph": "B", "name": "ALLREDUCE", "ts": tl, "pid": 0})
                if r.ready_s > r.loop_s:
                    span_all(r.first, r.end, "WAIT_FOR_DATA", r.loop_s, r.ready_s)
                if r.start_s > r.ready_s:
                    span_all(r.first, r.end, "QUEUE", r.ready_s, r.start_s)
                half = r.memcpy_s / 2
                end = r.start_s + r.duration_s
                if r.end - r.first > 1:
                    span_all(r.first, r.end, "MEMCPY_IN_FUSION_BUFFER", r.start_s, r.start_s + half)
                span_all(r.first, r.end, collective, r.start_s + half, end - half)
                if r.end - r.first > 1:
                    span_all(r.first, r.end, "MEMCPY_OUT_FUSION_BUFFER", end - half, end)
                te = us(end)
                for k in range(r.first, r.end):
                    add(k, {"ph": "E", "ts": te, "pid": 0, "args": end_args[k]})
        if si == len(tr.steps) - 1 and tr.period_s > 0:  # idle cycles to the end of the last step
            t = step.next_cycle_s
            while t < step.end_s:
                cycle_mark(t)
                t += tr.period_s

    keyed.sort(key=lambda x: (x[0], x[1]))  # stable in generation order: causal per tensor
    out: list[dict] = [
        {"name": "process_name", "ph": "M", "pid": 0,
         "args": {"start_time_since_epoch_in_micros": int(start_time_since_epoch_us)}},
        {"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}},
    ]
    pid_of: dict[int, int] = {}
    for _, _, k, ev in keyed:
        if k >= 0:
            pid = pid_of.get(k)
            if pid is None:
                pid = pid_of[k] = len(pid_of) + 1
                out.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": names[k]}})
                out.append({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}})
            ev["pid"] = pid
        out.append(ev)
    return out


def simulated_responses(result: StepResult, layout: Layout) -> list[dict]:
    """The traced responses as the reader reports them, for checks: one dict per response with
    ``tensors`` (timeline names), ``nbytes``, ``collective_us`` (collective activity only),
    ``memcpy_us`` (in + out) and ``start_us`` (µs since the first traced step began).

    Raises ValueError when ``result`` has no trace."""
    tr = result.trace
    if tr is None or not tr.steps:
        raise ValueError("the step result has no trace: simulate with trace=True")
    t0 = tr.steps[0].start_s
    return [{"tensors": tuple(TENSOR_PREFIX + n for n in layout.names[r.first:r.end]), "nbytes": r.nbytes,
             "start_us": (r.start_s + r.memcpy_s / 2 - t0) * 1e6, "collective_us": r.collective_s * 1e6,
             "memcpy_us": r.memcpy_s * 1e6}
            for s in tr.steps for r in s.responses]
