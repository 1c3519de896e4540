"""Fit cost models and workloads from measured records (``autotuner fit runs/``).

Input: :class:`autotuner.readers.runs.EnvData` records. Output: a JSON-ready dict per
environment (schema ``autotuner.model/1``, see :mod:`autotuner.frameworks.horovod.fit.store`). Fitting uses
scipy; simulation uses :func:`autotuner.frameworks.horovod.simulator.simulate_step`. See docs/explanation/cost-model.md.

Forms and choices:
- Per-response samples (report 000): each size bucket gives (mean bytes, mean time). For a
  model linear in n, the bucket mean time equals ``a + b·mean bytes`` exactly, so bucket means
  are valid samples. ``T(n) = a + b·n`` is fitted by scipy ``least_squares`` on relative
  residuals weighted by sqrt(count) with a, b >= 0 (pooled over every run of the
  environment). Each model then gets one ``comm_scale`` = its total measured collective time /
  the pooled fit's prediction for the same responses (sum of count x mean time), because the residuals show a per-workload level (ResNet50's responses ran at
  ~0.64x the bus bandwidth of VGG16's on the same cluster, in every size bucket and with fusion
  on and off alike).
- Step-time-only data (report 001): compute time per model calibrated on its single-GPU
  (1x1) step time (no communication); the inter-node tier's bandwidth is fitted by least squares so that the
  simulated 4x1 step times match, with the latency taken from ``alpha_us`` in env.toml (or
  100 µs); the 1x4 column fits the intra-node tier the same way.
- Compute split: forward (with data and loss) = 1/3, backward = 2/3 of the compute time
  (backward ≈ 2x forward FLOPs for conv/linear layers), update 0 unless the data says
  otherwise. One compute time per (environment, model), calibrated on the reference run.
"""
from __future__ import annotations

from collections import ChainMap
from importlib import import_module
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
from scipy.optimize import brentq, minimize_scalar

from ....errors import FitError
from ..knobs import DEFAULTS_0_28, MIB, Config, config_from_values, defaults_for
from ....model.costmodel import Cluster, CostModel, Negotiation, Tier
from ....model.layout import Layout
from ..simulator import simulate_step
from ....model.workload import Workload
from ....readers.layouts import load_data_layout
from ..readers.runs import EnvData
from ....schemas import MODEL_SCHEMA, Format, is_plain_name
from ....fit.collective import fit_collective_tier  # noqa: F401  (shared by every framework; re-exported for the fitters)
from ....fit.regression import fit_host_passes, fit_linear, mape, r_squared

FORWARD_FRACTION = 1 / 3
#: V100 device-to-device copy bandwidth used for fusion-buffer copies (bytes/s): HBM2 peak
#: 900 GB/s (NVIDIA V100 datasheet), each copy reads and writes, so ~400 GB/s effective.
GPU_MEMCPY_BPS = 400e9
#: PCIe 3.0 x16 device<->host copy (~12 GB/s achievable of 15.75 GB/s peak), hierarchical only.
PCIE3_BPS = 12e9


def workload_for(compute_s: float, comm_scale: float = 1.0, overlap: float = 1.0,
                 host_backward_s: float | None = None, async_collectives: bool = False) -> Workload:
    return Workload(forward_s=compute_s * FORWARD_FRACTION, backward_s=compute_s * (1 - FORWARD_FRACTION),
                    update_s=0.0, comm_scale=comm_scale, overlap=overlap, host_backward_s=host_backward_s,
                    async_collectives=async_collectives)


def _async(meta: dict[str, Any]) -> bool:
    """GPU collectives are asynchronous to the background loop in Horovod's NCCL build
    (ops/nccl_operations.cc NCCLAllreduce::Execute ends in GPUOpContext::FinalizeGPUQueue,
    ops/gpu_operations.cc, which hands completion to the finalizer thread and returns InProgress)."""
    return str(meta.get("backend", "")).lower() == "nccl"


def _workload_json(wl: Workload) -> dict[str, Any]:
    return {"forward_ms": wl.forward_s * 1e3, "backward_ms": wl.backward_s * 1e3, "update_ms": wl.update_s * 1e3,
            "comm_scale": wl.comm_scale, "overlap": wl.overlap,
            "host_backward_ms": None if wl.host_backward_s is None else wl.host_backward_s * 1e3,
            "async_collectives": wl.async_collectives}


