#!/usr/bin/env python3
"""Generate gradient layouts of torchvision-equivalent models as JSON data.

Pure Python, standard library only (no torch / torchvision).  The parameter
names, shapes and ordering reproduce ``named_parameters()`` of the models
defined in torchvision's ``torchvision/models/vgg.py`` (vgg16, vgg16_bn,
configuration "D") and ``torchvision/models/resnet.py`` (resnet18 with
BasicBlock [2, 2, 2, 2]; resnet50 / resnet101 with Bottleneck [3, 4, 6, 3] /
[3, 4, 23, 3], "v1.5" variant with the stride on the 3x3 conv2), for ImageNet
(1000 classes, 224x224 input).  Only trainable parameters are listed (no
BatchNorm running statistics or other buffers).  Also Horovod's PyTorch MNIST example
(``build_mnist``) and HuggingFace's ``BertModel`` with the ``bert-base-uncased`` config
(``build_bert_base``; its order and FLOP proxy are in its docstring and source string).

Output: ``autotuner/layouts/<name>.json`` with tensors in backward order and a
``compute_share`` per
tensor: the layer's share of total backward FLOPs (batch 1, 224x224) is put on
the layer's first tensor in backward order, 0.0 on its other tensors, so the
cumulative sum up to tensor i is the fraction of backward done when tensor i's
gradient is ready.

Backward order: layers in reverse of forward ``named_parameters()`` order; within a layer,
the order in which PyTorch's autograd accumulates the gradients in float32, as measured on a
GPU with post-accumulate-grad hooks (``scripts/profile_gradient_readiness.py``, records in
``runs/gpu-profiles/``): Linear (addmm) bias before weight, Conv and BatchNorm weight before
bias. (Under bf16 autocast Linear's weight comes first too; the shipped layouts are float32.)

Usage:  python scripts/gen_layouts.py [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

SCHEMA = "autotuner.layout/1"
DTYPE = "float32"
IMAGE = 224
NUM_CLASSES = 1000
BN_BWD_FLOPS_PER_ELEM = 10  # estimate, see SOURCE

SOURCE = (
    "scripts/gen_layouts.py: symbolic reconstruction of torchvision architecture "
    "definitions (torchvision/models/vgg.py cfg 'D' for vgg16/vgg16_bn; "
    "torchvision/models/resnet.py BasicBlock/Bottleneck v1.5 with stride on the "
    "3x3 conv2, for resnet18/50/101), ImageNet 1000 classes; parameters only "
    "(no BatchNorm running stats/buffers), exact named_parameters() names, "
    "float32. Tensor order: backward = layers in reverse of forward named_parameters() "
    "order, within a layer as PyTorch accumulates float32 gradients (measured, "
    "runs/gpu-profiles/): Linear bias then weight, Conv/BatchNorm weight then bias. compute_share: per-layer share of total backward FLOPs at 224x224 "
    "batch 1, put on the layer's first tensor in backward order (0.0 on its "
    "other tensors). Conv/Linear backward FLOPs = 2 x forward FLOPs (grad wrt "
    "input + grad wrt weight), forward FLOPs = 2*MACs "
    "(conv: 2*Cin/groups*kh*kw*Cout*Hout*Wout, linear: 2*in*out); the first "
    "layer of the network (no grad wrt input) = 1 x forward FLOPs. BatchNorm "
    "backward FLOPs estimated as 10 x number of output activation elements "
    "(an estimate, not measured). ReLU, max/avg pooling, dropout and residual "
    "adds (elementwise / parameter-free) are ignored. Shares normalized to sum "
    "to 1 and rounded to 8 significant digits."
)


class _Builder:
    """Collects layers in forward order: (param list in backward order, backward flops)."""

    def __init__(self) -> None:
        self.layers: list[tuple[list[tuple[str, list[int]]], float]] = []

    def _first(self) -> bool:
        return not self.layers

    def conv(self, prefix, cin, cout, k, stride, pad, h, w, bias):
        hout = (h + 2 * pad - k) // stride + 1
        wout = (w + 2 * pad - k) // stride + 1
        fwd = 2 * cin * k * k * cout * hout * wout
        bwd = fwd if self._first() else 2 * fwd
        params = [(f"{prefix}.weight", [cout, cin, k, k])]
        if bias:
            params.append((f"{prefix}.bias", [cout]))  # weight, then bias (backward order)
        self.layers.append((params, bwd))
        return hout, wout

    def bn(self, prefix, c, h, w):
        params = [(f"{prefix}.weight", [c]), (f"{prefix}.bias", [c])]  # backward order
        self.layers.append((params, BN_BWD_FLOPS_PER_ELEM * c * h * w))

    def linear(self, prefix, fin, fout, tokens=1, extra_bwd=0):
        """``tokens`` rows of input (a transformer's sequence length; 1 for a CNN's classifier);
        ``extra_bwd``: backward FLOPs of parameter-free work that runs just before this layer's
        gradients are ready (a transformer's attention core, put on its value projection)."""
        fwd = 2 * tokens * fin * fout
        bwd = fwd if self._first() else 2 * fwd
        params = [(f"{prefix}.bias", [fout]), (f"{prefix}.weight", [fout, fin])]  # backward order
        self.layers.append((params, bwd + extra_bwd))

    def layer_norm(self, prefix, c, tokens):
        """LayerNorm over ``c`` features of ``tokens`` rows; backward FLOPs estimated as for
        BatchNorm (BN_BWD_FLOPS_PER_ELEM per output element). Weight before bias, as BatchNorm
        (a CPU backward pass gives the same, docs/simulator.md)."""
        params = [(f"{prefix}.weight", [c]), (f"{prefix}.bias", [c])]  # backward order
        self.layers.append((params, BN_BWD_FLOPS_PER_ELEM * c * tokens))

    def embedding(self, prefix, num, dim, tokens):
        """nn.Embedding(num, dim) looked up ``tokens`` times: backward = a scatter-add of
        ``tokens`` gradient rows (tokens * dim FLOPs); no gradient wrt the indices."""
        self.layers.append(([(f"{prefix}.weight", [num, dim])], tokens * dim))


VGG_CFG_D = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M",
             512, 512, 512, "M", 512, 512, 512, "M"]


