#!/usr/bin/env python3
"""Spinning vs polling waits on the emulated cluster (root, real Horovod): why runs/local-gloo-2x2-poll exists.

    python scripts/wait_modes.py            # driver: 2x2, 4x1 and 1x4, each waiting both ways
    (python scripts/wait_modes.py --rank spin|sleep   is what every rank runs)

Each rank enqueues 16 allreduces of s bytes (fusion off: 16 responses in one cycle) and waits for
them, 12 times per size; rank 0 prints the median time per response (ms, after 2 warm-up rounds).
``spin`` waits with Horovod's own ``hvd.synchronize``, whose ``WaitAndClear`` loops on
``PollHandle`` + ``std::this_thread::yield()`` (horovod/torch/mpi_ops_v2.cc L1121-1130, 0.28.1);
``sleep`` first polls (``hvd.poll``) every 0.2 ms, as ``validate --replay-wait sleep`` and
``measure --wait sleep`` do. Measured here (docs/validation.md "Two emulated hosts"): on 2x2 a
1 MiB response took 53.9 ms spinning and 16.0 ms polling; on 4x1 62.8 vs 15.4; on 1x4 13.6 vs 3.3.
"""
from __future__ import annotations

import json
import sys
import time

SIZES = (4096, 65536, 1048576)


def rank_main(mode: str) -> None:
    import horovod.torch as hvd
    import torch

    hvd.init()
    out = {}
    for nbytes in SIZES:
        ts = [torch.zeros(nbytes // 4) for _ in range(16)]
        per = []
        for _ in range(12):
            t0 = time.perf_counter()
            hs = [hvd.allreduce_async_(t, name=f"w{nbytes}.{i}") for i, t in enumerate(ts)]
            if mode == "sleep":
                while not all(hvd.poll(h) for h in hs):
                    time.sleep(0.0002)
            for h in hs:
                hvd.synchronize(h)
            per.append((time.perf_counter() - t0) * 1e3 / 16)
        rest = sorted(per[2:])
        out[nbytes] = round(rest[len(rest) // 2], 3)
    if hvd.rank() == 0:
        print("WAIT_MODES", mode, json.dumps(out), flush=True)
    hvd.shutdown()


def driver() -> None:
    from dataclasses import replace

    from autotuner.knobs import DEFAULTS_0_28
    from autotuner.realrun.launcher import Job, run_job
    from autotuner.realrun.testbed import emulated_cluster

    print("shape  wait   ms per response at " + ", ".join(f"{s} B" for s in SIZES))
    for hosts, per_host in ((2, 2), (4, 1), (1, 4)):
        with emulated_cluster(hosts, 1.0) as bed:
            for mode in ("spin", "sleep"):
                res = run_job(Job(np=hosts * per_host, hosts=bed.hosts_arg(per_host),
                                  command=(sys.executable, __file__, "--rank", mode), prefix=bed.prefix,
                                  launcher=bed.launcher, config=replace(DEFAULTS_0_28, fusion_threshold_bytes=0)),
                              timeout_s=300)
                line = next((ln for ln in res.stdout.splitlines() if "WAIT_MODES" in ln), None)
                if res.returncode != 0 or line is None:
                    sys.exit(f"{hosts}x{per_host} {mode}: horovodrun exit {res.returncode}: {res.stderr[-300:]}")
                d = json.loads(line.split(mode, 1)[1])
                print(f"{hosts}x{per_host}    {mode:<5}  " + ", ".join(f"{d[str(s)]:.3f}" for s in SIZES))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--rank" and sys.argv[2] in ("spin", "sleep"):
        rank_main(sys.argv[2])
    else:
        driver()