def simulate_ms(layout: Layout, wl: Workload, cfg: Config, cost: CostModel, cluster: Cluster) -> float:
    return simulate_step(layout.sizes_bytes, layout.ready_fraction, wl, cfg, cost, cluster).step_time_ms


def calibrate_compute(layout: Layout, measured_ms: float, comm_scale: float, overlap: float, cfg: Config,
                      cost: CostModel, cluster: Cluster, host_backward_s: float | None = None,
                      async_collectives: bool = False) -> float:
    """Compute time (s) for which the simulated step equals ``measured_ms``.

    Raises FitError when even zero compute simulates slower than measured (the network
    alone is too slow for that step time).
    """
    def f(c: float) -> float:
        wl = workload_for(c, comm_scale, overlap, host_backward_s, async_collectives)
        return simulate_ms(layout, wl, cfg, cost, cluster) - measured_ms
    lo, hi = 1e-6, measured_ms * 1e-3 * 2
    if f(lo) > 0:
        raise FitError(f"communication alone simulates {f(lo) + measured_ms:.1f} ms > measured {measured_ms:.1f} ms")
    return float(brentq(f, lo, hi, xtol=1e-7))


def run_config(meta: Mapping[str, Any], run: Mapping[str, Any] | None = None) -> Config:
    """The knobs of one measured run: the run's own values, else the environment's, else the
    defaults of the env's ``horovod_version`` (:func:`autotuner.frameworks.horovod.knobs.defaults_for`). Keys are
    option names in flag units (``fusion_threshold_mb``, ``cycle_time_ms``, ...). Raises KnobError."""
    return config_from_values(ChainMap(dict(run or {}), dict(meta)), defaults_for(meta.get("horovod_version")),
                              where=str(meta.get("name", "env.toml")))



def _negotiation_for(tier: Tier, p: int) -> Negotiation:
    # one small controller collective ~ the fitted latency of a tiny allreduce on p ranks
    return Negotiation(ctrl_op_s=tier.allreduce_s(64, p))


def fit_responses_env(env: EnvData) -> dict[str, Any]:
    """Fit an environment whose data is per-run response-size tables (report 000 format)."""
    meta = env.meta
    runs = {r["id"]: r for r in meta.get("run", [])}
    cluster = Cluster(int(meta["nodes"]), int(meta["gpus_per_node"]))
    _name_dropped_buckets(env, runs)
    rows = [b for b in env.buckets if b.run in runs and b.count > 0 and b.mean_ms > 0]
    if len(rows) < 2:
        raise FitError(f"{env.name}: fewer than 2 usable response buckets")
    nbytes = np.array([b.mean_mib * MIB if b.mean_mib > 0 else (b.lo_bytes + b.hi_bytes) / 2 for b in rows])
    times = np.array([b.mean_ms * 1e-3 for b in rows])
    weights = np.sqrt([b.count for b in rows])
    lin = fit_linear(nbytes, times, weights)
    tier = Tier.from_linear(lin.a_s, lin.b_s_per_byte, cluster.size)
    cost = CostModel(inter=tier, link_gbps=float(meta["link_gbps"]), memcpy_Bps=GPU_MEMCPY_BPS,
                     host_copy_Bps=PCIE3_BPS, negotiation=_negotiation_for(tier, cluster.size))
    base = lin.a_s + lin.b_s_per_byte * nbytes
    samples = [{"run": b.run, "line": b.line, "bytes": float(n), "time_ms": float(t * 1e3),
                "count": b.count, "model": runs[b.run]["model"]} for b, n, t in zip(rows, nbytes, times)]
    workloads: dict[str, Any] = {}
    overlap = float(meta.get("overlap", 1.0))
    models = sorted({runs[b.run]["model"] for b in rows})
    for m in sorted({r["model"] for r in runs.values()} - set(models)):
        env.problems.append(f"{env.path.name}/{meta['source']}: model {m!r}: no usable response bucket: not fitted")
    scaled_pred = base.copy()
    for m in models:
        idx = np.array([runs[b.run]["model"] == m for b in rows])
        counts = np.array([b.count for b in rows])[idx]
        # the scale that reproduces this model's total measured collective time
        scale = float(np.sum(counts * times[idx]) / np.sum(counts * base[idx]))
        scaled_pred[idx] = scale * base[idx]
        ref = [r for r in runs.values() if r["model"] == m and r.get("reference")]
        if len(ref) != 1:
            raise FitError(f"{env.name}: model {m} needs exactly one run with reference = true")
        ref = ref[0]
        step = next((s for s in env.step_times if s.run == ref["id"]), None)
        if step is None:
            raise FitError(f"{env.name}: no step time for reference run {ref['id']}")
        layout = _data_layout(env, ref["layout"], f"run {ref['id']!r} layout")
        hb = _host_backward_s(meta, m)
        compute = calibrate_compute(layout, step.step_ms, scale, overlap, run_config(meta, ref), cost, cluster,
                                    hb, _async(meta))
        wl = workload_for(compute, scale, overlap, hb, _async(meta))
        workloads[m] = {"layout": ref["layout"], **_workload_json(wl),
                        "calibrated_on": f"{env.path.name}/{meta['source']}:{step.line} ({ref['id']}, {step.step_ms} ms)"}
    fit_info = {"form": "alpha-beta (ring)", "p": cluster.size, "a_ms": lin.a_s * 1e3,
                "b_ms_per_mib": lin.b_s_per_byte * MIB * 1e3, "r2": lin.r2, "mape_percent": lin.mape,
                "r2_with_comm_scale": r_squared(times, scaled_pred),
                "mape_percent_with_comm_scale": mape(times, scaled_pred),
                "n_samples": lin.n, "samples": samples}
    return _model_dict(env, cluster, cost, fit_info, workloads, run_config(meta, {}))


