"""The ``cpu`` phase of ``autotuner measure``: how much compute a rank loses to Horovod's cycles.

Where ranks compute on the CPU and fill their host's cores, every cycle of
Horovod's background thread takes the CPU from a compute thread: ``RunLoopOnce`` wakes after
its sleep and runs ``ComputeResponseList``, which with the response cache does its bit-vector
allreduces over the controller's Gloo context every cycle, idle or not (Horovod 0.28.1
``horovod/common/operations.cc`` ``RunLoopOnce``; ``horovod/common/controller.cc``
``CoordinateCacheAndState``; ``horovod/common/gloo/gloo_controller.cc``
``CrossRankBitwiseAnd``/``Or``): a wake-up, TCP sends and receives and the kernel's network
work for them. A compute thread with no spare core pays for all of it.

The phase runs this module under horovodrun on the first tier's host
(:func:`autotuner.frameworks.horovod.measure.tiers`): each rank's main thread (one torch thread) times
:data:`UNITS` compute units, a 256×1024 @ 1024×1024 float32 matmul (~5 ms on this machine), with
nothing enqueued: only idle cycles run beside it. Two jobs alternate, :data:`CYCLES_MS`: the
cycle time ``1 ms`` (Horovod's default, many wake-ups) and ``100 ms`` (the top of Horovod's
autotune range, ``horovod/common/parameter_manager.cc``: ~1 % of the wake-ups: the reference),
``repeats`` times each, interleaved (machine noise drifts by a few percent between runs).
Per pair, the share of the compute thread's time lost to the fast cycle is ``f = 1 - u_ref /
u_fast`` (``u``: the slowest rank's wall time per unit, which a synchronous step waits for); the fit
(:func:`autotuner.frameworks.horovod.fit.phase_cpu.cycle_cpu`) turns it into a cost per cycle.

Output (rank 0, stdout): one line ``AUTOTUNER_CPU {json}`` with ``unit_ms`` (mean over ranks
of each rank's wall time over its units, ms: a unit the cycle preempted counts), ``unit_ms_max``
(the slowest rank's), ``unit_ms_median`` (mean over ranks of the median unit), ``cpu_share`` (the compute
thread's CPU time over its wall time, mean over ranks), ``units``, ``ranks``. A bad argument
exits with status 2 and one line on stderr.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

TAG = "AUTOTUNER_CPU"
#: compute units each rank times per job (after :data:`WARMUP_UNITS`)
UNITS = 400
WARMUP_UNITS = 20
#: the two cycle times (ms) of the phase: the fast one whose cost is measured, then the reference
CYCLES_MS = (1.0, 100.0)
#: the streams (cycle 1 ms, fusion off): name -> (bytes per tensor, tensors per batch, batches). One large
#: response at a time, and 16 small ones back to back (the regime of fusion off): the CPU per response and
#: per byte that the collectives take from the compute (autotuner.frameworks.horovod.fit.phase_cpu.cycle_cpu)
STREAMS = {"4MiBx1": (4 << 20, 1, 40), "64KiBx16": (64 << 10, 16, 40)}
#: (n, k, m) of the matmul unit: (n×k) @ (k×m) float32
UNIT_SHAPE = (256, 1024, 1024)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m autotuner.frameworks.horovod.cpuprobe", description=__doc__.split("\n")[0])
    p.add_argument("--units", type=int, default=UNITS, help=f"timed compute units per rank (default {UNITS})")
    p.add_argument("--stream", default="", help="BYTES,TENSORS,BATCHES: a sender thread allreduces BATCHES batches "
                   "of TENSORS float32 tensors of BYTES bytes, one batch after another, timing each")
    p.add_argument("--no-compute", action="store_true", help="with --stream: the main thread waits instead of "
                   "computing (the collectives' own time)")
    a = p.parse_args(argv)
    try:
        stream = tuple(int(v) for v in a.stream.split(",")) if a.stream else None
    except ValueError:
        stream = (0,)
    if a.units < 2 or (stream is not None and (len(stream) != 3 or min(stream) < 1 or stream[0] % 4)) \
            or (a.no_compute and stream is None):
        print("error: --units must be >= 2, --stream BYTES,TENSORS,BATCHES positive (BYTES a multiple of 4), "
              "--no-compute only with --stream", file=sys.stderr)
        return 2
    import threading

    import horovod.torch as hvd
    import torch

    hvd.init()
    torch.set_num_threads(1)
    n, k, m = UNIT_SHAPE
    x, w = torch.randn(n, k), torch.randn(k, m)
    for _ in range(WARMUP_UNITS):
        torch.mm(x, w)
    times, batch_ms = [], []
    sender = None
    if stream is not None:  # every rank allreduces the same batches in the same order, each when the last is done
        size, count, batches = stream
        ts = [torch.zeros(size // 4) for _ in range(count)]

        def send() -> None:
            for _ in range(batches):
                t = time.perf_counter()
                for h in [hvd.allreduce_async_(v, name=f"cpuprobe.s{i}") for i, v in enumerate(ts)]:
                    hvd.synchronize(h)
                batch_ms.append((time.perf_counter() - t) * 1e3)

        sender = threading.Thread(target=send, daemon=True)
    w0, c0 = time.perf_counter(), time.thread_time()
    if sender is None:
        for _ in range(a.units):
            t = time.perf_counter()
            torch.mm(x, w)
            times.append(time.perf_counter() - t)
    else:
        sender.start()
        while sender.is_alive() and not a.no_compute:
            t = time.perf_counter()
            torch.mm(x, w)
            times.append(time.perf_counter() - t)
        sender.join()
        while len(times) < 2:  # --no-compute: two units after, so the record has its fields
            t = time.perf_counter()
            torch.mm(x, w)
            times.append(time.perf_counter() - t)
    wall = time.perf_counter() - w0
    share = (time.thread_time() - c0) / wall
    per_unit = wall / len(times) * 1e3  # the mean: a unit preempted by the cycle is in it (the median drops it)
    times.sort()
    med = times[len(times) // 2] * 1e3
    mean = hvd.allreduce(torch.tensor([per_unit, med, share], dtype=torch.float64), name="cpuprobe.mean",
                         op=hvd.Average)
    top = hvd.allreduce(torch.tensor([per_unit], dtype=torch.float64), name="cpuprobe.max", op=hvd.Max)
    if hvd.rank() == 0:
        print(f"{TAG} " + json.dumps({"unit_ms": round(float(mean[0]), 5), "unit_ms_max": round(float(top[0]), 5),
                                      "unit_ms_median": round(float(mean[1]), 5), "cpu_share": round(float(mean[2]), 4),
                                      "units": len(times), "ranks": hvd.size(),
                                      **({} if stream is None else {
                                          "stream_bytes": stream[0], "stream_tensors": stream[1],
                                          "stream_batches": stream[2], "compute": not a.no_compute,
                                          "wall_s": round(wall, 4),
                                          "batch_ms": round(sorted(batch_ms)[len(batch_ms) // 2], 5),
                                          "response_ms": round(sorted(batch_ms)[len(batch_ms) // 2] / stream[1], 5)})}),
              flush=True)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
