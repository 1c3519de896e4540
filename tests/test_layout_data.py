"""Checks on the shipped gradient-layout JSON files (autotuner/layouts/*.json).

Reads the JSON directly; does not import the autotuner package.
"""

import importlib.util
import json
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYOUT_DIR = ROOT / "autotuner" / "layouts"
SCRIPT = ROOT / "scripts" / "gen_layouts.py"

# name -> (tensor count, parameter count, first tensor (backward), last tensor)
EXPECTED = {
    "vgg16": (32, 138_357_544, "classifier.6.bias", "features.0.bias"),
    "vgg16_bn": (58, 138_365_992, "classifier.6.bias", "features.0.bias"),
    "resnet18": (62, 11_689_512, "fc.bias", "conv1.weight"),
    "resnet50": (161, 25_557_032, "fc.bias", "conv1.weight"),
    "resnet101": (314, 44_549_160, "fc.bias", "conv1.weight"),
    "mnist": (8, 21_840, "fc2.bias", "conv1.bias"),  # Horovod examples/pytorch/pytorch_mnist.py Net
    # HuggingFace BertModel (with pooler), bert-base-uncased config
    "bert_base": (199, 109_482_240, "pooler.dense.bias", "embeddings.word_embeddings.weight"),
    # embeddings (30522 + 512 + 2) x 512 + 1024, 8 x 3,152,384 per layer, pooler 262,656
    "bert_medium": (135, 41_373_184, "pooler.dense.bias", "embeddings.word_embeddings.weight"),
    # torchvision MobileNetV2 (width 1.0); timm vit_small_patch16_224; HuggingFace DistilBertModel
    # (distilbert-base-uncased) and GPT2Model (gpt2): torchvision's / the model cards' counts
    "mobilenet_v2": (158, 3_504_872, "classifier.1.bias", "features.0.0.weight"),
    "vit_s16": (152, 22_050_664, "head.bias", "patch_embed.proj.bias"),
    "distilbert": (100, 66_362_880, "transformer.layer.5.output_layer_norm.weight",
                   "embeddings.word_embeddings.weight"),
    "gpt2_small": (148, 124_439_808, "ln_f.weight", "wte.weight"),
}

#: bare nn.Parameters (timm ViT's), whose names end in neither .weight nor .bias
BARE = {"cls_token", "pos_embed"}


def load(name):
    with open(LAYOUT_DIR / f"{name}.json", encoding="utf-8") as f:
        return json.load(f)


def numel(t):
    return math.prod(t["shape"])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_header(name):
    d = load(name)
    assert d["schema"] == "autotuner.layout/1"
    assert d["name"] == name
    assert d["order"] == "backward"
    assert "scripts/gen_layouts.py" in d["source"]
    assert set(d) == {"schema", "name", "source", "order", "tensors"}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_counts_and_order(name):
    n_tensors, n_params, first, last = EXPECTED[name]
    tensors = load(name)["tensors"]
    assert len(tensors) == n_tensors
    assert sum(numel(t) for t in tensors) == n_params
    assert tensors[0]["name"] == first
    assert tensors[-1]["name"] == last
    names = [t["name"] for t in tensors]
    assert len(set(names)) == len(names)
    for t in tensors:
        assert t["dtype"] == "float32"
        assert all(isinstance(s, int) and s > 0 for s in t["shape"])
        assert t["name"].endswith((".weight", ".bias")) or t["name"] in BARE
        assert "running" not in t["name"] and "num_batches" not in t["name"]


GPU_PROFILES = ROOT / "runs" / "gpu-profiles" / "h100-torch2.11" / "profiles.json"


def _gpu_profiles():
    with open(GPU_PROFILES, encoding="utf-8") as f:
        return json.load(f)["profiles"]


