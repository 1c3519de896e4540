"""The fused phase: the fusion buffer's copies by the wall clock (fused against lone responses), and the tier helpers the phases share.

Part of the sweep fit (:func:`autotuner.frameworks.horovod.fit.sweep.fit_sweep_env`).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..knobs import MIB
from ....model.costmodel import GBIT, Cluster
from .fitters import fit_collective_tier


FUSED_RECORDS = "fused.jsonl"
#: fewest jobs and sizes of the fused phase for its copy rate to be charged
MIN_FUSED_JOBS, MIN_FUSED_SIZES = 3, 2


def fused_copy(recs: list[dict[str, Any]], host) -> dict[str, Any]:
    """The fusion buffer's copies by the wall clock, from the ``fused`` phase (:class:`autotuner.schemas.FusedRecord`,
    no timeline), in place of the copy rate the sweep's timelines give (``host``, the fitted
    :class:`autotuner.model.costmodel.HostPasses`, or None).

    The simulator charges a fused response of ``S`` bytes what a lone one of ``S`` costs (the tier's line, the gap
    after it) plus ``HostPasses.memcpy_s(S)``: MEMCPY_IN_FUSION_BUFFER and MEMCPY_OUT_FUSION_BUFFER (Horovod 0.28.1
    ``horovod/common/ops/collective_operations.cc`` ``MemcpyInFusionBuffer``/``MemcpyOutFusionBuffer``; a lone
    tensor is reduced in place: ``gloo_operations.cc`` ``GlooAllreduce::Execute``). Each job's point per size:
    ``x(S) = (T_fused(S) - 2 T_lone(S)) / 2`` (ms; medians of the job's samples; the fused item is two responses of
    ``S`` back to back, the lone item one per call). ``x = c + k S`` by least squares over every (job, size) point
    (``scipy.stats.linregress``): ``k`` (ms per MiB) the copies' price per byte, ``c`` what the two fused responses'
    shared cycle (one wait and one negotiation for two) and the rest take per response, not a copy.

    Returns the model file's ``fit.host_passes.fused``: ``points`` (``[bytes, job, x ms]``), ``sizes`` (per size
    ``[bytes, jobs, min, median, max, timelines' memcpy ms]``), ``ms_per_mib`` (``k``), ``ms_per_mib_se`` (its
    standard error), ``fixed_ms`` (``c``), ``timelines_ms_per_mib`` (the timelines' rate below and above their knee)
    and ``charged``: True with at least :data:`MIN_FUSED_JOBS` jobs of :data:`MIN_FUSED_SIZES` sizes, host passes
    fitted, ``k - 2 se > 0`` (the points pin a copy price: on fresh-2x1-5gbit, whose ranks spin on 2 cores, a
    lone 32 MiB allreduce measured 76-236 ms and the points scatter over -72..+51 ms) and ``|k - t| > 2 se``, ``t``
    the timelines' copies at the phase's sizes as one rate (``timelines_ms_per_mib_at_sizes``, least squares
    through the origin): the phase resolves a difference, and ``k < t``: only a lower rate is charged, the timeline
    writer's cost out of spans it ran beside; a higher one is recorded (charged, it turned the order of fresh-poll-2gbit's
    committed replays over: Kendall tau 1.00 -> 0.70; research/notes/accuracy.md, "Fused responses without the
    timeline"). Then ``memcpy_s_per_byte = k``, no spill above the
    knee. Else False with a ``note``."""
    from scipy.stats import linregress

    out: dict[str, Any] = {"jobs": len(recs), "charged": False, "ms_per_mib": None, "ms_per_mib_se": None,
                           "fixed_ms": None, "law": "x(S) = (T_fused(S) - 2 T_lone(S)) / 2 = c + k S, no timeline"}
    if host is not None:
        out["timelines_ms_per_mib"] = [host.memcpy_s_per_byte * MIB * 1e3,
                                       (host.memcpy_s_per_byte + host.memcpy_spill_s_per_byte) * MIB * 1e3]
    pts = [[int(b), j, (float(np.median(f)) - 2 * float(np.median(lo))) / 2]
           for j, r in enumerate(recs) for b, lo, f in zip(r["sizes"], r["lone_ms"], r["fused_ms"])]
    out["points"] = [[b, j, round(x, 4)] for b, j, x in pts]
    sizes = sorted({b for b, _, _ in pts})
    out["sizes"] = [[b, len(xs), min(xs), float(np.median(xs)), max(xs),
                     None if host is None else host.memcpy_s(b) * 1e3]
                    for b in sizes for xs in [[x for bb, _, x in pts if bb == b]]]
    if not recs:
        out["note"] = "no fused phase (measure --fused-rounds): the timelines' copy rate is charged"
        return out
    if len(recs) < MIN_FUSED_JOBS or len(sizes) < MIN_FUSED_SIZES:
        out["note"] = (f"{len(recs)} job(s) of {len(sizes)} size(s), fewer than {MIN_FUSED_JOBS} jobs of "
                       f"{MIN_FUSED_SIZES} sizes: the timelines' copy rate is charged")
        return out
    fit = linregress([b / MIB for b, _, _ in pts], [x for _, _, x in pts])
    se = 0.0 if not np.isfinite(fit.stderr) else float(fit.stderr)
    out["fixed_ms"], out["ms_per_mib"], out["ms_per_mib_se"] = float(fit.intercept), float(fit.slope), se
    if fit.slope - 2 * se <= 0:
        out["note"] = (f"the points do not pin a copy price ({fit.slope:+.2f} +/- {2 * se:.2f} ms per MiB, two "
                       "standard errors, includes 0): the timelines' copy rate is charged")
        return out
    if host is None:
        out["note"] = "recorded, not charged: no host passes fitted from the timelines to correct"
        return out
    # what the timelines charge at the phase's sizes, as one rate (least squares through the origin)
    sz = np.asarray(sizes, float)
    t_eff = float(np.sum(np.asarray(host.memcpy_s(sz)) * 1e3 * sz / MIB) / np.sum((sz / MIB) ** 2))
    out["timelines_ms_per_mib_at_sizes"] = t_eff
    if abs(fit.slope - t_eff) <= 2 * se:
        out["note"] = (f"the phase agrees with the timelines' copies at its sizes ({fit.slope:.2f} +/- {2 * se:.2f} "
                       f"ms per MiB against {t_eff:.2f}): the timelines' copy rate is charged")
        return out
    if fit.slope > t_eff:
        out["note"] = (f"the phase prices the copies above the timelines' ({fit.slope:.2f} +/- {2 * se:.2f} ms per "
                       f"MiB against {t_eff:.2f}): recorded; only a lower rate (the timeline writer's cost out of "
                       "spans it ran beside) is charged, the timelines' copy rate stands")
        return out
    out["charged"] = True
    return out


def _on_cluster_ranks(info: dict[str, Any], ranks: int, tier: str, cluster: Cluster) -> dict[str, Any]:
    """``info`` (a phase rule's result: :func:`mid_response`, :func:`mid_bandwidth`, :func:`fused_copy`) with its
    charge withdrawn, and a note saying why, where the phase ran ``ranks`` ranks of ``tier`` and the cluster has more
    or fewer."""
    if info["charged"] and ranks != cluster.size:
        info["charged"] = False
        info["note"] = (f"measured, not charged: the phase ran {ranks} rank(s) of the {tier} tier, the cluster has "
                        f"{cluster.size}")
    return info


def bound_below_knee(tier, link_gbps: float, piece_info: dict[str, Any] | None):
    """The tier's line below its knee, no cheaper per byte than the same tier's segment from the knee
    (``large_bandwidth_Bps``): where the sweep's pooled spans below the knee give a higher bus bandwidth than the
    segment from it, the line below the knee borrows that segment's per-byte cost and keeps its fixed part (the step
    phase solves the small responses' price on the tier afterwards; research/notes/accuracy.md, "The below-knee slope the sweep
    cannot identify").

    Why: the sweep times each small allreduce alone, after an idle link. A link in a step's busy cycle carries a
    queued response's bytes at its sustained rate, the rate of the segment from the knee. Two measurements say so:
    - on an emulated link (HTB, ``tc -d class show``: a burst of 1125 bytes at 3 Gbit/s, with 64 KiB skbs on lo),
      the first packet after idle goes out at once and the ones behind it pay the rate, so a lone allreduce under the
      knee pays little per byte;
    - on the one-host envs the mid-size burst phase's 256 KiB responses queued back to back, less the burst phase's
      small ones, cost per byte within 25 % of what the segment from the knee charges, where the line below it can
      charge half (fresh-poll-3gbit 4.66 against 5.97 ms per MiB, its line below 3.06; fresh-poll-1.25gbit 13.76
      against 13.63, below 7.75; ``research/scripts/burst_midsize.py --report``).
    Both cases borrow: a slope above the link's line rate ``link_gbps`` (Gbit/s, env.toml's; fresh-poll-2gbit 610132,
    fresh-poll-2.75gbit 51897 Gbit/s) and one under the link but above what the link carries back to back
    (fresh-poll-3gbit's 2.74 Gbit/s against its segment's 1.41: kept, it mispredicted the 1 MiB responses).

    Records ``piece_info["small"]["per_byte_borrowed"]`` where it borrows: ``fitted_busbw_gbps`` (the slope below the
    knee as fitted), ``link_gbps``, ``busbw_gbps`` (the segment's, borrowed), ``why`` (``"above the link"`` or
    ``"cheaper than the segment from the knee"``). Returns the tier (``tier`` itself where the slope is no cheaper,
    or the tier has no knee)."""
    if (piece_info is None or not tier.large_from_bytes or not tier.large_bandwidth_Bps
            or tier.bandwidth_Bps <= tier.large_bandwidth_Bps):
        return tier
    piece_info["small"]["per_byte_borrowed"] = {
        "fitted_busbw_gbps": tier.bandwidth_Bps / GBIT, "link_gbps": link_gbps,
        "busbw_gbps": tier.large_bandwidth_Bps / GBIT,
        "why": "above the link" if tier.bandwidth_Bps > link_gbps * GBIT else "cheaper than the segment from the knee"}
    return replace(tier, bandwidth_Bps=tier.large_bandwidth_Bps)


def _tier(by_size: dict[int, list[float]], p: int):
    """The ring tier of one tier's pooled (bytes -> durations in s) samples on ``p`` ranks:
    :func:`autotuner.fit.collective.fit_collective_tier` on (size, count, mean duration)."""
    sizes = np.array(sorted(by_size), dtype=float)
    counts = np.array([len(by_size[int(n)]) for n in sizes], dtype=float)
    times = np.array([np.mean(by_size[int(n)]) for n in sizes])
    tier, lin, pred, piece = fit_collective_tier(sizes, counts, times, p)
    return tier, lin, pred, piece, sizes, counts, times


def _per_tensor(recs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-tensor negotiation cost from the negotiation phase (see the module docstring), from the
    records of one tier (a two-tier sweep measures it on each; the caller picks the fitted one)."""
    by = {}
    for r in recs:
        if r.get("phase") == "negotiation":
            by.setdefault(bool(r.get("cache")), {})[int(r["tensors"])] = float(r["mean_ms"])
    on, off = by.get(True, {}), by.get(False, {})
    ks = sorted(set(on) & set(off))
    info: dict[str, Any] = {"tensors": ks, "cache_on_mean_ms": [on[k] for k in ks],
                            "cache_off_mean_ms": [off[k] for k in ks], "per_tensor_us": None}
    if len(ks) < 2:
        info["note"] = "no cache-on/off pair of batches: per-tensor cost not measured (simulator default kept)"
        return info
    diff = np.array([off[k] - on[k] for k in ks]) * 1e-3
    ranks = max(int(r.get("ranks", 2)) for r in recs)
    slope = float(np.polyfit(np.array(ks, float), diff, 1)[0])
    if slope <= 0:
        info["note"] = (f"cache-off minus cache-on batch time does not grow with the tensor count (slope "
                        f"{slope * 1e6:.2f} µs/tensor): per-tensor cost not identifiable (simulator default kept)")
        return info
    info["per_tensor_us"] = slope / ranks * 1e6  # Negotiation charges per_tensor_s · n · p
    info["note"] = f"slope of (cache off - cache on) mean batch time per tensor, / {ranks} ranks"
    return info


#: the cpu phase's records, beside ``source`` (:data:`autotuner.frameworks.horovod.measure.CPU_RECORDS`; not
#: imported: the fit does not load the real-run package)
