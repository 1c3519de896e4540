"""The compute side of a training step, shared by every framework's simulator: how long the forward, backward and
update take (:class:`Workload`) and when each gradient reaches the framework's hook (:func:`hand_over_times`).
Pure: no I/O. Horovod's simulator (:mod:`autotuner.frameworks.horovod.simulator`) and DDP's Reducer simulator
(:mod:`autotuner.frameworks.ddp.reducer`) both read it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Workload:
    """Compute side of a step for one model in one environment (seconds).

    Attributes:
        forward_s: data loading + forward + loss, before backward starts.
        backward_s: backward pass; gradients become ready during it.
        update_s: optimizer step after every allreduce finished.
        comm_scale: multiplier on collective times for this workload (1 = the environment's
            fitted network); calibrated per environment and model, see docs/explanation/cost-model.md.
        overlap: how far collectives overlap backward compute, in [0, 1]. 1: independent
            resources (backward runs at full speed while collectives run). 0: time-shared
            (backward makes no progress while a collective runs, so gradients after it become
            ready later by the collective's duration). Set per environment, see docs.
        host_backward_s: host time (s) autograd takes to hand every gradient to Horovod (the
            last hook fires ``host_backward_s`` after backward starts), or None: hooks fire when
            the gradient is ready on the device (CPU training). With a GPU, PyTorch launches
            kernels asynchronously, so the hooks run ahead of the device; see :mod:`autotuner.frameworks.horovod.simulator`'s
            docstring ("Hand-over").
        async_collectives: True for GPU (NCCL) allreduces, which Horovod enqueues on its own
            CUDA stream and completes on a finalizer thread, so the background loop is not
            blocked for their duration (they still run one after another on that stream).
            False: each collective blocks the loop (Gloo/MPI CPU ops).
        cpu_bound: True when the compute runs on CPU cores the ranks fill (set by
            :meth:`autotuner.frameworks.horovod.scenario.Scenario.workload_at`): a response that starts before
            the backward ends runs :meth:`autotuner.model.costmodel.ComputeDelay.extra_s` longer
            (nothing where the env measured no delay).
    """

    forward_s: float
    backward_s: float
    update_s: float = 0.0
    comm_scale: float = 1.0
    overlap: float = 1.0
    host_backward_s: float | None = None
    async_collectives: bool = False
    cpu_bound: bool = False

    @property
    def compute_s(self) -> float:
        return self.forward_s + self.backward_s + self.update_s


def hand_over_times(ready_rel: np.ndarray, forward_s: float, host_backward_s: float | None) -> np.ndarray:
    """When each gradient is handed to Horovod (its autograd hook fires), relative to the step.

    ``host_backward_s`` None: at device readiness (``ready_rel``). Otherwise the hooks fire
    uniformly per tensor over ``[forward_s, forward_s + host_backward_s]`` (Horovod's per-hook
    host work dominates the host side of backward, see docs/explanation/horovod-simulator.md), and never after the
    gradient is ready on the device. Shape (T,), non-decreasing.
    """
    if host_backward_s is None:
        return ready_rel
    T = ready_rel.size
    host = forward_s + max(host_backward_s, 0.0) * np.arange(1, T + 1) / T
    return np.minimum(ready_rel, host)
