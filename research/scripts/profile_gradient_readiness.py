#!/usr/bin/env python3
"""Measure when each gradient becomes ready during a real backward pass on a CUDA GPU.

Run on a machine with a CUDA GPU, PyTorch and torchvision (not this project's CI machines;
results are committed under ``runs/gpu-profiles/``)::

    python research/scripts/profile_gradient_readiness.py --out DIR [--models resnet50,vgg16] \\
        [--batch-sizes 32,64,128] [--precisions fp32,amp-bf16] [--steps 30] [--warmup 10]

For each torchvision model (``weights=None``, ImageNet shapes 3x224x224, 1000 classes) it runs
SGD training steps and registers ``Tensor.register_post_accumulate_grad_hook`` on every
parameter: the moment the hook runs is the moment Horovod's ``DistributedOptimizer`` hook
(``horovod/torch/optimizer.py``, a hook on each parameter's gradient accumulator) would hand
that gradient to Horovod. In the hook a CUDA event is recorded on the current stream, so the
event's time is when the GPU has produced the gradient (what Horovod's ready event waits for),
not when the CPU, which runs ahead, queued the kernels.

Output: ``DIR/profiles.json`` with, per (model, precision, batch size):
  - ``forward_ms``, ``backward_ms``, ``update_ms``: medians over measured steps, ms (CUDA events);
  - ``order``: parameter names in the order their hooks ran (identical in every measured step,
    else ``order_stable`` is false);
  - ``ready_ms``: per parameter in ``order``, median GPU time from the end of forward (loss
    computed) to the gradient being ready, ms; ``tail_ms``: end of backward minus last ready;
  - ``layout_check``: whether ``order`` and the shapes equal the shipped layout
    ``autotuner/layouts/<model>.json`` (tensor names, shapes, backward order), with the first
    mismatch if any;
  - ``layout``: an ``autotuner.layout/1`` dict whose ``compute_share`` values are the measured
    increments of ready time (share_i = (ready_i - ready_{i-1}) / ready_last), usable with
    ``--model FILE.json`` once written to a file.

The measuring itself is the package's (:func:`autotuner.realrun.profile.measure`, what
``autotuner profile`` runs for any ``torch.nn.Module``); this script adds the torchvision models,
the cross-entropy loss, the SGD update and the ``profiles.json`` records. It imports only
``autotuner.realrun.profile`` and ``autotuner.errors`` from this repository (found beside the
script), so the GPU machine needs nothing but torch and torchvision. Exits 2 with one line on
stderr when CUDA or torchvision is missing or an argument is bad.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from autotuner.realrun.profile import measure  # noqa: E402 (stdlib + torch only)

LAYOUT_DIR = ROOT / "autotuner" / "layouts"
SCHEMA = "autotuner.layout/1"
PRECISIONS = ("fp32", "amp-bf16")


def _check_layout(model: str, order: list[str], shapes: dict[str, list[int]]) -> dict:
    """Compare the measured readiness order and shapes with the shipped layout JSON."""
    path = LAYOUT_DIR / f"{model}.json"
    if not path.exists():
        return {"shipped": False}
    shipped = json.loads(path.read_text())["tensors"]
    names = [t["name"] for t in shipped]
    same_set = set(names) == set(order)
    first = None
    for i, (a, b) in enumerate(zip(names, order)):
        if a != b:
            first = {"index": i, "shipped": a, "measured": b}
            break
    bad_shapes = [t["name"] for t in shipped if t["name"] in shapes and list(t["shape"]) != shapes[t["name"]]]
    return {"shipped": True, "same_names": same_set, "same_order": names == order,
            "first_order_mismatch": first, "shape_mismatches": bad_shapes,
            "positions_moved": sum(1 for a, b in zip(names, order) if a != b)}


def profile(model_name: str, precision: str, batch: int, steps: int, warmup: int, device: str = "cuda") -> dict:
    import torch
    import torchvision

    torch.manual_seed(0)
    dev = torch.device(device)
    model = getattr(torchvision.models, model_name)(weights=None).to(dev).train()
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    opt = torch.optim.SGD([p for _, p in params], lr=0.01, momentum=0.9)
    crit = torch.nn.CrossEntropyLoss()
    x = torch.randn(batch, 3, 224, 224, device=dev)
    y = torch.randint(0, 1000, (batch,), device=dev)

    amp = precision == "amp-bf16"
    m = measure(model, x, cuda=dev.type == "cuda", amp_dtype=torch.bfloat16 if amp else None, steps=steps,
                warmup=warmup, loss_fn=lambda out: crit(out, y), optimizer=opt, what=model_name)
    fwd, bwd, upd, orders, ready, tails = m.forward_ms, m.backward_ms, m.update_ms, m.orders, m.ready, m.tails_ms

    order = list(orders[0])
    med = {n: statistics.median(v) for n, v in ready.items() if v}
    ready_ms = [med[n] for n in order]
    last = max(ready_ms[-1], 1e-9)
    shares, prev = [], 0.0
    for r in ready_ms:
        r = max(r, prev)  # events on one stream complete in order; guard rounding
        shares.append((r - prev) / last)
        prev = r
    shapes = {n: list(p.shape) for n, p in params}
    dtypes = {n: str(p.dtype).replace("torch.", "") for n, p in params}
    gpu = torch.cuda.get_device_name() if dev.type == "cuda" else "cpu"
    layout = {
        "schema": SCHEMA, "name": f"{model_name}-{gpu.replace(' ', '_')}-{precision}-b{batch}",
        "source": (f"research/scripts/profile_gradient_readiness.py: torchvision {torchvision.__version__} "
                   f"{model_name}, torch {torch.__version__}, {gpu}, {precision}, batch {batch}; "
                   "order = order of post-accumulate-grad hooks; compute_share = increment of the "
                   "median GPU ready time (CUDA events) over the last gradient's ready time"),
        "order": "backward",
        "tensors": [{"name": n, "shape": shapes[n], "dtype": dtypes[n],
                     "compute_share": round(s, 10)} for n, s in zip(order, shares)],
    }
    return {
        "model": model_name, "precision": precision, "batch_size": batch,
        "steps": steps, "warmup": warmup, "gpu": gpu,
        "torch": torch.__version__, "torchvision": torchvision.__version__,
        "forward_ms": statistics.median(fwd), "backward_ms": statistics.median(bwd),
        "update_ms": statistics.median(upd),
        "forward_ms_range": [min(fwd), max(fwd)], "backward_ms_range": [min(bwd), max(bwd)],
        "order_stable": all(o == orders[0] for o in orders),
        "order": order, "ready_ms": [round(r, 4) for r in ready_ms],
        "tail_ms": statistics.median(tails),
        "layout_check": _check_layout(model_name, order, shapes),
        "layout": layout,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--models", default="resnet18,resnet50,resnet101,vgg16,vgg16_bn")
    ap.add_argument("--batch-sizes", default="32,64,128")
    ap.add_argument("--precisions", default=",".join(PRECISIONS))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10)
    a = ap.parse_args(argv)
    try:
        import torch
        import torchvision  # noqa: F401
    except ImportError as e:
        print(f"error: needs torch and torchvision ({e})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("error: no CUDA GPU visible to torch", file=sys.stderr)
        return 2
    try:
        batches = [int(b) for b in a.batch_sizes.split(",")]
    except ValueError:
        print(f"error: --batch-sizes must be integers, got {a.batch_sizes!r}", file=sys.stderr)
        return 2
    precisions = a.precisions.split(",")
    if any(p not in PRECISIONS for p in precisions) or a.steps < 1 or a.warmup < 0 or min(batches) < 1:
        print(f"error: precisions from {PRECISIONS}, --steps >= 1, --warmup >= 0, batch >= 1",
              file=sys.stderr)
        return 2
    torch.backends.cudnn.benchmark = True
    a.out.mkdir(parents=True, exist_ok=True)
    results = []
    for m in a.models.split(","):
        for prec in precisions:
            for b in batches:
                t = time.perf_counter()
                r = profile(m, prec, b, a.steps, a.warmup)
                results.append(r)
                lc = r["layout_check"]
                print(f"{m:10s} {prec:8s} b{b:<4d} fwd {r['forward_ms']:7.2f} bwd {r['backward_ms']:7.2f} "
                      f"upd {r['update_ms']:6.2f} ms  order_stable={r['order_stable']} "
                      f"same_order={lc.get('same_order')} moved={lc.get('positions_moved')} "
                      f"tail {r['tail_ms']:.3f} ms ({time.perf_counter() - t:.1f} s)", flush=True)
                torch.cuda.empty_cache()
    tmp = a.out / "profiles.json.tmp"
    tmp.write_text(json.dumps({"schema": "autotuner.gradient-readiness/1", "profiles": results}))
    tmp.replace(a.out / "profiles.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
