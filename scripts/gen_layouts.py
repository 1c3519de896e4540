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
(``build_bert_base``; its order and FLOP proxy are in its docstring and source string), and,
from the same published definitions: torchvision's ``MobileNetV2`` (``build_mobilenet_v2``),
timm's ``vit_small_patch16_224`` (``build_vit``), HuggingFace's ``DistilBertModel``
(``build_distilbert``, ``distilbert-base-uncased``) and ``GPT2Model`` (``build_gpt2``, ``gpt2``).

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

    def conv(self, prefix, cin, cout, k, stride, pad, h, w, bias, groups=1):
        assert cin % groups == 0 and cout % groups == 0
        hout = (h + 2 * pad - k) // stride + 1
        wout = (w + 2 * pad - k) // stride + 1
        fwd = 2 * cin // groups * k * k * cout * hout * wout
        bwd = fwd if self._first() else 2 * fwd
        params = [(f"{prefix}.weight", [cout, cin // groups, k, k])]
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

    def conv1d(self, prefix, fin, fout, tokens=1, extra_bwd=0):
        """HuggingFace's GPT-2 ``Conv1D(nf=fout, nx=fin)``: a Linear with the weight stored
        transposed, ``[fin, fout]``, computed as ``addmm(bias, x, weight)``; FLOPs and gradient
        order (bias, then weight) as :meth:`linear`."""
        self.linear(prefix, fin, fout, tokens, extra_bwd)
        params, _ = self.layers[-1]
        assert params[1] == (f"{prefix}.weight", [fout, fin])
        params[1] = (f"{prefix}.weight", [fin, fout])

    def param(self, name, shape, bwd):
        """A bare ``nn.Parameter`` (ViT's ``cls_token``, ``pos_embed``): one tensor, ``bwd``
        backward FLOPs."""
        self.layers.append(([(name, list(shape))], bwd))

    def layer_norm(self, prefix, c, tokens):
        """LayerNorm over ``c`` features of ``tokens`` rows; backward FLOPs estimated as for
        BatchNorm (BN_BWD_FLOPS_PER_ELEM per output element). Weight before bias, as BatchNorm
        (a CPU backward pass gives the same, docs/explanation/horovod-simulator.md)."""
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
    "log_softmax ignored. The workload of lab reports 002 and 004 (research/notes/lab-reports-002-004-arithmetic.md)."
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
    rule, docs/explanation/horovod-simulator.md; not measured for BERT itself).

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

def _n_params(b: _Builder) -> int:
    return sum(math.prod(shape) for params, _ in b.layers for _, shape in params)


def _n_tensors(b: _Builder) -> int:
    return sum(len(params) for params, _ in b.layers)


#: torchvision MobileNetV2 ``inverted_residual_setting``: expand ratio t, channels c, repeats n,
#: stride s of the first block (Sandler et al. 2018, arXiv:1801.04381, Table 2)
MOBILENET_V2_SETTING = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                        (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


def build_mobilenet_v2() -> _Builder:
    """torchvision ``MobileNetV2`` (torchvision/models/mobilenetv2.py), width_mult 1.0 (so
    ``_make_divisible`` leaves every channel count as is: 32 in, 1280 last), 1000 classes,
    224x224: 3,504,872 parameters in 158 tensors. ``features.0`` and ``features.18`` are
    Conv2dNormActivation (``.0`` conv without bias, ``.1`` BatchNorm); ``features.1 .. 17`` are
    InvertedResidual blocks whose ``conv`` Sequential holds, for expand ratio t != 1, the 1x1
    expansion Conv2dNormActivation (``conv.0``), the 3x3 depthwise one (``conv.1``, groups =
    hidden channels), the 1x1 projection conv (``conv.2``) and its BatchNorm (``conv.3``);
    for t == 1 (``features.1``) no expansion, so depthwise ``conv.0``, projection ``conv.1``,
    BatchNorm ``conv.2``. Classifier: Dropout, then Linear ``classifier.1``. The residual adds
    do not change the order (each block's layers run in sequence)."""
    b = _Builder()
    h = w = IMAGE
    h, w = b.conv("features.0.0", 3, 32, 3, 2, 1, h, w, bias=False)  # 112
    b.bn("features.0.1", 32, h, w)
    cin, idx = 32, 1
    for t, c, n, s in MOBILENET_V2_SETTING:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = int(round(cin * t))
            p = f"features.{idx}.conv"
            j = 0
            if t != 1:
                b.conv(f"{p}.0.0", cin, hidden, 1, 1, 0, h, w, bias=False)
                b.bn(f"{p}.0.1", hidden, h, w)
                j = 1
            h, w = b.conv(f"{p}.{j}.0", hidden, hidden, 3, stride, 1, h, w, bias=False,
                          groups=hidden)
            b.bn(f"{p}.{j}.1", hidden, h, w)
            b.conv(f"{p}.{j + 1}", hidden, c, 1, 1, 0, h, w, bias=False)
            b.bn(f"{p}.{j + 2}", c, h, w)
            cin, idx = c, idx + 1
    assert idx == 18 and (h, w) == (7, 7)
    b.conv("features.18.0", cin, 1280, 1, 1, 0, h, w, bias=False)
    b.bn("features.18.1", 1280, h, w)
    b.linear("classifier.1", 1280, NUM_CLASSES)  # after adaptive_avg_pool2d to 1x1
    assert (_n_params(b), _n_tensors(b)) == (3_504_872, 158)  # torchvision's documented count
    return b


MOBILENET_V2_SOURCE = (
    "scripts/gen_layouts.py: symbolic reconstruction of torchvision/models/mobilenetv2.py "
    "MobileNetV2 (Sandler et al. 2018, arXiv:1801.04381), width_mult 1.0, "
    "inverted_residual_setting t,c,n,s = 1,16,1,1 / 6,24,2,2 / 6,32,3,2 / 6,64,4,2 / 6,96,3,1 / "
    "6,160,3,2 / 6,320,1,1, first conv 32 channels, last 1280, ImageNet 1000 classes, 224x224; "
    "parameters only (no BatchNorm running stats/buffers), exact named_parameters() names "
    "(features.N.0/.1 Conv2dNormActivation, features.N.conv.* InvertedResidual, classifier.1), "
    "float32, 3,504,872 parameters in 158 tensors. Tensor order and compute_share as for the "
    "other torchvision layouts: backward = layers in reverse forward order, Conv/BatchNorm weight "
    "then bias, Linear bias then weight (the fp32 rule measured for vgg/resnet, not measured for "
    "MobileNetV2); per-layer share of backward FLOPs at 224x224 batch 1 on the layer's first "
    "tensor: conv backward = 2 x forward FLOPs, forward = 2*Cin/groups*kh*kw*Cout*Hout*Wout "
    "(depthwise convs groups = channels), the first conv 1 x; BatchNorm 10 FLOPs per output "
    "element (an estimate); ReLU6, dropout, pooling and residual adds ignored. Shares normalized "
    "to sum to 1 and rounded to 8 significant digits."
)

#: timm ``vit_small_patch16_224`` (Dosovitskiy et al. 2020 ViT with DeiT-S dimensions): patch 16,
#: embed_dim 384, depth 12, num_heads 6, mlp_ratio 4, class token, qkv_bias, 1000 classes
VIT_S16 = {"image_size": 224, "patch_size": 16, "embed_dim": 384, "depth": 12, "num_heads": 6,
           "mlp_dim": 1536, "num_classes": 1000}


def build_vit(cfg: dict = VIT_S16) -> _Builder:
    """timm ``VisionTransformer`` (timm/models/vision_transformer.py) as built by
    ``vit_small_patch16_224``: 22,050,664 parameters in 152 tensors. ``named_parameters()`` lists
    the model's own parameters first: cls_token [1, 1, 384], pos_embed [1, 197, 384], then
    patch_embed.proj (Conv2d 3->384, kernel and stride 16, with bias), blocks.0 .. 11 (norm1,
    attn.qkv [1152, 384], attn.proj, norm2, mlp.fc1 [1536, 384], mlp.fc2; q_norm, k_norm, ls1,
    ls2, fc_norm are Identity), norm, head.

    As for bert_base, layers are listed in forward *execution* order, whose reverse is the
    backward order: the patch_embed conv runs first, then the class token is concatenated
    (``cls_token.expand``) and ``pos_embed`` added (``_pos_embed``). Backward: head, norm,
    blocks 11 .. 0 (fc2, fc1, norm2, proj, qkv, norm1), then pos_embed (its gradient is ready at
    the add), cls_token (the expand, created after the conv's flatten/transpose, runs before
    them), patch_embed.proj weight then bias. Not measured.

    compute_share: the bert_base proxy at batch 1, 197 tokens (196 patches + class token):
    Linear backward = 2 x 2*tokens*in*out (head on the class token only); the attention core
    (Q K^T and probs V) on the fused qkv projection, the projection whose gradients are ready
    first after it; LayerNorm 10 FLOPs per output element; the patch conv, the first layer,
    1 x its forward FLOPs; cls_token and pos_embed one FLOP per gradient element each."""
    d, depth, mlp = cfg["embed_dim"], cfg["depth"], cfg["mlp_dim"]
    assert d % cfg["num_heads"] == 0
    patch = cfg["patch_size"]
    gh, gw = cfg["image_size"] // patch, cfg["image_size"] // patch
    seq = gh * gw + 1  # patches + class token
    b = _Builder()
    assert b.conv("patch_embed.proj", 3, d, patch, patch, 0, cfg["image_size"], cfg["image_size"],
                  bias=True) == (gh, gw)
    b.param("cls_token", [1, 1, d], d)
    b.param("pos_embed", [1, seq, d], seq * d)
    attn_core_bwd = 2 * (2 * seq * seq * d + 2 * seq * seq * d)  # as bert_base
    for i in range(depth):
        p = f"blocks.{i}"
        b.layer_norm(f"{p}.norm1", d, seq)
        b.linear(f"{p}.attn.qkv", d, 3 * d, seq, extra_bwd=attn_core_bwd)
        b.linear(f"{p}.attn.proj", d, d, seq)
        b.layer_norm(f"{p}.norm2", d, seq)
        b.linear(f"{p}.mlp.fc1", d, mlp, seq)
        b.linear(f"{p}.mlp.fc2", mlp, d, seq)
    b.layer_norm("norm", d, seq)
    b.linear("head", d, cfg["num_classes"], 1)  # global_pool "token": the class token only
    if cfg == VIT_S16:
        assert (_n_params(b), _n_tensors(b)) == (22_050_664, 152)  # timm's vit_small_patch16_224
    return b


VIT_S16_SOURCE = (
    "scripts/gen_layouts.py: timm VisionTransformer (timm/models/vision_transformer.py) as "
    "vit_small_patch16_224 builds it (ViT of Dosovitskiy et al. 2020, arXiv:2010.11929, with "
    "DeiT-S dimensions): 224x224, patch 16, embed_dim 384, depth 12, num_heads 6, mlp 1536, "
    "qkv_bias, class token, global_pool 'token', 1000 classes; exact named_parameters() names "
    "(cls_token, pos_embed, patch_embed.proj, blocks.N.norm1/attn.qkv/attn.proj/norm2/mlp.fc1/"
    "mlp.fc2, norm, head), shapes from the config arithmetic (no torch), float32, 22,050,664 "
    "parameters in 152 tensors. Tensor order: backward = layers in reverse of forward execution "
    "order, as for bert_base (head, norm, blocks.11 .. 0, then pos_embed, cls_token, "
    "patch_embed.proj: the conv runs before the class token is concatenated and pos_embed "
    "added), within a layer Linear bias then weight, LayerNorm/Conv weight then bias (the fp32 "
    "rule measured for the torchvision models, not measured for ViT). compute_share: per-layer "
    "share of backward FLOPs at batch 1, 197 tokens, on the layer's first tensor in backward "
    "order: Linear backward = 2 x forward FLOPs (2*tokens*in*out; head 1 token); attention core "
    "(Q K^T and probs V, 2*197*197*384 forward FLOPs each) backward = 2 x forward, put on "
    "attn.qkv; LayerNorm 10 FLOPs per output element (an estimate); patch conv (first layer) "
    "1 x forward FLOPs; cls_token/pos_embed 1 FLOP per element. GELU, softmax, dropout and "
    "residual adds ignored. Shares normalized to sum to 1 and rounded to 8 significant digits."
)

#: HuggingFace ``distilbert-base-uncased`` config.json (Sanh et al. 2019)
DISTILBERT_BASE = {"vocab_size": 30522, "dim": 768, "n_layers": 6, "n_heads": 12,
                   "hidden_dim": 3072, "max_position_embeddings": 512}


def build_distilbert(cfg: dict = DISTILBERT_BASE, seq: int = BERT_SEQ_LEN) -> _Builder:
    """HuggingFace transformers ``DistilBertModel`` (modeling_distilbert.py; no task head, no
    pooler, no token types) with the ``distilbert-base-uncased`` config: 66,362,880 parameters
    in 100 tensors. Order and FLOP proxy exactly as :func:`build_bert_base`: layers in forward
    execution order (Embeddings.forward looks up word, then position embeddings; each
    TransformerBlock runs q_lin, k_lin, v_lin, out_lin, sa_layer_norm, ffn.lin1, ffn.lin2,
    output_layer_norm), the attention core on v_lin, sequence length 128."""
    d, n_layers, hidden = cfg["dim"], cfg["n_layers"], cfg["hidden_dim"]
    assert d % cfg["n_heads"] == 0
    assert seq <= cfg["max_position_embeddings"]
    b = _Builder()
    b.embedding("embeddings.word_embeddings", cfg["vocab_size"], d, seq)
    b.embedding("embeddings.position_embeddings", cfg["max_position_embeddings"], d, seq)
    b.layer_norm("embeddings.LayerNorm", d, seq)
    attn_core_bwd = 2 * (2 * seq * seq * d + 2 * seq * seq * d)  # as bert_base
    for i in range(n_layers):
        p = f"transformer.layer.{i}"
        b.linear(f"{p}.attention.q_lin", d, d, seq)
        b.linear(f"{p}.attention.k_lin", d, d, seq)
        b.linear(f"{p}.attention.v_lin", d, d, seq, extra_bwd=attn_core_bwd)
        b.linear(f"{p}.attention.out_lin", d, d, seq)
        b.layer_norm(f"{p}.sa_layer_norm", d, seq)
        b.linear(f"{p}.ffn.lin1", d, hidden, seq)
        b.linear(f"{p}.ffn.lin2", hidden, d, seq)
        b.layer_norm(f"{p}.output_layer_norm", d, seq)
    if cfg == DISTILBERT_BASE:
        assert (_n_params(b), _n_tensors(b)) == (66_362_880, 100)  # distilbert-base-uncased
    return b


DISTILBERT_SOURCE = (
    "scripts/gen_layouts.py: HuggingFace transformers DistilBertModel (modeling_distilbert.py; "
    "embeddings and 6 transformer layers, no pooler or task head) with the "
    "distilbert-base-uncased config.json (vocab_size 30522, dim 768, n_layers 6, n_heads 12, "
    "hidden_dim 3072, max_position_embeddings 512), i.e. DistilBERT of Sanh et al. 2019 "
    "(arXiv:1910.01108); exact named_parameters() names, shapes from the config arithmetic (no "
    "torch), float32, 66,362,880 parameters in 100 tensors. Tensor order and compute_share "
    "exactly as for bert_base (see its source), sequence length 128: backward = layers in "
    "reverse of forward execution order (transformer.layer.5 .. 0, within a layer "
    "output_layer_norm, ffn.lin2, ffn.lin1, sa_layer_norm, out_lin, v_lin, k_lin, q_lin; then "
    "embeddings.LayerNorm, position, word embeddings), Linear bias then weight, LayerNorm weight "
    "then bias (not measured for DistilBERT); attention core put on v_lin."
)

#: HuggingFace ``gpt2`` config.json (Radford et al. 2019, the 124M "small" model)
GPT2_SMALL = {"vocab_size": 50257, "n_embd": 768, "n_layer": 12, "n_head": 12,
              "n_positions": 1024, "n_inner": 4 * 768}
GPT2_SEQ_LEN = 1024  # tokens per sequence for compute_share: GPT-2's context length


def build_gpt2(cfg: dict = GPT2_SMALL, seq: int = GPT2_SEQ_LEN) -> _Builder:
    """HuggingFace transformers ``GPT2Model`` (modeling_gpt2.py; no LM head, so no tied weight)
    with the ``gpt2`` config: 124,439,808 parameters in 148 tensors. Projections are ``Conv1D``
    (weight stored ``[in, out]``, ``addmm(bias, x, weight)``: gradients bias then weight, as
    Linear). Order and FLOP proxy as :func:`build_bert_base`: layers in forward execution order
    (wte, then wpe, looked up in GPT2Model.forward in that order; each block ln_1, attn.c_attn,
    attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj; then ln_f); the attention core on the fused
    c_attn, counted in full (seq x seq, as the masked matmuls compute it), sequence length
    1024."""
    d, n_layers, inner = cfg["n_embd"], cfg["n_layer"], cfg["n_inner"]
    assert d % cfg["n_head"] == 0
    assert seq <= cfg["n_positions"]
    b = _Builder()
    b.embedding("wte", cfg["vocab_size"], d, seq)
    b.embedding("wpe", cfg["n_positions"], d, seq)
    attn_core_bwd = 2 * (2 * seq * seq * d + 2 * seq * seq * d)  # as bert_base
    for i in range(n_layers):
        p = f"h.{i}"
        b.layer_norm(f"{p}.ln_1", d, seq)
        b.conv1d(f"{p}.attn.c_attn", d, 3 * d, seq, extra_bwd=attn_core_bwd)
        b.conv1d(f"{p}.attn.c_proj", d, d, seq)
        b.layer_norm(f"{p}.ln_2", d, seq)
        b.conv1d(f"{p}.mlp.c_fc", d, inner, seq)
        b.conv1d(f"{p}.mlp.c_proj", inner, d, seq)
    b.layer_norm("ln_f", d, seq)
    if cfg == GPT2_SMALL:
        assert (_n_params(b), _n_tensors(b)) == (124_439_808, 148)  # gpt2 (124M)
    return b


GPT2_SMALL_SOURCE = (
    "scripts/gen_layouts.py: HuggingFace transformers GPT2Model (modeling_gpt2.py; wte, wpe, "
    "12 blocks, ln_f; no LM head, so no tied weights) with the gpt2 config.json (vocab_size "
    "50257, n_embd 768, n_layer 12, n_head 12, n_positions 1024, n_inner 3072), i.e. GPT-2 "
    "small of Radford et al. 2019; exact named_parameters() names, shapes from the config "
    "arithmetic (no torch; Conv1D weights [in, out]: c_attn [768, 2304], c_fc [768, 3072], "
    "mlp.c_proj [3072, 768]), float32, 124,439,808 parameters in 148 tensors. Tensor order: "
    "backward = layers in reverse of forward execution order (ln_f, h.11 .. 0 with mlp.c_proj, "
    "mlp.c_fc, ln_2, attn.c_proj, attn.c_attn, ln_1, then wpe, wte), Conv1D (addmm) bias then "
    "weight as Linear, LayerNorm weight then bias (not measured for GPT-2). compute_share as "
    "for bert_base at batch 1, sequence length 1024: Conv1D backward = 2 x forward FLOPs "
    "(2*1024*in*out); attention core (Q K^T and probs V, 2*1024*1024*768 forward FLOPs each, "
    "the causal mask not discounted) backward = 2 x forward, put on attn.c_attn; LayerNorm 10 "
    "FLOPs per output element (an estimate); embedding backward 1024*768 (scatter-add). GELU, "
    "softmax, dropout and residual adds ignored. Shares normalized to sum to 1 and rounded to "
    "8 significant digits."
)


SOURCES = {"mnist": MNIST_SOURCE, "bert_base": BERT_BASE_SOURCE, "bert_medium": BERT_MEDIUM_SOURCE,
           "mobilenet_v2": MOBILENET_V2_SOURCE, "vit_s16": VIT_S16_SOURCE,
           "distilbert": DISTILBERT_SOURCE, "gpt2_small": GPT2_SMALL_SOURCE}


MODELS = {
    "vgg16": lambda: build_vgg16(False),
    "vgg16_bn": lambda: build_vgg16(True),
    "resnet18": lambda: build_resnet("basic", [2, 2, 2, 2]),
    "resnet50": lambda: build_resnet("bottleneck", [3, 4, 6, 3]),
    "resnet101": lambda: build_resnet("bottleneck", [3, 4, 23, 3]),
    "mnist": build_mnist,
    "bert_base": build_bert_base,
    "bert_medium": lambda: build_bert_base(BERT_MEDIUM),
    "mobilenet_v2": build_mobilenet_v2,
    "vit_s16": build_vit,
    "distilbert": build_distilbert,
    "gpt2_small": build_gpt2,
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
