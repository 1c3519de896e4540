"""The ``burst`` phase of ``autotuner measure``: what one more small response costs in a busy cycle, timed by
the wall clock, without Horovod's timeline.

With fusion off or a threshold of 1 MiB and below, a training step runs hundreds of small responses back
to back (BatchNorm, bias and LayerNorm gradients). Every other phase that sees them reads their spans off
Horovod's timeline, and the timeline's writer (Horovod 0.28.1 ``horovod/common/timeline.cc``,
``TimelineWriter``: a thread formatting and writing JSON for every activity of every tensor) takes CPU
from the ranks on a host whose cores they fill: on 2 emulated hosts a replay paid 1.95 ms per extra
response with the timeline and 0.49 ms without (research/notes/accuracy.md, "The small-response regime"). A
production job runs without it, so this phase measures without it.

This module runs under horovodrun with a fusion threshold of 0 (each tensor a response of its own), a
1 ms cycle and the response cache on, and no timeline. For each of :data:`SIZES` (``--sizes``) and each count of
:data:`COUNTS` (``--counts``) it runs ``--rounds`` rounds: enqueue that many float32 tensors at once
(``burst.<bytes>.<k>``), wait for them as the env's ranks wait (``--wait spin``: ``hvd.synchronize`` on
each; ``--wait sleep``: poll in :data:`POLL_S` sleeps first, as the replay's ``--wait sleep``), and
record the wall time from the first enqueue to the last completion on this rank; then sleep 10 ms (the
next round starts from an idle loop). The first round of each size and count is the response cache's
miss: recorded apart, left out by the fit. ``(T(32) - T(1)) / 31`` is then the marginal wall time of a
response back to back in a busy cycle, whatever part of it is negotiation, host gaps or the collective
(:func:`autotuner.frameworks.horovod.fit.phase_small.burst_small_response`). Output (rank 0): one line ``AUTOTUNER_BURST {json}``
with ``sizes``, ``counts``, ``rounds``, ``wait``, ``ranks`` and ``wall_ms`` (``[bytes, count,
[ms per round, first round left out]]`` per size and count). A bad argument exits with status 2 and
one line on stderr.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from .idleprobe import POLL_S  # the poll interval of --wait sleep: the idle probe's, the replay's WAIT_POLL_S

TAG = "AUTOTUNER_BURST"
#: tensor sizes (bytes): BatchNorm / bias vectors, small convolution and attention weights
SIZES = (4096, 16384, 65536)
#: tensors enqueued at once: one alone, and a burst whose marginal cost the fit reads
COUNTS = (1, 32)
ROUNDS = 9
#: tensor-name prefix
PREFIX = "burst"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m autotuner.frameworks.horovod.burstprobe", description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=ROUNDS, help="rounds per size and count (the first is a warm-up)")
    p.add_argument("--wait", default="spin", help="spin (hvd.synchronize) or sleep (poll, then synchronize)")
    p.add_argument("--sizes", default=",".join(map(str, SIZES)),
                   help="tensor sizes, bytes, comma-separated (multiples of 4; default: %(default)s)")
    p.add_argument("--counts", default=",".join(map(str, COUNTS)),
                   help="tensors enqueued at once, comma-separated, at least two, increasing (default: %(default)s)")
    a = p.parse_args(argv)
    if a.rounds < 2:
        print("error: --rounds must be >= 2 (the first round of each size and count is left out)", file=sys.stderr)
        return 2
    if a.wait not in ("spin", "sleep"):
        print(f"error: --wait {a.wait!r}: use spin or sleep", file=sys.stderr)
        return 2
    try:
        sizes = tuple(int(x) for x in a.sizes.split(","))
        counts = tuple(int(x) for x in a.counts.split(","))
    except ValueError:
        print(f"error: --sizes {a.sizes!r} / --counts {a.counts!r}: comma-separated whole numbers", file=sys.stderr)
        return 2
    if not sizes or any(b < 4 or b % 4 for b in sizes):
        print(f"error: --sizes {a.sizes!r}: each a multiple of 4 bytes, at least 4", file=sys.stderr)
        return 2
    if len(counts) < 2 or counts[0] < 1 or any(y <= x for x, y in zip(counts, counts[1:])):
        print(f"error: --counts {a.counts!r}: at least two, increasing, from 1 up", file=sys.stderr)
        return 2
    import horovod.torch as hvd
    import torch

    hvd.init()
    torch.set_num_threads(1)
    walls = []
    for size in sizes:
        for count in counts:
            ts = [torch.zeros(size // 4) for _ in range(count)]
            got = []
            for r in range(a.rounds):
                t0 = time.perf_counter()
                hs = [hvd.allreduce_async_(t, name=f"{PREFIX}.{size}.{count}.{k}") for k, t in enumerate(ts)]
                if a.wait == "sleep":
                    while not all(hvd.poll(h) for h in hs):
                        time.sleep(POLL_S)
                for h in hs:
                    hvd.synchronize(h)
                if r:
                    got.append(round((time.perf_counter() - t0) * 1e3, 4))
                time.sleep(0.01)
            walls.append([size, count, got])
    if hvd.rank() == 0:
        print(f"{TAG} " + json.dumps({"sizes": list(sizes), "counts": list(counts), "rounds": a.rounds,
                                      "wait": a.wait, "ranks": hvd.size(), "wall_ms": walls}), flush=True)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
