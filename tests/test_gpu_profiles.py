"""The GPU records under runs/gpu-profiles/ (gradient readiness, DDP on one GPU, ``autotuner profile --device cuda``)
as the package reads them."""
import json
from pathlib import Path

import numpy as np
import pytest

from autotuner.readers.layouts import load_layout

ROOT = Path(__file__).resolve().parents[1]
PROFILE_DIR = ROOT / "runs" / "gpu-profiles" / "h100-torch2.11"
MEASURED = sorted((PROFILE_DIR / "layouts").glob("*.json"))


def test_measured_layout_files_are_the_batch_64_profiles():
    profiles = json.loads((PROFILE_DIR / "profiles.json").read_text())["profiles"]
    b64 = {(p["model"], p["precision"]): p for p in profiles if p["batch_size"] == 64}
    assert len(MEASURED) == len(b64) == 10
    for path in MEASURED:
        model, _, rest = path.stem.partition("-")
        prof = b64[(model, rest.rsplit("-b", 1)[0])]
        layout = load_layout(str(path))
        assert list(layout.names) == prof["order"]
        # the shares are the increments of the measured ready times
        ready = np.array(prof["ready_ms"]) / prof["ready_ms"][-1]
        assert np.allclose(layout.ready_fraction, ready, atol=1e-4)  # ready_ms kept to 0.1 µs


@pytest.mark.parametrize("path", MEASURED, ids=lambda p: p.stem)
def test_measured_layouts_hold_the_shipped_tensors(path):
    measured = load_layout(str(path))
    shipped = load_layout(path.stem.split("-")[0])
    assert sorted(measured.names) == sorted(shipped.names)
    assert measured.total_bytes == shipped.total_bytes


# --- DDP on one lent GPU (H100, H200) --------------------------------------------------------------------
GPU_DDP = ROOT / "runs" / "gpu-profiles" / "h100-ddp" / "ddp-h100.json"
#: the probe's settings as the simulator's DdpConfig (the hooks change no bucket)
DDP_SETTINGS = {"default": {}, "cap1": {"bucket_cap_mb": 1}, "cap25": {"bucket_cap_mb": 25},
                "cap100": {"bucket_cap_mb": 100}, "view": {"gradient_as_bucket_view": True},
                "fp16_hook": {"comm_hook": "fp16_compress"}, "bf16_hook": {"comm_hook": "bf16_compress"},
                "list_1_4_25": {"bucket_cap_mb_list": (1, 4, 25)}}


#: the H200's run (torch 2.11, NCCL 2.28.9): six models, three of them not in the H100's
GPU_DDP_H200 = ROOT / "runs" / "gpu-profiles" / "h200-ddp" / "ddp-h200.json"


@pytest.mark.parametrize("path,device,shipped", [(GPU_DDP, "NVIDIA H100", 3), (GPU_DDP_H200, "NVIDIA H200", 4)])
def test_ddps_own_rebuilt_buckets_on_a_gpu_are_the_simulators(path, device, shipped):
    """Real DDP on a GPU (torch 2.11, NCCL, one rank) rebuilt, in every round of every
    setting, exactly the buckets the Reducer simulator assigns to the shipped layout in its ready order: on the
    H100 ResNet-50 (161 tensors), ResNet-101 (314) and VGG-16 (32); on the H200 those and MobileNetV2 (158), DDP's
    default (the 1 MiB first bucket), caps 1/25/100 MiB, the view, both hooks and ``bucket_cap_mb_list=[1, 4, 25]``.
    Models with no shipped layout (the H200's DenseNet-121 and EfficientNet-B0) are not compared."""
    from autotuner.frameworks.ddp.knobs import DdpConfig
    from autotuner.frameworks.ddp.reducer import assign_buckets
    from autotuner.readers.layouts import shipped_models

    rec = json.loads(path.read_text())
    assert rec["complete"] and rec["has_bucket_cap_mb_list"] and rec["device"].startswith(device)
    checked = 0
    for m in rec["ddp"]:
        if m["model"] not in shipped_models():
            continue
        layout = load_layout(m["model"])
        assert (m["tensors"], 4 * m["elements"]) == (len(layout.names), layout.total_bytes)
        order = np.argsort(layout.ready_fraction, kind="stable")
        assert set(m["settings"]) == {"plain", *DDP_SETTINGS}
        for name, kw in DDP_SETTINGS.items():
            cfg = DdpConfig(**kw)
            buckets, _ = assign_buckets(layout.sizes_bytes, layout.dtypes, cfg.rebuild_limits(), order)
            sim = [int(sum(layout.sizes_bytes[i] for i in b)) for b in buckets]
            for r in m["settings"][name]:
                log = r["ddp_logging"]
                assert log["has_rebuilt_buckets"] == 1 and log["world_size"] == 1
                assert [int(x) for x in log["rebuilt_bucket_sizes"].split(",")] == sim, (m["model"], name)
                checked += 1
    assert checked == shipped * 8 * 3


@pytest.mark.parametrize("name", ["resnet50-cuda-fp32-b64", "resnet50-cuda-amp-b64", "resnet101-cuda-fp32-b64"])
def test_autotuner_profile_on_a_real_gpu(name):
    """``autotuner profile --device cuda`` run on an H100 (torch 2.11): a layout every command reads, holding the
    shipped model's tensors; in float32 in the shipped order, under bf16 autocast with Linear's weight first (as
    the readiness script found, runs/gpu-profiles/h100-torch2.11)."""
    path = ROOT / "runs" / "gpu-profiles" / "h100-profile" / f"{name}.json"
    d = json.loads(path.read_text())
    layout = load_layout(str(path))
    shipped = load_layout(name.split("-")[0])
    assert d["device"] == "cuda" and d["device_name"].startswith("NVIDIA H100")
    assert sorted(layout.names) == sorted(shipped.names) and layout.total_bytes == shipped.total_bytes
    moved = [a for a, b in zip(layout.names, shipped.names) if a != b]
    if d["amp"]:
        assert sorted(moved) == ["fc.bias", "fc.weight"]
    else:
        assert moved == []
    # the same model, batch and GPU as the readiness script's profile (profiles.json): backward within 5 %
    if name == "resnet50-cuda-fp32-b64":
        prof = {(p["model"], p["precision"], p["batch_size"]): p
                for p in json.loads((PROFILE_DIR / "profiles.json").read_text())["profiles"]}[("resnet50", "fp32", 64)]
        assert abs(d["backward_ms"] / prof["backward_ms"] - 1) < 0.05
