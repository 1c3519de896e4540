#!/usr/bin/env python3
"""Every figure of docs/t4x4-pcie.md, from the committed runs/t4x4-pcie (lab report 002).

    python research/scripts/t4x4_pcie_figures.py

Prints: the fit (compute, start-up, backend latencies); the held-out table; where the wall time
of 1-4 GPUs goes (start-up, compute, and per step after backward: cycle wait, negotiation,
collectives); the backend what-if; the sensitivity to the assumed MPI tier (latency 5-20 µs,
bandwidth 64-96 Gbit/s) and to Horovod 0.19.4's 5 ms cycle. Nothing is typed in: every number
comes from the report through autotuner's reader, fitter and simulator.
"""
from __future__ import annotations

import copy
from pathlib import Path

from autotuner.frameworks.horovod.fit.backend_runs import fit_backend_runs_env
from autotuner.frameworks.horovod.fit.store import env_from_dict
from autotuner.frameworks.horovod.scenario import Scenario
from autotuner.frameworks.horovod.readers.runs import read_env

ENV = Path(__file__).resolve().parents[2] / "runs" / "t4x4-pcie"


def fit(**over):
    env = read_env(ENV)
    env.meta = {**copy.deepcopy(env.meta), **over}
    return env, fit_backend_runs_env(env)


def scenario(d, n, backend=None):
    fenv = env_from_dict(d)
    layout_name, wl = fenv.workloads["mnist"]
    from autotuner.model.costmodel import Cluster
    from autotuner.readers.layouts import load_layout
    cost = fenv.cost if backend is None else fenv.cost.with_backend(backend)
    return Scenario(fenv.name, "mnist", load_layout(layout_name), wl, cost, Cluster(1, n),
                    run=fenv.run_shapes["mnist"], backend=backend), fenv.measured_config


def breakdown(sc, cfg):
    """Per step (ms): compute, then after backward: cycle wait, negotiation, collectives."""
    r = sc.simulate(cfg, trace=True, measure_steps=1)
    st = r.trace.steps[-1]
    comp = (sc.workload.forward_s + sc.workload.backward_s) * 1e3
    if not st.cycles:
        return comp, 0.0, 0.0, 0.0, r.step_time_ms
    bwd_end = st.start_s + sc.workload.forward_s + sc.workload.backward_s
    last = st.cycles[-1]
    wait = max(0.0, last.start_s - bwd_end) * 1e3
    neg = (last.negotiation_end_s - max(last.start_s, bwd_end)) * 1e3 if last.negotiation_end_s > bwd_end else 0.0
    coll = r.step_time_ms - comp - wait - neg
    return comp, wait, neg, coll, r.step_time_ms


def main() -> None:
    env, d = fit()
    f = d["fit"]
    print(f"fit: compute {f['compute_ms']:.4f} ms/step, start-up {f['startup_s']:.3f} s "
          f"(on {f['fit_backend']} {f['fit_processes']} processes)")
    for b, t in f["backends"].items():
        print(f"  {b}: alpha {t['alpha_us']:.2f} us (range {t['alpha_range_us'][0]:.1f}-{t['alpha_range_us'][1]:.1f}), "
              f"{t['bandwidth_gbps']:g} Gbit/s; {t['fitted_on']}")
    print("\nheld out: backend N line measured predicted [range] error%")
    for h in f["held_out"]:
        print(f"  {h['backend']} {h['processes']} L{h['line']} {h['measured_s']:.3f} {h['predicted_s']:.2f} "
              f"[{h['range_s'][0]:.2f}, {h['range_s'][1]:.2f}] {h['error_percent']:+.2f}")
    print("\nwhere the time goes (env backend nccl): N, wall s, start-up s, compute s, after-backward s;"
          " per step ms: compute, cycle wait, negotiation, collectives, step")
    for n in (1, 2, 3, 4):
        sc, cfg = scenario(d, n)
        comp, wait, neg, coll, step = breakdown(sc, cfg)
        k = sc.run.steps_per_rank(n)
        print(f"  {n} {sc.wall_s(step / 1e3):.2f} {sc.run.startup_s:.2f} {k * comp / 1e3:.2f} "
              f"{k * (step - comp) / 1e3:.2f}; {comp:.3f} {wait:.3f} {neg:.3f} {coll:.3f} {step:.3f}")
    one = scenario(d, 1)[0]
    w1 = one.wall_s(one.simulate(scenario(d, 1)[1]).step_time_s)
    sc4, cfg = scenario(d, 4)
    w4 = sc4.wall_s(sc4.simulate(cfg).step_time_s)
    print(f"  speedup 4 vs 1: {w1 / w4:.3f}; without start-up: {(w1 - one.run.startup_s) / (w4 - one.run.startup_s):.3f}")
    print("\nbackend what-if, 4 GPUs: backend step ms wall s")
    for b in ("mpi", "gloo", "nccl"):
        sc, cfg = scenario(d, 4, b)
        s = sc.simulate(cfg).step_time_s
        print(f"  {b} {s * 1e3:.3f} {sc.wall_s(s):.2f}")
    print("\nsensitivity: assumed MPI tier and cycle time -> compute ms, start-up s, held-out errors %")
    for a, bw, cyc in [(5, 80, 1.0), (20, 80, 1.0), (10, 64, 1.0), (10, 96, 1.0), (10, 80, 5.0)]:
        _, dd = fit(prior_alpha_us=float(a), prior_bandwidth_gbps=float(bw), cycle_time_ms=cyc)
        ff = dd["fit"]
        errs = " ".join(f"{h['backend']}{h['processes']}:{h['error_percent']:+.1f}" for h in ff["held_out"])
        print(f"  alpha {a} us, {bw} Gbit/s, cycle {cyc:g} ms: {ff['compute_ms']:.3f} ms, {ff['startup_s']:.2f} s; {errs}")


if __name__ == "__main__":
    main()
