"""torchvision's DenseNet-121 (``torchvision/models/densenet.py``: growth 32, blocks (6, 12, 24, 16), bn_size 4, 64
initial features, ImageNet 1000 classes, 224x224) as a gradient layout: 364 tensors, 8.0 M parameters (32 MB), with
``scripts/gen_layouts.py``'s builder and FLOP proxy (its docstring). For the held-out check of the Reducer's host
term (``research/scripts/ddp_host_heldout.sh``): many tensors, few bytes, so the host work is a visible share of the
step; no fit reads it.

Usage: python research/scripts/densenet121_layout.py OUT.json
"""
from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("gen_layouts", ROOT / "scripts" / "gen_layouts.py")
gl = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gl)


def build_densenet121() -> "gl._Builder":
    b = gl._Builder()
    h, w = b.conv("features.conv0", 3, 64, 7, 2, 3, 224, 224, bias=False)  # 112
    b.bn("features.norm0", 64, h, w)
    h, w = (h + 2 - 3) // 2 + 1, (w + 2 - 3) // 2 + 1  # max-pool 3/2/1 -> 56
    c = 64
    for bi, n in enumerate((6, 12, 24, 16), 1):
        for li in range(1, n + 1):
            p = f"features.denseblock{bi}.denselayer{li}"
            b.bn(f"{p}.norm1", c, h, w)
            b.conv(f"{p}.conv1", c, 128, 1, 1, 0, h, w, bias=False)
            b.bn(f"{p}.norm2", 128, h, w)
            b.conv(f"{p}.conv2", 128, 32, 3, 1, 1, h, w, bias=False)
            c += 32
        if bi < 4:
            p = f"features.transition{bi}"
            b.bn(f"{p}.norm", c, h, w)
            b.conv(f"{p}.conv", c, c // 2, 1, 1, 0, h, w, bias=False)
            c //= 2
            h, w = h // 2, w // 2  # avg-pool 2/2
    assert (c, h, w) == (1024, 7, 7)
    b.bn("features.norm5", c, h, w)
    b.linear("classifier", c, 1000)
    return b


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    gl.MODELS["densenet121"] = build_densenet121
    gl.SOURCES["densenet121"] = "torchvision/models/densenet.py densenet121 (research/scripts/densenet121_layout.py)"
    data = gl.layout("densenet121")
    n = sum(math.prod(t["shape"]) for t in data["tensors"])
    assert len(data["tensors"]) == 364 and n == 7_978_856, (len(data["tensors"]), n)
    Path(argv[0]).write_text(gl.dumps(data))
    print(f"{argv[0]}: {len(data['tensors'])} tensors, {n} parameters")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