def _data_layout(env: EnvData, ref: str, what: str) -> Layout:
    """The layout env.toml names: shipped, or a .json file in the env's folder (never code)."""
    return load_data_layout(ref, env.path, f"{env.path / 'env.toml'}: {what}")


def parse_env_report(env: EnvData, parse: Callable[..., tuple[list, list[str]]], *args: Any) -> list:
    """The records of the env's ``source`` report read by ``parse(text, *args, source)`` (a
    :mod:`autotuner.readers.labreport` parser); its problems are added to ``env.problems``.
    Raises RunsError for an unreadable file, FitError (one line) when the parser reads nothing.
    Shared by the ``backend-runs``, ``cpu-scaling`` and ``compression-runs`` fitters."""
    from ....errors import ReportError, RunsError
    from ....readers.files import read_text

    rel = f"{env.path.name}/{env.meta['source']}"
    text = read_text(env.path / env.meta["source"], RunsError, rel)
    try:
        records, problems = parse(text, *args, rel)
    except ReportError as e:
        raise FitError(str(e)) from None
    env.problems += problems
    return records


def _name_dropped_buckets(env: EnvData, runs: Mapping[str, Any]) -> None:
    """Name in ``env.problems`` every response table that the fit cannot use: a run the report
    has and env.toml does not list (a typo in either), a listed run without a table, a bucket
    with no responses or no time."""
    rel = f"{env.path.name}/{env.meta['source']}"
    unknown: dict[str, list[int]] = {}
    for b in env.buckets:
        if b.run not in runs:
            unknown.setdefault(b.run, []).append(b.line)
        elif not (b.count > 0 and b.mean_ms > 0):
            env.problems.append(f"{rel}:{b.line}: run {b.run}: bucket with count {b.count} and mean "
                                f"{b.mean_ms} ms dropped")
    for run, lines in unknown.items():
        env.problems.append(f"{rel}:{lines[0]}: run {run!r} is not a [[run]] of {env.path.name}/env.toml: "
                            f"its {len(lines)} bucket(s) dropped")
    have = {b.run for b in env.buckets} | {s.run for s in env.step_times}  # the report reader names the rest
    for run in runs:
        if run not in have:
            env.problems.append(f"{env.path.name}/env.toml: run {run!r}: not in {rel}")


def _host_backward_s(meta: dict[str, Any], model: str) -> float | None:
    """Host-side backward time (s) of ``model`` from env.toml's ``[host_backward_ms]``, or None."""
    v = meta.get("host_backward_ms", {}).get(model)
    return None if v is None else float(v) * 1e-3


def _steps(env: EnvData, column: str, row: str = "step") -> dict[str, float]:
    return {c.model: c.value for c in env.breakdown if c.column == column and c.row == row and c.unit == "ms"}


