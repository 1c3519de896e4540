"""What DDP's Reducer costs a rank's host beyond the bucket copies and the collectives: the work per gradient and
per bucket on the thread that runs the backward.

Per gradient (torch 2.13 ``torch/csrc/distributed/c10d/reducer.cpp``): the post-accumulate-grad hook autograd
runs for every parameter (``autograd_hook``), ``mark_variable_ready`` and its bookkeeping (``mark_variable_ready_dense``:
the launch of the copy into the bucket, a kernel launch on a GPU rank). Per bucket: ``mark_bucket_ready``, the comm
hook's call and its future (``run_comm_hook``), the process group's enqueue, and ``finalize_bucket_dense`` at the end.

:class:`ReducerHostCost` holds the two terms; the simulators (:mod:`.reducer`, :mod:`.fastsim`) charge them on the
backward's thread. Where they come from is in ``source``; where the records cannot pin a term to one figure (the
shipped GPU priors disagree from model to model) the range is kept beside it and answers show it.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReducerHostCost:
    """The Reducer's host work on one rank: ``per_tensor_s`` (s per gradient, each hook), ``per_bucket_s`` (s per
    bucket, each launch and finalize), ``source`` (one line: measured by which phase, or which prior), and where the
    figure is uncertain its range ``per_tensor_range_s`` / ``per_bucket_range_s`` (``(low, high)`` s; None: one
    figure)."""

    per_tensor_s: float
    per_bucket_s: float
    source: str
    per_tensor_range_s: tuple[float, float] | None = None
    per_bucket_range_s: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if not (self.per_tensor_s >= 0 and self.per_bucket_s >= 0):
            raise ValueError(f"a host cost is >= 0 s, got {self.per_tensor_s!r} per tensor, {self.per_bucket_s!r} "
                             "per bucket")

    def at(self, end: str) -> "ReducerHostCost":
        """This cost at the ``"low"`` or ``"high"`` end of its ranges (itself where it has none). Raises ValueError
        for another ``end``."""
        if end not in ("low", "high"):
            raise ValueError(f"end is 'low' or 'high', got {end!r}")
        i = 0 if end == "low" else 1
        t = self.per_tensor_range_s[i] if self.per_tensor_range_s else self.per_tensor_s
        b = self.per_bucket_range_s[i] if self.per_bucket_range_s else self.per_bucket_s
        return ReducerHostCost(t, b, self.source)

    def to_dict(self) -> dict:
        """JSON form: ``per_tensor_us``, ``per_bucket_us`` (µs), ``source``, ``per_tensor_range_us`` and
        ``per_bucket_range_us`` (``[low, high]`` µs or None)."""
        def us(r):
            return None if r is None else [r[0] * 1e6, r[1] * 1e6]
        return {"per_tensor_us": self.per_tensor_s * 1e6, "per_bucket_us": self.per_bucket_s * 1e6,
                "source": self.source, "per_tensor_range_us": us(self.per_tensor_range_s),
                "per_bucket_range_us": us(self.per_bucket_range_s)}
