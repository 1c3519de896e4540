"""The DDP cpu phase: how much of a CPU rank's compute a collective in flight takes, where the ranks' compute fills
their host's cores (docs/explanation/ddp-simulator.md, "Compute beside the collectives").

In a DDP step the Reducer launches each bucket's allreduce during the backward (``mark_bucket_ready``), and Gloo
runs it on the process group's worker threads (``ProcessGroupGloo``'s ``Options::threads``) and its TCP device's
loop thread, beside the backward's own thread. Every byte Gloo moves costs CPU: the kernel's TCP copies and
network work, Gloo's buffers, the reduction. On a host whose cores the ranks' compute already fills (CPU ranks, one
torch thread per core) that CPU comes out of the backward: measured here, a 256x1024 @ 1024x1024 matmul ran 1.06-1.15x
slower beside a stream of 4 MiB allreduces on a 2 Gbit/s loopback, 1.12-1.50x at 5 Gbit/s, 1.56-1.88x unshaped
(``research/scripts/ddp_cpu_contention.py``).

Runs under torchrun on every rank (``python -m autotuner.frameworks.ddp.cpuprobe``), one torch thread each. A
compute unit is :data:`UNIT_MATMULS` matmuls of 256x1024 @ 1024x1024 (float32, cache-resident). Each of ``--rounds``
rounds, for each stream size (:data:`STREAM_SIZES`), every rank together (a barrier before each part):

1. ``--units`` compute units alone;
2. the stream alone: ``count`` blocking ``all_reduce`` calls back to back of one float32 buffer of that size;
3. both: a helper thread runs the same ``count`` calls while the main thread runs compute units until it is done.

``count`` is set in round 0 so that the stream lasts about ``--stream-s`` alone (rank 0's time, taken by every
rank). Per round and stream, on every rank: the median unit alone and beside the stream (the unit in flight when the
stream ended left out), the median allreduce alone and beside the compute; rank 0's in the row's own fields, every
rank's in ``by_rank`` (where each rank's threads land on the cores changes from round to round, so one rank's view
is noisy).

Output (rank 0, stdout): one line ``AUTOTUNER_DDP_CPU {json}``: ``ranks``, ``cores_per_host`` (the cores this
rank's host has: this process's CPU affinity, shared among ``--hosts`` emulated hosts), ``unit`` (what a unit is),
``rows`` (``round``, ``bytes``, ``count``, ``unit_ms_alone``, ``unit_ms_beside``, ``units_beside``,
``allreduce_ms_alone``, ``allreduce_ms_beside``, ``by_rank``: ``[unit alone, unit beside (None: no unit ran beside),
allreduce alone, allreduce beside]`` per rank, ms). Exit status 2 and one line on stderr for a bad argument or no
torchrun.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time

from .rankside import init_gloo_rank

TAG = "AUTOTUNER_DDP_CPU"
#: the streams' buffer sizes (bytes): a bucket DDP's default first bucket holds, and a large one
STREAM_SIZES = (1 << 20, 16 << 20)
#: matmuls per compute unit (256x1024 @ 1024x1024, float32: ~6 ms each on this project's 2-core machine)
UNIT_MATMULS = 5


def host_cores(hosts: int) -> int:
    """The cores one host's ranks have: this process's CPU affinity (``os.sched_getaffinity``; ``os.cpu_count``
    where missing), shared by ``hosts`` emulated hosts on one machine (network namespaces share its cores)."""
    try:
        machine = len(os.sched_getaffinity(0))
    except AttributeError:
        machine = os.cpu_count() or 1
    return max(1, machine // max(1, hosts))


def _stream(dist, buf, count: int, out: list) -> None:
    for _ in range(count):
        t0 = time.perf_counter()
        dist.all_reduce(buf)
        out.append((time.perf_counter() - t0) * 1e3)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m autotuner.frameworks.ddp.cpuprobe", description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5, help="rounds (each: every stream size alone and beside compute)")
    p.add_argument("--units", type=int, default=12, help="compute units timed alone per round and stream")
    p.add_argument("--stream-s", type=float, default=1.0, help="how long a stream lasts alone (s), about")
    p.add_argument("--hosts", type=int, default=1, help="emulated hosts sharing this machine's cores")
    a = p.parse_args(argv)
    if a.rounds < 1 or a.units < 1 or a.hosts < 1 or not (0 < a.stream_s <= 60):
        print("error: --rounds, --units and --hosts must be >= 1 and --stream-s in (0, 60]", file=sys.stderr)
        return 2
    started = init_gloo_rank()
    if started is None:
        return 2
    torch, dist, rank = started
    ma, mb = torch.randn(256, 1024), torch.randn(1024, 1024)

    def unit():
        for _ in range(UNIT_MATMULS):
            torch.mm(ma, mb)

    unit()
    rows = []
    counts: dict[int, int] = {}
    for rnd in range(a.rounds):
        for size in STREAM_SIZES:
            buf = torch.randn(size // 4) * 1e-3
            if size not in counts:  # round 0: the count that lasts about --stream-s alone, rank 0's, for all
                probe: list[float] = []
                dist.barrier()
                _stream(dist, buf, 3, probe)
                n = torch.tensor([max(3, int(a.stream_s * 1e3 / max(statistics.median(probe), 1e-3)))])
                dist.broadcast(n, 0)
                counts[size] = int(n.item())
            count = counts[size]
            dist.barrier()
            alone_u = []
            for _ in range(a.units):
                t0 = time.perf_counter()
                unit()
                alone_u.append((time.perf_counter() - t0) * 1e3)
            dist.barrier()
            alone_a: list[float] = []
            _stream(dist, buf, count, alone_a)
            dist.barrier()
            beside_a: list[float] = []
            helper = threading.Thread(target=_stream, args=(dist, buf, count, beside_a))
            helper.start()
            beside_u = []
            while helper.is_alive():
                t0 = time.perf_counter()
                unit()
                if helper.is_alive():  # the unit in flight when the stream ended ran partly alone: left out
                    beside_u.append((time.perf_counter() - t0) * 1e3)
            helper.join()
            mine = [statistics.median(alone_u), statistics.median(beside_u) if beside_u else float("nan"),
                    statistics.median(alone_a), statistics.median(beside_a)]
            every = [torch.zeros(4, dtype=torch.float64) for _ in range(dist.get_world_size())]
            dist.all_gather(every, torch.tensor(mine, dtype=torch.float64))
            rows.append({"round": rnd, "bytes": size, "count": count,
                         "by_rank": [[None if v != v else round(float(v), 4) for v in t.tolist()] for t in every],
                         "unit_ms_alone": round(statistics.median(alone_u), 4),
                         "unit_ms_beside": round(statistics.median(beside_u), 4) if beside_u else None,
                         "units_beside": len(beside_u),
                         "allreduce_ms_alone": round(statistics.median(alone_a), 4),
                         "allreduce_ms_beside": round(statistics.median(beside_a), 4)})
    dist.barrier()
    if rank == 0:
        print(f"{TAG} " + json.dumps({"ranks": dist.get_world_size(), "cores_per_host": host_cores(a.hosts),
                                      "unit": f"{UNIT_MATMULS} matmuls 256x1024 @ 1024x1024 float32, one thread",
                                      "rows": rows}), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
