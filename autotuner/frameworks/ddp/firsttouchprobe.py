"""The DDP first-touch phase: what writing a step's fresh gradients costs a CPU rank when they are held to the
step's end (DDP without ``gradient_as_bucket_view``) against when each is dropped right after its copy into the
bucket (with the view), every rank of a host at once (docs/explanation/ddp-simulator.md, "An uncontended machine").

After ``zero_grad(set_to_none=True)`` autograd makes every gradient fresh. Without the view DDP keeps them to the
step's end (``finalize_bucket_dense`` copies the bucket back into them), so they are all freed together at the next
``zero_grad``; glibc then returns their pages to the kernel (its trim and mmap thresholds, mallopt(3)) and the next
step faults every page in again. With the view each fresh gradient is freed right after its copy into the bucket
(the gradient becomes the bucket's view) and the allocator reuses its pages. On a lent 16-core machine the real DDP
job of ResNet-101 faulted ~40,000 pages a step on rank 0 without the view and none with it; with glibc keeping the
pages the simulator held every setting within 1.8 % (``runs/ddp-1x4-16core/ddp-experiments``). On a GPU the caching
allocator keeps the pages and none of this applies.

Runs under torchrun on every rank (``python -m autotuner.frameworks.ddp.firsttouchprobe``), one thread each, the
gradients of a shipped layout (``--model``, default ResNet-50: 161 tensors, 102 MB). Each of ``--rounds`` rounds
runs both modes in turn, every rank together (a barrier before each): ``--steps`` + 1 steps of ``clone()`` every
gradient (as autograd makes it) and copy it into a preallocated flat bucket (``copy_``, as DDP's hook), keeping the
clones to the step's end ("held") or freeing each after its copy ("dropped"); the first step of each mode is not
timed (it touches everything once in both). Timed on rank 0 by the wall clock; faults from ``getrusage``.

Output (rank 0, stdout): one line ``AUTOTUNER_DDP_FIRST_TOUCH {json}``: ``ranks``, ``model``, ``bytes`` (the
layout's float32 bytes), ``rows`` (one per round and mode: ``mode``, ``write_ms`` (median step: clones and copies),
``copy_in_ms`` (its copies alone), ``minor_faults`` (median per step)), ``malloc_env`` (the ``MALLOC_*`` variables
the ranks ran with). Exit status 2 and one line on stderr for a bad argument or no torchrun.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time

from .rankside import init_gloo_rank, load_rank_layout

TAG = "AUTOTUNER_DDP_FIRST_TOUCH"
MODES = ("held", "dropped")


def time_mode(torch, shapes, mode: str, steps: int, seed: int = 0) -> dict:
    """One mode of the probe in this process: ``steps`` + 1 steps over gradients of ``shapes`` (float32), the first
    untimed. Returns ``{"mode", "write_ms", "copy_in_ms", "minor_faults", "bytes"}`` (medians per step; ms and
    counts). ``mode``: "held" keeps each step's clones to its end, "dropped" frees each after its copy."""
    gen = torch.Generator().manual_seed(seed)
    grads = [torch.randn(s, generator=gen) * 1e-3 for s in shapes]
    bucket = torch.empty(sum(g.numel() for g in grads))
    views, o = [], 0
    for g in grads:
        views.append(bucket[o:o + g.numel()].view_as(g))
        o += g.numel()
    held: list = [None] * len(grads)
    out = []
    for _ in range(steps + 1):
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = time.perf_counter()
        tc = 0.0
        for i, g in enumerate(grads):
            c = g.clone()
            t1 = time.perf_counter()
            views[i].copy_(c)
            tc += time.perf_counter() - t1
            held[i] = c if mode == "held" else None
        t = time.perf_counter() - t0
        f = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
        held = [None] * len(grads)  # zero_grad(set_to_none=True)
        out.append((t * 1e3, tc * 1e3, f))
    out = out[1:]
    return {"mode": mode, "write_ms": round(statistics.median(r[0] for r in out), 3),
            "copy_in_ms": round(statistics.median(r[1] for r in out), 3),
            "minor_faults": int(statistics.median(r[2] for r in out)),
            "bytes": int(sum(g.numel() * 4 for g in grads))}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m autotuner.frameworks.ddp.firsttouchprobe",
                                description=__doc__.split("\n")[0])
    p.add_argument("--model", default="resnet50", help="a shipped layout whose gradients are written")
    p.add_argument("--steps", type=int, default=5, help="timed steps per mode and round")
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args(argv)
    if a.steps < 1 or a.rounds < 1:
        print("error: --steps and --rounds must be >= 1", file=sys.stderr)
        return 2
    layout = load_rank_layout(a.model)
    if layout is None:
        return 2
    started = init_gloo_rank()
    if started is None:
        return 2
    torch, dist, rank = started
    rows = []
    for _ in range(a.rounds):
        for mode in MODES:
            dist.barrier()
            rows.append(time_mode(torch, layout.shapes, mode, a.steps, seed=rank))
    dist.barrier()
    if rank == 0:
        print(f"{TAG} " + json.dumps({"ranks": dist.get_world_size(), "model": layout.name,
                                      "bytes": rows[0]["bytes"], "rows": rows,
                                      "malloc_env": {k: v for k, v in sorted(os.environ.items())
                                                     if k.startswith("MALLOC_")}}), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
