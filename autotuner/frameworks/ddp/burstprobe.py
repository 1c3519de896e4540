"""The DDP burst phase: what an allreduce costs when it is launched while the previous one still runs, as DDP
launches its buckets, against the sweep's lone allreduce after a barrier.

DDP hands each bucket to the process group as soon as it is ready (``Reducer::mark_bucket_ready`` ->
``run_comm_hook`` -> ``ProcessGroupGloo::allreduce``, which queues the work for the group's worker threads;
``ProcessGroupGloo::Options::threads`` is 2 by default), so with many small buckets a collective starts the moment
the one before it ends, or overlaps its tail. The sweep (:mod:`.sweepprobe`) times each allreduce alone after a
``dist.barrier()``; on two emulated hosts a call issued back to back measured about one latency cheaper
(``research/scripts/ddp_back_to_back.py``, docs/explanation/ddp-simulator.md).

Runs under torchrun on every rank (``python -m autotuner.frameworks.ddp.burstprobe``), Gloo, float32 tensors of
gradient-like values (N(0, 1e-6): standard deviation 1e-3, seeded by rank). For each size of ``--sizes`` (bytes) and each of ``--rounds``
rounds, interleaved: ``--count`` lone ``dist.all_reduce`` calls, each after a barrier (the sweep's way, one sample
each), then ``--count`` ``all_reduce(async_op=True)`` issued back to back and waited for together (one sample: the
round's wall time / count). One untimed round first. Timed on rank 0 by the wall clock. With ``--device cuda``
the ranks run on their GPUs over NCCL (:func:`.rankside.init_rank`), the tensors on the device, and each timing
is bracketed by ``torch.cuda.synchronize()`` (an NCCL call returns once its work is queued; the burst's
``wait()`` only orders the streams).

Output (rank 0, stdout): one line ``AUTOTUNER_DDP_BURST {json}``: ``ranks``, ``sizes`` (bytes), ``count``,
``lone_ms`` (per size, every lone call, ms), ``burst_ms`` (per size, one per-call time per round, ms), ``backend``;
with ``--device cuda`` also ``device``, ``gpu``, ``cuda``, ``nccl`` (:func:`.rankside.device_fields`). Exit status
2 and one line on stderr for a bad argument, no torchrun, or (``--device cuda``) no CUDA device, no NCCL, or more
ranks on a host than it has GPUs.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from .rankside import add_device_option, barrier, device_fields, init_rank, parse_sizes, synchronize

TAG = "AUTOTUNER_DDP_BURST"
SIZES = (256 << 10, 1 << 20, 4 << 20)
GRADIENT_STD = 1e-3


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m autotuner.frameworks.ddp.burstprobe",
                                description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default=",".join(map(str, SIZES)), help="comma-separated message sizes in bytes")
    p.add_argument("--count", type=int, default=16, help="allreduces per round, lone and back to back")
    p.add_argument("--rounds", type=int, default=5)
    add_device_option(p)
    a = p.parse_args(argv)
    sizes = parse_sizes(a.sizes)
    if sizes is None:
        return 2
    if a.count < 2 or a.rounds < 1:
        print("error: --count must be >= 2 and --rounds >= 1", file=sys.stderr)
        return 2
    started = init_rank(a.device)
    if started is None:
        return 2
    torch, dist, rank, dev = started
    gen = torch.Generator().manual_seed(rank)
    lone_all, burst_all = [], []
    for size in sizes:
        ts = [(torch.randn(max(1, size // 4), generator=gen) * GRADIENT_STD).to(dev) for _ in range(a.count)]
        lone, burst = [], []
        for r in range(a.rounds + 1):
            got = []
            for t in ts:
                barrier(dist, dev)
                synchronize(torch, dev)
                t0 = time.perf_counter()
                dist.all_reduce(t)
                synchronize(torch, dev)
                got.append(round((time.perf_counter() - t0) * 1e3, 4))
            barrier(dist, dev)
            synchronize(torch, dev)
            t0 = time.perf_counter()
            works = [dist.all_reduce(t, async_op=True) for t in ts]
            for w in works:
                w.wait()
            synchronize(torch, dev)
            per_call = (time.perf_counter() - t0) * 1e3 / a.count
            if r > 0:
                lone += got
                burst.append(round(per_call, 4))
        lone_all.append(lone)
        burst_all.append(burst)
    if rank == 0:
        print(f"{TAG} " + json.dumps({"ranks": dist.get_world_size(), "backend": dist.get_backend(), "sizes": sizes,
                                      "count": a.count, "lone_ms": lone_all, "burst_ms": burst_all,
                                      **device_fields(torch, dev)}), flush=True)
    barrier(dist, dev)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
