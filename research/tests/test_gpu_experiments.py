"""What the GPU probes under runs/gpu-profiles/ measured (DDP on one H100 and one H200 against the same module
without DDP; float16 and bfloat16 casts and adds on an H100), read from their own records: facts about those runs,
which no change to the package can move. How the package reads the same records is checked in
``tests/test_gpu_profiles.py``.

Not part of the product's suite (``testpaths = ["tests"]``); run from the repository root with
``python -m pytest research/tests``."""
import json
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
GPU_DDP = ROOT / "runs" / "gpu-profiles" / "h100-ddp" / "ddp-h100.json"
GPU_DDP_H200 = ROOT / "runs" / "gpu-profiles" / "h200-ddp" / "ddp-h200.json"


def test_ddp_on_a_gpu_adds_host_work_for_many_tensors_and_copies_for_big_ones():
    """What DDP's default adds to a step on one H100 with no wire (research/notes/ddp.md, "On a GPU"), against its
    copies into the buckets and back at the device's copy rate (8 B per element each way, float32 copy of the largest
    size in fp16-h100-2.json: ~3.0 TB/s): ResNet-50 and -101 (161 and 314 tensors) add 5.1-5.3 ms where the
    copies take 0.13-0.22 ms: per-tensor host work, ~16-31 µs a tensor; VGG-16 (32 tensors, 138 M elements) adds
    0.97 ms, its copies 0.69 ms of it."""
    rec = json.loads(GPU_DDP.read_text())
    fp16 = json.loads((ROOT / "runs" / "gpu-profiles" / "h100-fp16" / "fp16-h100-2.json").read_text())
    copy_gbs = max(rec_["copy_fp32"]["gbytes_per_s"] for rec_ in fp16["elementwise"]
                   if rec_["elements"] >= 2 ** 27)
    med = lambda rows: float(np.median([r["step_ms"] for r in rows]))  # noqa: E731
    for m in rec["ddp"]:
        added = med(m["settings"]["default"]) - med(m["settings"]["plain"])
        copies_ms = 16 * m["elements"] / (copy_gbs * 1e9) * 1e3
        if m["tensors"] > 100:
            assert added > 20 * copies_ms, m["model"]
        else:
            assert copies_ms < added < copies_ms + 0.5, m["model"]


def test_what_ddp_adds_on_a_gpu_is_no_per_tensor_law():
    """Why the GPU Reducer's host work is not modelled (research/notes/ddp.md, "On a GPU"): on the H200 (six models,
    DDP's default against the same module without DDP, medians of 3 interleaved rounds) what DDP adds per tensor spans
    from nothing (MobileNetV2, 158 tensors: -0.4 ms, inside its rounds' 29.3-36.7 ms) to 33-34 µs (ResNet-101,
    DenseNet-121), and ResNet-50 adds 13.5 µs a tensor there against 32 µs on the H100: no one figure per tensor
    carries from model to model or host to host."""
    med = lambda rows: float(np.median([r["step_ms"] for r in rows]))  # noqa: E731
    per = {}
    for path in (GPU_DDP, GPU_DDP_H200):
        for m in json.loads(path.read_text())["ddp"]:
            if m["tensors"] > 100:
                added = med(m["settings"]["default"]) - med(m["settings"]["plain"])
                per[(path.parent.name, m["model"])] = added / m["tensors"] * 1e3  # µs a tensor
    h200 = {k[1]: v for k, v in per.items() if k[0] == "h200-ddp"}
    assert set(h200) == {"resnet50", "resnet101", "mobilenet_v2", "densenet121", "efficientnet_b0"}
    assert h200["mobilenet_v2"] < 5 < 30 < min(h200["resnet101"], h200["densenet121"])
    assert per[("h100-ddp", "resnet50")] > 2 * h200["resnet50"]


def test_bf16_casts_and_adds_run_at_the_fp16_rates_on_the_gpu():
    """bf16_compress_hook's work costs what fp16_compress_hook's does on an H100: from 16 M elements the bfloat16
    casts and add ran within 3 % of the float16 ones (runs/gpu-profiles/h100-fp16/fp16-h100-2.json)."""
    rec = json.loads((ROOT / "runs" / "gpu-profiles" / "h100-fp16" / "fp16-h100-2.json").read_text())
    assert rec["schema"] == "autotuner.gpu-fp16-probe/2"
    big = [r for r in rec["elementwise"] if r["elements"] >= 2 ** 24]
    assert len(big) == 5
    for r in big:
        for f16, b16 in (("cast_down", "cast_down_bf16"), ("cast_up", "cast_up_bf16"), ("add_fp16", "add_bf16")):
            assert abs(r[b16]["ms"] / r[f16]["ms"] - 1) < 0.03, (r["elements"], b16)
