#!/usr/bin/env python3
"""Spinning vs polling waits on the emulated cluster (root, real Horovod): why runs/local-gloo-2x2-poll exists.

    python research/scripts/wait_modes.py [--repeats 10]

On 2x2, 4x1 and 1x4 emulated hosts (1 Gbit/s links) the sweep workload's unfused phase (16
responses of s bytes back to back, fusion off: ``testbed_capacity.small_allreduces``) runs twice:
``--wait spin``, Horovod's own ``hvd.synchronize``, whose ``WaitAndClear`` loops on ``PollHandle`` +
``std::this_thread::yield()`` (horovod/torch/mpi_ops_v2.cc L1121-1130, 0.28.1), and ``--wait sleep``,
polling (``hvd.poll`` every 0.2 ms) first, as ``measure --wait sleep`` and ``validate --replay-wait
sleep`` do. Prints the median ms per response (docs/validation.md "Two emulated hosts").
"""
from __future__ import annotations

import argparse

from autotuner.realrun.testbed import emulated_cluster
from testbed_capacity import SIZES, small_allreduces  # this folder: run as a script


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=10)
    a = ap.parse_args()
    print("shape  wait   ms per response at " + ", ".join(f"{s} B" for s in SIZES))
    for hosts, per_host in ((2, 2), (4, 1), (1, 4)):
        with emulated_cluster(hosts, 1.0) as bed:
            for wait in ("spin", "sleep"):
                d = small_allreduces(bed, hosts, per_host, a.repeats, wait)
                print(f"{hosts}x{per_host}    {wait:<5}  " + ", ".join(f"{d[s]:.3f}" for s in SIZES))


if __name__ == "__main__":
    main()
