"""The ``trickle`` phase of ``autotuner measure``: a response alone in its cycle, as training issues them.

Training hands Horovod its gradients one by one during backward, so with fusion off (or a small
threshold) most responses are alone in their cycle. The sweep enqueues tensors all at once, and
the collective of a tensor alone in its cycle runs longer than one queued behind others, and
longer still with a longer cycle time (docs/how-to/measure.md, "What a sweep does not learn"; the
measured trickle: 4 KiB, 0.75 Gbit/s, 1.2 ms back to back against 2.0 ms alone at a 1 ms cycle and
2.8 ms at 5 ms). Each rank's background loop ticks on its own clock (Horovod 0.28.1
``horovod/common/operations.cc`` ``RunLoopOnce``: it sleeps what is left of the cycle time), and
a response can only run once both ranks' loops have reached it.

This module runs under horovodrun with a fusion threshold of 0. For each of :data:`SIZES`, it
runs :data:`REPEATS` rounds. In each round it enqueues :data:`TENSORS` float32 tensors one at a
time, ``--gap-ms`` apart (1.5 cycle times: one per cycle), waits for all of them, then enqueues
the same tensors all at once (back to back in one cycle). Tensor names carry the pattern
(``trickle.<bytes>.<k>`` / ``b2b.<bytes>.<k>``), so the job's timeline tells the two apart
(:func:`autotuner.frameworks.horovod.fit.phase_small.lone_response`). Output (rank 0): one line ``AUTOTUNER_TRICKLE {json}``
with ``sizes``, ``tensors``, ``repeats``, ``gap_ms``, ``ranks``. A bad argument exits with status 2
and one line on stderr.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

TAG = "AUTOTUNER_TRICKLE"
#: tensor sizes (bytes): a small one (BatchNorm vectors) and a mid-size one
SIZES = (4096, 65536)
TENSORS = 32
REPEATS = 4
#: the phase's cycle times (ms): Horovod's default and a longer one, for the slope in the cycle time
CYCLES_MS = (1.0, 5.0)
#: tensor-name prefixes the fit reads
TRICKLE, BACK_TO_BACK = "trickle", "b2b"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m autotuner.frameworks.horovod.trickleprobe", description=__doc__.split("\n")[0])
    p.add_argument("--gap-ms", type=float, required=True, help="time between two enqueued tensors (ms)")
    a = p.parse_args(argv)
    if not a.gap_ms > 0:
        print("error: --gap-ms must be > 0", file=sys.stderr)
        return 2
    import horovod.torch as hvd
    import torch

    hvd.init()
    torch.set_num_threads(1)
    for size in SIZES:
        ts = [torch.zeros(size // 4) for _ in range(TENSORS)]
        for _ in range(REPEATS):
            hs = []
            for k, t in enumerate(ts):
                hs.append(hvd.allreduce_async_(t, name=f"{TRICKLE}.{size}.{k}"))
                time.sleep(a.gap_ms / 1e3)
            for h in hs:
                hvd.synchronize(h)
            for h in [hvd.allreduce_async_(t, name=f"{BACK_TO_BACK}.{size}.{k}") for k, t in enumerate(ts)]:
                hvd.synchronize(h)
    if hvd.rank() == 0:
        print(f"{TAG} " + json.dumps({"sizes": list(SIZES), "tensors": TENSORS, "repeats": REPEATS,
                                      "gap_ms": a.gap_ms, "ranks": hvd.size()}), flush=True)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
