"""The DDP sweep: what DDP's buckets cost on this cluster, measured with the collective DDP calls.

Runs under torchrun on every rank (``python -m autotuner.frameworks.ddp.sweepprobe``): a Gloo process group
(``torch.distributed.init_process_group("gloo")``, as DDP's on CPU ranks) and, for each size of ``--sizes`` (bytes),
``--warmup`` untimed and ``--repeats`` timed ``dist.all_reduce`` calls of a float32 tensor of that many bytes
(gradient-like values, N(0, 1e-6) seeded by rank, as the replays' gradients), each after a ``dist.barrier()`` so
every rank starts together, timed on rank 0 by the wall clock; then the same for float16 tensors of the same bytes
(what ``fp16_compress_hook`` sends). On rank 0 alone, the copy into a bucket DDP's hook makes
(``torch.mul(grad, 1 / world_size, out=bucket_view)``, reducer.cpp ``mark_variable_ready_dense``) for each size up
to 64 MiB, ``--repeats`` times.

With ``--device cuda`` each rank runs on the GPU ``LOCAL_RANK`` names over NCCL (as DDP's on GPU ranks,
:func:`.rankside.init_rank`): the tensors live on the device; each allreduce is timed by the wall clock from after
the barrier and a ``torch.cuda.synchronize()`` to the ``synchronize()`` after it (the collective as the rank waits
for it); the copies and casts are timed by CUDA events around each (the device's time, at its memory rate; the
host's launch of each is the Reducer's host cost, measured apart), and the bfloat16 hook's casts
(``bf16_compress_hook``) are timed beside the float16 ones.

Output (rank 0, stdout): one line ``AUTOTUNER_DDP_SWEEP {json}``: ``ranks``, ``sizes`` (bytes), ``fp32_ms`` and
``fp16_ms`` (per size, the timed samples in ms), ``copy`` (``[bytes, median ms]`` per size), ``casts``
(``[1, elements, down ms, up ms]`` per size: the fp16 hook's casts of one bucket, medians), ``backend`` ("gloo" or
"nccl"); with ``--device cuda`` also ``casts_bf16`` (as ``casts``, the bf16 hook's) and ``device`` ("cuda"),
``gpu``, ``cuda``, ``nccl`` (:func:`.rankside.device_fields`). Exit status 2 and one line on stderr for a bad
argument, no torchrun, or (``--device cuda``) no CUDA device, no NCCL, or more ranks on a host than it has GPUs.
``--backend`` is the device's (gloo on cpu, nccl on cuda); another is refused.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from .rankside import add_device_option, barrier, device_fields, init_rank, parse_sizes, synchronize

TAG = "AUTOTUNER_DDP_SWEEP"
GRADIENT_STD = 1e-3
COPY_MAX_BYTES = 64 << 20
#: the process group's backend on each device (DDP's: Gloo for CPU tensors, NCCL for CUDA ones)
BACKENDS = {"cpu": "gloo", "cuda": "nccl"}


def _median(v):
    s = sorted(v)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def _event_ms(torch, fn) -> float:
    """``fn``'s time on the current CUDA stream (ms, CUDA events)."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    fn()
    b.record()
    b.synchronize()
    return a.elapsed_time(b)


def _wall_ms(fn) -> float:
    """``fn``'s wall-clock time (ms): a CPU rank's call returns when its work is done."""
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m autotuner.frameworks.ddp.sweepprobe", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", required=True, help="comma-separated message sizes in bytes")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--backend", default=None, help="the device's: gloo (cpu), nccl (cuda)")
    add_device_option(p)
    a = p.parse_args(argv)
    sizes = parse_sizes(a.sizes)
    if sizes is None:
        return 2
    if a.repeats < 1 or a.warmup < 0:
        print("error: --repeats must be >= 1 and --warmup >= 0", file=sys.stderr)
        return 2
    backend = BACKENDS[a.device]
    if a.backend not in (None, backend):
        print(f"error: --backend {a.backend}: with --device {a.device} the backend is {backend} (an NCCL sweep needs "
              "--device cuda, on the cluster's GPUs)", file=sys.stderr)
        return 2
    started = init_rank(a.device)
    if started is None:
        return 2
    torch, dist, rank, dev = started
    cuda = dev.type == "cuda"
    timed = (lambda fn: _event_ms(torch, fn)) if cuda else _wall_ms
    gen = torch.Generator().manual_seed(rank)
    out: dict[str, list] = {"fp32_ms": [], "fp16_ms": []}
    for key, dtype, width in (("fp32_ms", torch.float32, 4), ("fp16_ms", torch.float16, 2)):
        for size in sizes:
            src = (torch.randn(max(1, size // width), generator=gen) * GRADIENT_STD).to(dtype).to(dev)
            t = torch.empty_like(src)
            got = []
            for k in range(a.warmup + a.repeats):
                t.copy_(src)
                barrier(dist, dev)
                synchronize(torch, dev)
                t0 = time.perf_counter()
                dist.all_reduce(t)
                synchronize(torch, dev)
                if k >= a.warmup:
                    got.append(round((time.perf_counter() - t0) * 1e3, 4))
            out[key].append(got)
            del src, t
    copy, casts, casts_bf16 = [], [], []
    if rank == 0:
        for size in sizes:
            if size > COPY_MAX_BYTES:
                continue
            g = torch.randn(max(1, size // 4), generator=gen).to(dev)
            b = torch.empty_like(g)
            h = g.to(torch.float16)
            hb = g.to(torch.bfloat16) if cuda else None
            got, down, up, down_b, up_b = [], [], [], [], []
            for _ in range(a.repeats):
                got.append(timed(lambda: torch.mul(g, 1.0 / dist.get_world_size(), out=b)))
                down.append(timed(lambda: g.to(torch.float16)))  # fp16_compress_hook: buffer.to(torch.float16)
                up.append(timed(lambda: b.copy_(h)))  # its decompress: decompressed_tensor.copy_(fut.value()[0])
                if cuda:  # bf16_compress_hook: the same two with torch.bfloat16
                    down_b.append(timed(lambda: g.to(torch.bfloat16)))
                    up_b.append(timed(lambda: b.copy_(hb)))
            copy.append([size, round(_median(got), 5)])
            casts.append([1, max(1, size // 4), round(_median(down), 5), round(_median(up), 5)])
            if cuda:
                casts_bf16.append([1, max(1, size // 4), round(_median(down_b), 5), round(_median(up_b), 5)])
            del g, b, h, hb
        extra = {"casts_bf16": casts_bf16, **device_fields(torch, dev)} if cuda else {}
        print(f"{TAG} " + json.dumps({"ranks": dist.get_world_size(), "backend": backend, "sizes": sizes, **out,
                                      "copy": copy, "casts": casts, **extra}), flush=True)
    barrier(dist, dev)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