#: the torchvision models whose order runs/gpu-profiles recorded (not the MNIST example's Net, not
#: the transformers, not MobileNetV2)
TORCHVISION = sorted(set(EXPECTED) - {"mnist", "bert_base", "bert_medium", "mobilenet_v2", "vit_s16",
                                      "distilbert", "gpt2_small"})


@pytest.mark.parametrize("name", TORCHVISION)
def test_backward_order_is_the_order_recorded_on_a_gpu(name):
    # Recorded on an H100 (runs/gpu-profiles; torchvision models, real
    # backward, post-accumulate-grad hooks): the order Horovod's hooks see, float32.
    fp32 = [p for p in _gpu_profiles() if p["model"] == name and p["precision"] == "fp32"]
    assert {p["batch_size"] for p in fp32} == {32, 64, 128}
    names = [t["name"] for t in load(name)["tensors"]]
    for p in fp32:
        assert p["order_stable"]
        assert p["order"] == names, (name, p["batch_size"])
        shapes = {t["name"]: t["shape"] for t in p["layout"]["tensors"]}
        assert [shapes[n] for n in names] == [t["shape"] for t in load(name)["tensors"]]


#: last name component of the Linear layers (and GPT-2's Conv1D, addmm: the same order)
LINEAR_LAST = ("query", "key", "value", "dense",  # BERT
               "qkv", "proj", "fc1", "fc2", "head",  # ViT (not patch_embed.proj, a Conv2d)
               "q_lin", "k_lin", "v_lin", "out_lin", "lin1", "lin2",  # DistilBERT
               "c_attn", "c_proj", "c_fc")  # GPT-2 Conv1D


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_within_layer_order_linear_bias_first_others_weight_first(name):
    names = [t["name"] for t in load(name)["tensors"]]
    for i, n in enumerate(names):
        if n in BARE:
            continue
        layer, kind = n.rsplit(".", 1)
        linear = (layer in ("fc", "fc1", "fc2") or layer.startswith("classifier.")
                  or (layer.rsplit(".", 1)[-1] in LINEAR_LAST and layer != "patch_embed.proj"))
        if kind == ("bias" if linear else "weight") and i + 1 < len(names):
            partner = layer + (".weight" if linear else ".bias")
            if partner in names:
                assert names[i + 1] == partner


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_compute_shares(name):
    tensors = load(name)["tensors"]
    shares = [t["compute_share"] for t in tensors]
    assert all(isinstance(s, float) and s >= 0.0 for s in shares)
    assert abs(sum(shares) - 1.0) < 1e-9
    # the layer's share sits on its first tensor in backward order, 0.0 on the second
    seen = set()
    for t in tensors:
        layer = t["name"].rsplit(".", 1)[0]
        if layer in seen:
            assert t["compute_share"] == 0.0
        else:
            assert t["compute_share"] > 0.0
            seen.add(layer)


def test_vgg16_classifier0():
    t = {t["name"]: t for t in load("vgg16")["tensors"]}["classifier.0.weight"]
    assert t["shape"] == [4096, 25088]
    assert numel(t) * 4 == 411_041_792


def test_resnet50_known_shapes():
    t = {t["name"]: t["shape"] for t in load("resnet50")["tensors"]}
    assert t["conv1.weight"] == [64, 3, 7, 7]
    assert t["layer1.0.downsample.0.weight"] == [256, 64, 1, 1]
    assert t["layer1.0.downsample.1.bias"] == [256]
    assert t["layer2.0.conv2.weight"] == [128, 128, 3, 3]
    assert t["fc.weight"] == [1000, 2048]
    assert "layer2.1.downsample.0.weight" not in t


def test_vgg16_bn_indices():
    names = {t["name"] for t in load("vgg16_bn")["tensors"]}
    assert {"features.1.weight", "features.40.weight", "features.41.bias"} <= names
    assert "features.2.weight" not in names  # ReLU


