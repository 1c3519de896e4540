"""The one table of PyTorch DDP knobs (:data:`DDP_KNOBS`, the pattern of :data:`autotuner.frameworks.horovod.knobs.KNOBS`) and the
configuration they make (:class:`DdpConfig`).

Sources (torch 2.13.0): the arguments and their defaults are ``DistributedDataParallel.__init__``'s
(``torch/nn/parallel/distributed.py``); ``_DEFAULT_BUCKET_CAP_MB = 25`` and ``_BucketCapacityConfig.create``
(the first bucket is capped at ``dist._DEFAULT_FIRST_BUCKET_BYTES``, 1 MiB, only while ``bucket_cap_mb`` is left
at its default; a ``bucket_cap_mb_list`` gives each bucket its own cap, the largest of them standing in for
``bucket_cap_mb``); the comm hooks are ``torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py``
(``allreduce_hook``, ``fp16_compress_hook``, ``bf16_compress_hook``) and ``powerSGD_hook.py``.

Units: bucket caps in **MiB** (2**20 bytes, as DDP's arguments; :meth:`DdpConfig.cap_bytes` gives bytes).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from ...errors import KnobError
from ...model.units import MIB

#: torch releases whose DDP defaults the table holds ("2.13": the version this project installs)
TORCH_VERSIONS = ("2.13",)
#: ``torch/nn/parallel/distributed.py`` ``_DEFAULT_BUCKET_CAP_MB``
DEFAULT_BUCKET_CAP_MB = 25.0
#: ``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES`` (``torch/csrc/distributed/c10d/reducer.hpp``
#: ``kDefaultFirstBucketBytes``): the first bucket's cap while ``bucket_cap_mb`` is left at its default
DEFAULT_FIRST_BUCKET_BYTES = 1 * MIB
#: the comm hooks: name -> (what it sends per float32 element in bytes, lossy, the code a user pastes)
COMM_HOOKS: Mapping[str, tuple[int, bool, str]] = {
    "allreduce": (4, False, ""),
    "fp16_compress": (2, False, "model.register_comm_hook(None, default_hooks.fp16_compress_hook)"),
    "bf16_compress": (2, False, "model.register_comm_hook(None, default_hooks.bf16_compress_hook)"),
    "powerSGD": (0, True, "model.register_comm_hook(powerSGD_hook.PowerSGDState(process_group=None), "
                          "powerSGD_hook.powerSGD_hook)"),
}
#: the hooks the search proposes when the env measured float16 allreduces (else only ``allreduce``): lossless
#: hooks the simulator prices; bf16 is simulated as fp16's bytes but not proposed (its casts are not measured),
#: powerSGD is lossy and never proposed
SEARCHED_HOOKS_FP16 = ("allreduce", "fp16_compress")


def searched_hooks(fp16: bool) -> tuple[str, ...]:
    """The comm hooks suggest, explore, scale and tune search: ``allreduce`` and, with ``fp16`` (the env measured
    float16 allreduces), ``fp16_compress`` (:data:`SEARCHED_HOOKS_FP16`)."""
    return SEARCHED_HOOKS_FP16 if fp16 else ("allreduce",)


def sends_half_precision(hook: str) -> bool:
    """True for a hook that casts each bucket to a 2-byte float before the allreduce (fp16/bf16 compress,
    torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py)."""
    return COMM_HOOKS[hook][0] == 2


@dataclass(frozen=True)
class DdpKnob:
    """One DDP knob; every other spelling of it comes from these fields.

    Attributes:
        field: :class:`DdpConfig` attribute; ``argument``: DDP's own name for it (a ``DistributedDataParallel``
        argument, or ``register_comm_hook`` for the hook); ``unit``; ``defaults`` per :data:`TORCH_VERSIONS`
        (None: DDP's own default applies, e.g. ``bucket_cap_mb=None`` = 25 MiB with a 1 MiB first bucket);
        ``low``/``high``: accepted range (MiB for caps); ``space``: how the grid covers it (``"log"``,
        ``"switch"``, ``"choice"``, ``None`` = not searched); ``doc``; ``source``.
    """

    field: str
    argument: str
    unit: str
    defaults: Mapping[str, Any]
    low: float | None
    high: float | None
    space: str | None
    doc: str
    source: str

    @property
    def default(self) -> Any:
        return self.defaults[TORCH_VERSIONS[-1]]


_SRC = "torch/nn/parallel/distributed.py"
DDP_KNOBS: tuple[DdpKnob, ...] = (
    DdpKnob("bucket_cap_mb", "bucket_cap_mb", "MiB", {"2.13": None}, 0.0, 4096.0, "log",
            "bucket size cap; None = 25 MiB with the first bucket capped at 1 MiB",
            f"{_SRC} _BucketCapacityConfig.create; reducer.cpp compute_bucket_assignment_by_size"),
    DdpKnob("bucket_cap_mb_list", "bucket_cap_mb_list", "MiB per bucket", {"2.13": None}, 0.0, 4096.0, None,
            "one cap per bucket in backward order (the last one repeats); overrides bucket_cap_mb",
            f"{_SRC} _BucketCapacityConfig.compute_bucket_size_limits (pytorch#169026)"),
    DdpKnob("gradient_as_bucket_view", "gradient_as_bucket_view", "on/off", {"2.13": False}, None, None, "switch",
            "gradients are views into the buckets: no copy into the bucket and back",
            "reducer.cpp mark_variable_ready_dense, finalize_bucket_dense"),
    DdpKnob("comm_hook", "register_comm_hook", "hook", {"2.13": "allreduce"}, None, None, "choice",
            "what a bucket sends: allreduce (default), fp16_compress / bf16_compress (casts both ways); "
            "powerSGD is lossy and never proposed by default",
            "torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py, powerSGD_hook.py"),
    DdpKnob("static_graph", "static_graph", "on/off", {"2.13": False}, None, None, None,
            "the graph never changes: no unused-parameter search per step", f"{_SRC} DistributedDataParallel"),
    DdpKnob("find_unused_parameters", "find_unused_parameters", "on/off", {"2.13": False}, None, None, None,
            "search the autograd graph for unused parameters every step (not modelled: its cost is a graph "
            "traversal per step this project never measured)", f"{_SRC} DistributedDataParallel"),
)
KNOB_BY_FIELD = {k.field: k for k in DDP_KNOBS}


def _cap(value: Any, where: str) -> float:
    k = KNOB_BY_FIELD["bucket_cap_mb"]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise KnobError(f"{where} must be a number of MiB, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or not k.low < v <= k.high:
        raise KnobError(f"{where} must be a number of MiB in (0, {k.high:g}], got {value!r}")
    return v


@dataclass(frozen=True)
class DdpConfig:
    """One DDP setting (the knobs :data:`DDP_KNOBS` names). ``bucket_cap_mb`` None and ``bucket_cap_mb_list``
    None are DDP's defaults (25 MiB, first bucket 1 MiB). Raises KnobError (one line) for a bad value."""

    bucket_cap_mb: float | None = None
    bucket_cap_mb_list: tuple[float, ...] | None = None
    gradient_as_bucket_view: bool = False
    comm_hook: str = "allreduce"
    static_graph: bool = False
    find_unused_parameters: bool = False

    def __post_init__(self) -> None:
        if self.bucket_cap_mb is not None:
            object.__setattr__(self, "bucket_cap_mb", _cap(self.bucket_cap_mb, "bucket_cap_mb"))
        if self.bucket_cap_mb_list is not None:
            caps = self.bucket_cap_mb_list
            if isinstance(caps, (str, bytes)) or not hasattr(caps, "__iter__") or len(list(caps)) == 0:
                raise KnobError(f"bucket_cap_mb_list must be a non-empty list of MiB, got {caps!r}")
            object.__setattr__(self, "bucket_cap_mb_list",
                               tuple(_cap(c, f"bucket_cap_mb_list[{i}]") for i, c in enumerate(caps)))
        for name in ("gradient_as_bucket_view", "static_graph", "find_unused_parameters"):
            if not isinstance(getattr(self, name), bool):
                raise KnobError(f"{name} must be true or false, got {getattr(self, name)!r}")
        if self.comm_hook not in COMM_HOOKS:
            raise KnobError(f"comm_hook must be one of {', '.join(COMM_HOOKS)}, got {self.comm_hook!r}")

    # --- what DDP makes of it (torch 2.13 _BucketCapacityConfig) ---
    @property
    def uses_default_cap(self) -> bool:
        """True when neither cap is set: DDP then caps the first bucket at 1 MiB."""
        return self.bucket_cap_mb is None and self.bucket_cap_mb_list is None

    def cap_bytes(self) -> int:
        """``bucket_bytes_cap`` (bytes): the largest of ``bucket_cap_mb_list``, else ``bucket_cap_mb``, else 25 MiB
        (``int(MiB * 2**20)`` as ``_BucketCapacityConfig.create``)."""
        if self.bucket_cap_mb_list:
            return int(max(self.bucket_cap_mb_list) * MIB)
        return int((DEFAULT_BUCKET_CAP_MB if self.bucket_cap_mb is None else self.bucket_cap_mb) * MIB)

    def first_cap_bytes(self) -> int:
        """``first_bucket_bytes_cap`` (bytes): 1 MiB while the cap is DDP's default, else :meth:`cap_bytes`."""
        return DEFAULT_FIRST_BUCKET_BYTES if self.uses_default_cap else self.cap_bytes()

    def rebuild_limits(self) -> tuple[int, ...]:
        """The caps (bytes) of the buckets DDP rebuilds after the first iteration, in the order gradients become
        ready; the last one repeats (``Reducer::rebuild_buckets``: ``bucket_size_limits_for_rebuilding`` when a
        list was given, else ``[first_bucket_bytes_cap, bucket_bytes_cap]``)."""
        if self.bucket_cap_mb_list:
            return tuple(int(c * MIB) for c in self.bucket_cap_mb_list)
        return (self.first_cap_bytes(), self.cap_bytes())

    def first_iteration_limits(self) -> tuple[int, ...]:
        """The caps (bytes) of the first iteration's buckets (``compute_bucket_size_limits``): the list when given;
        else one bucket of every gradient (``sys.maxsize``) unless ``find_unused_parameters`` without
        ``static_graph``, which keeps ``[first, cap]`` and is never rebuilt."""
        if self.bucket_cap_mb_list:
            return self.rebuild_limits()
        if self.static_graph or not self.find_unused_parameters:
            return (2**63 - 1,)
        return (self.first_cap_bytes(), self.cap_bytes()) if self.first_cap_bytes() < self.cap_bytes() \
            else (self.cap_bytes(),)

    @property
    def rebuilds(self) -> bool:
        """Whether the Reducer rebuilds its buckets after the first iteration (``should_rebuild_buckets``:
        ``(static_graph or not find_unused_parameters)``)."""
        return self.static_graph or not self.find_unused_parameters

    # --- what a user pastes ---
    def code(self) -> str:
        """The Python a user pastes: the ``DistributedDataParallel(...)`` call with the non-default arguments, and
        the hook's registration when one is set."""
        args = ["model"]
        if self.bucket_cap_mb_list:
            args.append(f"bucket_cap_mb_list=[{', '.join(f'{c:g}' for c in self.bucket_cap_mb_list)}]")
        elif self.bucket_cap_mb is not None:
            args.append(f"bucket_cap_mb={self.bucket_cap_mb:g}")
        for name in ("gradient_as_bucket_view", "static_graph", "find_unused_parameters"):
            if getattr(self, name):
                args.append(f"{name}=True")
        line = f"model = DistributedDataParallel({', '.join(args)})"
        hook = COMM_HOOKS[self.comm_hook][2]
        return line + ("" if not hook else "\n" + hook)

    def label(self) -> str:
        """A short human label: ``25 MiB (default, first 1 MiB)``, ``[1, 4, 25] MiB``, plus view/hook."""
        if self.bucket_cap_mb_list:
            s = f"[{', '.join(f'{c:g}' for c in self.bucket_cap_mb_list)}] MiB"
        elif self.bucket_cap_mb is None:
            s = f"{DEFAULT_BUCKET_CAP_MB:g} MiB (default, first 1 MiB)"
        else:
            s = f"{self.bucket_cap_mb:g} MiB"
        if self.gradient_as_bucket_view:
            s += ", view"
        if self.comm_hook != "allreduce":
            s += f", {self.comm_hook}"
        return s

    def to_dict(self) -> dict[str, Any]:
        return {"bucket_cap_mb": self.bucket_cap_mb,
                "bucket_cap_mb_list": None if self.bucket_cap_mb_list is None else list(self.bucket_cap_mb_list),
                "gradient_as_bucket_view": self.gradient_as_bucket_view, "comm_hook": self.comm_hook,
                "static_graph": self.static_graph, "find_unused_parameters": self.find_unused_parameters}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "DdpConfig":
        """From :meth:`to_dict`'s form; unknown keys raise KnobError (one line)."""
        unknown = set(d) - set(KNOB_BY_FIELD)
        if unknown:
            raise KnobError(f"unknown DDP knob(s): {', '.join(sorted(unknown))} (known: {', '.join(KNOB_BY_FIELD)})")
        caps = d.get("bucket_cap_mb_list")
        return cls(d.get("bucket_cap_mb"), None if caps is None else tuple(caps),
                   d.get("gradient_as_bucket_view", False), d.get("comm_hook", "allreduce"),
                   d.get("static_graph", False), d.get("find_unused_parameters", False))
