"""Comparing a refit with a shipped (committed) fit: with a stated tolerance, never ``==``.

A fitted float depends on the BLAS and CPU underneath (summation order in ``numpy.linalg.lstsq`` and
scipy's least squares, FMA or not): a refit of ``runs/local-gloo-2x2`` on another
machine differed from the shipped model by 6.7e-7 relative (``inter.bandwidth_gbps`` 88.09421246
vs 88.09427147) and in the 15th digit elsewhere. :data:`REFIT_REL` is 1e-4: 150x the largest
difference seen between machines, and 100x below anything a prediction can show (a step time is
printed to 0.1 ms of ~100 ms, 1e-3; the fits' own standard errors are percent-level). A refit that
moves a figure by more than that changed the fit, not the machine. Structure, strings, integers and
booleans (sample counts, knees picked from a grid, file lists) must still match exactly.
"""
from __future__ import annotations

import math
from typing import Any

#: relative tolerance of a refit against a shipped fit (see the module docstring for why)
REFIT_REL = 1e-4
#: absolute floor for figures that are zero within the fit's resolution (a latency of ~0.02 µs)
REFIT_ABS = 1e-9


def refit_mismatches(got: Any, want: Any, *, rel: float = REFIT_REL, abs_: float = REFIT_ABS,
                     path: str = "") -> list[str]:
    """Every place where ``got`` and ``want`` (nested dicts/lists of JSON values) differ: floats by more
    than ``rel`` relative (or ``abs_`` absolute), anything else at all. Returns ``["path: got vs want"]``."""
    if isinstance(want, bool) or isinstance(got, bool) or want is None or got is None or isinstance(want, str):
        return [] if got == want else [f"{path or '.'}: {got!r} vs {want!r}"]
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        if isinstance(want, int) and isinstance(got, int):
            return [] if got == want else [f"{path}: {got} vs {want}"]
        ok = math.isclose(float(got), float(want), rel_tol=rel, abs_tol=abs_)
        return [] if ok else [f"{path}: {got!r} vs {want!r}"]
    if isinstance(want, dict) and isinstance(got, dict):
        if set(got) != set(want):
            return [f"{path or '.'}: keys {sorted(set(got) ^ set(want))} differ"]
        return [m for k in want for m in refit_mismatches(got[k], want[k], rel=rel, abs_=abs_, path=f"{path}.{k}")]
    if isinstance(want, (list, tuple)) and isinstance(got, (list, tuple)):
        if len(got) != len(want):
            return [f"{path}: {len(got)} items vs {len(want)}"]
        return [m for i, (g, w) in enumerate(zip(got, want))
                for m in refit_mismatches(g, w, rel=rel, abs_=abs_, path=f"{path}[{i}]")]
    return [f"{path or '.'}: {type(got).__name__} vs {type(want).__name__}"]


def assert_refit_close(got: Any, want: Any, *, rel: float = REFIT_REL, abs_: float = REFIT_ABS) -> None:
    """Fails with every mismatch listed (see :func:`refit_mismatches`)."""
    bad = refit_mismatches(got, want, rel=rel, abs_=abs_)
    assert not bad, "refit differs beyond the stated tolerance:\n" + "\n".join(bad[:20])