def test_bert_base_shapes_and_bytes():
    # BertModel + pooler for vocab 30522, hidden 768, 12 layers, intermediate 3072, 512 positions,
    # 2 token types: embeddings 23,837,184 + 12 x 7,087,872 + pooler 590,592 = 109,482,240
    h, inter = 768, 3072
    per_layer = 4 * (h * h + h) + (h * inter + inter) + (inter * h + h) + 2 * (2 * h)
    assert per_layer == 7_087_872
    assert (30522 + 512 + 2) * h + 2 * h + 12 * per_layer + (h * h + h) == 109_482_240
    tensors = load("bert_base")["tensors"]
    t = {x["name"]: x["shape"] for x in tensors}
    assert sum(numel(x) for x in tensors) * 4 == 437_928_960  # float32 bytes
    assert t["embeddings.word_embeddings.weight"] == [30522, 768]
    assert t["embeddings.position_embeddings.weight"] == [512, 768]
    assert t["embeddings.token_type_embeddings.weight"] == [2, 768]
    assert t["encoder.layer.0.intermediate.dense.weight"] == [3072, 768]
    assert t["encoder.layer.11.output.dense.weight"] == [768, 3072]
    assert t["pooler.dense.weight"] == [768, 768]
    sizes = sorted(numel(x) for x in tensors)
    assert sizes[-1] == 30522 * 768 and sizes[-2] == 2_359_296  # word embeddings, then FFN weights
    # many small tensors: 111 of the 199 are 768-element vectors (biases and LayerNorm), the smallest:
    # per layer 5 biases + 2 LayerNorms, embeddings LayerNorm, pooler bias
    small = [x["name"] for x in tensors if numel(x) == 768]
    assert sizes[0] == 768 and len(small) == 12 * (5 + 2 * 2) + 2 + 1
    assert all(n.endswith(".bias") or ".LayerNorm." in n for n in small)
    names = [x["name"] for x in tensors]
    # pooler, layers 11 .. 0, then the embeddings; value, key, query within attention
    layer_seq = [int(n.split(".")[2]) for n in names if n.startswith("encoder.layer.")]
    assert layer_seq == sorted(layer_seq, reverse=True) and len(layer_seq) == 12 * 16
    assert names[-5:] == ["embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias",
                          "embeddings.position_embeddings.weight",
                          "embeddings.token_type_embeddings.weight",
                          "embeddings.word_embeddings.weight"]
    qkv = [n for n in names if n.startswith("encoder.layer.0.attention.self.")]
    assert [n.split(".")[-2] for n in qkv] == ["value"] * 2 + ["key"] * 2 + ["query"] * 2


