"""The cpu phase and the negotiation: compute lost per background-loop cycle, the collectives' delay on the compute stream, and the per-cycle negotiation read off the timelines.

Part of the sweep fit (:func:`autotuner.frameworks.horovod.fit.sweep.fit_sweep_env`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ....readers.timeline import samples
from .phase_small import _kept_timeline


MIN_CPU_PAIRS = 3


def cycle_cpu(recs: list[dict[str, Any]], neg, p: int) -> dict[str, Any]:
    """Compute time a rank loses per background-loop cycle (``cpu_us``, µs) from the ``cpu``
    phase's records (:mod:`autotuner.frameworks.horovod.cpuprobe`): per repeat, the share of the compute
    thread's wall time lost to the fast cycle, ``f = 1 - u_ref / u_fast`` (``u``: the slowest
    rank's wall time per compute unit, ms, ``unit_ms_max``: a synchronous step waits for it, and
    the loss is not shared evenly: on the 2-core testbed one rank lost 12-15 % at a 1 ms cycle
    and the other ~0; the reference is the slowest cycle time measured), the median over repeats,
    times the fast cycle's idle period (:meth:`autotuner.model.costmodel.Negotiation.idle_period_s`
    of ``neg`` on ``p`` ranks, cache on), the reference cycle's own share taken out: with
    :meth:`~autotuner.model.costmodel.Negotiation.compute_stretch`'s ``u = u0 / (1 - c/P)``,
    ``f = (c/P_f - c/P_r) / (1 - c/P_r)``, so ``c = f·P_f / (1 - P_f/P_r + f·P_f/P_r)``. ``cpu_us`` is None (with a note) with
    fewer than :data:`MIN_CPU_PAIRS` pairs; 0 when the fast cycle cost nothing measurable (f <= 0)."""
    by: dict[int, dict[float, float]] = {}
    for r in recs:
        if r.get("stream", "idle") == "idle":
            by.setdefault(int(r["repeat"]), {})[float(r["cycle_time_ms"])] = float(r["unit_ms_max"])
    cycles = sorted({c for d in by.values() for c in d})
    info: dict[str, Any] = {"form": "f = 1 - u_ref/u_fast per interleaved pair (slowest rank's time per unit); "
                                    "cpu_us = median f x idle period at the fast cycle, corrected for the "
                                    "reference cycle's own share",
                            "cpu_us": None, "cycles_ms": cycles, "pairs": []}
    if len(cycles) < 2:
        info["note"] = "no cpu phase (measure --cpu-rounds): compute beside Horovod's cycles not measured"
        return info
    fast, ref = cycles[0], cycles[-1]
    pairs = [(k, d[fast], d[ref]) for k, d in sorted(by.items()) if fast in d and ref in d]
    info["pairs"] = [{"repeat": k, "unit_ms_fast": a, "unit_ms_ref": b, "f": 1 - b / a} for k, a, b in pairs]
    if len(pairs) < MIN_CPU_PAIRS:
        info["note"] = f"{len(pairs)} complete pair(s), fewer than {MIN_CPU_PAIRS}: per-cycle compute cost not fitted"
        return info
    f = float(np.median([1 - b / a for _, a, b in pairs]))
    pf, pr = neg.idle_period_s(fast * 1e-3, p, True), neg.idle_period_s(ref * 1e-3, p, True)
    info.update(f_median=f, f_min=min(x["f"] for x in info["pairs"]), f_max=max(x["f"] for x in info["pairs"]),
                period_fast_ms=pf * 1e3, period_ref_ms=pr * 1e3,
                cpu_us=max(0.0, f) * pf / (1 - pf / pr + max(0.0, f) * pf / pr) * 1e6)
    return info


def stream_delay(recs: list[dict[str, Any]], env_dir, problems: list[str]) -> dict[str, Any]:
    """How much longer a response runs while the ranks' compute fills the cores, from the ``cpu``
    phase's streams (:data:`autotuner.frameworks.horovod.cpuprobe.STREAMS`, fusion off, 1 ms cycles): each
    stream ran beside compute and alone, and its timeline (``cpu-timelines/``) gives every
    response's collective span (as the sweep's fit reads them). Per stream and round, the mean span
    of the stream's responses (its tensor size; the probe's own 8- and 24-byte allreduces left
    out); per stream, the median over rounds, with compute and alone; ``delta = with - alone``.
    ``delta = per_response + per_byte x bytes`` over the streams by non-negative least squares
    (``scipy.optimize.nnls``): ``per_response_us``, ``per_byte_ns``. None (with a note) without
    two streams of :data:`MIN_CPU_PAIRS` rounds each way. ``problems`` gets unreadable timelines."""
    from scipy.optimize import nnls

    spans: dict[tuple[str, bool], list[float]] = {}
    size: dict[str, int] = {}
    for r in recs:
        name = str(r.get("stream", "idle"))
        if name == "idle" or not r.get("timeline") or not r.get("stream_bytes"):
            continue
        base, alone = name.removesuffix("-alone"), name.endswith("-alone")
        tl = _kept_timeline(env_dir, r, problems)
        if tl is None:
            continue
        df = samples(tl)
        d = df["duration_s"][df["nbytes"] == int(r["stream_bytes"])]
        if len(d):
            spans.setdefault((base, alone), []).append(float(d.mean()))
            size[base] = int(r["stream_bytes"])
    out: dict[str, Any] = {"form": "delta = mean collective span beside compute - alone (stream timelines, median over "
                                   "rounds); delta = per_response + per_byte x bytes (nnls)",
                           "per_response_us": None, "per_byte_ns": None, "by_stream": {}}
    rows = []
    for base in sorted(size):
        w, a = spans.get((base, False), []), spans.get((base, True), [])
        if min(len(w), len(a)) < MIN_CPU_PAIRS:
            continue
        mw, ma = float(np.median(w)), float(np.median(a))
        out["by_stream"][base] = {"bytes": size[base], "rounds": min(len(w), len(a)), "with_compute_ms": mw * 1e3,
                                  "alone_ms": ma * 1e3, "delta_ms": (mw - ma) * 1e3}
        rows.append((size[base], mw - ma))
    if len(rows) < 2:
        out["note"] = "fewer than two streams timed beside compute and alone: the delay is not charged"
        return out
    A = np.array([[1.0, n * 1e-9] for n, _ in rows])  # columns: per response (s), per byte (ns)
    (per_resp, per_byte_ns), resid = nnls(A, np.array([max(0.0, d) for _, d in rows]))
    out.update(per_response_us=float(per_resp) * 1e6, per_byte_ns=float(per_byte_ns), residual_ms=float(resid) * 1e3)
    return out


#: fewest busy cycles of a job kind for the per-cycle negotiation to be taken from a sweep
MIN_CYCLES = 20


def cycle_negotiation_s(tl) -> list[float]:
    """The negotiation of every cycle that performed a response, read off one timeline (s): from
    the cycle's mark (``CYCLE_START``, written by ``RunLoopOnce`` once the cycle's sleep ends,
    horovod/common/operations.cc) to the start of the cycle's first response (its collective's
    start, less its MEMCPY_IN_FUSION_BUFFER). In between, Horovod 0.28.1 runs
    ``Controller::ComputeResponseList`` (horovod/common/controller.cc): with the response cache,
    ``CoordinateCacheAndState``'s bit-vector allreduces over the controller's Gloo context
    (gloo_controller.cc ``CrossRankBitwiseAnd``/``Or``), which wait for the slowest rank to
    reach its cycle; without it, the coordinator's gather and broadcast of requests. Empty when
    the timeline has no cycle marks (``--timeline-mark-cycles``)."""
    cyc = np.array(sorted(tl.cycle_starts_us), float)
    if cyc.size == 0:
        return []
    rs = sorted((r for r in tl.responses if r.op == "allreduce"), key=lambda r: r.start_us)
    out, seen = [], set()
    for r in rs:
        k = int(np.searchsorted(cyc, r.start_us, side="right")) - 1
        if k < 0 or k in seen:
            continue
        seen.add(k)
        d = r.start_us - r.memcpy_in_us - cyc[k]
        if d >= 0:
            out.append(d * 1e-6)
    return out


def _cycle_negotiation(cycles: dict[tuple[str, bool], list[float]], tier: str) -> dict[str, Any]:
    """Per-cycle negotiation of the fitted ``tier``: the mean over its busy cycles (a step pays
    the sum, so the mean, heavy tail included), cache on (the main and fusion-off jobs) and off
    (the cache-off job); None where fewer than :data:`MIN_CYCLES` cycles were seen."""
    info: dict[str, Any] = {"note": "mean of CYCLE_START -> first response start over the sweep's busy cycles"}
    for key, on in (("cache_on", True), ("cache_off", False)):
        v = cycles.get((tier, on), [])
        info[f"{key}_cycles"] = len(v)
        info[f"{key}_ms"] = float(np.mean(v)) * 1e3 if len(v) >= MIN_CYCLES else None
        info[f"{key}_median_ms"] = float(np.median(v)) * 1e3 if v else None
    return info


#: the fp16 phase's records, beside ``source`` (:data:`autotuner.frameworks.horovod.measure.FP16_RECORDS`)
FP16_RECORDS = "fp16.jsonl"
