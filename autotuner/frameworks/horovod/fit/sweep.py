"""Fit an environment measured by ``autotuner measure`` (env.toml ``format = "sweep"``).

The sweep (:mod:`autotuner.frameworks.horovod.sweepprobe`, driven by :mod:`autotuner.frameworks.horovod.measure`) leaves
``source`` (one JSON line per measured item: wall-time samples per message size) and the raw
timeline of every horovodrun job it ran (``timelines/<part>.json.gz`` beside ``source``). The
fit takes from those timelines what :func:`autotuner.frameworks.horovod.fit.fitters.fit_validation_env` takes from
training timelines, so the two kinds of environment give models of one form:

- the collective: every allreduce response of every kept timeline (GLOO_ALLREDUCE / MPI_* /
  NCCL_* span versus response bytes), pooled by size (count, mean duration), fitted by
  :func:`autotuner.fit.collective.fit_collective_tier` (alpha-beta ring tier, two segments where
  the samples allow);
- the fusion-buffer copies and the host time between responses: the fusion phase's fused
  responses (MEMCPY_IN + MEMCPY_OUT per response) and the back-to-back pairs of one cycle
  (the fusion phase's two dtypes, and the unfused phase's tensors)
  (:func:`autotuner.readers.timeline_steps.response_host_samples`), fitted by
  :func:`autotuner.fit.regression.fit_host_passes`, whose fixed gap is also the per-cycle
  negotiation cost (as in the validation fit); the copies' price per byte from measure's ``fused`` phase instead
  (fused against lone responses by the wall clock, no timeline: :func:`fused_copy`) where it finds the timelines'
  rate too dear;
- the per-tensor coordinator cost of a cycle without the response cache
  (:class:`autotuner.model.costmodel.Negotiation` ``per_tensor_s``): the slope, in tensors per
  batch, of the negotiation phase's mean batch time with the cache off minus with it on
  (both measured in the same sweep; controller.cc ``ComputeResponseList``: without the cache
  every tensor's request is gathered, checked and broadcast each cycle). Where that slope is
  not positive the simulator's default stays and ``fit.negotiation`` says so.

No model is trained in a sweep, so the fitted environment has no workloads: ``simulate``,
``suggest`` and the others take ``--compute-ms`` (or a profiled layout) for it.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ....errors import AutotunerError, FitError, RunsError
from ..knobs import MIB
from ....model.costmodel import GBIT, Cluster, ComputeDelay, Fp16Cost
from ....readers.files import read_toml
from ....readers.runs import EnvData
from ....readers.sweep import (parse_burst_records, parse_cpu_records, parse_fp16_records, parse_fused_records,
                             parse_idle_records,
                             parse_step_records,
                             parse_trickle_records, read_phase_records, read_sweep_records)
from ....readers.timeline import read_timeline, samples
from ....readers.timeline_steps import response_host_samples
from ....fit.collective import borrow_fp16_sum, fp16_cost
from .fitters import _model_dict, fit_collective_tier, run_config, timeline_cost_model

#: kept timelines of a sweep, relative to the folder of ``source``
TIMELINE_GLOB = "timelines/*.json.gz"


def fit_sweep_env(env: EnvData) -> dict[str, Any]:
    """Fit a ``sweep`` environment (see the module docstring). Returns the model dict (schema
    ``autotuner.model/1``). Raises FitError when no kept timeline has collective samples,
    RunsError for an unreadable record file."""
    meta = env.meta
    cluster = Cluster(int(meta["nodes"]), int(meta["gpus_per_node"]))
    src = env.path / meta["source"]
    recs, problems = read_sweep_records(src, f"{env.path.name}/{meta['source']}")
    env.problems += problems
    tls = sorted((src.parent).glob(TIMELINE_GLOB))
    cycles: dict[tuple[str, bool], list[float]] = {}  # (tier, cache on) -> negotiation per busy cycle (s)
    # per tier (the file name's first word: single | intra | inter), response bytes -> durations (s)
    pooled: dict[str, dict[int, list[float]]] = {}
    mem: list[tuple[int, float]] = []
    gaps: list[tuple[int, int, float, int]] = []
    used = []
    unfused: dict[str, list] = {}  # tier -> its fusion-off job's timelines (back-to-back responses in a busy cycle)
    for f in tls:
        rel = f.relative_to(env.path)
        try:
            tl = read_timeline(f)
        except AutotunerError as e:
            env.problems.append(f"{env.path.name}/{rel}: dropped ({e})")
            continue
        env.problems += [f"{env.path.name}/{rel}: {p}" for p in tl.problems[:5]]
        df = samples(tl)
        by_size = pooled.setdefault(f.name.split("-", 1)[0], {})
        for n, d in zip(df["nbytes"], df["duration_s"]):
            if d > 0:
                by_size.setdefault(int(n), []).append(float(d))
        tier_name, job = f.name.split("-", 1)[0], f.name.split("-", 1)[1].rsplit("-", 1)[0]
        cycles.setdefault((tier_name, job != "cache-off"), []).extend(cycle_negotiation_s(tl))
        if job == "fusion-off":
            unfused.setdefault(tier_name, []).append(tl)
        hs = response_host_samples(tl)
        mem += hs.memcpy
        gaps += hs.gaps
        used.append(str(rel))
    # one host: the sweep's ranks are the cluster (the inter tier serves intra-node traffic too,
    # as for the validation env); several hosts: the inter tier on one rank per host, the intra
    # tier on the ranks of one host (autotuner.frameworks.horovod.measure.tiers)
    first = "single" if "single" in pooled else "inter"
    ranks = {"single": cluster.size, "inter": cluster.nodes, "intra": cluster.gpus_per_node}
    if len(pooled.get(first, {})) < 2:
        raise FitError(f"{env.name}: fewer than 2 response sizes of the {first} tier in the kept timelines "
                       f"({src.parent.name}/{TIMELINE_GLOB}: {len(tls)} file(s))")
    tier, lin, pred, piece_info, sizes, counts, times = _tier(pooled[first], ranks[first])
    tier = bound_below_knee(tier, float(meta["link_gbps"]), piece_info)
    intra = None
    tiers_info: dict[str, Any] = {}
    if len(pooled.get("intra", {})) >= 2 and first == "inter":
        intra, ilin, _, ipiece, *_ = _tier(pooled["intra"], ranks["intra"])
        tiers_info["intra"] = {"p": ranks["intra"], "a_ms": ilin.a_s * 1e3, "b_ms_per_mib": ilin.b_s_per_byte * MIB * 1e3,
                               "r2": ilin.r2, "piecewise": ipiece}
    m = np.array(mem, float).reshape(-1, 2)
    cost, host_info = timeline_cost_model(tier, intra=intra, link_gbps=float(meta["link_gbps"]), ranks=cluster.size,
                                          memcpy_bytes=m[:, 0].sum(), memcpy_s=m[:, 1].sum(), host_mem=m,
                                          host_gaps=gaps)
    if host_info is None:
        env.problems.append(f"{env.name}: {len(m)} fused response(s) and {len(gaps)} back-to-back pair(s) in the "
                            "kept timelines: host passes not fitted (the fusion phase needs --timeline-mark-cycles)")
    # charged where measured on the cluster's own ranks: the fusion buffer's copies by the wall clock, no timeline,
    # in place of the timelines' copy rate (docs/accuracy.md, "Fused responses without the timeline"); first, so
    # that every term solved after it (the mid-size rules, the step phase) is solved on it
    urecs, uproblems = read_phase_records(src.parent / FUSED_RECORDS, parse_fused_records,
                                          f"{env.path.name}/{FUSED_RECORDS}")
    env.problems += uproblems
    fused_info = _on_cluster_ranks(fused_copy([r for r in urecs if r.get("tier", first) == first], cost.host),
                                   ranks[first], first, cluster)
    if fused_info["charged"]:
        cost = replace(cost, host=replace(cost.host, memcpy_s_per_byte=fused_info["ms_per_mib"] * 1e-3 / MIB,
                                          memcpy_spill_s_per_byte=0.0))
    if host_info is not None:
        host_info["fused"] = fused_info
    neg_info = _per_tensor([r for r in recs if r.get("tier", first) == first])  # the fitted tier's batches only
    if neg_info.get("per_tensor_us") is not None:
        cost = replace(cost, negotiation=replace(cost.negotiation, per_tensor_s=neg_info["per_tensor_us"] * 1e-6))
    cyc_info = _cycle_negotiation(cycles, first)
    if cyc_info.get("cache_on_ms") is not None:
        cost = replace(cost, negotiation=replace(
            cost.negotiation, busy_s=cyc_info["cache_on_ms"] * 1e-3,
            nocache_s=None if cyc_info.get("cache_off_ms") is None else cyc_info["cache_off_ms"] * 1e-3))
    neg_info["per_cycle"] = cyc_info
    crecs, cproblems = read_phase_records(src.parent / CPU_RECORDS, parse_cpu_records, f"{env.path.name}/{CPU_RECORDS}")
    env.problems += cproblems
    cpu_info = cycle_cpu(crecs, cost.negotiation, cluster.size)
    if cpu_info.get("cpu_us") is not None:
        cost = replace(cost, negotiation=replace(cost.negotiation, cpu_s=cpu_info["cpu_us"] * 1e-6))
    delay = stream_delay(crecs, src.parent, env.problems)
    if delay["per_response_us"] is not None:
        cost = replace(cost, compute_delay=ComputeDelay(delay["per_response_us"] * 1e-6, delay["per_byte_ns"] * 1e-9))
    cpu_info["streams"] = delay
    trecs, tproblems = read_phase_records(src.parent / TRICKLE_RECORDS, parse_trickle_records,
                                          f"{env.path.name}/{TRICKLE_RECORDS}")
    env.problems += tproblems
    # measured and recorded, not charged: as a simulator term (the cycle's only response + lone +
    # per_cycle x cycle) it moved the envs' held-out errors by -0.4 to +0.2 points and made two worse
    # (docs/fresh-environments.md section 9)
    trickle_read: dict = {}  # the trickle phase's timelines, parsed once for its two readers below
    neg_info["lone"] = lone_response(trecs, src.parent, env.problems, trickle_read)
    irecs, iproblems = read_phase_records(src.parent / IDLE_RECORDS, parse_idle_records, f"{env.path.name}/{IDLE_RECORDS}")
    env.problems += iproblems
    # measured and recorded, not charged: as a floor on the collective of responses up to 64 KiB while
    # the main thread sleeps it over-charged the poll envs' fusion-off replays (+7.7 to +13.6 %) and made
    # four envs' held-out errors worse (docs/fresh-environments.md section 11)
    idle_info = idle_response(irecs, src.parent, env.problems, ranks[first])
    # what a step's small responses cost: back to back in a busy cycle, from the phases that run them so
    # (the fusion-off job, the trickle phase's all-at-once tensors), in place of the pooled line's
    # intercept (docs/accuracy.md, "The small-response regime")
    small_info = busy_small_response(unfused.get(first, []), [r for r in trecs if r.get("tier", first) == first],
                                     src.parent, env.problems, cost.inter, ranks[first], trickle_read)
    # charged where the phases ran the env's own ring (every rank of the cluster); on a cluster of more ranks
    # than the tier's (2x2: 4 ranks sharing 2 cores) the 2-rank host regime says nothing of it
    small_info["charged"] = small_info["fixed_ms"] is not None and ranks[first] == cluster.size
    brecs, bproblems = read_phase_records(src.parent / BURST_RECORDS, parse_burst_records,
                                          f"{env.path.name}/{BURST_RECORDS}")
    env.problems += bproblems
    # measured and recorded, not charged: the busy regime without the timeline (0.44-1.26 ms per small response on
    # the 12 sweep envs) under-prices a step's small responses on the polling envs, which run partly while the
    # ranks sleep through an emulated backward (docs/accuracy.md, "The burst phase")
    small_info["burst"] = burst_small_response([r for r in brecs if r.get("tier", first) == first], cost, ranks[first])
    # charged where the records resolve it, on the cluster's own ranks: what a queued mid-size response costs by the
    # wall clock against the line above the knee, fitted on timeline spans (docs/accuracy.md, "Mid-size responses
    # back to back"); before the step phase, whose replay's fused responses are priced on that line
    mrecs, mproblems = read_phase_records(src.parent / MID_RECORDS, parse_burst_records,
                                          f"{env.path.name}/{MID_RECORDS}")
    env.problems += mproblems
    mrecs = [r for r in mrecs if r.get("tier", first) == first]
    mid_info = _on_cluster_ranks(mid_response(mrecs, cost, ranks[first]), ranks[first], first, cluster)
    if mid_info["charged"]:
        t = cost.inter
        cost = replace(cost, inter=replace(t, large_alpha_s=max(
            0.0, t.large_alpha_s + mid_info["shift_ms"] * 1e-3 / (2 * (ranks[first] - 1)))))
    small_info["mid"] = mid_info
    # charged where measured on the cluster's own ranks: a step's small responses timed as a step (a replay of many
    # small gradients, defaults against fusion off, no timeline), in place of the timelines' back-to-back price,
    # which carries the timeline writer's CPU (docs/accuracy.md, "The step phase")
    srecs, sproblems = read_phase_records(src.parent / STEP_RECORDS, parse_step_records,
                                          f"{env.path.name}/{STEP_RECORDS}")
    env.problems += sproblems
    step_cluster = cluster if ranks[first] == cluster.size else Cluster(ranks[first], 1)
    srecs = [r for r in srecs if r.get("tier", first) == first]
    step_info = step_small_response(srecs, cost, step_cluster, meta.get("backend"))
    step_info["charged"] = step_info["fixed_ms"] is not None and ranks[first] == cluster.size
    small_info["step"] = step_info
    if step_info["charged"]:
        cost = replace(cost, inter=replace(cost.inter, alpha_s=step_info["alpha_us"] * 1e-6))
        if small_info["charged"]:
            small_info["charged"] = False
            small_info["note"] = "measured, not charged: the step phase's price is (a step's regime, no timeline)"
    elif small_info["charged"]:
        cost = replace(cost, inter=replace(cost.inter, alpha_s=small_info["fixed_ms"] * 1e-3 / (2 * (ranks[first] - 1))))
    elif small_info["fixed_ms"] is not None:
        small_info["note"] = (f"measured, not charged: the phases ran {ranks[first]} rank(s) of the {first} tier, the "
                              f"cluster has {cluster.size}; small responses cost what the sweep line says")
    # charged where the records resolve it, on the cluster's own ranks: the bandwidth of the line below the knee from
    # the same mid-size phase, after the small responses' price is set (its fixed part); the step phase, whose
    # replay's 256 KiB gradients are priced on that line, is then solved again (docs/accuracy.md, "Mid-size
    # responses below the knee")
    below = mid_info["below"] = _on_cluster_ranks(mid_bandwidth(mrecs, cost, ranks[first]), ranks[first], first,
                                                  cluster)
    if below["charged"]:
        cost = replace(cost, inter=replace(cost.inter, bandwidth_Bps=below["bandwidth_gbps"][1] / 8e-9))
        if step_info["charged"]:
            again = step_small_response(srecs, cost, step_cluster, meta.get("backend"))
            below["step_fixed_ms"] = [step_info["fixed_ms"], again["fixed_ms"]]
            if again["fixed_ms"] is not None:
                again["charged"] = True
                small_info["step"] = step_info = again
                cost = replace(cost, inter=replace(cost.inter, alpha_s=again["alpha_us"] * 1e-6))
    # charged with the step phase's price: a cache-off cycle's negotiation by the wall clock, no timeline, in place of
    # the timelines' extra, which carries the writer's per-tensor work (docs/accuracy.md, "Cache off from the step
    # phase")
    step_info["cache_off"], cost = step_cache_off(step_info, cost, step_cluster, meta.get("backend"))
    # recorded beside the charged price, not charged: the burst and step phases price a small response apart by up to
    # 2x and neither carries to every real layout, so predictions give the step time at both (docs/accuracy.md, "The
    # small-response price the phases leave open")
    small_info["range"] = small_price_range(step_info, small_info["burst"], ranks[first])
    if small_info["range"]["alpha_us"] is not None:
        cost = replace(cost, small_alpha_range_s=tuple(x * 1e-6 for x in small_info["range"]["alpha_us"]))
    frecs, fproblems = read_phase_records(src.parent / FP16_RECORDS, parse_fp16_records, f"{env.path.name}/{FP16_RECORDS}")
    env.problems += fproblems
    # where the env's own phase does not pin the float16 sum (a slow link), the phases of the same stack and sitting
    # that do (docs/compression.md, "A phase that does not pin the sum")
    fp16_info = borrow_fp16_sum(fp16_cost(frecs), frecs, _stack_fp16_siblings(env))
    if fp16_info.get("sum_extra_ns_per_elem") is not None:
        lent = (fp16_info.get("borrowed") or {}).get("from")
        cost = replace(cost, fp16=Fp16Cost.from_fit(fp16_info, (
            f"measured: {env.path.name}/{FP16_RECORDS}, {fp16_info['jobs']} job(s)" + (
                f"; float16 sum borrowed from {', '.join(f'{n}/{FP16_RECORDS}' for n in lent)} (same stack and "
                f"sitting; this env's phase does not pin it)" if lent else ""))))
    neg_info["cpu"] = cpu_info
    fit_info = {"form": "alpha-beta (ring), from an allreduce sweep", "p": ranks[first], "tier": first,
                "other_tiers": tiers_info,
                "a_ms": lin.a_s * 1e3, "b_ms_per_mib": lin.b_s_per_byte * MIB * 1e3, "r2": lin.r2,
                "mape_percent": lin.mape, "n_samples": lin.n, "piecewise": piece_info, "host_passes": host_info,
                "negotiation": neg_info, "idle_response": idle_info, "small_responses": small_info,
                "fp16": fp16_info, "timelines": used,
                "samples": [{"bytes": float(n), "time_ms": float(t * 1e3), "count": int(c), "pred_ms": float(q * 1e3)}
                            for n, t, c, q in zip(sizes, times, counts, pred)]}
    return _model_dict(env, cluster, cost, fit_info, {}, run_config(meta, {}))


def _stack_fp16_siblings(env: EnvData) -> dict[str, list[dict[str, Any]]]:
    """The fp16 phase records of the other environments beside ``env`` (its runs folder) whose env.toml names the
    same ``stack``: env folder name -> records (those that parse; a sibling's own fit reports its bad lines). {}
    where ``env`` names no stack."""
    stack = env.meta.get("stack")
    out: dict[str, list[dict[str, Any]]] = {}
    if not stack:
        return out
    for d in sorted(p for p in env.path.parent.iterdir() if p.is_dir() and p != env.path):
        if not (d / FP16_RECORDS).is_file() or not (d / "env.toml").is_file():
            continue
        try:
            if read_toml(d / "env.toml", RunsError).get("stack") != stack:
                continue
        except RunsError:
            continue
        recs, _ = read_phase_records(d / FP16_RECORDS, parse_fp16_records, f"{d.name}/{FP16_RECORDS}")
        if recs:
            out[d.name] = recs
    return out


#: the fused phase's records beside ``source`` (:data:`autotuner.frameworks.horovod.measure.FUSED_RECORDS`)
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
    writer's cost out of spans it ran beside; a higher one is recorded (charged, it turned fresh-poll-2gbit's
    issue-20 replays' order over: Kendall tau 1.00 -> 0.70). Narrowed so after the committed replays
    (docs/accuracy.md, "Fused responses without the timeline"). Then ``memcpy_s_per_byte = k``, no spill above the
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
        out["note"] = "no fused phase (measure --fused-repeats): the timelines' copy rate is charged"
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
    phase solves the small responses' price on the tier afterwards; docs/accuracy.md, "The below-knee slope the sweep
    cannot identify").

    Why: the sweep times each small allreduce alone, after an idle link. A link in a step's busy cycle carries a
    queued response's bytes at its sustained rate, the rate of the segment from the knee. Two measurements say so:
    - on an emulated link (HTB, ``tc -d class show``: a burst of 1125 bytes at 3 Gbit/s, with 64 KiB skbs on lo),
      the first packet after idle goes out at once and the ones behind it pay the rate, so a lone allreduce under the
      knee pays little per byte;
    - on the one-host envs the mid-size burst phase's 256 KiB responses queued back to back, less the burst phase's
      small ones, cost per byte within 25 % of what the segment from the knee charges, where the line below it can
      charge half (fresh-poll-3gbit 4.66 against 5.97 ms per MiB, its line below 3.06; fresh-poll-1.25gbit 13.76
      against 13.63, below 7.75; ``scripts/burst_midsize.py --report``).
    The first form of this bound (2026-12-01) fired only where the slope was above the link's line rate
    ``link_gbps`` (Gbit/s, env.toml's): fresh-poll-2gbit 610132, fresh-poll-2.75gbit 51897 Gbit/s. The form here
    (2026-12-01, written after fresh-poll-3gbit's 1 MiB miss) also covers slopes under the link but above what the
    link carries back to back, as fresh-poll-3gbit's 2.74 Gbit/s against its segment's 1.41.

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
CPU_RECORDS = "cpu.jsonl"
#: the trickle phase's records, beside ``source`` (:data:`autotuner.frameworks.horovod.measure.TRICKLE_RECORDS`)
TRICKLE_RECORDS = "trickle.jsonl"
#: the idle phase's records, beside ``source`` (:data:`autotuner.frameworks.horovod.measure.IDLE_RECORDS`), and
#: the tensor-name prefix of autotuner.frameworks.horovod.idleprobe (not imported: fit does not load realrun)
IDLE_RECORDS, IDLE_PREFIX = "idle.jsonl", "idle"
#: the tensor-name prefixes of autotuner.frameworks.horovod.trickleprobe (not imported: fit does not load realrun)
TRICKLE, BACK_TO_BACK = "trickle", "b2b"


def _kept_timeline(env_dir, rec: dict[str, Any], problems: list[str], read: dict | None = None):
    """The timeline a probe phase's record kept (``rec["timeline"]``, relative to ``env_dir``), or
    None: the record has none, or it cannot be read (named in ``problems``). ``read`` (a dict the caller keeps)
    holds what each file gave, a Timeline or its error, so that two readers of one phase parse it once; each
    reader still names an unreadable file in ``problems``, as without it."""
    from pathlib import Path

    if not rec.get("timeline"):
        return None
    key = (str(env_dir), rec["timeline"])
    got = read.get(key) if read is not None else None
    if got is None:
        try:
            got = read_timeline(Path(env_dir) / rec["timeline"])
        except AutotunerError as e:
            got = e
        if read is not None:
            read[key] = got
    if isinstance(got, AutotunerError):
        problems.append(f"{rec['timeline']}: dropped ({got})")
        return None
    return got


def lone_response(recs: list[dict[str, Any]], env_dir, problems: list[str], read: dict | None = None) -> dict[str, Any]:
    """How much longer a response alone in its cycle runs, from the ``trickle`` phase's timelines
    (:mod:`autotuner.frameworks.horovod.trickleprobe`): per job and tensor size, the mean collective span of
    the tensors enqueued one per cycle less that of the same tensors enqueued all at once (each
    name's first use left out: the response cache's miss), averaged over the sizes; per cycle
    time, the median over rounds; then ``extra = lone + per_cycle x cycle`` through the cycle
    times by non-negative least squares (``scipy.optimize.nnls``). ``lone_us`` None (with a note)
    without two cycle times. ``problems`` gets unreadable timelines; ``read`` (optional) keeps each parsed
    timeline for :func:`busy_small_response`, which reads the same files (:func:`_kept_timeline`). Recorded in the
    model file's
    ``fit.negotiation.lone``; not a term of the cost model (docs/fresh-environments.md section 9)."""
    from scipy.optimize import nnls

    per_cycle: dict[float, list[float]] = {}
    sizes_info: dict[str, list[float]] = {}
    for r in recs:
        tl = _kept_timeline(env_dir, r, problems, read)
        if tl is None:
            continue
        spans: dict[tuple[str, int], list[float]] = {}
        seen: set[str] = set()
        for resp in sorted(tl.responses, key=lambda x: x.start_us):
            if resp.op != "allreduce" or len(resp.tensors) != 1:
                continue
            name = resp.tensors[0].split(".", 1)[-1]  # "allreduce.trickle.4096.3" -> "trickle.4096.3"
            kind = name.split(".", 1)[0]
            if kind not in (TRICKLE, BACK_TO_BACK):
                continue
            if name not in seen:  # each name's first use is left out (Horovod's first negotiation of it)
                seen.add(name)
                continue
            spans.setdefault((kind, resp.nbytes), []).append(resp.duration_us * 1e-6)
        extras = [float(np.mean(spans[(TRICKLE, n)]) - np.mean(spans[(BACK_TO_BACK, n)]))
                  for n in r["sizes"] if spans.get((TRICKLE, n)) and spans.get((BACK_TO_BACK, n))]
        for n in r["sizes"]:
            if spans.get((TRICKLE, n)) and spans.get((BACK_TO_BACK, n)):
                sizes_info.setdefault(f"{float(r['cycle_time_ms']):g} ms, {n} B", []).append(
                    float(np.mean(spans[(TRICKLE, n)]) - np.mean(spans[(BACK_TO_BACK, n)])) * 1e3)
        if extras:
            per_cycle.setdefault(float(r["cycle_time_ms"]), []).append(float(np.mean(extras)))
    out: dict[str, Any] = {"form": "extra = mean span one per cycle - all at once (per size, averaged); median over "
                                   "rounds; extra = lone + per_cycle x cycle (nnls)", "lone_us": None, "per_cycle": 0.0,
                           "extra_ms_by_cycle": {f"{c:g}": float(np.median(v)) * 1e3 for c, v in sorted(per_cycle.items())},
                           "extra_ms_by_cycle_and_size": sizes_info}
    if len(per_cycle) < 2:
        out["note"] = "fewer than two cycle times in a trickle phase: a lone response costs what the sweep says"
        return out
    cs = sorted(per_cycle)
    A = np.array([[1.0, c * 1e-3] for c in cs])
    (lone, slope), _ = nnls(A, np.array([max(0.0, float(np.median(per_cycle[c]))) for c in cs]))
    out.update(lone_us=float(lone) * 1e6, per_cycle=float(slope))
    return out


def idle_response(recs: list[dict[str, Any]], env_dir, problems: list[str], p: int) -> dict[str, Any]:
    """A small response's collective time while the ranks' main threads sleep, from the ``idle``
    phase's timelines (:mod:`autotuner.frameworks.horovod.idleprobe`): per job and tensor size, the mean span
    of the ``idle.<bytes>.<k>`` responses (each name's first use left out: the response cache's
    miss); per size, the mean over jobs (each job samples the host's idle regime once: the
    expected cost is the mean, not the median); then ``t(n) = a + b·n`` through the sizes by
    non-negative least squares (``scipy.optimize.nnls``), valid up to the largest size. Only jobs
    of the fitted tier's ``p`` ranks count. Returns the model file's ``fit.idle_response``:
    ``per_response_us`` (a), ``per_byte_ns`` (b), ``up_to_bytes``, ``ms_by_size`` ({size: [per job
    mean, ms]}), ``jobs``; ``per_response_us`` None (with a note) with fewer than 2 sizes seen.
    ``problems`` gets unreadable timelines. Recorded in the model file's ``fit.idle_response``; not
    a term of the cost model (docs/fresh-environments.md section 11)."""
    from scipy.optimize import nnls

    by_size: dict[int, list[float]] = {}
    jobs = 0
    for r in recs:
        if int(r.get("ranks", p)) != p:
            continue
        tl = _kept_timeline(env_dir, r, problems)
        if tl is None:
            continue
        spans: dict[int, list[float]] = {}
        seen: set[str] = set()
        for resp in sorted(tl.responses, key=lambda x: x.start_us):
            if resp.op != "allreduce" or len(resp.tensors) != 1:
                continue
            name = resp.tensors[0].split(".", 1)[-1]  # "allreduce.idle.4096.3" -> "idle.4096.3"
            if name.split(".", 1)[0] != IDLE_PREFIX:
                continue
            if name not in seen:  # its first use: the response cache's miss
                seen.add(name)
                continue
            spans.setdefault(int(resp.nbytes), []).append(resp.duration_us * 1e-6)
        if spans:
            jobs += 1
        for n, v in spans.items():
            by_size.setdefault(n, []).append(float(np.mean(v)))
    out: dict[str, Any] = {"form": "per job and size the mean span (first uses left out); per size the mean over "
                                   "jobs; t = a + b*n (nnls) up to the largest size",
                           "per_response_us": None, "per_byte_ns": None, "up_to_bytes": None, "jobs": jobs,
                           "ms_by_size": {str(n): [round(x * 1e3, 4) for x in v] for n, v in sorted(by_size.items())}}
    if len(by_size) < 2:
        out["note"] = "no idle phase (or fewer than 2 sizes in it): small responses cost what the sweep's tier says"
        return out
    ns = np.array(sorted(by_size), float)
    ts = np.array([np.mean(by_size[int(n)]) for n in ns])
    (a, b), _ = nnls(np.column_stack([np.ones_like(ns), ns]), ts)
    out.update(per_response_us=float(a) * 1e6, per_byte_ns=float(b) * 1e9, up_to_bytes=float(ns.max()),
               mean_ms_by_size={str(int(n)): round(float(t) * 1e3, 4) for n, t in zip(ns, ts)})
    return out


#: the largest response the back-to-back small-response price is read from (bytes): the largest size every
#: phase measures (the unfused job's 64 KiB, :data:`autotuner.frameworks.horovod.trickleprobe.SIZES`,
#: :data:`autotuner.frameworks.horovod.idleprobe.SIZES`; not imported: fit does not load realrun)
SMALL_RESPONSE_BYTES = 65536
#: fewest back-to-back small responses for the price to replace the sweep line's intercept
MIN_SMALL_RESPONSES = 100
#: tensor-name prefix of the sweep's unfused phase (autotuner.frameworks.horovod.sweepprobe)
UNFUSED_PREFIX = "sweep.unfused"


def busy_small_response(unfused_tls: list, trecs: list[dict[str, Any]], env_dir, problems: list[str], tier,
                        p: int, read: dict | None = None) -> dict[str, Any]:
    """What a small response costs where a training step runs it: back to back with others in one busy
    cycle (fusion off or a small threshold: a step's hundreds of BatchNorm, bias and LayerNorm tensors).

    Read from the phases of ``measure`` that queue small responses back to back while the ranks wait for
    them, each response's collective span off its timeline (each tensor name's first use left out: the
    response cache's miss), responses of up to :data:`SMALL_RESPONSE_BYTES`:

    - ``unfused``: the sweep's fusion-off job (``unfused_tls``, ``sweep.unfused.<bytes>.<k>``): 16 tensors
      enqueued at once, the ranks waiting as the env's ranks wait (``measure --wait``);
    - ``trickle_b2b``: the trickle phase's all-at-once tensors (``trecs``, ``b2b.<bytes>.<k>``; the ranks
      wait in ``hvd.synchronize``), 4 rounds of 32 per size and job.

    The idle phase is left out: it samples the host's slow wake-up regime on purpose (every job in it),
    while a step's responses fall in either (docs/fresh-environments.md sections 10-11; with it the
    price over-charged the 2x2 env's fusion-off runs by 16 %, docs/accuracy.md). Each span less the tier's
    bandwidth part (``tier.allreduce_s(n, p)`` minus its latency ``2(p-1)·alpha``) is one sample of the
    fixed cost; ``fixed_ms`` is their mean (a step pays the sum: the mean, tails included), None (with a
    note) with fewer than :data:`MIN_SMALL_RESPONSES` samples. The fit then uses it as the tier's small-message latency
    (``fixed / (2(p-1))`` per ring step) in place of the pooled line's intercept, whose small sizes the
    single allreduces (each alone in its cycle, paying the other rank's cycle) and their tiny share of the
    time-share weights decide. ``problems`` gets unreadable timelines; ``read`` (optional) is the dict of
    timelines already parsed that :func:`lone_response` shares (:func:`_kept_timeline`). Returns the model file's
    ``fit.small_responses``: ``fixed_ms``, ``line_a_ms`` (the intercept it replaces), ``n``, ``up_to_bytes``
    and per phase ``n``, ``mean_span_ms``, ``median_span_ms``, ``mean_fixed_ms``."""
    base_s = 2 * (p - 1) * tier.alpha_s  # the line's latency at n -> 0 on p ranks

    def spans(tl, prefix: str) -> list[tuple[int, float]]:
        out, seen = [], set()
        for resp in sorted(tl.responses, key=lambda x: x.start_us):
            if resp.op != "allreduce" or len(resp.tensors) != 1 or resp.nbytes > SMALL_RESPONSE_BYTES:
                continue
            name = resp.tensors[0].split(".", 1)[-1]  # "allreduce.idle.4096.3" -> "idle.4096.3"
            if not name.startswith(prefix + "."):
                continue
            if name not in seen:  # its first use: the response cache's miss
                seen.add(name)
                continue
            out.append((int(resp.nbytes), resp.duration_us * 1e-6))
        return out

    phases: dict[str, list[tuple[int, float]]] = {"unfused": [], "trickle_b2b": []}
    for tl in unfused_tls:
        phases["unfused"] += spans(tl, UNFUSED_PREFIX)
    for r in trecs:
        if int(r.get("ranks", p)) != p:
            continue
        tl = _kept_timeline(env_dir, r, problems, read)
        if tl is not None:
            phases["trickle_b2b"] += spans(tl, BACK_TO_BACK)
    out: dict[str, Any] = {
        "regime": "back to back in a busy cycle (the fusion-off job, the trickle phase's all-at-once tensors)",
        "form": f"fixed = mean over responses <= {SMALL_RESPONSE_BYTES} bytes of (span - the tier's bandwidth part); "
                "the tier's small-message latency = fixed / (2(p-1))",
        "fixed_ms": None, "line_a_ms": base_s * 1e3, "up_to_bytes": SMALL_RESPONSE_BYTES, "p": p, "phases": {}}
    fixed_all: list[float] = []
    for key, v in phases.items():
        if not v:
            out["phases"][key] = {"n": 0}
            continue
        n = np.array([x[0] for x in v], float)
        sp = np.array([x[1] for x in v], float)
        fixed = sp - (np.asarray(tier.allreduce_s(n, p), float) - base_s)
        fixed_all += fixed.tolist()
        out["phases"][key] = {"n": int(len(v)), "mean_span_ms": float(sp.mean()) * 1e3,
                              "median_span_ms": float(np.median(sp)) * 1e3, "mean_fixed_ms": float(fixed.mean()) * 1e3}
    out["n"] = len(fixed_all)
    if len(fixed_all) < MIN_SMALL_RESPONSES:
        out["note"] = (f"{len(fixed_all)} back-to-back small response(s), fewer than {MIN_SMALL_RESPONSES}: the "
                       "sweep line's intercept prices small responses")
        return out
    out["fixed_ms"] = max(0.0, float(np.mean(fixed_all))) * 1e3
    return out


#: the burst phase's records beside ``source`` (:data:`autotuner.frameworks.horovod.measure.BURST_RECORDS`)
BURST_RECORDS = "burst.jsonl"
#: the step phase's records beside ``source`` (:data:`autotuner.frameworks.horovod.measure.STEP_RECORDS`)
STEP_RECORDS = "step.jsonl"
#: fewest (size, job) marginal costs for the burst phase's price of a small response
MIN_BURST_POINTS = 3


def _burst_marginal_sim_s(cost, nbytes: int, count: int, p: int) -> float:
    """The simulator's marginal time (s) of one more of ``count`` responses of ``nbytes`` enqueued at once
    (fusion off, 1 ms cycle, cache on), ``(T(count) - T(1)) / (count - 1)``, on ``cost`` with ``p`` ranks on
    one node: the burst phase's pattern run through :func:`autotuner.frameworks.horovod.simulator.simulate_step`."""
    from ..knobs import DEFAULTS_0_28
    from ..simulator import simulate_step
    from ....model.workload import Workload

    cfg = replace(DEFAULTS_0_28, fusion_threshold_bytes=0)
    wl = Workload(forward_s=0.0, backward_s=1e-6)
    cl = Cluster(p, 1)

    def t(n: int) -> float:
        return simulate_step(np.full(n, nbytes, dtype=np.int64), np.ones(n), wl, cfg, cost, cl).step_time_s

    return (t(count) - t(1)) / (count - 1)


def burst_marginals_ms(rec: dict[str, Any]) -> list[tuple[int, int, float]]:
    """One burst record's (:class:`autotuner.schemas.BurstRecord`) marginal wall time of a response back to back:
    ``[(bytes, count, (median T(count) - median T(1)) / (count - 1) ms), ...]`` for every count above 1 whose size
    also ran alone, sorted by size and count (the rounds' medians; the probe left each first round out)."""
    by = {(int(b), int(c)): float(np.median(v)) for b, c, v in rec["wall_ms"] if v}
    return [(b, c, (tc - by[(b, 1)]) / (c - 1)) for (b, c), tc in sorted(by.items()) if c != 1 and (b, 1) in by]


def burst_small_response(recs: list[dict[str, Any]], cost, p: int) -> dict[str, Any]:
    """The price of a small response back to back in a busy cycle, from the ``burst`` phase
    (:mod:`autotuner.frameworks.horovod.burstprobe`): wall-clock times without Horovod's timeline, whose writer takes
    the ranks' CPU (docs/accuracy.md, "The small-response regime").

    Per job and size, the measured marginal ``m = (median T(32) - median T(1)) / 31`` (ms; the rounds'
    medians, each size's first round left out by the probe). The simulator runs the same pattern on
    ``cost`` (:func:`_burst_marginal_sim_s`) with the tier's latency set to 0, giving ``m0``: what the
    fitted negotiation, host gaps and bandwidth already charge per response. The latency that closes the
    gap is ``alpha = (m - m0) / (2(p-1))`` per ring step (a ring allreduce pays ``2(p-1)`` latencies; the
    simulator is linear in it), taken as the median over sizes and jobs, at least 0. Returns the model
    file's ``fit.small_responses.burst``: ``alpha_us`` (None with a note below :data:`MIN_BURST_POINTS`
    points), ``fixed_ms`` (= ``2(p-1)·alpha``), ``points`` (``[bytes, job, m_ms, m0_ms]``), ``regime``,
    ``form``."""
    out: dict[str, Any] = {"regime": "back to back in a busy cycle, wall clock without the timeline (burst phase)",
                           "form": "alpha = median over sizes and jobs of (marginal measured - marginal simulated at "
                                   "alpha 0) / (2(p-1))",
                           "alpha_us": None, "fixed_ms": None, "points": [], "jobs": 0}
    recs = [r for r in recs if int(r.get("ranks", p)) == p]
    out["jobs"] = len(recs)
    if not recs:
        out["note"] = "no burst phase measured (autotuner measure --burst-repeats)"
        return out
    zero = replace(cost, inter=replace(cost.inter, alpha_s=0.0))
    m0_cache: dict[int, float] = {}
    alphas = []
    for r in recs:
        for b, c, m_ms in burst_marginals_ms(r):
            m = m_ms * 1e-3
            if b not in m0_cache:
                m0_cache[b] = _burst_marginal_sim_s(zero, b, c, p)
            alphas.append((m - m0_cache[b]) / (2 * (p - 1)))
            out["points"].append([b, int(r["repeat"]), m * 1e3, m0_cache[b] * 1e3])
    if len(alphas) < MIN_BURST_POINTS:
        out["note"] = f"{len(alphas)} burst point(s), fewer than {MIN_BURST_POINTS}: not used"
        return out
    a = max(0.0, float(np.median(alphas)))
    out["alpha_us"] = a * 1e6
    out["fixed_ms"] = 2 * (p - 1) * a * 1e3
    out["charged"] = False  # recorded, not a term: see the comment where fit_sweep_env calls this
    return out


#: the mid-size burst records beside ``source`` (:data:`autotuner.frameworks.horovod.measure.MID_RECORDS`)
MID_RECORDS = "burst-mid.jsonl"
#: fewest jobs (rounds) of the mid-size burst phase for its shift to be charged
MIN_MID_JOBS = 3


def _mid_sizes(recs: list[dict[str, Any]], keep, cost, p: int) -> tuple[list[list], list[float], set[int]]:
    """The mid-size burst phase's jobs (``recs``, already those on ``p`` ranks without the timeline) per record size
    ``b`` and count ``c`` with ``keep(b)``, against the simulator on ``cost``: ``(sizes, diffs, sides)``, sorted by
    size: ``sizes`` rows ``[bytes, jobs, measured min, median, max, simulated]`` (ms per response; measured:
    :func:`burst_marginals_ms`, simulated: :func:`_burst_marginal_sim_s`), ``diffs`` the median measured - simulated
    per size (ms), ``sides`` the set of +1 (every job above the simulated marginal), -1 (every one below), 0 (some on
    each side)."""
    by: dict[tuple[int, int], list[float]] = {}
    for r in recs:
        for b, c, m_ms in burst_marginals_ms(r):
            if keep(b):
                by.setdefault((b, c), []).append(m_ms)
    rows, diffs, sides = [], [], set()
    for b, c in sorted(by):
        m, sim = by[(b, c)], _burst_marginal_sim_s(cost, b, c, p) * 1e3
        rows.append([b, len(m), min(m), float(np.median(m)), max(m), sim])
        diffs.append(float(np.median(m)) - sim)
        sides.add(1 if min(m) > sim else -1 if max(m) < sim else 0)
    return rows, diffs, sides


def mid_response(recs: list[dict[str, Any]], cost, p: int) -> dict[str, Any]:
    """What a mid-size response (at or above the tier's knee, ``large_from_bytes``) costs back to back in a busy
    cycle by the wall clock, against what ``cost``'s line above the knee charges for it: the shift of that line's
    latency, from the mid-size burst phase (:func:`autotuner.frameworks.horovod.measure.run_burst_phase` with
    :data:`autotuner.frameworks.horovod.measure.MID_SIZES`, counts 1 and 8, no timeline; docs/accuracy.md,
    "Mid-size responses back to back"). That line is fitted on spans read off the sweep's timelines, whose
    writer takes the ranks' CPU.

    Per job, record size at or above the knee and count ``c`` above 1, the measured marginal ``(median T(c) -
    median T(1)) / (c - 1)`` (ms, :func:`burst_marginals_ms`; ``c`` = 8 in ``measure``'s phase); the simulator's for
    the same pattern on ``cost`` (:func:`_burst_marginal_sim_s`). The rule, declared before it was judged on a
    fresh env (issue 29): the shift is the median over those sizes of (median over jobs of the measured -
    simulated), charged only where the records resolve it: at least
    :data:`MIN_MID_JOBS` jobs, and at every such size the jobs' whole range on the same side of the simulated
    marginal. Where the differences are inside the jobs' own scatter the line stands. Narrowed after the replays of
    the committed envs were read: only a shift down is charged (the timeline writer's cost taken out of a line
    fitted on timeline spans); a wall clock above the line is recorded (on fresh-poll-2gbit, charging +0.44 ms
    turned its configurations' order over, Kendall tau 0.85 -> 0.62 over pairs > 2 % apart, and on
    fresh-2x1-5gbit a shift up broke DistilBERT's rows). ``large_alpha_s += shift / (2(p-1))`` (a ring pays
    ``2(p-1)`` latencies), floored at 0. Returns the model file's ``fit.small_responses.mid``: ``shift_ms``
    (None where not resolved), ``charged``, ``sizes`` (``[bytes, jobs, measured min, median, max, simulated]``,
    ms per response), ``regime``, ``form``, ``note``."""
    out: dict[str, Any] = {"regime": "mid-size responses back to back in a busy cycle, wall clock without the "
                                     "timeline (mid-size burst phase)",
                           "form": "shift = median over sizes >= knee of (median measured - simulated marginal); "
                                   "charged where every size's jobs lie below the simulated marginal",
                           "shift_ms": None, "charged": False, "sizes": [], "jobs": 0}
    knee = cost.inter.large_from_bytes
    recs = [r for r in recs if int(r.get("ranks", p)) == p and not r.get("timeline_recorded")]
    out["jobs"] = len(recs)
    if not recs:
        out["note"] = "no mid-size burst phase measured (autotuner measure --mid-repeats)"
        return out
    if knee is None:
        out["note"] = "the tier has one line for all sizes: nothing above a knee to shift"
        return out
    out["sizes"], diffs, sides = _mid_sizes(recs, lambda b: b >= knee, cost, p)
    if not diffs:
        out["note"] = f"no record size at or above the knee ({knee / MIB:g} MiB)"
        return out
    out["shift_ms"] = float(np.median(diffs))
    if len(recs) < MIN_MID_JOBS:
        out["note"] = f"{len(recs)} job(s), fewer than {MIN_MID_JOBS}"
    elif len(sides) != 1 or 0 in sides:
        out["note"] = "inside the jobs' own scatter (or on both sides) at some size: the line stands"
    elif sides == {1}:
        out["note"] = ("the wall clock above the line, which a step's queued responses did not show (docs/accuracy.md, "
                       "\"Mid-size responses back to back\")")
    else:
        out["charged"] = True
    return out


#: the smallest record size the below-knee rule reads: under it a response's price is mostly its fixed part
MID_BANDWIDTH_FROM_BYTES = MIB
#: fewest record sizes below the knee (and at least :data:`MID_BANDWIDTH_FROM_BYTES`) for the below-knee rule
MIN_MID_BELOW_SIZES = 2


def mid_bandwidth(recs: list[dict[str, Any]], cost, p: int) -> dict[str, Any]:
    """What a mid-size response below the tier's knee costs back to back by the wall clock, against ``cost``'s
    line below the knee (its fixed part the small responses' price, its bandwidth the sweep's pooled spans): the
    change of that line's bandwidth, from the same mid-size burst phase as :func:`mid_response` (no timeline).

    The rule, declared (issue 29) after reading fresh-poll-2x1-4gbit's and -3.5gbit's records and before it was
    judged on an env no fit had seen: per record size ``b`` with :data:`MID_BANDWIDTH_FROM_BYTES` <= ``b`` < the
    knee, ``d(b)`` = median over jobs of the measured marginal (:func:`burst_marginals_ms`) - the simulated one
    (:func:`_burst_marginal_sim_s` on ``cost``, its small-response price already set). A bandwidth error grows with
    the size, a fixed-cost error does not: charged only where at least :data:`MIN_MID_BELOW_SIZES` such sizes,
    :data:`MIN_MID_JOBS` jobs, at every size the jobs' whole range on the same side of the simulated marginal, and
    ``|d|`` growing with ``b``. The per-byte change ``k`` is the least-squares slope through the origin of ``d``
    against ``b`` (``k = sum(d b) / sum(b^2)``, the fixed part left to the small responses' price); a ring allreduce
    moves ``2(p-1)/p`` bytes per byte of response, so ``1/bandwidth' = 1/bandwidth + k p / (2(p-1))``, charged in
    either direction (the line's form, not the timeline writer's cost, is what it corrects) where that stays
    positive. No knee (one line for all sizes, the large messages' too): recorded, not charged. Returns the model
    file's ``fit.small_responses.mid.below``: ``k_ms_per_mib`` (None where not resolved), ``charged``,
    ``bandwidth_gbps`` ``[before, after]``, ``sizes`` (``[bytes, jobs, measured min, median, max, simulated]``, ms
    per response), ``regime``, ``form``, ``note``."""
    out: dict[str, Any] = {"regime": "mid-size responses below the knee back to back in a busy cycle, wall clock "
                                     "without the timeline (mid-size burst phase)",
                           "form": "k = sum(d b) / sum(b^2) over sizes 1 MiB <= b < knee, d = median measured - "
                                   "simulated marginal; 1/bandwidth += k p / (2(p-1)); charged where every size's jobs "
                                   "lie on one side and |d| grows with b",
                           "k_ms_per_mib": None, "charged": False, "bandwidth_gbps": None, "sizes": [], "jobs": 0}
    knee = cost.inter.large_from_bytes
    recs = [r for r in recs if int(r.get("ranks", p)) == p and not r.get("timeline_recorded")]
    out["jobs"] = len(recs)
    if not recs:
        out["note"] = "no mid-size burst phase measured (autotuner measure --mid-repeats)"
        return out
    if knee is None:
        out["note"] = "the tier has one line for all sizes, the large messages' too: its bandwidth stands"
        return out
    rows, ds, sides = _mid_sizes(recs, lambda b: MID_BANDWIDTH_FROM_BYTES <= b < knee, cost, p)
    if len(rows) < MIN_MID_BELOW_SIZES:
        out["note"] = (f"{len(rows)} record size(s) from {MID_BANDWIDTH_FROM_BYTES / MIB:g} MiB to under the knee "
                       f"({knee / MIB:g} MiB), fewer than {MIN_MID_BELOW_SIZES}")
        return out
    out["sizes"] = rows
    b_, d_ = np.array([r[0] / MIB for r in rows]), np.array(ds)
    k = float(np.sum(d_ * b_) / np.sum(b_ * b_))  # ms per MiB of response
    out["k_ms_per_mib"] = k
    inv = 1.0 / cost.inter.bandwidth_Bps + k * 1e-3 / MIB * p / (2 * (p - 1))
    out["bandwidth_gbps"] = [cost.inter.bandwidth_Bps * 8e-9, (8e-9 / inv) if inv > 0 else None]
    if len(recs) < MIN_MID_JOBS:
        out["note"] = f"{len(recs)} job(s), fewer than {MIN_MID_JOBS}"
    elif len(sides) != 1 or 0 in sides:
        out["note"] = "inside the jobs' own scatter (or on both sides) at some size: the line stands"
    elif not all(abs(y) > abs(x) for x, y in zip(ds, ds[1:])):
        out["note"] = "the difference does not grow with the size (a fixed part, not the bandwidth): the line stands"
    elif inv <= 0:
        out["note"] = "the change would leave no time per byte: the line stands"
    else:
        out["charged"] = True
    return out


#: fewest rounds of the step phase with both a defaults and a fusion-off job for its price to be charged
MIN_STEP_ROUNDS = 3
#: the small-response latency searched (ms per small response, ``2(p-1)·alpha``): 0 to this
MAX_STEP_FIXED_MS = 20.0


def _step_delta_sim_ms(cost, cluster: Cluster, fixed_ms: float, job: str, backend: str | None,
                       compute_ms: float | None = None, after_ms: float | None = None) -> float:
    """The simulator's step-time difference (ms) ``job`` - defaults of the ``step`` phase's replay
    (:mod:`autotuner.frameworks.horovod.stepprobe`: its layout, its emulated compute, ``compute_ms`` or the phase's
    first, split forward 1/3 and backward 2/3 as the replay sleeps it) on ``cost`` with the tier's small-message
    latency set to ``fixed_ms / (2(p-1))`` and a response that starts after the backward costing ``after_ms`` in its
    place (:attr:`autotuner.model.costmodel.CostModel.after_backward_s` = ``after_ms - fixed_ms``; None: the same
    ``fixed_ms``), ``cluster``: the phase's ranks."""
    from ..simulator import simulate_step
    from ..stepprobe import COMPUTE_MS, JOBS, layout
    from .fitters import workload_for

    p = cluster.size
    c = replace(cost, inter=replace(cost.inter, alpha_s=fixed_ms * 1e-3 / (2 * (p - 1))),
                after_backward_s=0.0 if after_ms is None else (after_ms - fixed_ms) * 1e-3)
    L = layout()
    wl = workload_for((COMPUTE_MS if compute_ms is None else compute_ms) * 1e-3)

    def t(name: str) -> float:
        return simulate_step(L.sizes_bytes, L.ready_fraction, wl, JOBS[name], c, cluster, backend=backend).step_time_s

    return (t(job) - t("defaults")) * 1e3


#: the grid of latencies during the backward searched by the two-compute fit (:func:`_long_curve`), ms per small
#: response; it spans 0 to twice the one-latency answer
STEP_GRID_MS = 0.1


def _long_curve(cost, cluster: Cluster, backend: str | None, d_short: float,
                hi_ms: float) -> list[tuple[float, float, float]]:
    """``[(a, b, d_long), ...]``: for each latency during the backward ``a`` (ms, a grid of :data:`STEP_GRID_MS` over
    0..``hi_ms``) the latency after it ``b`` at which the simulated fusion-off - defaults difference at
    :data:`~autotuner.frameworks.horovod.stepprobe.COMPUTE_MS` equals ``d_short`` (ms; scipy ``brentq``, ``b`` in
    0..:data:`MAX_STEP_FIXED_MS`; an ``a`` with no such ``b`` is left out), and the simulated difference ``d_long``
    (ms) those two give at ``LONG_COMPUTE_MS``. A grid, not a root finder, on ``a``: the simulator's 1 ms cycles make
    ``d_long`` a step function of it, and not a monotone one."""
    from scipy.optimize import brentq

    from ..stepprobe import LONG_COMPUTE_MS

    out = []
    for a in np.round(np.arange(0.0, hi_ms + STEP_GRID_MS / 2, STEP_GRID_MS), 6):
        def f(b: float) -> float:
            return _step_delta_sim_ms(cost, cluster, float(a), "fusion-off", backend, after_ms=b) - d_short

        if f(0.0) > 0 or f(MAX_STEP_FIXED_MS) < 0:
            continue
        b = float(brentq(f, 0.0, MAX_STEP_FIXED_MS, xtol=1e-3))
        out.append((float(a), b, _step_delta_sim_ms(cost, cluster, float(a), "fusion-off", backend, LONG_COMPUTE_MS,
                                                   after_ms=b)))
    return out


def _nearest(curve: list[tuple[float, float, float]], d_long: float) -> tuple[float, float, float]:
    """The point of :func:`_long_curve`'s ``curve`` whose ``d_long`` comes nearest the measured ``d_long`` (ms):
    ``(a, b, simulated - measured)``; the smaller ``a`` on a tie."""
    a, b, d = min(curve, key=lambda x: (abs(x[2] - d_long), x[0]))
    return a, b, d - d_long


def _paired_rounds(by: dict[int, dict[str, float]]) -> list[tuple[int, dict[str, float]]]:
    """The step phase's rounds (repeat -> job -> median step, ms) that ran both the defaults and fusion off, by
    repeat."""
    return sorted((k, j) for k, j in by.items() if "defaults" in j and "fusion-off" in j)


def _deltas(rounds: list[tuple[int, dict[str, float]]]) -> tuple[float, list[float]]:
    """``(D, [min, max])``: the median over ``rounds`` (:func:`_paired_rounds`) of fusion off - defaults (ms) and
    the rounds' extremes."""
    d = [j["fusion-off"] - j["defaults"] for _, j in rounds]
    return float(np.median(d)), [float(min(d)), float(max(d))]


def step_small_response(recs: list[dict[str, Any]], cost, cluster: Cluster, backend: str | None) -> dict[str, Any]:
    """The price of a training step's small response, from the ``step`` phase (:mod:`autotuner.frameworks.horovod.stepprobe`):
    replay jobs of a synthetic layout of 32 x (one 256 KiB weight + three 1 KiB vectors), Horovod's defaults
    and fusion off interleaved per round, wall clock, no timeline, the ranks waiting and sleeping through an
    emulated backward as a step's do.

    Per round, the measured difference ``d = median step (fusion off) - median step (defaults)`` (ms); ``D``:
    the median over rounds. The simulator runs both jobs on ``cost`` (:func:`_step_delta_sim_ms`; everything
    fitted except the tier's latency) and ``brentq`` (scipy) finds the small-message latency ``a = 2(p-1)·alpha``
    (ms per small response) at which its difference equals ``D``; the rounds' smallest and largest ``d`` give
    the range. The difference cancels what both jobs share (the compute, the defaults' few fused responses, a
    testbed's offset). ``cluster``: the ranks the phase ran (the records' ``ranks`` must match). Returns the
    model file's ``fit.small_responses.step``: ``fixed_ms`` (``a``; None with a ``note`` below
    :data:`MIN_STEP_ROUNDS` rounds, or where no ``a`` in 0..:data:`MAX_STEP_FIXED_MS` ms gives ``D``),
    ``fixed_range_ms``, ``alpha_us``, ``delta_ms``, ``delta_range_ms``, ``rounds`` (``[repeat, defaults ms,
    fusion off ms, cache off ms or None]``, medians), ``cache_off_delta_ms`` (recorded: cache off - defaults,
    median over rounds), ``layout``, ``regime``, ``form``. Only the records at ``COMPUTE_MS`` (100 ms) price it; those
    at ``LONG_COMPUTE_MS`` (300 ms) give ``long`` (:func:`_long_compute`, recorded, not charged)."""
    from scipy.optimize import brentq

    from ..stepprobe import COMPUTE_MS, LAYOUT_NAME, LONG_COMPUTE_MS

    out: dict[str, Any] = {"regime": "a training step's small responses, wall clock without the timeline (step phase: "
                                     "a replay of many small gradients, defaults against fusion off)",
                           "form": "a = 2(p-1)·alpha at which the simulated step-time difference fusion off - "
                                   "defaults equals the median measured one (scipy brentq)",
                           "layout": LAYOUT_NAME, "fixed_ms": None, "fixed_range_ms": None, "alpha_us": None,
                           "delta_ms": None, "delta_range_ms": None, "cache_off_delta_ms": None, "rounds": []}
    p = cluster.size
    recs = [r for r in recs if r.get("layout") == LAYOUT_NAME and int(r["ranks"]) == p]
    if not recs:
        out["note"] = (f"no step phase of {LAYOUT_NAME} on {p} ranks measured "
                       "(autotuner measure --step-repeats; scripts/probe_phase.py --phase step)")
        return out
    at: dict[float, dict[int, dict[str, float]]] = {COMPUTE_MS: {}, LONG_COMPUTE_MS: {}}  # compute -> repeat -> job
    for r in recs:
        if float(r["compute_ms"]) in at:
            at[float(r["compute_ms"])].setdefault(int(r["repeat"]), {})[r["job"]] = float(np.median(r["step_times_ms"]))
    by, long_by = at[COMPUTE_MS], at[LONG_COMPUTE_MS]
    rounds = _paired_rounds(by)
    out["rounds"] = [[k, j["defaults"], j["fusion-off"], j.get("cache-off")] for k, j in sorted(by.items())
                     if "defaults" in j]
    cache = [j["cache-off"] - j["defaults"] for _, j in rounds if "cache-off" in j]
    out["cache_off_delta_ms"] = float(np.median(cache)) if cache else None
    if len(rounds) < MIN_STEP_ROUNDS:
        out["note"] = f"{len(rounds)} round(s) with defaults and fusion off, fewer than {MIN_STEP_ROUNDS}: not used"
        return out
    D, out["delta_range_ms"] = _deltas(rounds)
    out["delta_ms"] = D

    def g(a: float) -> float:
        return _step_delta_sim_ms(cost, cluster, a, "fusion-off", backend)

    g_lo, g_hi = g(0.0), g(MAX_STEP_FIXED_MS)  # the bracket's ends, the same for every target

    def solve(target: float) -> float | None:
        if g_lo > target or g_hi < target:
            return None
        return float(brentq(lambda a: g(a) - target, 0.0, MAX_STEP_FIXED_MS, xtol=1e-4))

    a = solve(D)
    if a is None:
        out["note"] = (f"no latency in 0-{MAX_STEP_FIXED_MS:g} ms per small response gives the measured difference "
                       f"{D:.1f} ms: not used")
        return out
    out["fixed_ms"], out["alpha_us"] = a, a * 1e3 / (2 * (p - 1))
    ends = [solve(x) for x in out["delta_range_ms"]]
    out["fixed_range_ms"] = [0.0 if ends[0] is None else ends[0], MAX_STEP_FIXED_MS if ends[1] is None else ends[1]]
    # recorded, not charged: the two latencies it identifies moved apart between two sittings (fresh-3gbit 0.80 /
    # 2.21 ms, then 0.30 / 3.92 ms) and made the held-out rows worse on the whole (docs/accuracy.md, "The step phase
    # at 300 ms of compute")
    out["long"] = _long_compute(long_by, cost, cluster, backend, D, a)
    return out


def small_price_range(step: dict[str, Any], burst: dict[str, Any], p: int) -> dict[str, Any]:
    """The small-response price the env's phases leave open: the charged step phase's fixed cost per response ``a``
    (``step["fixed_ms"]``, :func:`step_small_response`) and the burst phase's (``burst["fixed_ms"]``,
    :func:`burst_small_response`), both by the wall clock without the timeline, low to high.

    Why a range: the two phases time small responses in two regimes (a training step's, handed over one by one
    through a backward and after it; a burst's, 32 queued at once from a busy loop) and differ by up to 2x on the
    committed envs (fresh-poll-2x1-4.5gbit 0.77 / 1.46 ms, fresh-poll-4gbit 0.64 / 0.36 ms); on the held-out
    fusion-off replays neither is right everywhere, and which one a real layout's step meets is not identified by
    them (docs/accuracy.md, "The small-response price the phases leave open"). ``p``: the ranks the phases ran.

    Returns ``{"ms": [low, high] | None, "alpha_us": [low, high] | None, "from": {"step": ms, "burst": ms},
    "note"}``: ``ms`` in ms per response (``a = 2(p-1)·alpha``), ``alpha_us`` the tier's latency in µs. None where
    the step phase is not charged or the burst phase did not price a response. Raises nothing."""
    a, b = step.get("fixed_ms") if step.get("charged") else None, burst.get("fixed_ms")
    out = {"ms": None, "alpha_us": None, "from": {"step": a, "burst": b}}
    if a is None or b is None:
        out["note"] = ("no range: " + ("the step phase's price is not charged" if a is None else
                                       "the burst phase priced no response"))
        return out
    lo, hi = sorted((float(a), float(b)))
    out.update(ms=[lo, hi], alpha_us=[x * 1e3 / (2 * (p - 1)) for x in (lo, hi)],
               note="recorded, not charged: predictions give the step time at both ends")
    return out


def step_cache_off(step: dict[str, Any], cost, cluster: Cluster, backend: str | None) -> tuple[dict[str, Any], Any]:
    """What a cache-off cycle's negotiation costs by the wall clock, from the ``step`` phase's cache-off rounds
    (issue 29 part 5): ``(info, cost')``.

    The negotiation terms a cycle pays when it negotiates its tensors without the response cache
    (:meth:`autotuner.model.costmodel.Negotiation.cycle_s`: ``nocache_s`` in place of ``busy_s``, plus
    ``per_tensor_s`` x tensors x ranks; controller.cc ``ComputeResponseList`` in Horovod 0.28.1) are fitted from the
    sweep's timelines (:func:`cycle_negotiation_s`, :func:`_per_tensor`), whose writer does per-tensor work in
    exactly those cycles (a negotiation's start, each rank's ready mark and its end, per tensor). The step phase runs
    the same jobs without a timeline. One factor ``k`` in [0, 1] scales the extra over a busy cycle:
    ``nocache_s' = busy_s + k (nocache_s - busy_s)`` (left as it is where ``nocache_s <= busy_s``) and
    ``per_tensor_s' = k per_tensor_s``; scipy ``brentq`` finds the ``k`` at which the simulated cache off - defaults
    difference of the replay (:func:`_step_delta_sim_ms`, the charged ``step['fixed_ms']``) equals the measured
    median ``step['cache_off_delta_ms']`` (ms), and where the two ends of [0, 1] do not bracket it, the end nearer it
    (``k`` = 0: the timelines' extra is all the writer's; 1: the timelines' figure stands). ``cost'`` is ``cost``
    with the two terms replaced, or ``cost`` where not charged. ``step``: :func:`step_small_response`'s dict,
    ``charged`` set; ``cluster``: the phase's ranks. ``info`` is the model file's
    ``fit.small_responses.step.cache_off``: ``charged``, ``k``, ``rounds`` (cache-off rounds paired with a
    defaults round), ``measured_ms``, ``measured_range_ms`` (the rounds' extremes), ``simulated_before_ms``
    (k = 1), ``simulated_ms`` (at ``k``), ``nocache_us`` and ``per_tensor_us`` (``[before, after]``), ``regime``; a
    ``note`` where not charged (the step phase's price not charged, no cache-off rounds, fewer than
    :data:`MIN_STEP_ROUNDS`, or no ``nocache_s`` fitted)."""
    from scipy.optimize import brentq

    rounds = [(r[1], r[3]) for r in step.get("rounds", []) if r[2] is not None and r[3] is not None]
    d = [c - f for f, c in rounds]
    out: dict[str, Any] = {"charged": False, "k": None, "rounds": len(d), "measured_ms": None,
                           "measured_range_ms": None, "simulated_before_ms": None, "simulated_ms": None,
                           "nocache_us": None, "per_tensor_us": None,
                           "regime": "a step's cache-off cycles, wall clock without the timeline (step phase: cache off "
                                     "against the defaults, interleaved per round)"}
    neg = cost.negotiation
    if not step.get("charged"):
        out["note"] = "the step phase's price is not charged, so the timelines' negotiation terms stand"
        return out, cost
    if len(d) < MIN_STEP_ROUNDS:
        out["note"] = f"{len(d)} round(s) with cache off, fewer than {MIN_STEP_ROUNDS}: the timelines' terms stand"
        return out, cost
    if neg.nocache_s is None:
        out["note"] = "no cache-off cycle fitted from the timelines: nothing to scale"
        return out, cost
    measured = float(step["cache_off_delta_ms"])
    out["measured_ms"], out["measured_range_ms"] = measured, [float(min(d)), float(max(d))]
    base = neg.busy_s if neg.busy_s is not None else neg.cache_ops * neg.ctrl_op_s

    def scaled(k: float):
        nocache = neg.nocache_s if neg.nocache_s <= base else base + k * (neg.nocache_s - base)
        return replace(cost, negotiation=replace(neg, nocache_s=nocache, per_tensor_s=k * neg.per_tensor_s))

    def sim(k: float) -> float:
        return _step_delta_sim_ms(scaled(k), cluster, float(step["fixed_ms"]), "cache-off", backend)

    g0, g1 = sim(0.0), sim(1.0)
    if (g0 - measured) * (g1 - measured) < 0:
        k = float(brentq(lambda x: sim(x) - measured, 0.0, 1.0, xtol=1e-3))
    else:
        k = 0.0 if abs(g0 - measured) <= abs(g1 - measured) else 1.0
    new = scaled(k)
    out.update(charged=True, k=k, simulated_before_ms=g1, simulated_ms=sim(k),
               nocache_us=[neg.nocache_s * 1e6, new.negotiation.nocache_s * 1e6],
               per_tensor_us=[neg.per_tensor_s * 1e6, new.negotiation.per_tensor_s * 1e6])
    return out, new


def _long_compute(long_by: dict[int, dict[str, float]], cost, cluster: Cluster, backend: str | None,
                  d_short: float, one_ms: float) -> dict[str, Any]:
    """The step phase's rounds at ``LONG_COMPUTE_MS`` (repeat -> job -> median step, ms): with at least
    :data:`MIN_STEP_ROUNDS` of them, what a small response costs during the backward (``during_ms``) and after
    it (``after_ms``), :func:`_long_curve` and :func:`_nearest` on the median differences (``d_short`` at the phase's
    first compute, ``one_ms`` the one latency that meets it alone), and their ranges over the median and the rounds'
    extreme long differences (``during_range_ms``, ``after_range_ms``; the curve is not monotone). Returns the
    model file's ``fit.small_responses.step.long``: ``compute_ms``, ``rounds`` (``[repeat, defaults ms, fusion off
    ms]``), ``delta_ms``, ``delta_range_ms``, ``during_ms``, ``after_ms``, ``after_backward_us`` (``(b - a)`` in µs,
    what :attr:`~autotuner.model.costmodel.CostModel.after_backward_s` would be), ``miss_ms`` (simulated - measured long
    difference), ``one_latency_delta_ms`` (what the one latency gives at the long compute); ``after_ms`` None with
    a ``note`` where not identified; ``charged``: False (recorded: the fit charges the one latency, ``one_ms``)."""
    from ..stepprobe import LONG_COMPUTE_MS

    out: dict[str, Any] = {"compute_ms": LONG_COMPUTE_MS, "rounds": [], "delta_ms": None, "delta_range_ms": None,
                           "during_ms": None, "after_ms": None, "after_backward_us": None, "miss_ms": None,
                           "during_range_ms": None, "after_range_ms": None, "one_latency_delta_ms": None,
                           "charged": False}
    rounds = _paired_rounds(long_by)
    out["rounds"] = [[k, j["defaults"], j["fusion-off"]] for k, j in rounds]
    if len(rounds) < MIN_STEP_ROUNDS:
        out["note"] = f"{len(rounds)} round(s) at {LONG_COMPUTE_MS:g} ms of compute, fewer than {MIN_STEP_ROUNDS}"
        return out
    D, out["delta_range_ms"] = _deltas(rounds)
    out["delta_ms"] = D
    out["one_latency_delta_ms"] = _step_delta_sim_ms(cost, cluster, one_ms, "fusion-off", backend, LONG_COMPUTE_MS)
    curve = _long_curve(cost, cluster, backend, d_short, 2.0 * one_ms)
    if not curve:
        out["note"] = "no latencies meet the measured difference at the first compute"
        return out
    a, b, miss = _nearest(curve, D)
    out.update(during_ms=a, after_ms=b, after_backward_us=(b - a) * 1e3, miss_ms=miss)
    pts = [(a, b)] + [_nearest(curve, x)[:2] for x in out["delta_range_ms"]]  # the curve is no monotone function
    out["during_range_ms"] = [min(x[0] for x in pts), max(x[0] for x in pts)]
    out["after_range_ms"] = [min(x[1] for x in pts), max(x[1] for x in pts)]
    return out


#: fewest complete (fast, reference) job pairs for the per-cycle compute cost
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
        info["note"] = "no cpu phase (measure --cpu-repeats): compute beside Horovod's cycles not measured"
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