def build_vgg16(batch_norm: bool) -> _Builder:
    b = _Builder()
    h = w = IMAGE
    cin = 3
    idx = 0
    for v in VGG_CFG_D:
        if v == "M":
            h, w = h // 2, w // 2  # MaxPool2d(kernel_size=2, stride=2)
            idx += 1
            continue
        h, w = b.conv(f"features.{idx}", cin, v, 3, 1, 1, h, w, bias=True)
        if batch_norm:
            b.bn(f"features.{idx + 1}", v, h, w)
            idx += 3  # conv, bn, relu
        else:
            idx += 2  # conv, relu
        cin = v
    assert (h, w) == (7, 7)  # AdaptiveAvgPool2d((7, 7)) is then the identity
    b.linear("classifier.0", 512 * 7 * 7, 4096)
    b.linear("classifier.3", 4096, 4096)
    b.linear("classifier.6", 4096, NUM_CLASSES)
    return b


def build_resnet(block: str, layers: list[int]) -> _Builder:
    b = _Builder()
    h = w = IMAGE
    h, w = b.conv("conv1", 3, 64, 7, 2, 3, h, w, bias=False)  # 112
    b.bn("bn1", 64, h, w)
    h, w = (h + 2 - 3) // 2 + 1, (w + 2 - 3) // 2 + 1  # maxpool 3/2/1 -> 56
    inplanes = 64
    expansion = 1 if block == "basic" else 4
    for li, (planes, nblocks) in enumerate(zip([64, 128, 256, 512], layers), 1):
        stride = 1 if li == 1 else 2
        for bi in range(nblocks):
            s = stride if bi == 0 else 1
            p = f"layer{li}.{bi}"
            hin, win = h, w
            if block == "basic":
                h, w = b.conv(f"{p}.conv1", inplanes, planes, 3, s, 1, hin, win, False)
                b.bn(f"{p}.bn1", planes, h, w)
                h, w = b.conv(f"{p}.conv2", planes, planes, 3, 1, 1, h, w, False)
                b.bn(f"{p}.bn2", planes, h, w)
            else:
                h1, w1 = b.conv(f"{p}.conv1", inplanes, planes, 1, 1, 0, hin, win, False)
                b.bn(f"{p}.bn1", planes, h1, w1)
                h, w = b.conv(f"{p}.conv2", planes, planes, 3, s, 1, h1, w1, False)
                b.bn(f"{p}.bn2", planes, h, w)
                h, w = b.conv(f"{p}.conv3", planes, planes * expansion, 1, 1, 0, h, w, False)
                b.bn(f"{p}.bn3", planes * expansion, h, w)
            if bi == 0 and (s != 1 or inplanes != planes * expansion):
                dh, dw = b.conv(f"{p}.downsample.0", inplanes, planes * expansion,
                                1, s, 0, hin, win, False)
                assert (dh, dw) == (h, w)
                b.bn(f"{p}.downsample.1", planes * expansion, dh, dw)
            inplanes = planes * expansion
    assert (h, w) == (7, 7)
    b.linear("fc", 512 * expansion, NUM_CLASSES)
    return b


