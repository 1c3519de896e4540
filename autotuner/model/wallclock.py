"""Wall time of a whole training run: fixed start-up plus steps per rank times the step time.

Pure: numbers in, numbers out. Lab reports 002 and 004 time whole runs with the shell's
``time`` (``real``): process launch, imports, device initialisation, data loading and test
passes are in it, as well as every training step. A run is modelled as

    wall(N) = startup_s + steps_per_rank(N) · step_s(N)

with ``steps_per_rank(N) = epochs · ceil(ceil(train_images / N) / batch_size)``: PyTorch's
``DistributedSampler`` gives each of N replicas ``ceil(len(dataset) / N)`` samples
(torch/utils/data/distributed.py ``num_samples``, padding by repetition) and the DataLoader
keeps the last partial batch (``drop_last=False``, Horovod's examples/pytorch/pytorch_mnist.py).
With one rank there is no sampler split: ``ceil(train_images / batch_size)`` per epoch.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..errors import CostModelError


@dataclass(frozen=True)
class RunShape:
    """What one timed run did: ``epochs`` passes over ``train_images`` in batches of
    ``batch_size`` images per rank, after ``startup_s`` seconds of fixed cost (launch, imports,
    device initialisation, data loading, test passes; fitted per environment, see the env's
    docs). Raises CostModelError for counts < 1 or a negative start-up."""

    train_images: int
    batch_size: int
    epochs: int
    startup_s: float

    def __post_init__(self) -> None:
        if min(self.train_images, self.batch_size, self.epochs) < 1 or not self.startup_s >= 0:
            raise CostModelError(f"a run needs images, batch size and epochs >= 1 and start-up >= 0 s, got {self}")

    def steps_per_rank(self, ranks: int) -> int:
        """Training steps each of ``ranks`` ranks runs (see module docstring)."""
        if ranks < 1:
            raise CostModelError(f"ranks must be >= 1, got {ranks}")
        return self.epochs * math.ceil(math.ceil(self.train_images / ranks) / self.batch_size)

    def wall_s(self, ranks: int, step_s: float) -> float:
        """Wall time (s) of the run on ``ranks`` ranks with a step of ``step_s`` seconds."""
        return self.startup_s + self.steps_per_rank(ranks) * step_s

    def to_dict(self) -> dict[str, Any]:
        return {"train_images": self.train_images, "batch_size": self.batch_size, "epochs": self.epochs,
                "startup_s": self.startup_s}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RunShape":
        return cls(int(d["train_images"]), int(d["batch_size"]), int(d["epochs"]), float(d["startup_s"]))
