"""Small ``torch.nn.Module`` factories for ``load_layout("factory_models:NAME")`` tests."""
import torch
import torch.nn as nn


def small_cnn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 6 * 6, 16), nn.LayerNorm(16), nn.Linear(16, 5))


def small_cnn_input() -> torch.Tensor:
    return torch.randn(2, 3, 8, 8)


def frozen_only() -> nn.Module:
    m = nn.Linear(2, 2)
    for p in m.parameters():
        p.requires_grad_(False)
    return m


def broken() -> nn.Module:
    raise RuntimeError("cannot build")


def tied() -> nn.Module:
    emb = nn.Embedding(10, 4)
    head = nn.Linear(4, 10, bias=False)
    head.weight = emb.weight  # tied weights: one parameter, two modules
    return nn.Sequential(emb, nn.LayerNorm(4), head)


def mlp() -> nn.Module:
    """A 3-layer perceptron on 256 features (``autotuner profile --input-shape 256``)."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))


class _WithUnused(nn.Module):
    def __init__(self):
        super().__init__()
        self.used = nn.Linear(8, 4)
        self.unused = nn.Linear(8, 4)  # never called in forward: its hook never fires
        self.frozen = nn.Linear(4, 4)
        self.frozen.requires_grad_(False)

    def forward(self, x):
        return self.frozen(self.used(x))


def with_unused() -> nn.Module:
    torch.manual_seed(0)
    return _WithUnused()


def not_a_module():
    return "a string"


def convnet() -> nn.Module:
    """A small 3-stage conv net for 3x64x64 inputs (docs/how-to/profile.md's example)."""
    torch.manual_seed(0)

    def block(cin, cout, stride):
        return [nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]

    return nn.Sequential(*block(3, 32, 1), *block(32, 64, 2), *block(64, 128, 2), *block(128, 256, 2),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 100))