#: a few shapes per layout, from the published definitions (torchvision mobilenetv2.py, timm
#: vision_transformer.py, HuggingFace modeling_distilbert.py and modeling_gpt2.py)
KNOWN_SHAPES = {
    "mobilenet_v2": {"features.0.0.weight": [32, 3, 3, 3],
                     "features.1.conv.0.0.weight": [32, 1, 3, 3],  # depthwise, no expansion (t = 1)
                     "features.1.conv.1.weight": [16, 32, 1, 1], "features.1.conv.2.bias": [16],
                     "features.2.conv.0.0.weight": [96, 16, 1, 1],  # expansion 6
                     "features.2.conv.1.0.weight": [96, 1, 3, 3],
                     "features.17.conv.2.weight": [320, 960, 1, 1], "features.17.conv.3.weight": [320],
                     "features.18.0.weight": [1280, 320, 1, 1], "classifier.1.weight": [1000, 1280]},
    "vit_s16": {"cls_token": [1, 1, 384], "pos_embed": [1, 197, 384],
                "patch_embed.proj.weight": [384, 3, 16, 16], "blocks.0.attn.qkv.weight": [1152, 384],
                "blocks.0.attn.qkv.bias": [1152], "blocks.11.attn.proj.weight": [384, 384],
                "blocks.11.mlp.fc1.weight": [1536, 384], "blocks.11.mlp.fc2.weight": [384, 1536],
                "norm.weight": [384], "head.weight": [1000, 384]},
    "distilbert": {"embeddings.word_embeddings.weight": [30522, 768],
                   "embeddings.position_embeddings.weight": [512, 768],
                   "transformer.layer.0.attention.q_lin.weight": [768, 768],
                   "transformer.layer.5.ffn.lin1.weight": [3072, 768],
                   "transformer.layer.5.ffn.lin2.weight": [768, 3072],
                   "transformer.layer.5.output_layer_norm.bias": [768]},
    "gpt2_small": {"wte.weight": [50257, 768], "wpe.weight": [1024, 768],
                   "h.0.attn.c_attn.weight": [768, 2304], "h.0.attn.c_attn.bias": [2304],  # Conv1D [in, out]
                   "h.11.attn.c_proj.weight": [768, 768], "h.11.mlp.c_fc.weight": [768, 3072],
                   "h.11.mlp.c_proj.weight": [3072, 768], "ln_f.bias": [768]},
}
#: the last tensors in backward order (the layers that run first), and the projection that carries
#: the attention core's FLOPs (more than the block's output projection of the same shape or smaller)
TAIL = {
    "mobilenet_v2": ["features.1.conv.0.0.weight", "features.0.1.weight", "features.0.1.bias",
                     "features.0.0.weight"],
    # pos_embed is added last in the forward pass, after the class token is concatenated to the patches
    "vit_s16": ["pos_embed", "cls_token", "patch_embed.proj.weight", "patch_embed.proj.bias"],
    # DistilBERT and GPT-2 look up words, then positions
    "distilbert": ["embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias",
                   "embeddings.position_embeddings.weight", "embeddings.word_embeddings.weight"],
    "gpt2_small": ["h.0.ln_1.weight", "h.0.ln_1.bias", "wpe.weight", "wte.weight"],
}
ATTENTION = {"vit_s16": ("blocks.0.attn.qkv", "blocks.0.attn.proj"),
             "distilbert": ("transformer.layer.0.attention.v_lin", "transformer.layer.0.attention.q_lin"),
             "gpt2_small": ("h.0.attn.c_attn", "h.0.mlp.c_fc")}


@pytest.mark.parametrize("name", sorted(KNOWN_SHAPES))
def test_published_model_shapes_and_order(name):
    tensors = load(name)["tensors"]
    t = {x["name"]: x["shape"] for x in tensors}
    for n, shape in KNOWN_SHAPES[name].items():
        assert t[n] == shape, n
    assert [x["name"] for x in tensors[-len(TAIL[name]):]] == TAIL[name]
    share = {x["name"]: x["compute_share"] for x in tensors}
    if name in ATTENTION:
        core, other = ATTENTION[name]
        assert share[core + ".bias"] > share[other + ".bias"] > 0.0
    if name == "mobilenet_v2":  # InvertedResidual: 6 tensors without expansion (features.1), else 9
        per_block = [sum(n.startswith(f"features.{i}.") for n in t) for i in range(19)]
        assert per_block == [3, 6] + [9] * 16 + [3]
    else:  # transformer blocks in reverse: 12 (ViT, GPT-2) or 16 (DistilBERT) tensors each
        prefix = {"vit_s16": "blocks.", "distilbert": "transformer.layer.", "gpt2_small": "h."}[name]
        seq = [int(n[len(prefix):].split(".")[0]) for n in t if n.startswith(prefix)]
        assert seq == sorted(seq, reverse=True)


def _load_script():
    spec = importlib.util.spec_from_file_location("gen_layouts", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_committed_json_matches_generator(tmp_path):
    paths = _load_script().generate(tmp_path)
    assert sorted(p.name for p in paths) == sorted(f"{n}.json" for n in EXPECTED)
    for p in paths:
        committed = (LAYOUT_DIR / p.name).read_text(encoding="utf-8")
        assert committed == p.read_text(encoding="utf-8"), p.name
