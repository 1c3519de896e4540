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