def build_mnist() -> _Builder:
    """Horovod's examples/pytorch/pytorch_mnist.py ``Net`` (identical in v0.19.4, v0.23.0 and
    v0.28.1): conv1 1->10 k5, max-pool 2, conv2 10->20 k5 (+ Dropout2d), max-pool 2, fc1 320->50,
    fc2 50->10, on 28x28 MNIST images; 21,840 parameters."""
    b = _Builder()
    h, w = b.conv("conv1", 1, 10, 5, 1, 0, 28, 28, bias=True)  # 24
    h, w = h // 2, w // 2  # F.max_pool2d(x, 2) -> 12
    h, w = b.conv("conv2", 10, 20, 5, 1, 0, h, w, bias=True)  # 8
    h, w = h // 2, w // 2  # -> 4
    assert 20 * h * w == 320
    b.linear("fc1", 320, 50)
    b.linear("fc2", 50, 10)
    return b


MNIST_SOURCE = (
    "scripts/gen_layouts.py: Horovod's examples/pytorch/pytorch_mnist.py Net (v0.19.4 "
    "examples/pytorch_mnist.py, v0.23.0 and v0.28.1 examples/pytorch/pytorch_mnist.py: the same "
    "network), 28x28 inputs, 10 classes; exact named_parameters() names, float32, 21,840 "
    "parameters. Tensor order and compute_share as for the torchvision layouts: backward = layers "
    "in reverse forward order, Linear bias then weight, Conv weight then bias; per-layer share of "
    "backward FLOPs at batch 1 (conv/linear backward = 2 x forward FLOPs, the first layer 1 x), "
    "put on the layer's first tensor in backward order. Max-pooling, ReLU, dropout and "
    "log_softmax ignored. The workload of lab reports 002 and 004 (docs/lab-reports-002-004-arithmetic.md)."
)

#: HuggingFace ``bert-base-uncased`` config.json (Devlin et al. 2018, "BERT-Base")
BERT_BASE = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
             "num_attention_heads": 12, "intermediate_size": 3072,
             "max_position_embeddings": 512, "type_vocab_size": 2}
#: BERT-Medium (L=8, H=512, A=8; intermediate 4H) of Turc et al. 2019, "Well-Read Students Learn
#: Better" (arXiv:1908.08962; google-research/bert README's 24 smaller models), same vocabulary
BERT_MEDIUM = {**BERT_BASE, "hidden_size": 512, "num_hidden_layers": 8, "num_attention_heads": 8,
               "intermediate_size": 2048}
BERT_SEQ_LEN = 128  # tokens per sequence for compute_share: BERT's phase-1 pre-training length


