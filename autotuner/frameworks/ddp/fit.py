"""A DDP environment's cost model from its own sweep (:mod:`autotuner.frameworks.ddp.sweepprobe` records): the
shared :class:`~autotuner.model.costmodel.CostModel`, fitted with the shared fitters, so the Reducer simulator
prices each bucket by what ``torch.distributed``'s allreduce measured on this cluster.

- The ring tier: :func:`autotuner.fit.fitters.fit_collective_tier` on every size's median allreduce time (float32),
  pooled over the sweep's jobs (the same alpha-beta line, split at a knee where the samples allow).
- The copy into a bucket (``at::mul_out``, one pass): bytes per second from a least-squares line through the
  copies of 1 MiB and more (``memcpy_Bps``; the cost model's ``memcpy_s`` is two passes, in and out).
- fp16 / bf16 hooks: :func:`autotuner.fit.sweep.fp16_cost` (Gloo's pipelined ring: the float16 sum's exposed part)
  on the float16 sweep's sizes of 1 MiB and more against float32's of the same bytes, and the hook's casts.

Pure: records in, model out. Raises FitError (one line) for records that cannot give a line.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import FitError
from ...model.costmodel import Cluster, CostModel, Fp16Cost, Negotiation

MIB = 1 << 20


def _medians(recs, key):
    by: dict[int, list[float]] = {}
    for r in recs:
        for b, samples in zip(r["sizes"], r[key]):
            if samples:
                by.setdefault(int(b), []).append(float(np.median(samples)))
    return by


def cost_model_from_sweep(recs: list[dict[str, Any]], *, link_gbps: float, cluster: Cluster) -> tuple[CostModel, dict]:
    """(cost model, fit info) of a DDP env from its sweep records (one per job). ``link_gbps``: the nominal link
    rate the sweep ran at (Gbit/s, for what-ifs); ``cluster``: the sweep's shape (its ranks are the ring's p).
    Raises FitError for no records or fewer than 2 sizes."""
    from ...fit.fitters import fit_collective_tier
    from ...fit.sweep import fp16_cost

    if not recs:
        raise FitError("no DDP sweep records (runs/<env>/ddp-sweep.jsonl)")
    p = int(recs[0]["ranks"])
    by = _medians(recs, "fp32_ms")
    if len(by) < 2:
        raise FitError(f"a DDP sweep needs at least 2 sizes, got {len(by)}")
    sizes = np.array(sorted(by), dtype=float)
    counts = np.array([len(by[int(b)]) for b in sizes], dtype=float)
    times = np.array([np.mean(by[int(b)]) for b in sizes]) * 1e-3
    tier, lin, pred, piece = fit_collective_tier(sizes, counts, times, p)
    copies = [(b, ms * 1e-3) for r in recs for b, ms in r.get("copy", []) if b >= MIB]
    if len(copies) >= 2:
        x = np.array([c[0] for c in copies], float)
        y = np.array([c[1] for c in copies], float)
        slope = float(np.linalg.lstsq(np.vstack([x, np.ones_like(x)]).T, y, rcond=None)[0][0])
        copy_Bps = 1.0 / slope if slope > 0 else 400e9
    else:
        copy_Bps = 400e9
    f16 = _medians(recs, "fp16_ms")
    pseudo = [{"ranks": p, "sizes": [b for b in sorted(by) if b >= MIB and b in f16],
               "fp32_ms": [float(np.mean(by[b])) for b in sorted(by) if b >= MIB and b in f16],
               "fp16_ms": [float(np.mean(f16[b])) for b in sorted(by) if b >= MIB and b in f16],
               "casts": [c for r in recs for c in r.get("casts", [])]}]
    fp = fp16_cost(pseudo) if pseudo[0]["sizes"] and pseudo[0]["casts"] else {"sum_extra_ns_per_elem": None}
    fp16 = None
    if fp.get("sum_extra_ns_per_elem") is not None:
        fp16 = Fp16Cost(fp["sum_extra_ns_per_elem"] * 1e-9, fp["cast_up_ns_per_elem"] * 1e-9,
                        fp["cast_up_us_per_tensor"] * 1e-6, fp["cast_down_ns_per_elem"] * 1e-9,
                        fp["cast_down_us_per_tensor"] * 1e-6, fp["segment_bytes"], None,
                        "measured: the DDP sweep's float16 allreduces and the hook's casts")
    cost = CostModel(inter=tier, intra=None if cluster.nodes > 1 else tier, link_gbps=link_gbps, memcpy_Bps=copy_Bps,
                     negotiation=Negotiation(), fp16=fp16)
    info = {"ranks": p, "sizes": [int(b) for b in sizes], "measured_ms": [round(t * 1e3, 4) for t in times],
            "predicted_ms": [round(float(q) * 1e3, 4) for q in pred], "alpha_us": lin.a_s * 1e6,
            "busbw_gbps": (2 * (p - 1) / p) / lin.b_s_per_byte * 8 / 1e9 if lin.b_s_per_byte > 0 else None,
            "piecewise": piece, "copy_GBps": copy_Bps / 1e9, "fp16": fp}
    return cost, info
