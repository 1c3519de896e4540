"""A scenario: everything the simulator needs besides the knobs (pure: no I/O).

A :class:`Scenario` binds a fitted environment's cost model and cluster, a model's layout and
workload, and the what-ifs (nodes, GPUs per node, link rate, compression).
:func:`autotuner.api.make_scenario` builds one from files.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from ..knobs import Config
from .costmodel import Cluster, CostModel
from .layout import Layout
from .simulator import StepResult, Workload, simulate_step


class Compression(StrEnum):
    """Gradient compression of ``hvd.DistributedOptimizer`` (``horovod/torch/compression.py``):
    none, or fp16 (fp32 gradients cast to fp16 before the allreduce: half the bytes)."""

    none = "none"
    fp16 = "fp16"


#: bytes on the wire per fp32 gradient byte
COMPRESSION_RATIO = {Compression.none: 1.0, Compression.fp16: 0.5}


@dataclass(frozen=True)
class Scenario:
    """Everything the simulator needs besides the knobs."""

    env: str
    model: str
    layout: Layout
    workload: Workload
    cost: CostModel
    cluster: Cluster
    compression: str = "none"

    def simulate(self, config: Config, **kw) -> StepResult:
        """:func:`simulate_step` on this scenario; ``kw`` passes ``trace``, ``measure_steps``, ..."""
        return simulate_step(self.layout.sizes_bytes, self.layout.ready_fraction, self.workload, config,
                             self.cost, self.cluster, compression_ratio=COMPRESSION_RATIO[self.compression], **kw)

    def step_times(self, **knobs) -> np.ndarray:
        """Step times (s) of many configurations at once (:func:`autotuner.model.fastsim.simulate_batch`).

        ``knobs``: ``fusion_threshold_bytes``, ``cycle_time_ms``, ``cache_capacity``,
        ``hierarchical_allreduce`` and optionally ``hierarchical_allgather``, arrays broadcast
        together to one shape S (internal units: bytes, ms). Returns float64 seconds, shape S,
        equal to :meth:`simulate`'s ``step_time_s`` for each configuration.
        """
        from .fastsim import simulate_batch

        return simulate_batch(self.layout.sizes_bytes, self.layout.ready_fraction, self.workload, self.cost,
                              self.cluster, compression_ratio=COMPRESSION_RATIO[self.compression], **knobs)
