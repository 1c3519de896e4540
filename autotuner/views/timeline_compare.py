"""Line a real Horovod timeline up against a simulated one (pure: two parsed timelines in).

Both sides are :class:`~autotuner.readers.timeline.Timeline` objects (``read_timeline``), so a
real file and one written by ``autotuner simulate --timeline`` are treated alike.

Steps. A timeline has no step marks; a training step allreduces every gradient once, so the
allreduce responses (in start order) are cut into steps where a response carries a tensor the
current step already reduced. Only *complete* steps (every tensor seen in the file, once) are
compared; a run's first steps (response-cache misses, ``INIT_FUSION_BUFFER``) are skipped with
``skip_real`` (default 1) and a file cut short loses its last partial step.

Compared, per side (durations in ms; the collective activity span, memcpy separate):
responses per step, bytes per step, collective and memcpy time per step, the step period
(start of one step's first response to the next's, i.e. the step time when steps follow each
other), by response size (power-of-4 byte buckets: responses per step and mean duration), by
position in the step (k-th response on each side, side by side), and response by response where both sides fused the same tensors (matched on the tensor-name tuple),
with the largest differences first.
"""
from __future__ import annotations


from ..readers.timeline import Timeline
from ..readers.timeline_steps import Steps, split_steps

#: lower edges of the size buckets (bytes): < 16 KiB, then powers of 4 up to >= 256 MiB
BUCKET_EDGES = (0,) + tuple(16 * 1024 * 4**k for k in range(8))


def _mean(xs) -> float | None:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else None


def _bucket(nbytes: int) -> int:
    k = 0
    while k + 1 < len(BUCKET_EDGES) and nbytes >= BUCKET_EDGES[k + 1]:
        k += 1
    return k


def _bucket_label(k: int) -> str:
    def fmt(b: int) -> str:
        return f"{b / 2**20:g} MiB" if b >= 2**20 else f"{b / 1024:g} KiB"
    lo = BUCKET_EDGES[k]
    if k + 1 == len(BUCKET_EDGES):
        return f">= {fmt(lo)}"
    return f"< {fmt(BUCKET_EDGES[k + 1])}" if lo == 0 else f"{fmt(lo)} - {fmt(BUCKET_EDGES[k + 1])}"


def summarize(s: Steps) -> dict:
    """Per-step means of one side (ms, bytes) and the per-step rows."""
    rows = []
    for i, st in enumerate(s.steps):
        rows.append({"responses": len(st), "bytes": sum(r.nbytes for r in st),
                     "collective_ms": sum(r.duration_us for r in st) / 1e3,
                     "memcpy_ms": sum(r.memcpy_in_us + r.memcpy_out_us for r in st) / 1e3,
                     "span_ms": (max(r.start_us + r.duration_us + r.memcpy_out_us for r in st)
                                 - min(r.start_us - r.memcpy_in_us for r in st)) / 1e3,
                     "start_ms": min(r.start_us for r in st) / 1e3})
    periods = [b["start_ms"] - a["start_ms"] for a, b in zip(rows, rows[1:])]
    return {"source": s.source, "steps_found": s.n_total, "steps_skipped": s.skipped, "steps_used": len(rows),
            "tensors": s.n_tensors,
            "responses_per_step": _mean(r["responses"] for r in rows),
            "bytes_per_step": _mean(r["bytes"] for r in rows),
            "collective_ms_per_step": _mean(r["collective_ms"] for r in rows),
            "memcpy_ms_per_step": _mean(r["memcpy_ms"] for r in rows),
            "comm_span_ms_per_step": _mean(r["span_ms"] for r in rows),
            "step_period_ms": _mean(periods), "per_step": rows}


def _by_size(s: Steps) -> dict[int, dict]:
    out: dict[int, dict] = {}
    n = len(s.steps)
    for st in s.steps:
        for r in st:
            b = out.setdefault(_bucket(r.nbytes), {"n": 0, "dur": 0.0, "bytes": 0})
            b["n"] += 1
            b["dur"] += r.duration_us
            b["bytes"] += r.nbytes
    return {k: {"per_step": v["n"] / n, "mean_ms": v["dur"] / v["n"] / 1e3, "mean_bytes": v["bytes"] / v["n"]}
            for k, v in out.items()}


def _by_tensors(s: Steps) -> dict[tuple[str, ...], dict]:
    out: dict[tuple[str, ...], dict] = {}
    for st in s.steps:
        for pos, r in enumerate(st):
            d = out.setdefault(r.tensors, {"n": 0, "dur": 0.0, "pos": pos, "nbytes": r.nbytes})
            d["n"] += 1
            d["dur"] += r.duration_us
    return {k: {**v, "mean_ms": v["dur"] / v["n"] / 1e3} for k, v in out.items()}


