"""Time a training script's steps in the form ``autotuner validate`` and ``autotuner ddp validate`` read.

::

    with StepTimer(warmup=3) as timer:
        for batch in data:
            with timer.step():
                opt.zero_grad(); loss_fn(model(batch)).backward(); opt.step()

prints, on rank 0 only, one line per step: ``warmup_step_ms <ms>`` for the first ``warmup`` steps and
``AUTOTUNER_STEP_TIME_MS <ms>`` for each step after them, the form
:func:`autotuner.readers.replay_output.parse_output` reads (its "step_lines" form; the warm-up lines carry no tag
and are not read). A step is timed with :func:`time.perf_counter` from the ``with`` to its end; where CUDA is in
use in the process (torch imported, ``torch.cuda.is_initialized()``) ``torch.cuda.synchronize()`` runs at both
ends, so that kernels queued in the step count in it and kernels of earlier work do not.
"""
from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from typing import IO, Iterator

from ..readers.replay_output import STEP_TAG

__all__ = ["StepTimer", "WARMUP_TAG"]

#: the tag of a warm-up step's line (not read by the validate commands; for the reader of the log)
WARMUP_TAG = "warmup_step_ms"
#: environment variables that hold the process's rank, in the order looked at, after torch.distributed and
#: Horovod: torchrun's, horovodrun's, Open MPI's, MPICH/Intel MPI's
_RANK_VARS = ("RANK", "HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK")


def _rank() -> int:
    """This process's rank: ``torch.distributed.get_rank()`` when a process group is initialised, else
    ``horovod.torch.rank()`` when Horovod is initialised (either looked at only when already imported), else the
    first of :data:`_RANK_VARS` set, else 0."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return int(dist.get_rank())
    hvd = sys.modules.get("horovod.torch")
    if hvd is not None:
        try:
            return int(hvd.rank())
        except ValueError:  # Horovod has not been initialized
            pass
    for var in _RANK_VARS:
        v = os.environ.get(var, "")
        if v.strip().isdigit():
            return int(v)
    return 0


def _cuda_sync() -> None:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


class StepTimer:
    """Step times of a training loop, printed for the validate commands.

    Args:
        warmup: the first steps, timed but printed as warm-up (a whole number >= 0). Under a validation take it,
            and the number of steps, from ``AUTOTUNER_WARMUP`` / ``AUTOTUNER_STEPS``.
        rank: this process's rank (only rank 0 prints); None: from ``torch.distributed``, Horovod or the
            launcher's environment (``RANK``, ``HOROVOD_RANK``, ...), looked up at the first step.
        out: the text stream printed to (default: ``sys.stdout`` at the time of printing), flushed per line.
        cuda_sync: synchronise CUDA around each step; None: when torch has initialised CUDA in this process.

    Attributes:
        measured_ms: the times of the steps after warm-up (ms, every rank records them, only rank 0 prints).
        warmup_ms: the warm-up steps' times (ms).

    Raises ValueError (one line) for a ``warmup`` that is not a whole number >= 0. A step that raises is neither
    recorded nor printed.
    """

    def __init__(self, warmup: int = 0, *, rank: int | None = None, out: IO[str] | None = None,
                 cuda_sync: bool | None = None) -> None:
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
            raise ValueError(f"warmup must be a whole number of steps >= 0, got {warmup!r}")
        if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int) or rank < 0):
            raise ValueError(f"rank must be a whole number >= 0 or None, got {rank!r}")
        self.warmup = warmup
        self.rank = rank
        self.out = out
        self.cuda_sync = cuda_sync
        self.warmup_ms: list[float] = []
        self.measured_ms: list[float] = []

    def __enter__(self) -> "StepTimer":
        return self

    def __exit__(self, *exc: object) -> None:
        (self.out or sys.stdout).flush()

    def _sync(self) -> None:
        if self.cuda_sync is None:
            _cuda_sync()
        elif self.cuda_sync:
            import torch

            torch.cuda.synchronize()

    @contextmanager
    def step(self) -> Iterator[None]:
        """Time one step (the body of the ``with``): record it and, on rank 0, print its line."""
        self._sync()
        t0 = time.perf_counter()
        yield
        self._sync()
        ms = (time.perf_counter() - t0) * 1e3
        warm = len(self.warmup_ms) < self.warmup
        (self.warmup_ms if warm else self.measured_ms).append(ms)
        if self.rank is None:
            self.rank = _rank()
        if self.rank == 0:
            print(f"{WARMUP_TAG if warm else STEP_TAG} {ms:.3f}", file=self.out or sys.stdout, flush=True)
