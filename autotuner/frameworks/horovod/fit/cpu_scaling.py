"""Fit an environment of CPU-only ranks sharing one host (``format = "cpu-scaling"``, lab report 003).

Input (env.toml, :class:`autotuner.schemas.CpuScalingEnv`): the report, read by
:func:`autotuner.readers.labreport.parse_cpu_scaling` with the ``[[model]]`` names in table
order; ``step_unit`` (the report prints none: seconds, research/notes/lab-reports-002-004-arithmetic.md);
``fit_model``; the host's ``logical_cpus`` and ``cores``; the assumed shared-memory tier.

Model (docs/explanation/laptop-cpu.md): a report "step" is a fixed global amount of work split over the
``N`` ranks (step time falls ~1/N), so each workload is stored as ``work_per_step = "global"``:
its compute is one rank alone doing the whole step, and the scenario runs
``compute · slowdown(N) / N`` per rank (:attr:`autotuner.frameworks.horovod.scenario.Scenario.rank_workload`)
plus the simulated allreduce of the model's gradients.

What is fitted, and on what:

- compute per model (the only per-model constant): its own ``N = 1`` step
  (:func:`autotuner.frameworks.horovod.fit.fitters.calibrate_compute` on one rank, where Horovod registers no hooks
  and the simulator adds nothing, so it is the step time itself);
- the contention's ``parallel_fraction`` (:class:`autotuner.model.contention.Contention`, one
  parameter for the environment, shared by every model): scipy ``minimize_scalar`` (bounded,
  [0, 1]) of the sum of squared relative errors of the simulated ``fit_model`` steps at every
  ``N > 1`` of its table;
- held out: every other model's ``N > 1`` steps, predicted and compared (``fit.held_out``).

Assumed (``fit.assumed``), since nothing in the report measures it: the MPI allreduce over
shared memory (``prior_alpha_us``, ``prior_bandwidth_gbps``), the fusion-buffer copy rate
(:data:`CPU_MEMCPY_BPS`), and the negotiation collective (the tier's 64-byte allreduce, as
:func:`autotuner.frameworks.horovod.fit.fitters._negotiation_for`).

Only the step-time column is used. The speedup column is checked against the step-time ratio
and the total throughput against processes x throughput per process; mismatches are listed in
``fit.row_checks`` (research/notes/lab-reports-002-004-arithmetic.md), not used.

Rows the reader cannot use are named in ``env.problems`` and skipped; a model without an
``N = 1`` row is named and dropped. Raises FitError (no readable table, the fit model has no
``N = 1`` or no ``N > 1`` row), RunsError (report unreadable), LayoutError, KnobError.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from scipy.optimize import minimize_scalar

from ....errors import FitError
from ..knobs import Config
from ....model.contention import Contention
from ....model.costmodel import Cluster, CostModel, Tier
from ....model.layout import Layout
from ..scenario import Scenario
from ....readers.labreport import CpuScalingRow, parse_cpu_scaling
from ..readers.runs import EnvData
from .fitters import (
    _data_layout,
    _model_dict,
    _negotiation_for,
    _workload_json,
    calibrate_compute,
    parse_env_report,
    run_config,
    workload_for,
)

#: fusion-buffer copy rate on the host (bytes/s): a laptop's dual-channel DDR4-2666 peaks at
#: 42.7 GB/s; a copy reads and writes, and a single core's memcpy reaches ~10 GB/s. Assumed.
CPU_MEMCPY_BPS = 10e9
#: Gbit/s -> bytes/s
GBIT = 1e9 / 8
#: the bound on a held-out prediction (per cent of the measured time)
HELD_OUT_TOLERANCE_PERCENT = 10.0


def simulate_ranks(layout: Layout, compute_s: float, ranks: int, contention: Contention, cost: CostModel,
                   cfg: Config, model: str = "", env: str = ""):
    """The simulated step (:class:`autotuner.frameworks.horovod.simulator.StepResult`) of ``ranks`` CPU ranks
    on one host sharing a global step of ``compute_s`` seconds (one rank alone), through
    :class:`Scenario` exactly as ``simulate`` builds it."""
    sc = Scenario(env, model, layout, workload_for(compute_s), cost, Cluster(1, ranks),
                  contention=contention, global_work=True)
    return sc.simulate(cfg)


def _row_checks(rows: list[CpuScalingRow], rel: str) -> list[dict[str, Any]]:
    """Per row: printed speedup vs step(1)/step(N), total throughput vs N x per process."""
    one = {r.model: r.step_time for r in rows if r.processes == 1}
    out = []
    for r in rows:
        ratio = one[r.model] / r.step_time if r.model in one else None
        expect_total = r.processes * r.per_process
        out.append({"model": r.model, "line": f"{rel}:{r.line}", "processes": r.processes,
                    "speedup_printed": r.speedup, "step_ratio": ratio,
                    "speedup_minus_ratio_percent": None if ratio is None else (r.speedup / ratio - 1) * 100,
                    "total_printed": r.total, "processes_x_per_process": expect_total,
                    "total_consistent": abs(r.total - expect_total) <= 0.05 * r.processes + 1e-9})
    return out


def fit_cpu_scaling_env(env: EnvData) -> dict[str, Any]:
    """Fit a ``cpu-scaling`` env (see the module docstring). Returns the model dict (schema
    ``autotuner.model/1``) with a top-level ``contention``; appends skipped rows and dropped
    models to ``env.problems``."""
    meta = env.meta
    rel = f"{env.path.name}/{meta['source']}"
    names = [m["model"] for m in meta["model"]]
    rows = parse_env_report(env, parse_cpu_scaling, names)
    unit_s = {"s": 1.0, "ms": 1e-3}[meta["step_unit"]]
    cfg = run_config(meta, {})
    tier = Tier(float(meta["prior_alpha_us"]) * 1e-6, float(meta["prior_bandwidth_gbps"]) * GBIT)
    ranks_default = int(meta["gpus_per_node"])
    cost = CostModel(inter=tier, link_gbps=float(meta["link_gbps"]), memcpy_Bps=CPU_MEMCPY_BPS,
                     host_copy_Bps=CPU_MEMCPY_BPS, negotiation=_negotiation_for(tier, ranks_default))
    one = Cluster(1, 1)
    overlap = float(meta.get("overlap", 1.0))
    layouts = {m["model"]: _data_layout(env, m["layout"], f"model {m['model']!r} layout") for m in meta["model"]}
    by_model: dict[str, dict[int, CpuScalingRow]] = {}
    for r in rows:
        by_model.setdefault(r.model, {})[r.processes] = r
    compute: dict[str, float] = {}
    workloads: dict[str, Any] = {}
    for m in names:
        base = by_model.get(m, {}).get(1)
        if base is None:
            env.problems.append(f"{rel}: model {m!r}: no 1-process row: no compute calibrated, model dropped")
            continue
        step_ms = base.step_time * unit_s * 1e3
        compute[m] = calibrate_compute(layouts[m], step_ms, 1.0, overlap, cfg, cost, one)
        wl = workload_for(compute[m], 1.0, overlap)
        workloads[m] = {"layout": layouts[m].name, **_workload_json(wl), "work_per_step": "global",
                        "calibrated_on": f"{rel}:{base.line} ({m}, 1 process, "
                                         f"step {base.step_time} {meta['step_unit']})"}
    fm = meta["fit_model"]
    if fm not in compute:
        raise FitError(f"{env.name}: fit_model {fm!r} has no 1-process row in {rel}: the contention cannot be fitted")
    fit_rows = [r for n, r in sorted(by_model[fm].items()) if n > 1]
    if not fit_rows:
        raise FitError(f"{env.name}: fit_model {fm!r} has no row with more than 1 process in {rel}")
    logical, cores = int(meta["logical_cpus"]), float(meta["cores"])

    def predicted_s(m: str, ranks: int, p: float) -> float:
        return simulate_ranks(layouts[m], compute[m], ranks, Contention(logical, cores, p), cost, cfg,
                              m, env.name).step_time_s

    def loss(p: float) -> float:
        return sum((predicted_s(fm, r.processes, p) / (r.step_time * unit_s) - 1) ** 2 for r in fit_rows)

    res = minimize_scalar(loss, bounds=(0.0, 1.0), method="bounded", options={"xatol": 1e-8})
    p = float(res.x)
    contention = Contention(logical, cores, p)

    def table(models: list[str]) -> list[dict[str, Any]]:
        out = []
        for m in models:
            for n, r in sorted(by_model.get(m, {}).items()):
                if n == 1:
                    continue
                sim = simulate_ranks(layouts[m], compute[m], n, contention, cost, cfg, m, env.name)
                meas = r.step_time * unit_s
                out.append({"model": m, "ranks": n, "measured_s": meas, "predicted_s": sim.step_time_s,
                            "error_percent": (sim.step_time_s / meas - 1) * 100,
                            "compute_per_rank_s": compute[m] * contention.slowdown(n) / n,
                            "comm_s": sim.comm_s, "slowdown": contention.slowdown(n), "line": f"{rel}:{r.line}"})
        return out

    fitted_on = table([fm])
    held_out = table([m for m in names if m != fm and m in compute])
    fit_info = {
        "form": "global work / ranks x contention slowdown + simulated allreduce (shared memory)",
        "contention": contention.to_dict(),
        "fitted_on": fm, "fitted_parameter": "parallel_fraction", "parallel_fraction": p,
        "fit_mape_percent": float(np.mean([abs(x["error_percent"]) for x in fitted_on])),
        "fit_rows": fitted_on,
        "held_out": held_out,
        "held_out_tolerance_percent": HELD_OUT_TOLERANCE_PERCENT,
        "held_out_within_tolerance": all(abs(x["error_percent"]) <= HELD_OUT_TOLERANCE_PERCENT for x in held_out),
        "step_unit": meta["step_unit"],
        "columns_used": ["平均每步耗时 (step time)"],
        "columns_not_used": ["平均吞吐率 (per process)", "总吞吐率 (total)", "加速比 (speedup)"],
        "row_checks": _row_checks(rows, rel),
        "assumed": {
            "shared_memory_tier": {"alpha_us": float(meta["prior_alpha_us"]),
                                   "bandwidth_gbps": float(meta["prior_bandwidth_gbps"]),
                                   "range": "alpha 1-10 us, bandwidth 2-10 GB/s (16-80 Gbit/s); "
                                            "not measured by the report (docs/explanation/laptop-cpu.md)"},
            "memcpy_gbytes_per_s": CPU_MEMCPY_BPS / 1e9,
            "negotiation": "ctrl_op = the assumed tier's 64-byte allreduce",
            "cores": cores, "logical_cpus": logical,
        },
    }
    cluster = Cluster(1, ranks_default)
    d = _model_dict(env, cluster, cost, fit_info, workloads, cfg)
    d["contention"] = contention.to_dict()
    return d