def _by_position(s: Steps) -> list[dict]:
    """Mean bytes / duration (ms) / tensor count of the k-th response of a step, over the steps
    that have a k-th response."""
    n = max(len(st) for st in s.steps)
    out = []
    for k in range(n):
        rs = [st[k] for st in s.steps if len(st) > k]
        out.append({"steps": len(rs), "bytes": _mean(r.nbytes for r in rs),
                    "tensors": _mean(len(r.tensors) for r in rs), "ms": _mean(r.duration_us / 1e3 for r in rs)})
    return out


def _ratio(a: float | None, b: float | None) -> float | None:
    return b / a if a and b is not None and a > 0 else None


def compare(real: Timeline, sim: Timeline, *, skip_real: int = 1, skip_sim: int = 0, top: int = 10) -> dict:
    """Compare ``real`` with ``sim``; returns a JSON-ready dict.

    Keys: ``real``/``sim`` (:func:`summarize`), ``ratio`` (sim / real for the per-step means),
    ``by_size`` (one row per size bucket present on either side: responses per step and mean
    duration, ms), ``by_position`` (the k-th response of a step on each side: mean bytes,
    tensors, ms, and how many steps have one), ``matched`` (responses fused alike on both sides, with ``real_ms``,
    ``sim_ms``, ``diff_ms`` = sim − real; the ``top`` largest ``|diff_ms|`` first),
    ``n_matched``/``unmatched_real``/``unmatched_sim`` (distinct tensor groups), ``notes``.

    Raises :class:`TimelineError` when either side has no complete allreduce step.
    """
    rs, ss = split_steps(real, skip=skip_real), split_steps(sim, skip=skip_sim)
    rsum, ssum = summarize(rs), summarize(ss)
    notes = []
    rt = {t for st in rs.steps for r in st for t in r.tensors}
    st_ = {t for st in ss.steps for r in st for t in r.tensors}
    if rt != st_:
        common = len(rt & st_)
        notes.append(f"tensor names differ: {common} in common, {len(rt - st_)} only in the real timeline, "
                     f"{len(st_ - rt)} only in the simulated one (different models or layouts?)")
    keys = ("responses_per_step", "bytes_per_step", "collective_ms_per_step", "memcpy_ms_per_step",
            "comm_span_ms_per_step", "step_period_ms")
    ratio = {k: _ratio(rsum[k], ssum[k]) for k in keys}
    rb, sb = _by_size(rs), _by_size(ss)
    by_size = []
    for k in sorted(set(rb) | set(sb)):
        a, b = rb.get(k), sb.get(k)
        by_size.append({"bucket": _bucket_label(k), "min_bytes": BUCKET_EDGES[k],
                        "real_per_step": a["per_step"] if a else 0.0, "sim_per_step": b["per_step"] if b else 0.0,
                        "real_mean_ms": a["mean_ms"] if a else None, "sim_mean_ms": b["mean_ms"] if b else None,
                        "ratio": _ratio(a and a["mean_ms"], b and b["mean_ms"])})
    rk, sk = _by_tensors(rs), _by_tensors(ss)
    matched = []
    for key in sorted(set(rk) & set(sk), key=lambda k: rk[k]["pos"]):
        a, b = rk[key], sk[key]
        matched.append({"first_tensor": key[0], "last_tensor": key[-1], "tensors": len(key), "bytes": a["nbytes"],
                        "real_ms": a["mean_ms"], "sim_ms": b["mean_ms"], "diff_ms": b["mean_ms"] - a["mean_ms"],
                        "ratio": _ratio(a["mean_ms"], b["mean_ms"]), "real_position": a["pos"],
                        "sim_position": b["pos"]})
    rp, sp = _by_position(rs), _by_position(ss)
    by_position = []
    for k in range(max(len(rp), len(sp))):
        a = rp[k] if k < len(rp) else None
        b = sp[k] if k < len(sp) else None
        by_position.append({"position": k,
                            "real_bytes": a and a["bytes"], "sim_bytes": b and b["bytes"],
                            "real_tensors": a and a["tensors"], "sim_tensors": b and b["tensors"],
                            "real_ms": a and a["ms"], "sim_ms": b and b["ms"],
                            "real_steps": a["steps"] if a else 0, "sim_steps": b["steps"] if b else 0})
    largest = sorted(matched, key=lambda m: -abs(m["diff_ms"]))[:top]
    if not matched:
        notes.append("no response carries the same tensors on both sides (fusion differs): compare by size")
    return {"real": rsum, "sim": ssum, "ratio": ratio, "by_size": by_size, "by_position": by_position,
            "matched": matched,
            "largest_differences": largest, "n_matched": len(matched),
            "unmatched_real": len(set(rk) - set(sk)), "unmatched_sim": len(set(sk) - set(rk)), "notes": notes}
