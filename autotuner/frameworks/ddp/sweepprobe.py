"""The DDP sweep: what DDP's buckets cost on this cluster, measured with the collective DDP calls.

Runs under torchrun on every rank (``python -m autotuner.frameworks.ddp.sweepprobe``): a Gloo process group
(``torch.distributed.init_process_group("gloo")``, as DDP's on CPU ranks) and, for each size of ``--sizes`` (bytes),
``--warmup`` untimed and ``--repeats`` timed ``dist.all_reduce`` calls of a float32 tensor of that many bytes
(gradient-like values, N(0, 1e-6) seeded by rank, as the replays' gradients), each after a ``dist.barrier()`` so
every rank starts together, timed on rank 0 by the wall clock; then the same for float16 tensors of the same bytes
(what ``fp16_compress_hook`` sends). On rank 0 alone, the copy into a bucket DDP's hook makes
(``torch.mul(grad, 1 / world_size, out=bucket_view)``, reducer.cpp ``mark_variable_ready_dense``) for each size up
to 64 MiB, ``--repeats`` times.

Output (rank 0, stdout): one line ``AUTOTUNER_DDP_SWEEP {json}``: ``ranks``, ``sizes`` (bytes), ``fp32_ms`` and
``fp16_ms`` (per size, the timed samples in ms), ``copy`` (``[bytes, median ms]`` per size), ``casts``
(``[1, elements, down ms, up ms]`` per size: the fp16 hook's casts of one bucket, medians), ``backend`` ("gloo"). Exit status 2 and one line on stderr for a bad argument. NCCL with CUDA tensors is not measured here (no
GPU on these machines): a CUDA cluster's sweep must run this with ``--backend nccl`` on its GPUs, which this module
refuses rather than timing the CPU path for it.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from .rankside import init_gloo_rank, parse_sizes

TAG = "AUTOTUNER_DDP_SWEEP"
GRADIENT_STD = 1e-3
COPY_MAX_BYTES = 64 << 20


def _median(v):
    s = sorted(v)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m autotuner.frameworks.ddp.sweepprobe", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", required=True, help="comma-separated message sizes in bytes")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--backend", default="gloo")
    a = p.parse_args(argv)
    sizes = parse_sizes(a.sizes)
    if sizes is None:
        return 2
    if a.repeats < 1 or a.warmup < 0:
        print("error: --repeats must be >= 1 and --warmup >= 0", file=sys.stderr)
        return 2
    if a.backend != "gloo":
        print(f"error: --backend {a.backend}: only gloo (CPU ranks) is measured here; a CUDA cluster's NCCL sweep "
              "needs its GPUs", file=sys.stderr)
        return 2
    started = init_gloo_rank()
    if started is None:
        return 2
    torch, dist, rank = started
    gen = torch.Generator().manual_seed(rank)
    out: dict[str, list] = {"fp32_ms": [], "fp16_ms": []}
    for key, dtype, width in (("fp32_ms", torch.float32, 4), ("fp16_ms", torch.float16, 2)):
        for size in sizes:
            src = (torch.randn(max(1, size // width), generator=gen) * GRADIENT_STD).to(dtype)
            t = torch.empty_like(src)
            got = []
            for k in range(a.warmup + a.repeats):
                t.copy_(src)
                dist.barrier()
                t0 = time.perf_counter()
                dist.all_reduce(t)
                if k >= a.warmup:
                    got.append(round((time.perf_counter() - t0) * 1e3, 4))
            out[key].append(got)
    copy, casts = [], []
    if rank == 0:
        for size in sizes:
            if size > COPY_MAX_BYTES:
                continue
            g = torch.randn(max(1, size // 4), generator=gen)
            b = torch.empty_like(g)
            h = g.to(torch.float16)
            got, down, up = [], [], []
            for _ in range(a.repeats):
                t0 = time.perf_counter()
                torch.mul(g, 1.0 / dist.get_world_size(), out=b)
                t1 = time.perf_counter()
                g.to(torch.float16)  # fp16_compress_hook: buffer.to(torch.float16)
                t2 = time.perf_counter()
                b.copy_(h)  # its decompress callback: decompressed_tensor.copy_(fut.value()[0])
                t3 = time.perf_counter()
                got.append((t1 - t0) * 1e3)
                down.append((t2 - t1) * 1e3)
                up.append((t3 - t2) * 1e3)
            copy.append([size, round(_median(got), 5)])
            casts.append([1, max(1, size // 4), round(_median(down), 5), round(_median(up), 5)])
        print(f"{TAG} " + json.dumps({"ranks": dist.get_world_size(), "backend": "gloo", "sizes": sizes, **out,
                                      "copy": copy, "casts": casts}), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
