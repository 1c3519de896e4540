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
from ....model.costmodel import Cluster, ComputeDelay, Fp16Cost
from ....readers.files import read_toml
from ..readers.runs import EnvData
from ..readers.sweep import (parse_burst_records, parse_cpu_records, parse_fp16_records, parse_fused_records,
                             parse_idle_records,
                             parse_step_records,
                             parse_trickle_records, read_phase_records, read_sweep_records)
from ....readers.timeline import read_timeline, samples
from ....readers.timeline_steps import response_host_samples
from ....fit.collective import borrow_fp16_sum, fp16_cost
from .fitters import _model_dict, run_config, timeline_cost_model
from .phase_fused import (
    FUSED_RECORDS, fused_copy, _on_cluster_ranks, bound_below_knee, _tier, _per_tensor)
from .phase_small import (
    CPU_RECORDS, TRICKLE_RECORDS, IDLE_RECORDS, lone_response, idle_response, busy_small_response, BURST_RECORDS,
    STEP_RECORDS, burst_small_response, MID_RECORDS, mid_response, mid_bandwidth)
from .phase_step import step_small_response, small_price_range, step_cache_off
from .phase_cpu import cycle_cpu, stream_delay, cycle_negotiation_s, _cycle_negotiation, FP16_RECORDS

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
    # in place of the timelines' copy rate (research/notes/accuracy.md, "Fused responses without the timeline"); first, so
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
    # (research/notes/fresh-environments.md section 9)
    trickle_read: dict = {}  # the trickle phase's timelines, parsed once for its two readers below
    neg_info["lone"] = lone_response(trecs, src.parent, env.problems, trickle_read)
    irecs, iproblems = read_phase_records(src.parent / IDLE_RECORDS, parse_idle_records, f"{env.path.name}/{IDLE_RECORDS}")
    env.problems += iproblems
    # measured and recorded, not charged: as a floor on the collective of responses up to 64 KiB while
    # the main thread sleeps it over-charged the poll envs' fusion-off replays (+7.7 to +13.6 %) and made
    # four envs' held-out errors worse (research/notes/fresh-environments.md section 11)
    idle_info = idle_response(irecs, src.parent, env.problems, ranks[first])
    # what a step's small responses cost: back to back in a busy cycle, from the phases that run them so
    # (the fusion-off job, the trickle phase's all-at-once tensors), in place of the pooled line's
    # intercept (research/notes/accuracy.md, "The small-response regime")
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
    # ranks sleep through an emulated backward (research/notes/accuracy.md, "The burst phase")
    small_info["burst"] = burst_small_response([r for r in brecs if r.get("tier", first) == first], cost, ranks[first])
    # charged where the records resolve it, on the cluster's own ranks: what a queued mid-size response costs by the
    # wall clock against the line above the knee, fitted on timeline spans (research/notes/accuracy.md, "Mid-size responses
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
    # which carries the timeline writer's CPU (research/notes/accuracy.md, "The step phase")
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
    # replay's 256 KiB gradients are priced on that line, is then solved again (research/notes/accuracy.md, "Mid-size
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
    # the timelines' extra, which carries the writer's per-tensor work (research/notes/accuracy.md, "Cache off from the step
    # phase")
    step_info["cache_off"], cost = step_cache_off(step_info, cost, step_cluster, meta.get("backend"))
    # recorded beside the charged price, not charged: the burst and step phases price a small response apart by up to
    # 2x and neither carries to every real layout, so predictions give the step time at both (research/notes/accuracy.md, "The
    # small-response price the phases leave open")
    small_info["range"] = small_price_range(step_info, small_info["burst"], ranks[first])
    if small_info["range"]["alpha_us"] is not None:
        cost = replace(cost, small_alpha_range_s=tuple(x * 1e-6 for x in small_info["range"]["alpha_us"]))
    frecs, fproblems = read_phase_records(src.parent / FP16_RECORDS, parse_fp16_records, f"{env.path.name}/{FP16_RECORDS}")
    env.problems += fproblems
    # where the env's own phase does not pin the float16 sum (a slow link), the phases of the same stack and sitting
    # that do (docs/explanation/fp16-compression.md, "A phase that does not pin the sum")
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
