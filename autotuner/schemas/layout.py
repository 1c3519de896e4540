"""A gradient layout JSON (``autotuner.layout/1``)."""
from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import (
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from ..model.layout import DTYPE_BYTES, MAX_LAYOUT_BYTES
from .core import (
    Count,
    LAYOUT_SCHEMA,
    NonNeg,
    Positive,
    Text,
    _Schema,
    _fail,
    _unique,
)


# --- layout JSON ----------------------------------------------------------------------------

Dim = Annotated[int, Field(ge=1, le=MAX_LAYOUT_BYTES)]


class TensorEntry(_Schema):
    """One tensor of a layout, in backward readiness order."""

    name: Text
    dtype: Literal[tuple(DTYPE_BYTES)] = "float32"  # type: ignore[valid-type]
    shape: list[Dim]
    compute_share: NonNeg = 0.0
    #: measured: ms from the end of forward until the gradient is ready (runs/gpu-profiles)
    ready_ms: NonNeg | None = None

    @field_validator("shape")
    @classmethod
    def _bytes_fit(cls, v: list[int], info) -> list[int]:
        nbytes = math.prod(v) * DTYPE_BYTES.get(info.data.get("dtype", "float32"), 8)
        if nbytes > MAX_LAYOUT_BYTES:
            raise ValueError(f"{nbytes} bytes is over the {MAX_LAYOUT_BYTES}-byte limit of a layout")
        return v


class LayoutFile(_Schema):
    """A layout JSON (``autotuner.layout/1``); other top-level keys (``source``, ...) are kept.

    ``autotuner profile`` adds what it measured: ``forward_ms`` and ``backward_ms`` (both or
    neither; medians per step, ms), the ``device``, the compute ``dtype`` (autocast's, or the
    parameters'), ``batch_size``, ``input_shape`` (per sample), ``torch`` (version) and
    ``profiled_with``; with ``backward_ms``, ``ready_ms`` is on every tensor or on none,
    non-decreasing in file order and <= ``backward_ms``.
    """

    model_config = ConfigDict(extra="allow")
    schema_: Literal[LAYOUT_SCHEMA] | None = Field(None, alias="schema")  # type: ignore[valid-type]
    name: Text | None = None
    order: Literal["backward"] | None = None
    tensors: Annotated[list[TensorEntry], Field(min_length=1)]
    forward_ms: Positive | None = None
    backward_ms: Positive | None = None
    device: Text | None = None
    dtype: Literal[tuple(DTYPE_BYTES)] | None = None  # type: ignore[valid-type]
    batch_size: Count | None = None
    input_shape: list[Dim] | None = None
    torch: Text | None = None
    profiled_with: Text | None = None

    @model_validator(mode="after")
    def _measured(self) -> LayoutFile:
        if (self.forward_ms is None) != (self.backward_ms is None):
            k = "backward_ms" if self.backward_ms is None else "forward_ms"
            raise _fail("missing", "forward_ms and backward_ms come together", (k,), None)
        if self.backward_ms is None:
            return self  # ready_ms alone (runs/gpu-profiles) is a record; readiness is compute_share
        have = [t.ready_ms is not None for t in self.tensors]
        if any(have) and not all(have):
            i = have.index(False)
            raise _fail("missing", "ready_ms is on every tensor or on none", ("tensors", i, "ready_ms"), None)
        prev = 0.0
        for i, t in enumerate(self.tensors):
            if t.ready_ms is None:
                break
            if t.ready_ms < prev or t.ready_ms > self.backward_ms:
                raise _fail("value_error", f"must be >= the previous tensor's ready_ms ({prev:g}) and <= "
                            f"backward_ms ({self.backward_ms:g})", ("tensors", i, "ready_ms"), t.ready_ms)
            prev = t.ready_ms
        return self

    @field_validator("tensors")
    @classmethod
    def _whole(cls, v: list[TensorEntry]) -> list[TensorEntry]:
        _unique(v, "name", "tensor name")
        total = sum(math.prod(t.shape) * DTYPE_BYTES[t.dtype] for t in v)
        if total > MAX_LAYOUT_BYTES:
            raise ValueError(f"{total} bytes in all is over the {MAX_LAYOUT_BYTES}-byte limit of a layout")
        s = sum(t.compute_share for t in v)
        if not (math.isfinite(s) and s > 0):
            raise ValueError(f"compute shares must have a finite, positive sum, got {s}")
        return v