def build_bert_base(cfg: dict = BERT_BASE, seq: int = BERT_SEQ_LEN) -> _Builder:
    """HuggingFace transformers ``BertModel`` (modeling_bert.py, with the pooler, no task head)
    for the ``bert-base-uncased`` config: 199 tensors, 109,482,240 parameters. Names and shapes
    are those of ``named_parameters()``, generated from the config arithmetic (no torch).

    Layers are listed in forward *execution* order, so the layout's backward order is its
    reverse: pooler, encoder layers 11 .. 0, then the embeddings. Within an encoder layer that is
    output.LayerNorm, output.dense, intermediate.dense, attention.output.LayerNorm,
    attention.output.dense, value, key, query (the reverse of ``named_parameters()``). The
    embeddings run word, token_type, position in BertEmbeddings.forward (not their registration
    order word, position, token_type), so their gradients come position, token_type, word.
    Within a layer: Linear bias then weight, LayerNorm weight then bias (the measured fp32
    rule, docs/simulator.md; not measured for BERT itself).

    compute_share: the same FLOP proxy as the torchvision layouts, at batch 1 and ``seq`` tokens
    (128): Linear backward = 2 x forward = 2 x 2*seq*in*out (the pooler sees 1 token);
    attention core (Q K^T and probs V, 2*seq*seq*hidden FLOPs each forward, 2 x that backward)
    put on the value projection, whose gradients are ready first after it; LayerNorm backward
    10 FLOPs per output element (the BatchNorm estimate); embedding backward = seq*hidden
    (scatter-add). GELU, softmax, dropout, residual adds, tanh ignored."""
    h, n_layers = cfg["hidden_size"], cfg["num_hidden_layers"]
    inter = cfg["intermediate_size"]
    assert h % cfg["num_attention_heads"] == 0
    assert seq <= cfg["max_position_embeddings"]
    b = _Builder()
    b.embedding("embeddings.word_embeddings", cfg["vocab_size"], h, seq)
    b.embedding("embeddings.token_type_embeddings", cfg["type_vocab_size"], h, seq)
    b.embedding("embeddings.position_embeddings", cfg["max_position_embeddings"], h, seq)
    b.layer_norm("embeddings.LayerNorm", h, seq)
    attn_core_bwd = 2 * (2 * seq * seq * h + 2 * seq * seq * h)  # Q K^T and probs V, summed over heads
    for i in range(n_layers):
        p = f"encoder.layer.{i}"
        b.linear(f"{p}.attention.self.query", h, h, seq)
        b.linear(f"{p}.attention.self.key", h, h, seq)
        b.linear(f"{p}.attention.self.value", h, h, seq, extra_bwd=attn_core_bwd)
        b.linear(f"{p}.attention.output.dense", h, h, seq)
        b.layer_norm(f"{p}.attention.output.LayerNorm", h, seq)
        b.linear(f"{p}.intermediate.dense", h, inter, seq)
        b.linear(f"{p}.output.dense", inter, h, seq)
        b.layer_norm(f"{p}.output.LayerNorm", h, seq)
    b.linear("pooler.dense", h, h, 1)  # on the first ([CLS]) token only
    return b


