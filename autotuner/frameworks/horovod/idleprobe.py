"""The ``idle`` phase of ``autotuner measure``: small responses back to back while the ranks' main threads sleep.

In training the main thread sleeps while Horovod's background thread runs most small responses:
during an emulated (GPU-like) backward, and after it where the ranks wait by polling
(``--wait sleep``). On a host whose idle cores halt, every hand-off of such a response's ring
(Horovod 0.28.1 ``horovod/common/ops/gloo_operations.cc`` ``GlooAllreduce::Execute``) waits for
a thread to wake: a 4 KiB response measured ~1.8 ms there against ~0.25 ms beside a spinning
``hvd.synchronize`` (research/notes/fresh-environments.md section 10). The sweep's one fusion-off job
samples that regime once, by chance; this phase samples it on purpose.

This module runs under horovodrun with a fusion threshold of 0 (each tensor a response of its
own). For each of :data:`SIZES` it runs :data:`ROUNDS` rounds: it enqueues :data:`TENSORS`
float32 tensors at once (``idle.<bytes>.<k>``), then sleeps in :data:`POLL_S` steps until every
handle polls done, exactly as the replay's ``--wait sleep`` does, then synchronizes (which returns
at once). The fit (:func:`autotuner.frameworks.horovod.fit.phase_small.idle_response`) reads the spans off the job's
timeline, each name's first use left out. Output (rank 0): one line ``AUTOTUNER_IDLE {json}``
with ``sizes``, ``tensors``, ``rounds``, ``ranks``. A bad argument exits with status 2 and one
line on stderr.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

TAG = "AUTOTUNER_IDLE"
#: tensor sizes (bytes): BatchNorm / bias vectors, small convolution and attention weights
SIZES = (4096, 16384, 65536)
TENSORS = 32
ROUNDS = 4
#: poll interval (s): the replay's ``WAIT_POLL_S`` (autotuner.frameworks.horovod.replay), not imported so that
#: this probe needs nothing but Horovod
POLL_S = 0.0002
#: tensor-name prefix the fit reads
PREFIX = "idle"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m autotuner.frameworks.horovod.idleprobe", description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=ROUNDS, help="rounds per size")
    a = p.parse_args(argv)
    if a.rounds < 2:
        print("error: --rounds must be >= 2 (the first use of each name is left out)", file=sys.stderr)
        return 2
    import horovod.torch as hvd
    import torch

    hvd.init()
    torch.set_num_threads(1)
    for size in SIZES:
        ts = [torch.zeros(size // 4) for _ in range(TENSORS)]
        for _ in range(a.rounds):
            hs = [hvd.allreduce_async_(t, name=f"{PREFIX}.{size}.{k}") for k, t in enumerate(ts)]
            while not all(hvd.poll(h) for h in hs):
                time.sleep(POLL_S)
            for h in hs:
                hvd.synchronize(h)
            time.sleep(0.01)  # the next round starts from an idle loop, as a step's backward does
    if hvd.rank() == 0:
        print(f"{TAG} " + json.dumps({"sizes": list(SIZES), "tensors": TENSORS, "rounds": a.rounds,
                                      "ranks": hvd.size()}), flush=True)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
