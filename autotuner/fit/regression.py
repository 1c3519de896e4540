"""Regression for the cost model: alpha-beta lines, the two-segment fit, host passes (scipy).

Pure functions of arrays; the fitters (:mod:`autotuner.frameworks.horovod.fit.fitters`) turn records into arrays
and the results into a model. See docs/explanation/cost-model.md.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from ..errors import FitError
from ..model.units import MIB
from ..model.costmodel import HostPasses


@dataclass(frozen=True)
class LinearFit:
    """``T(n) = a + b·n`` with a in s and b in s/byte, plus fit quality on the samples."""

    a_s: float
    b_s_per_byte: float
    r2: float
    mape: float
    n: int


def fit_linear(nbytes: np.ndarray, times_s: np.ndarray, weights: np.ndarray | None = None) -> LinearFit:
    """Least-squares fit of ``T = a + b·n`` on relative residuals; a, b >= 0.

    Args: arrays of shape (k,), k >= 2; bytes, seconds, non-negative weights.
    Raises FitError for fewer than 2 samples or non-positive times.
    """
    n = np.asarray(nbytes, float)
    t = np.asarray(times_s, float)
    w = np.ones_like(t) if weights is None else np.asarray(weights, float)
    if n.size < 2 or np.any(t <= 0):
        raise FitError("need at least 2 samples with positive times to fit T(n) = a + b*n")
    b0 = max((t.max() - t.min()) / max(n.max() - n.min(), 1.0), 1e-15)
    x0 = np.array([max(t.min(), 1e-9), b0])
    scale = x0.copy()
    res = least_squares(lambda x: w * ((x[0] * scale[0] + x[1] * scale[1] * n) - t) / t,
                        x0 / scale, bounds=([0, 0], [np.inf, np.inf]))
    a, b = res.x * scale
    pred = a + b * n
    return LinearFit(float(a), float(b), r_squared(t, pred), mape(t, pred), int(n.size))


def r_squared(y: np.ndarray, pred: np.ndarray) -> float:
    ss = float(np.sum((y - np.mean(y)) ** 2))
    return 1.0 - float(np.sum((y - pred) ** 2)) / ss if ss > 0 else float("nan")


def mape(y: np.ndarray, pred: np.ndarray) -> float:
    """Mean absolute percentage error, in percent."""
    return float(np.mean(np.abs(pred - y) / y) * 100)


#: candidate knees (MiB) for the collective's large-message segment and the host passes' cache knee
KNEES_MIB = (0.25, 0.5, 1, 2, 4, 8, 16)
HOST_KNEES_MIB = (2, 4, 6, 8, 12, 16, 24, 32)


def fit_piecewise(nbytes: np.ndarray, times_s: np.ndarray, weights: np.ndarray, counts: np.ndarray,
                  knees_bytes=tuple(k * MIB for k in KNEES_MIB), min_side: int = 4):
    """Two-segment alpha-beta fit: ``T = a1 + b1·n`` below a knee, ``a2 + b2·n`` from it on.

    Each segment is :func:`fit_linear` on its samples (same weights); the knee is the
    candidate (bytes) with the least count-weighted squared error in seconds (the time a step
    actually pays: ``counts`` responses of each size were measured), among those
    leaving at least ``min_side`` samples on each side. Returns ``(knee_bytes, small, large)``
    or None when no candidate qualifies. Raises FitError as :func:`fit_linear`.
    """
    best = None
    for k in knees_bytes:
        lo, hi = nbytes < k, nbytes >= k
        if lo.sum() < min_side or hi.sum() < min_side:
            continue
        fits = (fit_linear(nbytes[lo], times_s[lo], weights[lo]), fit_linear(nbytes[hi], times_s[hi], weights[hi]))
        err = 0.0
        for m, f in zip((lo, hi), fits):
            err += float(np.sum(counts[m] * (f.a_s + f.b_s_per_byte * nbytes[m] - times_s[m]) ** 2))
        if best is None or err < best[0]:
            best = (err, float(k), *fits)
    return None if best is None else best[1:]


def fit_host_passes(memcpy: np.ndarray, gaps: np.ndarray,
                    knees_bytes=tuple(k * MIB for k in HOST_KNEES_MIB)) -> tuple[HostPasses, float, dict[str, Any]]:
    """Fit :class:`~autotuner.model.costmodel.HostPasses` and the per-cycle negotiation cost.

    Args:
        memcpy: shape (m, 2): bytes and seconds of MEMCPY_IN + MEMCPY_OUT per fused response.
        gaps: shape (g, 4): bytes of responses A and B, the untimed seconds between them and
            whether B came in a new cycle (1) or in A's (0)
            (:class:`autotuner.readers.timeline_steps.HostSamples`).
    Model (units ms and MiB inside the fit, returned in s and bytes): ``memcpy(n) = m1·n +
    m2·max(0, n - K)``; ``gap(A, B) = c0 + g1·(A + B)/2 + g2·(max(0, A - K) + max(0, B - K))/2``
    (half of each gap to each neighbour: one rank's timeline cannot tell A's post-processing
    from B's preparation). Plain least squares on absolute times, so the fit follows the mean,
    tails included (the step pays the total, as for the collectives); all terms >= 0. The
    knee K is the candidate with the least combined cost. ``c0``, the fixed host time between
    two responses, is both the per-response fixed cost and the returned negotiation cost of a
    cycle (controller.cc ``ComputeResponseList``: on this testbed a cycle's cache bit-vector
    allreduce right after a collective costs no more than the same-cycle gap, so the two
    cannot be told apart; the tiny-allreduce latency, 3.5 ms here, would be 40x too much).
    Returns ``(host, ctrl_op_s, info)``.
    Raises FitError with fewer than 3 samples of either kind.
    """
    if len(memcpy) < 3 or len(gaps) < 3:
        raise FitError(f"host passes need >= 3 fused responses and >= 3 back-to-back pairs, got {len(memcpy)} and {len(gaps)}")
    mn, mt = memcpy[:, 0] / MIB, memcpy[:, 1] * 1e3
    ga, gb, gt, new = gaps[:, 0] / MIB, gaps[:, 1] / MIB, gaps[:, 2] * 1e3, gaps[:, 3]
    best = None
    for kb in knees_bytes:
        k = kb / MIB
        rm = least_squares(lambda c: c[0] * mn + c[1] * np.maximum(mn - k, 0) - mt, [0.2, 0.2],
                           bounds=(0, np.inf))
        rg = least_squares(lambda c: c[0] + c[1] * (ga + gb) / 2
                           + c[2] * (np.maximum(ga - k, 0) + np.maximum(gb - k, 0)) / 2 - gt,
                           [0.05, 0.05, 0.05], bounds=(0, np.inf))
        cost = rm.cost + rg.cost
        if best is None or cost < best[0]:
            best = (cost, kb, rm.x, rg.x)
    _, kb, m, g = best
    ms_mib = 1e-3 / MIB
    host = HostPasses(knee_bytes=kb, memcpy_s_per_byte=m[0] * ms_mib, memcpy_spill_s_per_byte=m[1] * ms_mib,
                      gap_fixed_s=g[0] * 1e-3, gap_s_per_byte=g[1] * ms_mib, gap_spill_s_per_byte=g[2] * ms_mib)
    info = {"n_memcpy": int(len(memcpy)), "n_gaps": int(len(gaps)), "n_gaps_new_cycle": int(new.sum()),
            "knee_mib": kb / MIB, "fixed_ms": float(g[0]), "gap_median_ms": float(np.median(gt))}
    return host, float(g[0] * 1e-3), info
