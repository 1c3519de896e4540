"""Compute contention: how a rank's compute time grows when ranks share one host's CPUs.

Pure: numbers in, numbers out. Used for CPU-only ranks (lab report 003: 1-8 MPI processes on
one laptop), where the ranks' compute shares the cores instead of running on separate devices.
One fitted parameter per environment, shared by every model (the calibration budget: everything
else is predicted, not fitted).
See docs/explanation/laptop-cpu.md for the fit and its limits.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import CostModelError

#: the form's name in model files (``contention.form``)
FORM = "intra-op-sharing"


@dataclass(frozen=True)
class Contention:
    """Ranks sharing ``cores`` physical cores, each rank's compute partly spread over
    intra-op threads (Amdahl) while it has cores to spare, time-shared once it does not.

    Form (times relative to one rank's work on one core; ``N`` ranks on the host, ``c`` =
    :attr:`cores`, ``p`` = :attr:`parallel_fraction`):

    - a rank's serial part (``1 - p``) runs on one core: ``(1 - p) · max(1, N / c)``
      (more ranks than cores: each gets ``c / N`` of a core);
    - its intra-op-parallel part ``p`` gets ``c / N`` cores (its threads share the host's
      cores with the other ranks' threads): ``p · N / c``;
    - ``slowdown(N) = [(1 - p)·max(1, N/c) + p·N/c] / [(1 - p) + p/c]`` (the denominator is
      ``N = 1``: one rank alone, all ``c`` cores for its intra-op threads), so
      ``slowdown(1) = 1``; it is non-decreasing in ``N``, equal to ``max(1, N/c)`` for
      ``p = 0`` (plain processor sharing) and to ``N`` for ``p = 1``.

    Source and reasoning: compute depends on how many ranks share the cores (oversubscription,
    and torch's intra-op threads when one rank has the machine to itself);
    Amdahl's law for the intra-op threads; processor sharing (the OS scheduler's fair share)
    beyond one rank per core. Hyper-threads are assumed to add no compute: the two threads of a
    core share its vector (FMA) units, which dense convolutions saturate; so ``logical_cpus``
    (what the OS schedules on) bounds ``cores`` but does not enter the formula. Fitted: ``p``
    (:func:`autotuner.frameworks.horovod.fit.cpu_scaling.fit_cpu_scaling_env`); ``cores`` is env.toml's
    assumption (report 003: 4, the author's "4 cores 8 threads"; Intel's spec 6; the OS saw 8
    logical CPUs).

    Attributes:
        logical_cpus: logical CPUs the OS schedules on (>= 1).
        cores: physical cores the ranks' compute shares (> 0, <= ``logical_cpus``).
        parallel_fraction: share of one rank's compute that its intra-op threads spread over
            idle cores, in [0, 1] (0: the placeholder's processor sharing).

    Raises CostModelError for values outside those ranges.
    """

    logical_cpus: int
    cores: float
    parallel_fraction: float = 0.0

    def __post_init__(self) -> None:
        if self.logical_cpus < 1 or not 0 < self.cores <= self.logical_cpus:
            raise CostModelError(f"contention needs logical_cpus >= 1 and 0 < cores <= logical_cpus, got {self}")
        if not 0.0 <= self.parallel_fraction <= 1.0:
            raise CostModelError(f"contention's parallel_fraction must be in [0, 1], got {self.parallel_fraction}")

    def slowdown(self, ranks: int) -> float:
        """Compute time of one rank among ``ranks`` on the host / compute time of one rank
        alone (dimensionless, >= 1; 1.0 at ``ranks = 1``). Raises CostModelError for ranks < 1."""
        if ranks < 1:
            raise CostModelError(f"ranks must be >= 1, got {ranks}")
        p, c, n = self.parallel_fraction, float(self.cores), float(ranks)
        alone = (1 - p) + p / c
        return ((1 - p) * max(1.0, n / c) + p * n / c) / alone

    def to_dict(self) -> dict[str, Any]:
        return {"form": FORM, "logical_cpus": self.logical_cpus, "cores": self.cores,
                "parallel_fraction": self.parallel_fraction}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Contention":
        """From :meth:`to_dict` (a dict without ``parallel_fraction``: plain processor sharing)."""
        return cls(int(d["logical_cpus"]), float(d["cores"]), float(d.get("parallel_fraction", 0.0)))
