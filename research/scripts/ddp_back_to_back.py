"""Is an allreduce cheaper back to back than alone? (issue 30: on 2 emulated hosts DDP's small buckets measured
faster than the DDP sweep's lone allreduces predict.)

    python research/scripts/ddp_back_to_back.py                                   # 2 ranks, 2 Gbit/s loopback
    python research/scripts/ddp_back_to_back.py --testbed-hosts 2 --link-gbit 3   # 2 emulated hosts x 1 rank

Under torchrun (Gloo), for 256 KiB, 1 MiB and 4 MiB: 20 lone ``dist.all_reduce`` calls, each after a barrier (the
sweep's way), and 5 rounds of 20 ``all_reduce(async_op=True)`` issued back to back and waited for together (DDP's
way with many buckets), interleaved. Prints (rank 0) per size the lone median and the back-to-back time per call
(median round / 20), ms. As root, alone on a quiet machine.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
SIZES, N = (256 << 10, 1 << 20, 4 << 20), 20


def worker() -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    for size in SIZES:
        ts = [torch.randn(size // 4) * 1e-3 for _ in range(N)]
        lone, burst = [], []
        for _ in range(5):
            for t in ts:
                dist.barrier()
                t0 = time.perf_counter()
                dist.all_reduce(t)
                lone.append((time.perf_counter() - t0) * 1e3)
            dist.barrier()
            t0 = time.perf_counter()
            works = [dist.all_reduce(t, async_op=True) for t in ts]
            for w in works:
                w.wait()
            burst.append((time.perf_counter() - t0) * 1e3 / N)
        if dist.get_rank() == 0:
            lone.sort()
            burst.sort()
            print(f"BTB {size >> 10} KiB: lone {lone[len(lone) // 2]:.2f} ms, back to back {burst[2]:.2f} ms per call",
                  flush=True)
    dist.barrier()
    dist.destroy_process_group()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--testbed-hosts", type=int, default=0)
    ap.add_argument("--link-gbit", type=float, default=None)
    ap.add_argument("--bandwidth-gbit", type=float, default=2.0)
    a = ap.parse_args()
    from autotuner.frameworks.ddp.launch import run_ddp
    from autotuner.realrun.launcher import testbed_for

    topo = (a.testbed_hosts, 1) if a.testbed_hosts else None
    with testbed_for(topo, None if topo else a.bandwidth_gbit, a.link_gbit) as (tb, note):
        print(note)
        r = run_ddp(str(Path(__file__).resolve()), ["--worker"], ranks_per_host=1 if topo else 2, testbed=tb,
                    timeout_s=600)
    print("\n".join(x for x in r.stdout.splitlines() if x.startswith("BTB")))
    return 0 if "BTB" in r.stdout else 1


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        worker()
        sys.exit(0)
    sys.exit(main())
