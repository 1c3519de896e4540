"""A DDP environment's cost model from its own sweep (:mod:`autotuner.frameworks.ddp.sweepprobe` records): the
shared :class:`~autotuner.model.costmodel.CostModel`, fitted with the shared fitters, so the Reducer simulator
prices each bucket by what ``torch.distributed``'s allreduce measured on this cluster.

- The ring tier: :func:`autotuner.fit.collective.fit_collective_tier` on every size's median allreduce time (float32),
  pooled over the sweep's jobs (the same alpha-beta line, split at a knee where the samples allow).
- The copy into a bucket (``at::mul_out``, one pass): bytes per second from a least-squares line through the
  copies of 1 MiB and more (``memcpy_Bps``; the cost model's ``memcpy_s`` is two passes, in and out).
- fp16 / bf16 hooks: :func:`autotuner.fit.collective.fp16_cost` (Gloo's pipelined ring: the float16 sum's exposed part)
  on the float16 sweep's sizes of 1 MiB and more against float32's of the same bytes, and the hook's casts.
- A bucket queued behind another (:func:`queued_saving`): what the burst phase (:mod:`.burstprobe`) measured an
  allreduce launched back to back to save against a lone one, in the same job.
- The first-touch phase (:func:`first_touch`, :mod:`.firsttouchprobe`): what a CPU rank pays per byte when its fresh
  gradients are held to the step's end; reported beside the model, not in it.
- The cpu phase (:func:`cpu_share`, :mod:`.cpuprobe`): the CPU a collective in flight takes from a rank's compute,
  per collective and per byte, where the ranks' compute fills the cores (``CostModel.collective_cpu``).
- The host phase (:func:`host_cost`, :mod:`.hostprobe`): the Reducer's own host work per gradient and per bucket
  (:class:`~.hostcost.ReducerHostCost`), beside the cost model.

Pure: records in, model out. Raises FitError (one line) for records that cannot give a line.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import FitError
from ...model.costmodel import Cluster, CollectiveCpu, CostModel, Fp16Cost, Negotiation
from ...model.units import MIB


def _medians(recs, key):
    by: dict[int, list[float]] = {}
    for r in recs:
        for b, samples in zip(r["sizes"], r[key]):
            if samples:
                by.setdefault(int(b), []).append(float(np.median(samples)))
    return by


def queued_saving(burst: list[dict[str, Any]], tier, p: int) -> dict[str, Any]:
    """What an allreduce launched while the previous one runs saves against a lone one, from the burst phase's
    records (:mod:`.burstprobe`, one per job): per job and size, the median lone call less the median per-call time
    of the back-to-back rounds (ms, same job, interleaved, so the testbed's drift between jobs cancels); the saving is
    the median of those differences, clipped to ``[0, 2 (p - 1) alpha]`` (a queued call can save at most the ring's
    latency term; ``alpha`` the fitted ``tier``'s, ``p`` its ranks). Returns ``{"saving_us", "points"
    ([bytes, lone ms, back-to-back ms] each), "jobs", "clipped", "note"}``; ``saving_us`` 0 with a note for no
    records."""
    pts = []
    for r in burst:
        for b, lone, bb in zip(r["sizes"], r["lone_ms"], r["burst_ms"]):
            if lone and bb:
                pts.append([int(b), float(np.median(lone)), float(np.median(bb))])
    if not pts:
        return {"saving_us": 0.0, "points": [], "jobs": 0, "clipped": False,
                "note": "no burst phase measured (autotuner ddp measure --burst-rounds): a queued bucket is priced "
                        "as a lone allreduce"}
    raw = float(np.median([lo - bb for _, lo, bb in pts])) * 1e3
    cap = 2 * (p - 1) * tier.alpha_s * 1e6
    saving = min(max(raw, 0.0), cap)
    return {"saving_us": saving, "raw_us": raw, "cap_us": cap, "points": pts, "jobs": len(burst),
            "clipped": saving != raw, "note": ""}


def first_touch(recs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What re-faulting fresh gradients held to the step's end costs a CPU rank, from the first-touch phase's
    records (:mod:`.firsttouchprobe`, one per job; rank 0's rows, every rank writing at once): the median held step
    less the median dropped step, per byte of gradients. Returns ``{"refault_s_per_byte", "held_ms",
    "dropped_ms", "faults_held", "bytes", "model", "ranks", "jobs", "malloc_env"}``, or None for no records. Not
    part of the cost model: the simulator prices no page fault (docs/explanation/ddp-simulator.md, "An uncontended machine")."""
    if not recs:
        return None
    rows = [r for rec in recs for r in rec["rows"]]
    held = float(np.median([r["write_ms"] for r in rows if r["mode"] == "held"]))
    dropped = float(np.median([r["write_ms"] for r in rows if r["mode"] == "dropped"]))
    nbytes = int(recs[0]["bytes"])
    return {"refault_s_per_byte": max(0.0, held - dropped) * 1e-3 / nbytes, "held_ms": held, "dropped_ms": dropped,
            "faults_held": int(np.median([r["minor_faults"] for r in rows if r["mode"] == "held"])),
            "bytes": nbytes, "model": recs[0]["model"], "ranks": int(recs[0]["ranks"]), "jobs": len(recs),
            "malloc_env": recs[0].get("malloc_env") or {}}


def cpu_share(recs: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The CPU a collective in flight takes from a rank's compute, from the cpu phase's records (:mod:`.cpuprobe`,
    one per job; rank 0's rows, every rank computing and allreducing at once).

    Per row (round and stream size): the compute's lost share ``f = 1 - unit_alone / unit_beside`` (processor
    sharing: beside the stream a unit ran at ``1 - f`` of its speed; 0 where it ran no slower), the mean over the
    ranks that ran units beside the stream (``by_rank``; rank 0 alone in jobs without it), so each collective of the
    stream, lasting ``allreduce_beside`` (the ranks' mean), took ``f x allreduce_beside`` of CPU from the compute. Over the rows,
    ``cpu = per_collective + per_byte x bytes`` by non-negative least squares (``scipy.optimize.nnls``): the
    :class:`~autotuner.model.costmodel.CollectiveCpu`. The collectives' own slowdown beside the compute
    (``allreduce_beside / allreduce_alone``, median) is reported, not charged. Returns ``{"per_collective_us",
    "per_byte_ns", "points" ([bytes, f, cpu ms, allreduce ms alone, beside] per row), "slowdown", "cores_per_host",
    "ranks", "jobs", "unit"}``, or None for no rows with units beside the stream."""
    from scipy.optimize import nnls

    pts = []
    for rec in recs:
        for r in rec["rows"]:
            ranks = [x for x in (r.get("by_rank") or []) if x[1]] or (
                [[r["unit_ms_alone"], r["unit_ms_beside"], r["allreduce_ms_alone"], r["allreduce_ms_beside"]]]
                if r.get("unit_ms_beside") else [])
            if not ranks:
                continue
            f = float(np.mean([max(0.0, 1.0 - float(ua) / float(ub)) for ua, ub, _, _ in ranks]))
            alone = float(np.mean([float(x[2]) for x in ranks]))
            beside = float(np.mean([float(x[3]) for x in ranks]))
            pts.append([int(r["bytes"]), f, f * beside, alone, beside])
    if not pts:
        return None
    a = np.array([[1.0, b] for b, *_ in pts])
    (per_coll_ms, per_byte_ms), _ = nnls(a, np.array([p[2] for p in pts]))
    return {"per_collective_us": float(per_coll_ms) * 1e3, "per_byte_ns": float(per_byte_ms) * 1e6, "points": pts,
            "slowdown": float(np.median([b / a for *_, a, b in pts])),
            "cores_per_host": int(recs[0]["cores_per_host"]), "ranks": int(recs[0]["ranks"]), "jobs": len(recs),
            "unit": recs[0].get("unit", "")}


def copy_rate(recs: list[dict[str, Any]]) -> float:
    """The bucket copy's rate (bytes/s) from a sweep's copies (``at::mul_out`` into a bucket, one pass): the inverse
    slope of a least-squares line through the copies of 1 MiB and more, over every record; 400e9 where fewer than
    2 such copies were measured or the slope is not positive."""
    copies = [(b, ms * 1e-3) for r in recs for b, ms in r.get("copy", []) if b >= MIB]
    if len(copies) < 2:
        return 400e9
    x = np.array([c[0] for c in copies], float)
    y = np.array([c[1] for c in copies], float)
    slope = float(np.linalg.lstsq(np.vstack([x, np.ones_like(x)]).T, y, rcond=None)[0][0])
    return 1.0 / slope if slope > 0 else 400e9


def cost_model_from_sweep(recs: list[dict[str, Any]], *, link_gbps: float, cluster: Cluster,
                          burst: list[dict[str, Any]] | None = None,
                          cpu: list[dict[str, Any]] | None = None) -> tuple[CostModel, dict]:
    """(cost model, fit info) of a DDP env from its sweep records (one per job). ``link_gbps``: the nominal link
    rate the sweep ran at (Gbit/s, for what-ifs); ``cluster``: the sweep's shape (its ranks are the ring's p);
    ``burst``: the env's burst-phase records (:func:`queued_saving`), None or empty: a queued bucket costs a lone
    allreduce; ``cpu``: its cpu-phase records (:func:`cpu_share`), None or empty: no collective takes CPU from the
    compute. Raises FitError for no records or fewer than 2 sizes."""
    from ...fit.collective import fit_collective_tier
    from ...fit.collective import fp16_cost

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
    copy_Bps = copy_rate(recs)
    f16 = _medians(recs, "fp16_ms")
    pseudo = [{"ranks": p, "sizes": [b for b in sorted(by) if b >= MIB and b in f16],
               "fp32_ms": [float(np.mean(by[b])) for b in sorted(by) if b >= MIB and b in f16],
               "fp16_ms": [float(np.mean(f16[b])) for b in sorted(by) if b >= MIB and b in f16],
               "casts": [c for r in recs for c in r.get("casts", [])]}]
    fp = fp16_cost(pseudo) if pseudo[0]["sizes"] and pseudo[0]["casts"] else {"sum_extra_ns_per_elem": None}
    fp16 = Fp16Cost.from_fit(fp, "measured: the DDP sweep's float16 allreduces and the hook's casts")
    queued = queued_saving(burst or [], tier, p)
    share = cpu_share(cpu or [])
    cost = CostModel(inter=tier, intra=None if cluster.nodes > 1 else tier, link_gbps=link_gbps, memcpy_Bps=copy_Bps,
                     negotiation=Negotiation(), fp16=fp16, queued_saving_s=queued["saving_us"] * 1e-6,
                     collective_cpu=None if share is None else CollectiveCpu(share["per_collective_us"] * 1e-6,
                                                                              share["per_byte_ns"] * 1e-9))
    info = {"ranks": p, "sizes": [int(b) for b in sizes], "measured_ms": [round(t * 1e3, 4) for t in times],
            "predicted_ms": [round(float(q) * 1e3, 4) for q in pred], "alpha_us": lin.a_s * 1e6,
            "busbw_gbps": (2 * (p - 1) / p) / lin.b_s_per_byte * 8 / 1e9 if lin.b_s_per_byte > 0 else None,
            "piecewise": piece, "copy_GBps": copy_Bps / 1e9, "fp16": fp, "queued": queued,
            "cpu": share}
    return cost, info


def host_cost(recs: list[dict[str, Any]], copy_Bps: float) -> dict[str, Any] | None:
    """The Reducer's host work per gradient and per bucket, from the host phase's records (:mod:`.hostprobe`, one
    per job; every rank's median step per round, T and setting, all ranks at once, no wire).

    Per round, T and DDP setting: what DDP added, ``d`` = the setting's step less the plain step of the same round and
    T (each the mean over the ranks, ms), less the modelled copies (each gradient copied into its bucket and back,
    ``2 x T x tensor_bytes / copy_Bps``: the probe runs without the view). Over those points, by non-negative least
    squares (``scipy.optimize.nnls``), ``d = T x per_tensor + B x per_bucket + per_step`` (``B``: DDP's rebuilt bucket
    count the probe read; ``per_step``: DDP's forward wrapper and the last one-rank collective's latency, which the
    sweep's allreduce already holds: reported, not charged). The figures are the fit on each setting's median over
    the rounds; their range the lowest and highest of the same fit on each round alone. ``copy_Bps``: the env's copy
    rate (bytes/s, one pass). Returns ``{"per_tensor_us", "per_bucket_us", "per_step_us", "per_tensor_range_us",
    "per_bucket_range_us", "points" ([T, B, d ms, rounds] per setting, d the median), "plain_between_us" (autograd's
    own work per gradient, the plain module's median time between stages / T), "ranks", "jobs", "rounds", "device",
    "tensor_bytes"}``, or None for no DDP row with a plain one beside it."""
    from scipy.optimize import nnls

    by_round: dict[tuple, list[tuple[int, int, float]]] = {}
    plain_between = []
    for j, rec in enumerate(recs):
        tb = int(rec["tensor_bytes"])
        plain = {(r["round"], r["tensors"]): r for r in rec["rows"] if r["mode"] == "plain"}
        for (_, T), r in plain.items():
            plain_between.append(float(np.mean(r["between_ms"])) * 1e3 / T)
        for r in rec["rows"]:
            base = plain.get((r["round"], r["tensors"]))
            if r["mode"] != "ddp" or base is None or not r.get("buckets"):
                continue
            T = int(r["tensors"])
            d = float(np.mean(r["step_ms"]) - np.mean(base["step_ms"])) - 2 * T * tb / copy_Bps * 1e3
            by_round.setdefault((j, r["round"]), []).append((T, int(r["buckets"]), d))
    if not by_round:
        return None

    def fit(pts) -> np.ndarray:
        a = np.array([[float(T), float(B), 1.0] for T, B, _ in pts])
        return nnls(a, np.array([d for *_, d in pts]))[0]

    per_setting: dict[tuple[int, int], list[float]] = {}
    for pts in by_round.values():
        for T, B, d in pts:
            per_setting.setdefault((T, B), []).append(d)
    points = [[T, B, float(np.median(ds)), len(ds)] for (T, B), ds in sorted(per_setting.items())]
    pt, pb, ps = fit([(T, B, d) for T, B, d, _ in points])
    rounds = [fit(pts) for pts in by_round.values() if len({(T, B) for T, B, _ in pts}) >= 3]
    pt, pb, ps = float(pt) * 1e3, float(pb) * 1e3, float(ps) * 1e3  # us
    rt = [float(min(r[0] for r in rounds)) * 1e3, float(max(r[0] for r in rounds)) * 1e3] if rounds else None
    rb = [float(min(r[1] for r in rounds)) * 1e3, float(max(r[1] for r in rounds)) * 1e3] if rounds else None
    return {"per_tensor_us": pt, "per_bucket_us": pb, "per_step_us": ps,
            "per_tensor_range_us": None if rt is None else [min(rt[0], pt), max(rt[1], pt)],
            "per_bucket_range_us": None if rb is None else [min(rb[0], pb), max(rb[1], pb)],
            "points": points, "plain_between_us": float(np.median(plain_between)) if plain_between else None,
            "ranks": int(recs[0]["ranks"]), "jobs": len(recs), "rounds": len(by_round),
            "device": recs[0].get("device", "cpu"), "tensor_bytes": int(recs[0]["tensor_bytes"])}


def host_cost_term(fit: dict[str, Any] | None):
    """The :class:`~.hostcost.ReducerHostCost` of :func:`host_cost`'s answer (seconds; its ranges beside it), or
    None for None."""
    from .hostcost import ReducerHostCost

    if fit is None:
        return None

    def s(r):
        return None if r is None else (r[0] * 1e-6, r[1] * 1e-6)
    return ReducerHostCost(fit["per_tensor_us"] * 1e-6, fit["per_bucket_us"] * 1e-6,
                           f"measured: the env's host phase ({fit['jobs']} job(s), {fit['rounds']} round(s), "
                           f"{fit['ranks']} rank(s) at once, no wire)", s(fit["per_tensor_range_us"]),
                           s(fit["per_bucket_range_us"]))
