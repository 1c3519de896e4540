"""Fits of collective timings every framework shares (pure, scipy): the alpha-beta ring tier of measured
allreduces (:func:`fit_collective_tier`: Horovod's sweep, validation and timeline fitters and DDP's sweep,
:mod:`autotuner.frameworks.ddp.fit`) and what fp16 costs besides the bytes on Gloo's pipelined ring
(:func:`fp16_cost`, from an fp16 phase's jobs: Horovod's ``measure`` and DDP's ``ddp measure``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..model.costmodel import Tier
from ..model.units import MIB
from .regression import fit_linear, fit_piecewise, mape, r_squared


def fit_collective_tier(nbytes: np.ndarray, counts: np.ndarray, times_s: np.ndarray,
                        p: int) -> tuple[Tier, Any, np.ndarray, dict[str, Any] | None]:
    """The ring tier of measured collectives: ``T(n) = a + b·n`` (:func:`fit_linear`) and, where
    the samples allow, two such lines split at a knee (:func:`fit_piecewise`).

    Args: arrays of shape (k,): response bytes, how many responses of that size were measured,
    their mean duration (s); ``p``: the ranks they ran on. Each size's relative residual weighs by its share of all measured
    collective time (sqrt(count x time / total)), so the line is right where a step's time goes
    (the many tiny tensors would dominate otherwise). Returns ``(tier, linear fit, predicted s
    per sample, piecewise info or None)``. Raises FitError (fewer than 2 samples, times <= 0).
    Shared by the ``validation``, ``sweep`` and ``timelines`` fitters.
    """
    weights = np.sqrt(counts * times_s / np.sum(counts * times_s))
    lin = fit_linear(nbytes, times_s, weights)
    tier = Tier.from_linear(lin.a_s, lin.b_s_per_byte, p)
    pred = lin.a_s + lin.b_s_per_byte * nbytes
    piece = fit_piecewise(nbytes, times_s, weights, counts)
    piece_info = None
    if piece is not None:
        knee, small, large = piece
        tier = Tier.from_linear(small.a_s, small.b_s_per_byte, p).with_large(
            knee, large.a_s, large.b_s_per_byte, p)
        pred = np.where(nbytes >= knee, large.a_s + large.b_s_per_byte * nbytes, small.a_s + small.b_s_per_byte * nbytes)
        piece_info = {"knee_bytes": knee, "small": {"a_ms": small.a_s * 1e3, "b_ms_per_mib": small.b_s_per_byte * MIB * 1e3,
                                                   "n_samples": small.n},
                      "large": {"a_ms": large.a_s * 1e3, "b_ms_per_mib": large.b_s_per_byte * MIB * 1e3,
                                "n_samples": large.n},
                      "r2": r_squared(times_s, pred), "mape_percent": mape(times_s, pred)}
    return tier, lin, pred, piece_info


def _cast_fit(recs: list[dict[str, Any]], col: int) -> tuple[float, float]:
    """(s per element, s per tensor) of one cast, least squares (non-negative) over every set of every job:
    a set of ``count`` tensors of ``elems`` elements took ``count · (per_tensor + elems · per_elem)``."""
    from scipy.optimize import nnls

    a, y = [], []
    for r in recs:
        for count, elems, *ms in r["casts"]:
            a.append([count * elems, count])
            y.append(ms[col] * 1e-3)
    (per_elem, per_tensor), _ = nnls(np.asarray(a, float), np.asarray(y, float))
    return float(per_elem), float(per_tensor)


def _sum_points(recs: list[dict[str, Any]]) -> list[tuple]:
    """Every (job, size) point of an fp16 phase, as :func:`fp16_cost` reads it: (bytes, T32 s, T16 s, k, segment
    bytes, w s, the float16 sum per element s, the per-element law's figure s)."""
    from ..model.costmodel import GLOO_SEGMENT_BYTES, ring_segments

    pts = []
    for r in recs:
        p = int(r["ranks"])
        for b, t32, t16 in zip(r["sizes"], r["fp32_ms"], r["fp16_ms"]):
            k, seg = (float(v) for v in ring_segments(float(b), p, GLOO_SEGMENT_BYTES))
            t32_s, t16_s = t32 * 1e-3, t16 * 1e-3
            w = t32_s / (2 * k)
            x = 2 * _segment_sum_s(t16_s - t32_s, k, w) / seg
            pts.append((int(b), t32_s, t16_s, k, seg, w, x, (t16_s - t32_s) / ((p - 1) / p * b / 2)))
    return pts


def fp16_sum_points_ns(recs: list[dict[str, Any]]) -> list[float]:
    """The float16 sum per element (ns) each (job, size) point of an fp16 phase gives (:func:`fp16_cost`'s
    ``per_point_ns_per_elem``, unrounded), in record order."""
    return [q[6] * 1e9 for q in _sum_points(recs)]


def _segment_sum_s(extra_s: float, k: float, w_s: float) -> float:
    """The sum time (s) of one float16 segment that explains a measured extra ``extra_s`` over float32 in Gloo's
    pipelined ring (:meth:`autotuner.model.costmodel.Fp16Tier.sum_exposed_s`, solved for ``s``): ``extra = s``
    where ``s <= w`` (the wire hides all sums but the last), ``extra = k · s - (k - 1) · w`` where it does not."""
    return extra_s if extra_s <= w_s else (extra_s + (k - 1) * w_s) / k


def fp16_cost(recs: list[dict[str, Any]]) -> dict[str, Any]:
    """What fp16 compression costs besides the bytes, from the ``fp16`` phase's jobs
    (:mod:`autotuner.frameworks.horovod.fp16probe`): the model file's ``fit.fp16`` and the cost model's ``fp16``
    (:class:`autotuner.model.costmodel.Fp16Cost`).

    The float16 sum overlaps the wire: Gloo's ring (``gloo/allreduce.cc`` ``ring()``) cuts a buffer of ``B`` bytes
    into segments of at most 1 MiB (:func:`autotuner.model.costmodel.ring_segments`: ``k`` reduced per rank) and
    sums one while the next is in flight, so a float16 allreduce costs its float32 twin of the same bytes plus
    ``k · max(0, s - w) + min(w, s)`` (:meth:`autotuner.model.costmodel.Fp16Tier.sum_exposed_s`), ``w`` one
    segment's wire time and ``s`` its float16 sum. Each point (job, size) gives ``w = T32(B) / (2 k)`` (the ring's
    reduce-scatter and allgather move ``k`` segments each, per rank) and, solved for ``s``
    (:func:`_segment_sum_s`), the sum per float16 element ``2 s / segment``; ``sum_extra_ns_per_elem`` is their
    median (a median: one job of three may sample a slow regime; a negative one is reported and clipped to 0).
    ``per_point_ns_per_elem`` lists them, ``sum_extra_range_ns_per_elem`` gives their quartiles (how far the phase
    pins the figure: ``suggest`` predicts an fp16 proposal at both), ``predicted_fp16_ms`` what the median gives back for each point, and
    ``per_element_law_ns_per_elem`` the median of the earlier law (every element's sum exposed,
    ``(T16 - T32) / ((p - 1) / p · B / 2)``) for comparison. The casts per element and per tensor:
    :func:`_cast_fit`. With no record: ``{"jobs": 0, "sum_extra_ns_per_elem": None, "note": ...}``.
    """
    from ..model.costmodel import GLOO_SEGMENT_BYTES

    if not recs:
        return {"jobs": 0, "sum_extra_ns_per_elem": None,
                "note": "no fp16 phase (measure --fp16-rounds): fp16 compression only halves the bytes"}
    pts = _sum_points(recs)
    xs = np.asarray([q[6] for q in pts], float)
    slope = float(np.median(xs))
    x = max(slope, 0.0)
    pred = [t32 + k * max(0.0, seg * x / 2 - w) + min(w, seg * x / 2) for _, t32, _, k, seg, w, _, _ in pts]
    down_e, down_t = _cast_fit(recs, 0)
    up_e, up_t = _cast_fit(recs, 1)
    info = {"jobs": len(recs), "sizes": sorted({int(b) for r in recs for b in r["sizes"]}),
            "law": ("Gloo's pipelined ring: a float16 allreduce = its float32 twin + k max(0, s - w) + min(w, s) "
                    "(k segments of at most 1 MiB reduced per rank, w one segment's wire time = T32 / 2k, s its "
                    "float16 sum)"),
            "segment_bytes": GLOO_SEGMENT_BYTES,
            "sum_extra_ns_per_elem": x * 1e9,
            "per_point_ns_per_elem": [round(float(v) * 1e9, 2) for v in xs],
            # how far the points pin it: their quartiles (docs/explanation/fp16-compression.md, "How well the phase pins the sum")
            "sum_extra_range_ns_per_elem": [max(0.0, float(np.percentile(xs, q)) * 1e9) for q in (25, 75)],
            "predicted_fp16_ms": [[b, round(t16 * 1e3, 3), round(q * 1e3, 3)]
                                  for (b, _, t16, *_), q in zip(pts, pred)],
            "per_element_law_ns_per_elem": float(np.median([q[7] for q in pts])) * 1e9,
            "cast_up_ns_per_elem": up_e * 1e9, "cast_up_us_per_tensor": up_t * 1e6,
            "cast_down_ns_per_elem": down_e * 1e9, "cast_down_us_per_tensor": down_t * 1e6,
            "fp16_minus_fp32_ms": [[int(b), round(t16 - t32, 3)] for r in recs
                                   for b, t32, t16 in zip(r["sizes"], r["fp32_ms"], r["fp16_ms"])]}
    if slope < 0:
        info["note"] = (f"float16 allreduces were not slower per element than float32 ones of the same bytes "
                        f"(median {slope * 1e9:.2f} ns per element): no extra charged")
    return info


#: an fp16 phase pins the float16 sum where the quartiles of its per-point figures span at most this share of their
#: median (:func:`fp16_cost`'s ``sum_extra_range_ns_per_elem``). On the 13 committed CPU envs' phases the spread is
#: 0.09-0.20 at 1.75-4.5 Gbit/s and 0.49-0.51 at 0.75 and 1.25 Gbit/s, where the sum is read off a small difference of
#: two long allreduces (docs/explanation/fp16-compression.md, "A phase that does not pin the sum")
FP16_PINNED_SPREAD = 0.3
#: phases finished within this many minutes of each other sat in one sitting: the testbed's float16 sum drifts 9-12 %
#: over four hours (fresh-poll-2gbit's 16 MiB float16 allreduce 176.9 ms at 19:18, 199.8 at 23:03; tests/test_fp16.py
#: ``PHASE_OF``), so only a phase of the same sitting times the same sum
FP16_SITTING_MINUTES = 30.0


def fp16_spread(info: dict[str, Any]) -> float | None:
    """How far an fp16 phase pins the float16 sum: the quartile range of its per-point figures over their median
    (dimensionless; :func:`fp16_cost`'s ``sum_extra_range_ns_per_elem`` and ``sum_extra_ns_per_elem``), or None
    where there is no figure (no records, or a median of 0)."""
    x, rng = info.get("sum_extra_ns_per_elem"), info.get("sum_extra_range_ns_per_elem")
    if not x or rng is None:
        return None
    return (rng[1] - rng[0]) / x


def _finished(recs: list[dict[str, Any]]) -> list[float]:
    """The records' ``finished_at`` as POSIX seconds (those that parse)."""
    from datetime import datetime

    out = []
    for r in recs:
        try:
            out.append(datetime.fromisoformat(str(r["finished_at"])).timestamp())
        except (KeyError, TypeError, ValueError):
            continue
    return out


def borrow_fp16_sum(info: dict[str, Any], recs: list[dict[str, Any]],
                    siblings: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The fp16 term's float16 sum where an env's own phase cannot pin it: borrowed from the phases measured on the
    same stack in the same sitting that do.

    The float16 sum per element is what the host's CPU and Gloo build do (Gloo's ``sum<float16>``,
    ``gloo/math.cc``), not the link: every phase of one machine and one sitting times the same sum. A phase pins it
    where :func:`fp16_spread` is at most :data:`FP16_PINNED_SPREAD`; on a slow link the sum is a small difference of
    two long allreduces and the points scatter (fresh-poll-1.25gbit: 13.8-46.8 ns per element, quartiles 17.0-31.9).

    Args:
        info: :func:`fp16_cost` of the env's own phase (``recs``).
        recs: the env's own fp16 phase records (``finished_at``, ``values``, ``tensors``).
        siblings: env name -> fp16 phase records of the other envs the caller found on the same stack (env.toml's
            ``stack``); only those whose jobs ran the same values and tensors per response, finished within
            :data:`FP16_SITTING_MINUTES` of the env's own, and whose own phase pins the sum are pooled.

    Returns: ``info`` unchanged where its phase pins the sum or there is no figure; else a copy with ``borrowed``
    (``from``: the pooled envs, ``points``, ``own_ns_per_elem`` and ``own_range_ns_per_elem``: what the env's phase
    gave, ``note``) and, where a sibling qualified, ``sum_extra_ns_per_elem`` and ``sum_extra_range_ns_per_elem``
    replaced by the median and quartiles of the pooled siblings' per-point figures (ns per element). The casts stay
    the env's own. Pure: no I/O.
    """
    spread = fp16_spread(info)
    if spread is None or spread <= FP16_PINNED_SPREAD:
        return info
    own_t = _finished(recs)
    kind = {(str(r.get("values")), r.get("tensors")) for r in recs}
    pooled: list[float] = []
    used = []
    for name in sorted(siblings):
        srecs = siblings[name]
        if not srecs or {(str(r.get("values")), r.get("tensors")) for r in srecs} != kind:
            continue
        t = _finished(srecs)
        if not own_t or not t or min(abs(a - b) for a in own_t for b in t) > FP16_SITTING_MINUTES * 60:
            continue
        s_info = fp16_cost(srecs)
        s_spread = fp16_spread(s_info)
        if s_spread is None or s_spread > FP16_PINNED_SPREAD:
            continue
        pooled += fp16_sum_points_ns(srecs)
        used.append(name)
    out = dict(info)
    own = {"own_ns_per_elem": info["sum_extra_ns_per_elem"], "own_range_ns_per_elem": info["sum_extra_range_ns_per_elem"],
           "spread": spread}
    if not used:
        out["borrowed"] = {"from": [], "points": 0, **own,
                           "note": (f"the phase does not pin the float16 sum (quartiles {spread:.2f} of the median "
                                    f"apart, more than {FP16_PINNED_SPREAD:g}) and no phase of the same stack and "
                                    f"sitting does: its own median charged, its quartiles shown as the range")}
        return out
    xs = np.asarray(pooled, float)
    out["sum_extra_ns_per_elem"] = max(0.0, float(np.median(xs)))
    out["sum_extra_range_ns_per_elem"] = [max(0.0, float(np.percentile(xs, q))) for q in (25, 75)]
    out["borrowed"] = {"from": used, "points": len(pooled), **own,
                       "note": (f"the phase does not pin the float16 sum (quartiles {spread:.2f} of the median apart, "
                                f"more than {FP16_PINNED_SPREAD:g}): the sum borrowed from the phase(s) of "
                                f"{', '.join(used)}, same stack, within {FP16_SITTING_MINUTES:g} min")}
    return out
