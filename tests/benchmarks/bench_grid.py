"""Exhaustive-grid wall time and Bayesian-search regret against the grid optimum.

Run by hand (not part of CI pass/fail):

    python tests/benchmarks/bench_grid.py grid [--env v100-16gbit] [--model resnet50] [--repeat 3] [--no-dedupe]
    python tests/benchmarks/bench_grid.py regret [--envs v100-16gbit,local-gloo-1gbit] [--models resnet50,vgg16] [--seeds 0,1,2,3,4]

``grid``: wall time of :func:`autotuner.frameworks.horovod.search.grid.grid_step_times` on the default grid (fusion
0-512 MiB in 1 MiB steps × cycle 0.1-99.6 ms in 0.5 ms steps × cache on/off × hierarchical
allreduce off/on × hierarchical allgather off/on = 820,800 configurations), DataFrame
included; median over ``--repeat`` runs. ``--no-dedupe`` simulates every row (no result reuse).
``--cpu N`` pins the process to one core.

``regret``: for each env, model and seed, ``suggest``'s pick (:func:`autotuner.frameworks.horovod.predict.suggest_configs`,
default 24 proposals after the controls, then the coordinate refinement on the fast simulator)
against the grid optimum: regret % = (best predicted step time among suggest's trials − grid
minimum) / grid minimum × 100, for the Bayesian trials alone and with the refinement. Negative:
suggest found a cycle time between the grid's 0.5 ms steps that beats every grid point. A model
not calibrated in an env (vgg16 on local-gloo-1gbit) uses ``--compute-ms`` (default 300: the
replay workload's emulated compute of that env's runs).
"""
import argparse
import os
import platform
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def scenario(env: str, model: str, compute_ms: float):
    from autotuner.frameworks.horovod.predict import make_scenario
    from autotuner.frameworks.horovod.fit.store import load_env

    fenv = load_env(ROOT / "autotuner" / "models", env)
    return make_scenario(ROOT / "autotuner" / "models", env, model,
                         compute_ms=None if model in fenv.workloads else compute_ms)[0]


def bench_grid(a) -> None:
    from autotuner.frameworks.horovod.search.grid import best_of_grid, grid_step_times

    sc = scenario(a.env, a.model, a.compute_ms)
    walls, df = [], None
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        df = grid_step_times(sc, dedupe=not a.no_dedupe)
        walls.append(time.perf_counter() - t0)
    cfg, ms = best_of_grid(df)
    print(f"grid {a.env}/{a.model}: {len(df):,} configurations, median {statistics.median(walls):.2f} s "
          f"(runs: {', '.join(f'{w:.2f}' for w in walls)}){' without dedupe' if a.no_dedupe else ''}; "
          f"optimum {ms:.2f} ms at {cfg.fusion_threshold_mb:g} MiB, {cfg.cycle_time_ms:g} ms, "
          f"cache {cfg.cache_capacity}, hierarchical allreduce {cfg.hierarchical_allreduce}")


def bench_regret(a) -> None:
    from autotuner.frameworks.horovod.predict import suggest_configs
    from autotuner.frameworks.horovod.search.grid import best_of_grid, grid_step_times

    print("| env | model | grid optimum (ms) | seed | Bayesian only (ms) | regret | + refinement (ms) | regret | best found |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|")
    worst, worst_bo, walls = [], [], []
    for env in a.envs.split(","):
        for model in a.models.split(","):
            sc = scenario(env, model, a.compute_ms)
            _, gms = best_of_grid(grid_step_times(sc))
            for seed in (int(s) for s in a.seeds.split(",")):
                t0 = time.perf_counter()
                trials, _ = suggest_configs(sc, seed=seed)
                walls.append(time.perf_counter() - t0)
                best = min(trials, key=lambda t: t.step_time_s)
                bo = min((t for t in trials if t.origin != "refine"), key=lambda t: t.step_time_s)
                r = (best.step_time_s * 1e3 - gms) / gms * 100
                rb = (bo.step_time_s * 1e3 - gms) / gms * 100
                worst.append(r)
                worst_bo.append(rb)
                c = best.config
                print(f"| {env} | {model} | {gms:.2f} | {seed} | {bo.step_time_s * 1e3:.2f} | {rb:+.2f}% | "
                      f"{best.step_time_s * 1e3:.2f} | {r:+.2f}% | "
                      f"{c.fusion_threshold_mb:g} MiB, {c.cycle_time_ms:.2f} ms, cache {c.cache_capacity}, "
                      f"hier {c.hierarchical_allreduce} |")
    print(f"\nregret with refinement: worst {max(worst):+.2f}%, median {statistics.median(worst):+.2f}%; "
          f"Bayesian only: worst {max(worst_bo):+.2f}%, median {statistics.median(worst_bo):+.2f}%; "
          f"{len(worst)} runs; suggest_configs wall median {statistics.median(walls):.2f} s, max {max(walls):.2f} s")


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="what", required=True)
    g = sub.add_parser("grid")
    g.add_argument("--env", default="v100-16gbit")
    g.add_argument("--model", default="resnet50")
    g.add_argument("--repeat", type=int, default=3)
    g.add_argument("--no-dedupe", action="store_true")
    r = sub.add_parser("regret")
    r.add_argument("--envs", default="v100-16gbit,local-gloo-1gbit")
    r.add_argument("--models", default="resnet50,vgg16")
    r.add_argument("--seeds", default="0,1,2,3,4")
    for p in (g, r):
        p.add_argument("--compute-ms", type=float, default=300.0)
        p.add_argument("--cpu", type=int, default=None, help="pin to this core")
    a = ap.parse_args()
    if a.cpu is not None:
        os.sched_setaffinity(0, {a.cpu})
    print(f"# {a.what}, {platform.python_version()}, cores allowed {sorted(os.sched_getaffinity(0))}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    (bench_grid if a.what == "grid" else bench_regret)(a)


if __name__ == "__main__":
    main()