def _fit_tier_bandwidth(cases: list[tuple[Layout, float, float, float | None]], cfg: Config, cluster: Cluster,
                        alpha_s: float, overlap: float, make_cost, async_collectives: bool) -> tuple[Tier, float]:
    """Fit one tier's bandwidth so simulated steps match measured (relative least squares).

    ``cases``: (layout, compute s, measured step ms, host backward s or None) per model.
    """
    def loss(log_bw: float) -> float:
        cost = make_cost(Tier(alpha_s, float(np.exp(log_bw))))
        return sum(((simulate_ms(L, workload_for(c, 1.0, overlap, hb, async_collectives), cfg, cost, cluster) - m)
                    / m) ** 2 for L, c, m, hb in cases)
    grid = np.linspace(np.log(1e7), np.log(1e12), 41)  # coarse scan first: the loss is not unimodal
    k = int(np.argmin([loss(g) for g in grid]))
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, grid.size - 1)]
    res = minimize_scalar(loss, bounds=(lo, hi), method="bounded", options={"xatol": 1e-6})
    return Tier(alpha_s, float(np.exp(res.x))), float(res.fun)


def fit_breakdown_env(env: EnvData) -> dict[str, Any]:
    """Fit an environment whose data is per-cluster-shape step times (report 001 format)."""
    meta = env.meta
    cols = {c["key"]: c for c in meta["column"]}
    cfg = run_config(meta, {})
    single = [k for k, c in cols.items() if c["nodes"] * c["gpus_per_node"] == 1]
    multi_node = [k for k, c in cols.items() if c["nodes"] > 1]
    one_node = [k for k, c in cols.items() if c["nodes"] == 1 and c["gpus_per_node"] > 1]
    if not single or not multi_node:
        raise FitError(f"{env.name}: needs a 1x1 column (compute) and a multi-node column (network)")
    one = Cluster(1, 1)
    dummy = CostModel(inter=Tier(0.0, 1e12), link_gbps=1.0)
    layouts = {m["model"]: _data_layout(env, m["layout"], f"model {m['model']!r} layout")
               for m in meta.get("model", [])}
    single_steps = _steps(env, single[0])
    rel = f"{env.path.name}/{meta['source']}"
    for m in sorted(set(single_steps) - set(layouts)):
        env.problems.append(f"{rel}: model {m!r} is not a [[model]] of {env.path.name}/env.toml: dropped")
    for m in sorted(set(layouts) - set(single_steps)):
        env.problems.append(f"{env.path.name}/env.toml: model {m!r}: no {single[0]} step time in {rel}: dropped")
    # host-side backward (the report's "backward" row: loss.backward() returns once autograd has
    # launched every kernel and run every hook) of the multi-node column, where Horovod's hooks run;
    # one value per model, shared by every column like the compute time
    host_bwd = {m: v * 1e-3 for m, v in _steps(env, multi_node[0], "backward").items()}
    asy = _async(meta)
    # compute time per model: the single-GPU step (no communication), through the simulator so
    # that the 1-rank background loop's cycle wait is accounted for
    compute = {m: calibrate_compute(layouts[m], v, 1.0, float(meta.get("overlap", 1.0)), cfg, dummy, one,
                                    host_bwd.get(m), asy) * 1e3
               for m, v in single_steps.items() if m in layouts}
    alpha = float(meta.get("alpha_us", 100.0)) * 1e-6
    mn = cols[multi_node[0]]
    cluster = Cluster(int(mn["nodes"]), int(mn["gpus_per_node"]))
    multi = _steps(env, multi_node[0])
    cases = [(layouts[m], compute[m] * 1e-3, multi[m], host_bwd.get(m)) for m in layouts
             if m in compute and m in multi]
    if not cases:
        raise FitError(f"{env.name}: no model has both a 1x1 and a {multi_node[0]} step time")
    link = float(mn.get("link_gbps", meta.get("link_gbps", 10.0)))

    def inter_cost(t: Tier) -> CostModel:
        return CostModel(inter=t, link_gbps=link, memcpy_Bps=GPU_MEMCPY_BPS, host_copy_Bps=PCIE3_BPS,
                         negotiation=_negotiation_for(t, cluster.size))
    overlap = float(meta.get("overlap", 1.0))
    inter, _ = _fit_tier_bandwidth(cases, cfg, cluster, alpha, overlap, inter_cost, asy)
    cost = inter_cost(inter)
    fit_info: dict[str, Any] = {"form": "alpha-beta (ring), bandwidth fitted on step times", "p": cluster.size,
                                "alpha_us_assumed": alpha * 1e6, "inter_cases": [
                                    {"model": L.name, "column": multi_node[0], "measured_ms": m,
                                     "compute_ms": c * 1e3} for L, c, m, _ in cases]}
    if one_node:
        oc = cols[one_node[0]]
        ocl = Cluster(1, int(oc["gpus_per_node"]))
        ones = _steps(env, one_node[0])
        icases = [(layouts[m], compute[m] * 1e-3, ones[m], host_bwd.get(m)) for m in layouts
                  if m in compute and m in ones]
        if icases:
            intra, _ = _fit_tier_bandwidth(icases, cfg, ocl, 10e-6, overlap,
                                           lambda t: CostModel(inter=inter, intra=t, link_gbps=link,
                                                               memcpy_Bps=GPU_MEMCPY_BPS, host_copy_Bps=PCIE3_BPS,
                                                               negotiation=_negotiation_for(t, ocl.size)),
                                           asy)
            cost = CostModel(inter=inter, intra=intra, link_gbps=link, memcpy_Bps=GPU_MEMCPY_BPS,
                             host_copy_Bps=PCIE3_BPS, negotiation=cost.negotiation)
            fit_info["intra_cases"] = [{"model": L.name, "column": one_node[0], "measured_ms": m,
                                        "compute_ms": c * 1e3} for L, c, m, _ in icases]
    line = {c.model: c.line for c in env.breakdown if c.column == single[0] and c.row == "step"}
    workloads = {}
    for m, L in layouts.items():
        if m not in compute:
            continue
        wl = workload_for(compute[m] * 1e-3, 1.0, overlap, host_bwd.get(m), asy)
        workloads[m] = {"layout": L.name, **_workload_json(wl),
                        "calibrated_on": f"{env.path.name}/{meta['source']}:{line[m]} ({single[0]} step {single_steps[m]} ms)"}
    return _model_dict(env, cluster, cost, fit_info, workloads, cfg)