BERT_BASE_SOURCE = (
    "scripts/gen_layouts.py: HuggingFace transformers BertModel (modeling_bert.py; embeddings, "
    "12 encoder layers, pooler; no pre-training or task head) with the bert-base-uncased "
    "config.json (vocab_size 30522, hidden_size 768, num_hidden_layers 12, num_attention_heads "
    "12, intermediate_size 3072, max_position_embeddings 512, type_vocab_size 2), i.e. BERT-Base "
    "of Devlin et al. 2018 (arXiv:1810.04805); exact named_parameters() names, shapes from the "
    "config arithmetic (no torch), float32, 109,482,240 parameters in 199 tensors. Tensor order: "
    "backward = layers in reverse of forward execution order (pooler, encoder.layer.11 .. 0, "
    "embeddings; within a layer value, key, query projections; the embeddings position, "
    "token_type, word, as BertEmbeddings.forward uses them), within a layer Linear bias then "
    "weight, LayerNorm weight then bias (the fp32 rule measured for the torchvision models, "
    "not measured for BERT). compute_share: per-layer share of backward FLOPs at batch 1, "
    "sequence length 128, put on the layer's first tensor in backward order: Linear backward = "
    "2 x forward FLOPs (2*tokens*in*out; pooler 1 token); attention core (Q K^T and probs V, "
    "2*128*128*768 forward FLOPs each) backward = 2 x forward, put on the value projection; "
    "LayerNorm backward 10 FLOPs per output element (an estimate, as for BatchNorm); embedding "
    "backward 128*768 (scatter-add). GELU, softmax, dropout, tanh and residual adds ignored. "
    "Shares normalized to sum to 1 and rounded to 8 significant digits."
)
BERT_MEDIUM_SOURCE = (
    "scripts/gen_layouts.py: build_bert_base with the BERT-Medium config of Turc et al. 2019 "
    "(arXiv:1908.08962; google-research/bert: L=8, H=512, A=8, intermediate_size 2048, "
    "vocab_size 30522, max_position_embeddings 512, type_vocab_size 2): HuggingFace BertModel "
    "names and shapes, float32, 41,373,184 parameters in 135 tensors; tensor order and "
    "compute_share exactly as for bert_base (see its source), sequence length 128."
)
SOURCES = {"mnist": MNIST_SOURCE, "bert_base": BERT_BASE_SOURCE, "bert_medium": BERT_MEDIUM_SOURCE}


MODELS = {
    "vgg16": lambda: build_vgg16(False),
    "vgg16_bn": lambda: build_vgg16(True),
    "resnet18": lambda: build_resnet("basic", [2, 2, 2, 2]),
    "resnet50": lambda: build_resnet("bottleneck", [3, 4, 6, 3]),
    "resnet101": lambda: build_resnet("bottleneck", [3, 4, 23, 3]),
    "mnist": build_mnist,
    "bert_base": build_bert_base,
    "bert_medium": lambda: build_bert_base(BERT_MEDIUM),
}


def _round_sig(x: float, sig: int = 8) -> float:
    return float(f"{x:.{sig}g}")


def layout(name: str) -> dict:
    b = MODELS[name]()
    total = math.fsum(f for _, f in b.layers)
    tensors = []
    for params, flops in reversed(b.layers):
        for j, (pname, shape) in enumerate(params):  # each layer's list is in backward order
            share = _round_sig(flops / total) if j == 0 else 0.0
            tensors.append({"name": pname, "shape": shape, "dtype": DTYPE,
                            "compute_share": share})
    # make the sum exactly 1 (within float eps) by adjusting the largest share
    imax = max(range(len(tensors)), key=lambda i: tensors[i]["compute_share"])
    rest = math.fsum(t["compute_share"] for i, t in enumerate(tensors) if i != imax)
    tensors[imax]["compute_share"] = 1.0 - rest
    assert abs(sum(t["compute_share"] for t in tensors) - 1.0) < 1e-12
    return {"schema": SCHEMA, "name": name, "source": SOURCES.get(name, SOURCE),
            "order": "backward", "tensors": tensors}


def dumps(data: dict) -> str:
    """Deterministic JSON: header keys one per line, one tensor per line."""
    lines = ["{"]
    for key in ("schema", "name", "source", "order"):
        lines.append(f" {json.dumps(key)}: {json.dumps(data[key])},")
    lines.append(' "tensors": [')
    rows = [json.dumps(t, separators=(", ", ": ")) for t in data["tensors"]]
    lines.append(",\n".join(f"  {r}" for r in rows))
    lines.append(" ]")
    lines.append("}")
    text = "\n".join(lines) + "\n"
    assert json.loads(text) == data
    return text


def generate(out_dir: Path | str | None = None) -> list[Path]:
    """Write <out_dir>/<name>.json for every model; return the paths."""
    if out_dir is None:
        out_dir = Path(__file__).resolve().parents[1] / "autotuner" / "layouts"
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in MODELS:
        path = out_dir / f"{name}.json"
        path.write_text(dumps(layout(name)), encoding="utf-8")
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None,
                    help="output directory (default: autotuner/layouts)")
    args = ap.parse_args(argv)
    for p in generate(args.out):
        print(p)


if __name__ == "__main__":
    main()
