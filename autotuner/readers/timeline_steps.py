"""Training steps and host-side samples read off a parsed Horovod timeline (pure).

Shared by the timeline comparison (:mod:`autotuner.views.timeline_compare`) and the host-pass
fit (:mod:`autotuner.frameworks.horovod.fit.fitters`). Steps: a timeline has no step marks; a training step
allreduces every gradient once, so the allreduce responses (in start order) are cut into steps
where a response carries a tensor the current step already reduced.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import TimelineError
from .timeline import FusedResponse, Timeline


@dataclass(frozen=True)
class Steps:
    """A timeline cut into steps: ``steps`` are the complete ones after skipping ``skipped``;
    ``n_total``: all steps found (complete or not); ``n_tensors``: distinct tensors."""

    source: str
    steps: list[list[FusedResponse]]
    n_total: int
    skipped: int
    n_tensors: int


def split_steps(tl: Timeline, *, op: str = "allreduce", skip: int = 0) -> Steps:
    """Cut ``tl``'s ``op`` responses into training steps (see the module docstring).

    Raises :class:`TimelineError` when the timeline has no ``op`` response or no complete step
    is left after skipping ``skip``.
    """
    resp = sorted((r for r in tl.responses if r.op == op), key=lambda r: r.start_us)
    if not resp:
        raise TimelineError(f"{tl.source}: no {op} responses to compare")
    all_tensors = {t for r in resp for t in r.tensors}
    steps: list[list[FusedResponse]] = []
    cur: list[FusedResponse] = []
    seen: set[str] = set()
    for r in resp:
        if cur and any(t in seen for t in r.tensors):
            steps.append(cur)
            cur, seen = [], set()
        cur.append(r)
        seen.update(r.tensors)
    steps.append(cur)
    complete = [s for s in steps if sum(len(r.tensors) for r in s) == len(all_tensors)]
    kept = complete[skip:]
    if not kept:
        raise TimelineError(f"{tl.source}: {len(complete)} complete step(s) of {len(all_tensors)} tensors, "
                            f"none left after skipping {skip}")
    return Steps(tl.source, kept, len(steps), min(skip, len(complete)), len(all_tensors))


@dataclass(frozen=True)
class HostSamples:
    """Host-side timings read off a timeline (seconds, bytes), for :func:`autotuner.fit.regression.fit_host_passes`.

    ``memcpy``: ``(nbytes, seconds)`` per fused response (MEMCPY_IN + MEMCPY_OUT spans).
    ``gaps``: ``(nbytes_a, nbytes_b, seconds, new_cycle)`` per pair of back-to-back responses
    A, B in one step: from A's collective end to B's first activity, minus A's MEMCPY_OUT
    (ScaleBuffer, callbacks, and when ``new_cycle`` is 1 the cycle that negotiated B:
    everything the timeline does not name). Kept only when the background loop went straight
    from A to B: B in A's cycle (no CYCLE_START between them, ``new_cycle`` 0), or in the very
    next cycle (one CYCLE_START, ``new_cycle`` 1) that did not sleep (A's collective lasted at
    least the cycle time; operations.cc ``RunLoopOnce`` sleeps only what is left of the cycle).
    Without CYCLE_START marks (``--timeline-mark-cycles``) only same-cycle pairs, told by B's
    NEGOTIATE starting before A's collective ended, are kept.
    """

    memcpy: list[tuple[int, float]]
    gaps: list[tuple[int, int, float, int]]


def host_samples(tl: Timeline, *, cycle_time_ms: float | None = None, op: str = "allreduce",
                 skip: int = 1) -> HostSamples:
    """Host-side samples of ``tl``'s complete steps after the first ``skip`` (see
    :class:`HostSamples`); ``cycle_time_ms``: the run's cycle time (ms), None when unknown
    (then next-cycle pairs are kept only after a collective of at least 50 ms). Raises
    :class:`TimelineError` as :func:`split_steps` does."""
    import bisect

    st = split_steps(tl, op=op, skip=skip)
    marks = sorted(tl.cycle_starts_us)
    min_a_us = (cycle_time_ms if cycle_time_ms is not None else 50.0) * 1e3
    enq: dict[str, list[float]] = {}
    for n in tl.negotiations:
        enq.setdefault(n.tensor, []).append(n.start_us)
    memcpy: list[tuple[int, float]] = []
    gaps: list[tuple[int, int, float, int]] = []
    for step in st.steps:
        memcpy += [(r.nbytes, (r.memcpy_in_us + r.memcpy_out_us) * 1e-6) for r in step if len(r.tensors) > 1]
        for a, b in zip(step, step[1:]):
            a_end = a.start_us + a.duration_us
            b_begin = b.start_us - b.memcpy_in_us
            gap = (b_begin - a_end - a.memcpy_out_us) * 1e-6
            if marks:
                between = bisect.bisect_left(marks, b_begin) - bisect.bisect_right(marks, a_end)
                if between == 0 or (between == 1 and a.duration_us >= min_a_us):
                    gaps.append((a.nbytes, b.nbytes, gap, between))
                continue
            # no cycle marks: B was negotiated in A's cycle if its tensors' NEGOTIATE began before A ended
            last = max((max((t for t in enq.get(x, ()) if t <= b_begin), default=math.inf) for x in b.tensors),
                       default=math.inf)
            if last <= a_end:
                gaps.append((a.nbytes, b.nbytes, gap, 0))
    return HostSamples(memcpy, gaps)


def response_host_samples(tl: Timeline, op: str = "allreduce") -> HostSamples:
    """Host-side samples of a timeline that has no training steps (``autotuner measure``'s
    sweep): ``memcpy`` per fused response as in :func:`host_samples`, and ``gaps`` for every
    two responses that ran back to back in one cycle (no CYCLE_START between A's collective end
    and B's first activity; ``new_cycle`` is 0). Needs ``--timeline-mark-cycles``: without cycle
    marks no gap is kept (which cycle ran B cannot be told)."""
    import bisect

    resp = sorted((r for r in tl.responses if r.op == op), key=lambda r: r.start_us)
    marks = sorted(tl.cycle_starts_us)
    memcpy = [(r.nbytes, (r.memcpy_in_us + r.memcpy_out_us) * 1e-6) for r in resp if len(r.tensors) > 1]
    gaps: list[tuple[int, int, float, int]] = []
    if marks:
        for a, b in zip(resp, resp[1:]):
            a_end = a.start_us + a.duration_us
            b_begin = b.start_us - b.memcpy_in_us
            if b_begin >= a_end and bisect.bisect_left(marks, b_begin) == bisect.bisect_right(marks, a_end):
                gaps.append((a.nbytes, b.nbytes, (b_begin - a_end - a.memcpy_out_us) * 1e-6, 0))
    return HostSamples(memcpy, gaps)
