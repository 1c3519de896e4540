"""What fp16 gradient compression costs on a GPU besides the bytes: the casts and a float16 add,
measured on the device (issue 29), against the memory-bandwidth figure of the GPU table
(``autotuner/specs.py``).

Run on a machine with a CUDA GPU (the device tool lends one to some sessions)::

    python3 research/scripts/gpu_fp16_probe.py --out OUT/fp16-h100.json

Needs only torch (no autotuner import: the GPU machine's Python lacks some of its dependencies);
reads the shipped layouts' tensor sizes from ``autotuner/layouts/*.json``.

What is timed (CUDA events around ``reps`` back-to-back launches, median of ``trials``; ms):

- ``elementwise``: for n = 2^20 .. 2^27 float32 elements (and vgg16's 138,357,544): the cast
  down ``g.to(float16)`` (reads 4 B, writes 2 B per element; what ``hvd.Compression.fp16``'s
  ``compress`` does in each gradient's hook, horovod/torch/compression.py), the cast up
  ``h.to(float32)`` (2 + 4 B; ``decompress`` in ``synchronize``), the float16 add ``a.add_(b)``
  (2 + 2 + 2 B: what a ring reduction step does with a received float16 chunk, NCCL's
  ``reduce`` kernels), the float32 add (12 B), and a float32 copy (8 B), the device's achievable
  copy bandwidth. Each gives its effective GB/s = bytes moved / time. Schema /2 adds the same
  three for bfloat16 (``cast_down_bf16``, ``cast_up_bf16``, ``add_bf16``): what DDP's
  ``bf16_compress_hook`` does (torch ``ddp_comm_hooks/default_hooks.py`` ``_compress_hook``).
- ``per_layout``: the casts done as Horovod does them, one tensor at a time, for the shipped
  layouts (vgg16, resnet50, bert_base, ...): wall time of the loop (host launch cost included,
  CUDA synchronised at the end), so a per-tensor term can be fitted: time = a * tensors + b * elements.

Output: one JSON object (schema ``autotuner.gpu-fp16-probe/2``) with the device, torch, and
every figure; nothing else is written.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
LAYOUTS = ("vgg16", "resnet50", "resnet18", "bert_base", "gpt2_small", "vit_s16", "mobilenet_v2", "mnist")


def _time_ms(fn, reps: int, trials: int) -> tuple[float, float, float]:
    """(median, min, max) over ``trials`` of the mean time of one of ``reps`` back-to-back calls (ms)."""
    out = []
    for _ in range(trials):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        out.append(start.elapsed_time(end) / reps)
    return statistics.median(out), min(out), max(out)


def elementwise(n: int, reps: int, trials: int) -> dict:
    dev = "cuda"
    g = torch.randn(n, device=dev, dtype=torch.float32)
    h = g.to(torch.float16)
    a16, b16 = h.clone(), h.clone()
    hb = g.to(torch.bfloat16)
    ab, bb = hb.clone(), hb.clone()
    a32, b32 = g.clone(), g.clone()
    dst32 = torch.empty_like(g)
    ops = {  # name -> (callable, bytes moved per element)
        "cast_down": (lambda: g.to(torch.float16), 6),
        "cast_up": (lambda: h.to(torch.float32), 6),
        "add_fp16": (lambda: a16.add_(b16), 6),
        "add_fp32": (lambda: a32.add_(b32), 12),
        "copy_fp32": (lambda: dst32.copy_(g), 8),
        "cast_down_bf16": (lambda: g.to(torch.bfloat16), 6),
        "cast_up_bf16": (lambda: hb.to(torch.float32), 6),
        "add_bf16": (lambda: ab.add_(bb), 6),
    }
    row = {"elements": n}
    for name, (fn, bpe) in ops.items():
        for _ in range(3):
            fn()  # warm-up
        med, lo, hi = _time_ms(fn, reps, trials)
        row[name] = {"ms": med, "ms_min": lo, "ms_max": hi, "bytes_per_elem": bpe,
                     "ns_per_elem": med * 1e6 / n, "gbytes_per_s": bpe * n / (med * 1e-3) / 1e9}
    del g, h, a16, b16, a32, b32, dst32, hb, ab, bb
    torch.cuda.empty_cache()
    return row


def layout_sizes(name: str) -> list[int]:
    d = json.loads((ROOT / "autotuner" / "layouts" / f"{name}.json").read_text())
    return [max(1, math.prod(t["shape"])) for t in d["tensors"]]


def per_layout(name: str, trials: int) -> dict:
    sizes = layout_sizes(name)
    grads = [torch.randn(n, device="cuda") for n in sizes]
    halves = [x.to(torch.float16) for x in grads]
    res = {"layout": name, "tensors": len(sizes), "elements": sum(sizes)}
    for key, fn in (("cast_down", lambda: [x.to(torch.float16) for x in grads]),
                    ("cast_up", lambda: [x.to(torch.float32) for x in halves])):
        for _ in range(3):
            fn()
        walls = []
        for _ in range(trials):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            walls.append((time.perf_counter() - t0) * 1e3)
        res[key] = {"ms": statistics.median(walls), "ms_min": min(walls), "ms_max": max(walls)}
    del grads, halves
    torch.cuda.empty_cache()
    return res


def nvidia_smi() -> str:
    """The GPU's name, memory, driver and memory clock as ``nvidia-smi`` reports them (one CSV line), or why not."""
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version,clocks.max.memory",
                               "--format=csv,noheader"], capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as e:
        return f"nvidia-smi failed: {e}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--trials", type=int, default=15)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("error: no CUDA device: this probe measures a GPU", file=sys.stderr)
        return 2
    smi = nvidia_smi()
    t0 = time.time()
    rows = []
    for n in [2**k for k in range(20, 28)] + [138_357_544]:
        reps = max(3, min(200, int(2**26 / n * 20)))
        rows.append(elementwise(n, reps, a.trials))
        print(f"n={n:>11,}: " + ", ".join(f"{k} {rows[-1][k]['gbytes_per_s']:.0f} GB/s"
                                          for k in ("cast_down", "cast_up", "add_fp16", "add_fp32", "copy_fp32",
                                                    "cast_down_bf16", "cast_up_bf16", "add_bf16")),
              flush=True)
    lays = []
    for name in LAYOUTS:
        if (ROOT / "autotuner" / "layouts" / f"{name}.json").exists():
            lays.append(per_layout(name, a.trials))
            r = lays[-1]
            print(f"{name}: {r['tensors']} tensors, {r['elements']:,} elements: cast down {r['cast_down']['ms']:.3f} ms, "
                  f"up {r['cast_up']['ms']:.3f} ms", flush=True)
    rec = {"schema": "autotuner.gpu-fp16-probe/2", "device": torch.cuda.get_device_name(0), "nvidia_smi": smi,
           "torch": torch.__version__, "cuda": torch.version.cuda,
           "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "seconds": round(time.time() - t0, 1),
           "command": "python3 research/scripts/gpu_fp16_probe.py " + " ".join(sys.argv[1:]),
           "elementwise": rows, "per_layout": lays}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = a.out.with_suffix(".tmp")
    tmp.write_text(json.dumps(rec, indent=1) + "\n")
    os.replace(tmp, a.out)
    print(f"wrote {a.out} ({rec['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
