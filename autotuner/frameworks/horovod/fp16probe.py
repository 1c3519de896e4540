"""The ``fp16`` phase of ``autotuner measure``: what fp16 gradient compression costs besides halving the bytes.

``hvd.Compression.fp16`` (Horovod 0.28.1 ``horovod/torch/compression.py``, ``FP16Compressor``) casts each
float32 gradient to float16 in its hook (``compress``), Horovod allreduces the float16 tensor, and
``synchronize`` casts the result back (``decompress``) inside ``DistributedOptimizer.step()``
(``horovod/torch/optimizer.py``). On a CPU the reduction itself changes too: the ring's float16 sum
converts every element (Gloo's ``float16`` type, ``gloo/types.h``), so the same bytes take longer to reduce
than float32's vectorised sum.

This module runs under horovodrun (fusion as set by the caller) and measures, on the env's own link and
host, for each of :data:`SIZES` bytes: one fused response of :data:`TENSORS` float32 tensors of that many bytes in
all (``bytes / 4`` elements) and one of float16 tensors of the same bytes (``bytes / 2`` elements), both of gradient-like values averaged
(:data:`GRADIENT_STD`), :data:`REPEATS` timed samples each after one warm-up, interleaved, waited for as the env's
ranks wait (``--wait``: ``spin``, Horovod's synchronize; ``sleep``, polling first, as the replay's ``--wait sleep``:
on cores shared by emulated hosts a spinning wait takes the core Gloo's float16 sum needs);
and on rank 0 alone the two casts Horovod's compressor makes (``tensor.type(torch.float16)`` and back) of each
set of :data:`CAST_SETS`, :data:`CAST_REPEATS` samples each. Output (rank 0): one line ``AUTOTUNER_FP16 {json}``
with ``sizes``, ``fp32_ms`` and ``fp16_ms`` (median per size, ms), ``casts`` (``[tensors, elements each, down
ms, up ms]`` per set, medians), ``ranks``. The fit is :func:`autotuner.fit.collective.fp16_cost`. A bad argument exits
with status 2 and one line on stderr.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from .idleprobe import POLL_S  # the poll interval of --wait sleep: the replay's WAIT_POLL_S

TAG = "AUTOTUNER_FP16"
#: message sizes (bytes): fused responses of a few MiB, where the per-element cost dominates the latency
SIZES = (1 << 20, 4 << 20, 16 << 20)
REPEATS = 7
#: the summed values: gradient-like, N(0, GRADIENT_STD**2) seeded by rank, as the replay's gradients
#: (:data:`autotuner.frameworks.horovod.replay.GRADIENT_STD`); Gloo's software float16 sum costs less for zeros or ones
#: than for random mantissas (docs/explanation/fp16-compression.md, "The values matter"). Averaged as training does
#: (``hvd.Average``: Horovod rescales the float16 result, ``ScaleBuffer``); the phase's oldest records summed
#: ones (``op=Sum``).
GRADIENT_STD = 1e-3
#: the cast samples: sets of (tensors, float32 bytes each) as a layout's gradients come, 4 MiB a set: the cast's
#: cost per tensor (a call, an allocation) and per element are told apart by the fit
CAST_SETS = ((1024, 4096), (64, 65536), (4, 1 << 20))
CAST_REPEATS = 9
#: tensors per timed allreduce, enqueued at once and fused into one response (the default 64 MiB threshold holds
#: every size): what a training step's responses are. Against a lone tensor of the same bytes no consistent
#: difference was measured (``research/scripts/fp16_fused_vs_lone.py``, 2 Gbit/s loopback, 16 MiB of float16: fused 201.4
#: against lone 219.1 ms, an hour later 186.4 against 173.6); the phase's older records timed one tensor
#: (``tensors`` absent).
TENSORS = 64


def _median(v: list[float]) -> float:
    s = sorted(v)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m autotuner.frameworks.horovod.fp16probe", description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=REPEATS, help="timed allreduces per size and dtype")
    p.add_argument("--wait", default="spin", help="spin (hvd.synchronize) or sleep (poll, then synchronize)")
    p.add_argument("--tensors", type=int, default=TENSORS, help="tensors per allreduce, fused into one response")
    a = p.parse_args(argv)
    if a.repeats < 1 or a.tensors < 1:
        print("error: --repeats and --tensors must be >= 1", file=sys.stderr)
        return 2
    if a.wait not in ("spin", "sleep"):
        print(f"error: --wait {a.wait!r}: use spin or sleep", file=sys.stderr)
        return 2
    import horovod.torch as hvd
    import torch

    hvd.init()
    torch.set_num_threads(1)
    fp32: dict[int, list[float]] = {s: [] for s in SIZES}
    fp16: dict[int, list[float]] = {s: [] for s in SIZES}
    gen = torch.Generator().manual_seed(hvd.rank())
    n = a.tensors
    for size in SIZES:
        src32 = [torch.randn(size // 4 // n, generator=gen) * GRADIENT_STD for _ in range(n)]
        src16 = [(torch.randn(size // 2 // n, generator=gen) * GRADIENT_STD).half() for _ in range(n)]
        t32, t16 = [torch.empty_like(x) for x in src32], [torch.empty_like(x) for x in src16]
        for k in range(a.repeats + 1):  # the first sample of each is a warm-up
            for ts, srcs, out in ((t32, src32, fp32), (t16, src16, fp16)):
                for t, src in zip(ts, srcs):
                    t.copy_(src)
                t0 = time.perf_counter()
                hs = [hvd.allreduce_async_(t, name=f"fp16probe.{size}.{t.dtype}.{i}", op=hvd.Average)
                      for i, t in enumerate(ts)]
                for h in hs:
                    if a.wait == "sleep":  # as the env's ranks wait: a spinning wait takes the core the sum needs
                        while not hvd.poll(h):
                            time.sleep(POLL_S)
                    hvd.synchronize(h)
                if k:
                    out[size].append((time.perf_counter() - t0) * 1e3)
    if hvd.rank() == 0:
        casts = []
        for count, nbytes in CAST_SETS:
            xs = [torch.randn(nbytes // 4) for _ in range(count)]
            hs = [x.half() for x in xs]
            down, up = [], []
            for _ in range(CAST_REPEATS):
                t0 = time.perf_counter()
                for x in xs:
                    x.type(torch.float16)
                t1 = time.perf_counter()
                for h in hs:
                    h.type(torch.float32)
                t2 = time.perf_counter()
                down.append((t1 - t0) * 1e3)
                up.append((t2 - t1) * 1e3)
            casts.append([count, nbytes // 4, round(_median(down), 5), round(_median(up), 5)])
        print(f"{TAG} " + json.dumps({
            "sizes": list(SIZES), "fp32_ms": [round(_median(fp32[s]), 4) for s in SIZES],
            "fp16_ms": [round(_median(fp16[s]), 4) for s in SIZES], "casts": casts, "ranks": hvd.size(),
            "values": f"normal(0, {GRADIENT_STD:g}), averaged", "wait": a.wait, "tensors": n}), flush=True)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
