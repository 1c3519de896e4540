"""Simulator throughput on one core: ResNet50 and VGG16 step simulations per second.

Run by hand (not part of CI pass/fail):

    python tests/benchmarks/bench_simulator.py [--env v100-16gbit] [--repeat 5] [--cpu 0]

The process is pinned to one core (``os.sched_setaffinity``). Configurations are drawn at
random from the search space (fusion 0-512 whole MiB, cycle 0.1-100 ms log-uniform, cache
on/off, hierarchical allreduce on/off) with a seeded generator, all distinct. Reference: one
:func:`autotuner.frameworks.horovod.simulator.simulate_step` call per configuration. Fast:
:func:`autotuner.frameworks.horovod.fastsim.simulate_batch` with ``dedupe=False`` (every configuration simulated,
no result reuse), in one batch. Each figure is the median over ``--repeat`` runs.
"""
import argparse
import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def random_configs(n: int, seed: int) -> dict[str, np.ndarray]:
    from autotuner.frameworks.horovod.knobs import MIB

    rng = np.random.default_rng(seed)
    return {"fusion_threshold_bytes": rng.integers(0, 513, n) * MIB,
            "cycle_time_ms": np.exp(rng.uniform(np.log(0.1), np.log(100.0), n)),
            "cache_capacity": rng.choice([0, 1024], n),
            "hierarchical_allreduce": rng.integers(0, 2, n).astype(bool)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--env", default="v100-16gbit")
    ap.add_argument("--models", default="resnet50,vgg16")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cpu", type=int, default=0, help="core to pin to")
    ap.add_argument("--n-ref", type=int, default=300, help="configurations per reference run")
    ap.add_argument("--n-fast", type=int, default=50_000, help="configurations per fast run")
    a = ap.parse_args()
    os.sched_setaffinity(0, {a.cpu})
    from autotuner.frameworks.horovod.predict import make_scenario
    from autotuner.frameworks.horovod.fastsim import simulate_batch
    from autotuner.frameworks.horovod.knobs import Config
    from autotuner.frameworks.horovod.simulator import simulate_step

    print(f"# simulator throughput, env {a.env}, pinned to core {a.cpu} of {os.cpu_count()}, "
          f"python {platform.python_version()}, numpy {np.__version__}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    for model in a.models.split(","):
        sc, _ = make_scenario(ROOT / "autotuner" / "models", a.env, model)
        L = sc.layout
        args = (L.sizes_bytes, L.ready_fraction, sc.workload)
        ref_rates, fast_rates = [], []
        for r in range(a.repeat):
            k = random_configs(a.n_ref, seed=r)
            cfgs = [Config(int(f), float(c), int(ca), bool(h)) for f, c, ca, h in
                    zip(k["fusion_threshold_bytes"], k["cycle_time_ms"], k["cache_capacity"], k["hierarchical_allreduce"])]
            t0 = time.perf_counter()
            ref = [simulate_step(*args, c, sc.cost, sc.cluster).step_time_s for c in cfgs]
            ref_rates.append(len(cfgs) / (time.perf_counter() - t0))
            k = random_configs(a.n_fast, seed=100 + r)
            t0 = time.perf_counter()
            fast = simulate_batch(*args, sc.cost, sc.cluster, dedupe=False, **k)
            fast_rates.append(a.n_fast / (time.perf_counter() - t0))
            if r == 0:  # spot check: the first reference configurations through the fast path
                k0 = {n: v[:a.n_ref] for n, v in random_configs(a.n_ref, seed=0).items()}
                chk = simulate_batch(*args, sc.cost, sc.cluster, dedupe=False, **k0)
                assert np.allclose(chk, ref, rtol=1e-9, atol=0), "fast and reference disagree"
                del fast
        print(f"{model} ({L.n_tensors} tensors): reference {statistics.median(ref_rates):,.0f} sims/s "
              f"(runs: {', '.join(f'{x:,.0f}' for x in ref_rates)}); fast batch {statistics.median(fast_rates):,.0f} sims/s "
              f"(runs: {', '.join(f'{x:,.0f}' for x in fast_rates)}); speed-up "
              f"{statistics.median(fast_rates) / statistics.median(ref_rates):.0f}x")


if __name__ == "__main__":
    main()
