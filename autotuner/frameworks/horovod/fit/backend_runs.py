"""Fit a ``backend-runs`` environment: wall times of whole training runs per collective backend
and process count on one server (lab report 002, ``runs/t4x4-pcie``).

Each run is the shell's ``time`` of a whole training job, so (:mod:`autotuner.model.wallclock`)

    wall(N, backend) = F + steps_per_rank(N) · step(N, backend)

with ``step`` simulated by :func:`autotuner.frameworks.horovod.simulator.simulate_step` for the env's
workload (layout, one compute constant) on one node of N ranks with that backend's intra-node
tier. At N = 1 Horovod does nothing (the simulator's single-rank rule), so step = compute.

What is fitted, and from which rows (env.toml names them; every other row is held out):

1. **Compute ``c``** (the one compute constant of the (report, model) pair) and **start-up
   ``F``** (the environment's one fixed-cost parameter: launch, imports, CUDA initialisation,
   data loading, the test passes) from the ``fit_backend`` runs at ``fit_processes`` (report
   002: MPI on 1 and 2 GPUs), by least squares on relative residuals. The fit backend's own tier
   cannot be separated from ``c`` by those runs, so it is the assumed prior
   (``prior_alpha_us``, ``prior_bandwidth_gbps``: PCIe, named as assumed in the model's ``fit``;
   docs/explanation/t4x4-pcie.md shows the predictions over its range).
2. **Each other backend's latency ``alpha``** (its ring tier's per-step latency; bandwidth kept
   at the prior: 85 KiB per step cannot identify it) from that backend's runs at the fit
   process counts above 1 (report 002: its 2-GPU run), with ``c`` and ``F`` held. The simulated
   step of a ~10 ms step with a 1 ms cycle moves in whole cycles, so the latency is resolved
   only to an interval (:func:`_latency_interval`); the tier takes its midpoint and every
   held-out prediction also gives the range over the interval (``range_s``).

Every GPU run not used above is predicted and compared (``fit["held_out"]``). Runs on the
other device (report 002's CPU rows when the env models GPUs) are read and named in
``env.problems``, not fitted: another device needs its own compute constant and start-up.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from scipy.optimize import least_squares

from ....errors import FitError
from ....model.costmodel import GBIT, BackendCost, Cluster, CostModel, Negotiation, Tier
from ..simulator import simulate_step
from ....model.wallclock import RunShape
from ....readers.labreport import parse_backend_runs
from ..readers.runs import EnvData
from .fitters import (
    GPU_MEMCPY_BPS,
    PCIE3_BPS,
    _data_layout,
    _model_dict,
    _workload_json,
    parse_env_report,
    run_config,
    workload_for,
)

#: backends a Horovod build can use for its collectives (the report's labels, lower case)
BACKENDS = ("mpi", "gloo", "nccl")


def _ctrl_op_s(tier: Tier) -> float:
    # one small controller collective ~ a tiny allreduce on 2 ranks (fitters._negotiation_for)
    return float(tier.allreduce_s(64, 2))


def _latency_interval(wall_of, measured_s: float, grid=np.concatenate(([0.0], np.geomspace(1e-7, 1e-2, 241))),
                      ) -> tuple[float, float, float]:
    """The latencies (s) whose simulated wall time is the plateau nearest ``measured_s``.

    ``wall_of(alpha)`` is non-decreasing and, at steps a few cycles long, a staircase: the
    simulated step moves in whole cycle times (the loop's tick after the hand-over), so a
    latency is identified only to the interval of its plateau. Returns ``(lo, hi, plateau wall
    s)`` over ``grid`` (0 and 0.1 µs .. 10 ms, 241 log-spaced points). Raises FitError when
    even 10 ms per ring step simulates faster than measured."""
    walls = np.array([wall_of(float(a)) for a in grid])
    if walls[-1] < measured_s * 0.9:
        raise FitError(f"a run of {measured_s} s needs a latency over {grid[-1] * 1e3:g} ms per ring step")
    k = int(np.argmin(np.abs(walls - measured_s)))
    same = np.flatnonzero(np.isclose(walls, walls[k], rtol=1e-9, atol=1e-9))
    return float(grid[same.min()]), float(grid[same.max()]), float(walls[k])


def fit_backend_runs_env(env: EnvData) -> dict[str, Any]:
    """Fit the env (see the module docstring). Returns the model dict (``autotuner.model/1``) with
    ``cost_model.backends`` (one fitted intra-node tier per backend measured), the workload's
    ``run`` (start-up, images, batch, epochs) and ``fit["held_out"]``: every run not fitted,
    measured vs predicted wall time (s). Raises FitError when a fit run is missing or the
    workload cannot be calibrated, RunsError/ReportError for an unreadable report."""
    meta = env.meta
    rel = f"{env.path.name}/{meta['source']}"
    runs = parse_env_report(env, parse_backend_runs)
    device = meta.get("device", "GPU")
    other = [r for r in runs if r.device != device]
    if other:
        env.problems.append(f"{rel}: {len(other)} {other[0].device} run(s) (lines "
                            f"{', '.join(str(r.line) for r in other)}) not fitted: this env models {device} ranks "
                            "(another device needs its own compute constant and start-up)")
    runs = [r for r in runs if r.device == device and r.servers == 1]
    layout = _data_layout(env, meta["layout"], "layout")
    shape = RunShape(int(meta["train_images"]), int(meta["batch_size"]), int(meta["epochs"]), 0.0)
    cfg = run_config(meta, {})
    asy = str(meta.get("backend", "")).lower() == "nccl"
    fit_b = str(meta["fit_backend"]).lower()
    fit_n = sorted(set(int(n) for n in meta["fit_processes"]))
    by_key = {(r.backend.lower(), r.processes): r for r in runs}
    fit_rows = [by_key.get((fit_b, n)) for n in fit_n]
    if any(r is None for r in fit_rows):
        missing = [n for n, r in zip(fit_n, fit_rows) if r is None]
        raise FitError(f"{env.name}: no {fit_b} {device} run on {missing} process(es) in {rel} to fit compute and start-up")
    prior = Tier(float(meta["prior_alpha_us"]) * 1e-6, float(meta["prior_bandwidth_gbps"]) * GBIT)

    def cost_for(t: Tier) -> CostModel:
        return CostModel(inter=t, intra=t, link_gbps=float(meta["link_gbps"]), memcpy_Bps=GPU_MEMCPY_BPS,
                         host_copy_Bps=PCIE3_BPS, negotiation=Negotiation(ctrl_op_s=_ctrl_op_s(t)))

    def step_s(c: float, n: int, t: Tier) -> float:
        return simulate_step(layout.sizes_bytes, layout.ready_fraction, workload_for(c, async_collectives=asy), cfg,
                             cost_for(t), Cluster(1, n)).step_time_s

    def wall(F: float, c: float, n: int, t: Tier) -> float:
        return F + shape.steps_per_rank(n) * step_s(c, n, t)

    # 1. compute and start-up from the fit backend's runs (relative least squares)
    one = fit_rows[0]
    c0 = one.real_s / shape.steps_per_rank(one.processes) / 2
    res = least_squares(lambda x: [(wall(x[0], x[1], r.processes, prior) - r.real_s) / r.real_s for r in fit_rows],
                        x0=[one.real_s / 2, c0], bounds=([0.0, 1e-6], [one.real_s, one.real_s]), x_scale=[10, 1e-2])
    F, c = float(res.x[0]), float(res.x[1])
    if not res.success:
        raise FitError(f"{env.name}: compute and start-up did not converge ({res.message})")

    # 2. every other backend's latency from its own runs at the fit process counts > 1
    tiers: dict[str, Tier] = {fit_b: prior}
    intervals: dict[str, tuple[float, float]] = {fit_b: (prior.alpha_s, prior.alpha_s)}
    fitted_on: dict[str, str] = {fit_b: f"assumed prior ({meta['prior_alpha_us']} µs, "
                                        f"{meta['prior_bandwidth_gbps']} Gbit/s): not identifiable from its own runs"}
    for b in sorted({r.backend.lower() for r in runs} - {fit_b}):
        rows = [by_key[(b, n)] for n in fit_n if n > 1 and (b, n) in by_key]
        if not rows:
            env.problems.append(f"{rel}: backend {b}: no run on {[n for n in fit_n if n > 1]} process(es): no tier fitted")
            continue
        r = rows[0]
        lo, hi, plateau = _latency_interval(lambda a, r=r: wall(F, c, r.processes, Tier(a, prior.bandwidth_Bps)),
                                            r.real_s)
        alpha = (lo + hi) / 2
        intervals[b] = (lo, hi)
        if abs(plateau - r.real_s) / r.real_s > 0.005:
            env.problems.append(f"{rel}:{r.line}: backend {b}: {r.processes}-process run {r.real_s} s lies between the "
                                f"simulated plateaus (nearest {plateau:.3f} s): at this step length the simulated step "
                                f"moves in whole cycles, so the latency is resolved only to [{lo * 1e6:.1f}, "
                                f"{hi * 1e6:.1f}] us")
        tiers[b] = Tier(alpha, prior.bandwidth_Bps)
        fitted_on[b] = f"{rel}:{r.line} ({b}, {r.processes} processes, {r.real_s} s)"

    fit_keys = {(fit_b, n) for n in fit_n} | {(b, n) for b in tiers for n in fit_n if n > 1}
    held_out = []
    for r in sorted(runs, key=lambda r: (r.backend.lower(), r.processes)):
        b = r.backend.lower()
        if (b, r.processes) in fit_keys or b not in tiers:
            continue
        p = wall(F, c, r.processes, tiers[b])
        ends = [wall(F, c, r.processes, Tier(a, prior.bandwidth_Bps)) for a in intervals[b]]
        held_out.append({"range_s": [min(ends), max(ends)],"backend": b, "processes": r.processes, "line": r.line, "measured_s": r.real_s,
                         "predicted_s": p, "error_percent": (p - r.real_s) / r.real_s * 100,
                         "steps_per_rank": shape.steps_per_rank(r.processes),
                         "step_ms": step_s(c, r.processes, tiers[b]) * 1e3})
    home = str(meta.get("backend", fit_b)).lower()
    if home not in tiers:
        raise FitError(f"{env.name}: the env's backend {home!r} has no fitted tier (fitted: {', '.join(tiers)})")
    cost = CostModel(inter=tiers[home], intra=tiers[home], link_gbps=float(meta["link_gbps"]),
                     memcpy_Bps=GPU_MEMCPY_BPS, host_copy_Bps=PCIE3_BPS,
                     negotiation=Negotiation(ctrl_op_s=_ctrl_op_s(tiers[home])),
                     backends=tuple((b, BackendCost(t, _ctrl_op_s(t))) for b, t in sorted(tiers.items())))
    wl = workload_for(c, async_collectives=asy)
    model = str(meta["workload_model"])
    lines = ", ".join(f"{r.line} ({r.processes} proc., {r.real_s} s)" for r in fit_rows)
    workloads = {model: {"layout": meta["layout"], **_workload_json(wl),
                         "calibrated_on": f"{rel}:{lines}: compute {c * 1e3:.4f} ms/step and start-up {F:.3f} s",
                         "run": RunShape(shape.train_images, shape.batch_size, shape.epochs, F).to_dict()}}
    fit_info = {"form": "wall = start-up + steps per rank x simulated step; one compute constant, one start-up, "
                        "one ring latency per backend",
                "device": device, "fit_backend": fit_b, "fit_processes": fit_n,
                "compute_ms": c * 1e3, "startup_s": F,
                "fit_residuals_percent": [float(v) * 100 for v in np.atleast_1d(res.fun)],
                "assumed": {"tier": fit_b, "alpha_us": prior.alpha_s * 1e6,
                            "bandwidth_gbps": prior.bandwidth_Bps / GBIT,
                            "why": "the fit backend's runs fix compute and start-up; its latency cannot be separated "
                                   "from them (docs/explanation/t4x4-pcie.md gives the range)"},
                "backends": {b: {"alpha_us": t.alpha_s * 1e6, "bandwidth_gbps": t.bandwidth_Bps / GBIT,
                                 "alpha_range_us": [intervals[b][0] * 1e6, intervals[b][1] * 1e6],
                                 "fitted_on": fitted_on[b]} for b, t in sorted(tiers.items())},
                "inter": "not measured (the report's multi-server table is blank): the inter tier is the env "
                         "backend's intra tier, a placeholder for what-ifs only",
                "held_out": held_out}
    d = _model_dict(env, Cluster(int(meta["nodes"]), int(meta["gpus_per_node"])), cost, fit_info, workloads, cfg)
    return d
