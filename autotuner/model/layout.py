"""Gradient layouts: the tensors a model allreduces, in the order they become ready.

A :class:`Layout` is pure data (no I/O); readers in :mod:`autotuner.readers.layouts` build it
from the shipped JSON files, a user's JSON file or a user's ``torch.nn.Module``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from numbers import Integral, Real

import numpy as np

from ..errors import LayoutError

#: bytes per element of the dtypes a layout may use
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int64": 8, "int32": 4}
#: the most bytes a layout may hold in all (8 PiB): byte counts stay exact in float64, which the
#: simulator sums them in, and far from int64's overflow
MAX_LAYOUT_BYTES = 2**53


def _frozen(a: np.ndarray) -> np.ndarray:
    """``a``, made read-only: a layout's arrays are computed once and shared by every caller."""
    a.flags.writeable = False
    return a


@dataclass(frozen=True)
class Layout:
    """Gradient layout of one model.

    Attributes:
        name: model name (e.g. ``"resnet50"``).
        names: tensor names, length T, in backward readiness order.
        shapes: tensor shapes, length T.
        dtypes: dtype names, length T (keys of :data:`DTYPE_BYTES`).
        compute_share: shape (T,), fraction of backward compute that runs just before tensor i
            is ready; finite, non-negative, with a positive sum (normalised by it).
        forward_ms, backward_ms: measured forward (+ loss) and backward time per step, ms
            (``autotuner profile``), or None; both or neither. When given, they are the
            workload of an uncalibrated model (:func:`autotuner.frameworks.horovod.predict.make_scenario`).
        device, batch_size: where ``autotuner profile`` ran the model and its batch per rank
            (None for layouts written from published shapes).
        ready_ms: shape (T,), measured ms from the end of forward until each gradient is
            ready, non-decreasing, <= ``backward_ms``; or None. Needs ``backward_ms``. When
            given, :attr:`ready_fraction` is ``ready_ms / backward_ms`` instead of the shares.

    Raises LayoutError (one line) for no tensors, lengths that differ, an unknown dtype, a
    dimension that is not a whole number >= 1, more than :data:`MAX_LAYOUT_BYTES` bytes,
    shares that are negative, not finite or sum to 0, or measured times that break the rules above.
    """

    name: str
    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    compute_share: tuple[float, ...]
    forward_ms: float | None = None
    backward_ms: float | None = None
    ready_ms: tuple[float, ...] | None = None
    #: where ``autotuner profile`` ran it (``cpu``, ``cuda``) and its batch per rank, or None
    device: str | None = None
    batch_size: int | None = None

    def __post_init__(self) -> None:
        n = len(self.names)
        if n == 0:
            raise LayoutError(f"layout {self.name!r} has no tensors")
        if not (len(self.shapes) == len(self.dtypes) == len(self.compute_share) == n):
            raise LayoutError(f"layout {self.name!r}: names/shapes/dtypes/shares differ in length")
        bad = [d for d in self.dtypes if d not in DTYPE_BYTES]
        if bad:
            raise LayoutError(f"layout {self.name!r}: unknown dtype {bad[0]!r}")
        total = 0
        for name, shape, dtype in zip(self.names, self.shapes, self.dtypes):
            if not all(isinstance(d, Integral) and not isinstance(d, bool) and d >= 1 for d in shape):
                raise LayoutError(f"layout {self.name!r}: tensor {name!r}: shape {list(shape)}: "
                                  "dimensions must be whole numbers >= 1")
            total += math.prod(int(d) for d in shape) * DTYPE_BYTES[dtype]
            if total > MAX_LAYOUT_BYTES:
                raise LayoutError(f"layout {self.name!r}: tensor {name!r}: shape {list(shape)}: the layout "
                                  f"holds over {MAX_LAYOUT_BYTES} bytes")
        if not all(isinstance(s, Real) and math.isfinite(s) and s >= 0 for s in self.compute_share) \
                or not math.isfinite(sum(self.compute_share)) or sum(self.compute_share) <= 0:
            raise LayoutError(f"layout {self.name!r}: compute shares must be finite and >= 0 with a positive sum")
        self._check_measured()

    def _check_measured(self) -> None:
        """The measured times (``autotuner profile``): both or neither of forward/backward, > 0;
        ready_ms only with them, one per tensor, non-decreasing, within [0, backward_ms]."""
        def ok(x) -> bool:
            return isinstance(x, Real) and not isinstance(x, bool) and math.isfinite(x)

        if (self.forward_ms is None) != (self.backward_ms is None):
            raise LayoutError(f"layout {self.name!r}: measured forward_ms and backward_ms come together")
        if self.forward_ms is not None and not (ok(self.forward_ms) and ok(self.backward_ms)
                                                and self.forward_ms > 0 and self.backward_ms > 0):
            raise LayoutError(f"layout {self.name!r}: forward_ms {self.forward_ms!r} and backward_ms "
                              f"{self.backward_ms!r} must be finite and > 0")
        if self.ready_ms is None:
            return
        if self.backward_ms is None:
            raise LayoutError(f"layout {self.name!r}: ready_ms needs the measured backward_ms")
        if len(self.ready_ms) != len(self.names):
            raise LayoutError(f"layout {self.name!r}: {len(self.ready_ms)} ready times for {len(self.names)} tensors")
        prev = 0.0
        for name, r in zip(self.names, self.ready_ms):
            if not ok(r) or r < prev or r > self.backward_ms:
                raise LayoutError(f"layout {self.name!r}: tensor {name!r}: ready_ms {r!r} must be finite, "
                                  f">= the previous tensor's ({prev:g}) and <= backward_ms ({self.backward_ms:g})")
            prev = r

    @property
    def measured(self) -> bool:
        """True when the layout carries measured forward/backward times (``autotuner profile``)."""
        return self.backward_ms is not None

    def measured_split(self, compute_ms: float | None = None) -> tuple[float, float]:
        """(forward ms, backward ms) of a measured layout: the measured times, or ``compute_ms``
        (forward + backward) split in the measured forward : backward ratio. Needs :attr:`measured`."""
        if self.forward_ms is None or self.backward_ms is None:
            raise LayoutError(f"layout {self.name!r} carries no measured forward/backward times")
        if compute_ms is None:
            return self.forward_ms, self.backward_ms
        total = self.forward_ms + self.backward_ms
        return compute_ms * self.forward_ms / total, compute_ms * self.backward_ms / total

    @property
    def n_tensors(self) -> int:
        return len(self.names)

    @cached_property
    def numels(self) -> np.ndarray:
        """Elements per tensor, shape (T,), int64; computed once per layout, read-only."""
        return _frozen(np.array([math.prod(int(d) for d in s) for s in self.shapes], dtype=np.int64))

    @cached_property
    def sizes_bytes(self) -> np.ndarray:
        """Bytes per tensor, shape (T,), int64; computed once per layout, read-only."""
        return _frozen(self.numels * np.array([DTYPE_BYTES[d] for d in self.dtypes], dtype=np.int64))

    @property
    def n_params(self) -> int:
        return int(self.numels.sum())

    @property
    def total_bytes(self) -> int:
        return int(self.sizes_bytes.sum())

    @cached_property
    def ready_fraction(self) -> np.ndarray:
        """Fraction of backward elapsed when each tensor is ready, shape (T,), in [0, 1]:
        ``ready_ms / backward_ms`` when measured, else the cumulative compute shares; computed once per layout,
        read-only."""
        if self.ready_ms is not None and self.backward_ms is not None:
            return _frozen(np.minimum(np.asarray(self.ready_ms, dtype=float) / self.backward_ms, 1.0))
        s = np.asarray(self.compute_share, dtype=float)
        c = np.cumsum(s) / s.sum()
        return _frozen(np.minimum(c, 1.0))