def _model_dict(env: EnvData, cluster: Cluster, cost: CostModel, fit_info: dict[str, Any],
                workloads: dict[str, Any], cfg: Config) -> dict[str, Any]:
    meta = env.meta
    return {
        "schema": MODEL_SCHEMA,
        "env": env.name,
        "default": bool(meta.get("default", False)),  # the env used when --env is not given
        "source": f"runs/{env.path.name}/{meta['source']}",
        "cluster": {"nodes": cluster.nodes, "gpus_per_node": cluster.gpus_per_node,
                    **({"cores_per_host": int(meta["cores_per_host"])} if meta.get("cores_per_host") else {}),
                    "gpu": meta.get("gpu"), "backend": meta.get("backend"),
                    "horovod_version": meta.get("horovod_version")},
        "measured_config": cfg.to_dict(),
        "cost_model": cost.to_dict(),
        "fit": fit_info,
        "workloads": workloads,
    }


def host_samples_for(env: EnvData, recs: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Host samples from the kept timelines of ``recs`` (``validation/timelines/<source stem>/
    <label>-r<repeat>.json.gz``, as ``validate --keep-timelines`` writes them). Returns
    ``(memcpy (m, 2), gaps (g, 4), files used)``; records without a kept timeline are skipped;
    a kept timeline that cannot be read is skipped and named in ``env.problems``."""
    from ....errors import AutotunerError
    from ....readers.timeline import read_timeline
    from ....readers.timeline_steps import host_samples

    folder = env.path / Path(env.meta["source"]).parent / "timelines" / Path(env.meta["source"]).stem
    mem, gaps, used = [], [], []
    for r in recs:
        f = folder / f"{r['trial'].replace('/', '-')}.json.gz"
        if not f.is_file():
            continue
        try:
            cyc = (r.get("config") or {}).get("cycle_time_ms")  # unknown (None) when the record omits it
            hs = host_samples(read_timeline(f), cycle_time_ms=None if cyc is None else float(cyc))
        except AutotunerError as e:  # TimelineError, KnobError: named, not silently skipped
            env.problems.append(f"{env.path.name}/{f.relative_to(env.path)}: kept timeline of trial {r['trial']} "
                                f"dropped from the host-pass fit ({e})")
            continue
        mem += hs.memcpy
        gaps += hs.gaps
        used.append(str(f.relative_to(env.path)))
    return np.array(mem, float).reshape(-1, 2), np.array(gaps, float).reshape(-1, 4), used


def timeline_cost_model(tier: Tier, *, link_gbps: float, ranks: int, memcpy_bytes: float, memcpy_s: float,
                        host_mem, host_gaps, intra: Tier | None = None,
                        min_host: int = 3) -> tuple[CostModel, dict[str, Any] | None]:
    """The cost model of a fitted collective tier plus what timelines measure beside it.

    - fusion-buffer copy rate ``2 · memcpy_bytes / memcpy_s`` (bytes, s: MEMCPY_IN + MEMCPY_OUT of
      the fused responses; the simulator charges ``2 · bytes / memcpy_Bps``), or
      :data:`GPU_MEMCPY_BPS` when nothing was copied;
    - negotiation from the tier's small-message latency (:func:`_negotiation_for` on ``ranks``);
    - with at least ``min_host`` samples of each, host passes and the per-cycle negotiation
      cost from :func:`autotuner.fit.regression.fit_host_passes` (``host_mem`` shape (m, 2),
      ``host_gaps`` shape (g, 4)).

    Returns ``(cost model, host-pass fit info or None)``. Shared by the ``validation``,
    ``sweep`` and ``timelines`` fitters.
    """
    cost = CostModel(inter=tier, intra=intra, link_gbps=link_gbps,
                     memcpy_Bps=float(2 * memcpy_bytes / memcpy_s) if memcpy_s > 0 else GPU_MEMCPY_BPS,
                     negotiation=_negotiation_for(tier, ranks))
    if len(host_mem) < min_host or len(host_gaps) < min_host:
        return cost, None
    host, ctrl_op_s, info = fit_host_passes(np.asarray(host_mem, float).reshape(-1, 2),
                                            np.asarray(host_gaps, float).reshape(-1, 4))
    return replace(cost, host=host, negotiation=replace(cost.negotiation, ctrl_op_s=ctrl_op_s)), info


def fit_validation_env(env: EnvData) -> dict[str, Any]:
    """Fit an environment measured here by ``autotuner validate`` (records with timeline summaries).

    - Collective cost: ``T(n) = a + b·n`` (:func:`fit_linear`, each sample's relative residual
      weighted by sqrt(its share of the total collective time: count x duration)) on the fused
      responses read from the trials' Horovod timelines (GLOO_ALLREDUCE span vs response bytes),
      turned into a ring tier for the cluster's ranks; then, where the samples allow, a
      size-dependent latency: two such lines split at a knee (:func:`fit_piecewise`). On the
      1 Gbit/s testbed small allreduces pay ~3.5 ms of rank skew and queueing each while
      responses of 4 MiB and more stream with no measurable latency (docs/how-to/validate.md).
    - Fusion-buffer copy rate: 2 x bytes / (MEMCPY_IN + MEMCPY_OUT span) summed over fused
      responses (the simulator charges ``2 · bytes / memcpy_Bps``). Where the trials' raw
      timelines are kept (``validate --keep-timelines``), size-dependent host passes and the
      measured negotiation cost per cycle replace it (:func:`fit_host_passes`,
      :func:`host_samples_for`).
    - Workload: the replay workload's emulated compute (``setup.compute_ms``, split 1/3 : 2/3 as
      :mod:`autotuner.frameworks.horovod.replay` does) and ``setup.update_ms`` — known, not calibrated.
    Only records of status ``ok`` are used. Raises FitError when no record has timeline samples.
    """
    meta = env.meta
    cluster = Cluster(int(meta["nodes"]), int(meta["gpus_per_node"]))
    recs = [r for r in env.records if r.get("status") == "ok" and isinstance(r.get("timeline"), dict)
            and r["timeline"].get("samples")]
    if not recs:
        raise FitError(f"{env.name}: no successful trial with timeline samples in {meta['source']}")
    # [nbytes, count, median µs, mean µs]: the mean, because small allreduces have heavy tails
    # (mean 2-4x median on the 1 Gbit/s testbed) and the step pays the total, not the median
    kept = [(s, r["setup"]["model"]) for r in recs for s in r["timeline"]["samples"] if s[-1] > 0]
    rows = np.array([[s[0], s[1], s[-1]] for s, _ in kept], dtype=float)
    if len(rows) < 2:
        raise FitError(f"{env.name}: fewer than 2 usable timeline samples")
    nbytes, counts, times = rows[:, 0], rows[:, 1], rows[:, 2] * 1e-6
    tier, lin, pred, piece_info = fit_collective_tier(nbytes, counts, times, cluster.size)
    mem = np.array([r["timeline"]["memcpy"] for r in recs if r["timeline"].get("memcpy")], dtype=float).reshape(-1, 2)
    host_mem, host_gaps, host_files = host_samples_for(env, recs)
    cost, host_info = timeline_cost_model(tier, link_gbps=float(meta["link_gbps"]), ranks=cluster.size,
                                          memcpy_bytes=mem[:, 0].sum(), memcpy_s=mem[:, 1].sum() * 1e-6,
                                          host_mem=host_mem, host_gaps=host_gaps)
    if host_info is not None:
        host_info["timelines"] = host_files
    workloads: dict[str, Any] = {}
    for r in recs:
        st = r["setup"]
        if st.get("command"):
            continue  # a user's own command: its compute time is unknown
        if not is_plain_name(st["model"]):  # e.g. pkg.mod:factory: a model file names shipped layouts only
            if st["model"] not in workloads:
                env.problems.append(f"{env.path.name}/{meta['source']}: trial {r['trial']}: model {st['model']!r} "
                                    "is not a shipped layout name: no workload fitted for it")
            workloads[st["model"]] = None
            continue
        if "compute_ms" not in st:
            if st["model"] not in workloads:
                env.problems.append(f"{env.path.name}/{meta['source']}: trial {r['trial']}: setup has no compute_ms: "
                                    f"no workload fitted for {st['model']!r}")
            continue
        wl = workload_for(float(st["compute_ms"]) * 1e-3)
        workloads.setdefault(st["model"], {
            "layout": st["model"], "forward_ms": wl.forward_s * 1e3, "backward_ms": wl.backward_s * 1e3,
            "update_ms": float(st.get("update_ms", 0.0)), "comm_scale": 1.0, "overlap": 1.0,
            "calibrated_on": f"not calibrated: replay workload's emulated compute ({st['compute_ms']} ms)"})
    workloads = {m: w for m, w in workloads.items() if w is not None}
    fit_info = {"form": "alpha-beta (ring)", "p": cluster.size, "a_ms": lin.a_s * 1e3,
                "b_ms_per_mib": lin.b_s_per_byte * MIB * 1e3, "r2": lin.r2, "mape_percent": lin.mape,
                "n_samples": lin.n, "n_trials": len(recs), "piecewise": piece_info, "host_passes": host_info,
                "trials": sorted({r["trial"] for r in recs}),
                "samples": [{"bytes": float(n), "time_ms": float(t * 1e3), "count": int(c), "pred_ms": float(q * 1e3),
                             "model": m} for n, t, c, q, (_, m) in zip(nbytes, times, counts, pred, kept)]}
    return _model_dict(env, cluster, cost, fit_info, workloads, DEFAULTS_0_28)


def _lazy(module: str, name: str) -> Callable[[EnvData], dict[str, Any]]:
    """The fitter ``name`` of ``autotuner.fit.<module>``, imported when first called (those modules
    build on this one, so they cannot be imported at its top)."""
    def fit(env: EnvData) -> dict[str, Any]:
        return getattr(import_module(f"{__package__}.{module}"), name)(env)
    fit.__name__ = name
    return fit


FITTERS: dict[Format, Callable[[EnvData], dict[str, Any]]] = {
    Format.RESPONSES: fit_responses_env,
    Format.BREAKDOWN: fit_breakdown_env,
    Format.VALIDATION: fit_validation_env,
    Format.SWEEP: _lazy("sweep", "fit_sweep_env"),
    Format.NCCL_TESTS: _lazy("nccl_tests", "fit_nccl_tests_env"),
    Format.TIMELINES: _lazy("timelines", "fit_timelines_env"),
    Format.BACKEND_RUNS: _lazy("backend_runs", "fit_backend_runs_env"),
    Format.CPU_SCALING: _lazy("cpu_scaling", "fit_cpu_scaling_env"),
    Format.COMPRESSION_RUNS: _lazy("compression_runs", "fit_compression_runs_env"),
}


def fit_env(env: EnvData) -> dict[str, Any]:
    """Fit one environment with the fitter of its format (:data:`FITTERS`); returns the model
    dict (schema ``autotuner.model/1``). Raises FitError (or LayoutError, KnobError)."""
    try:
        fitter = FITTERS[Format(env.meta["format"])]
    except (KeyError, ValueError):
        raise FitError(f"{env.name}: no fitter for format {env.meta.get('format')!r}") from None
    return fitter(env)
