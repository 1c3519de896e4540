"""The one table of Horovod knobs: names, units, bounds, defaults, flags, env vars.

Everything else (the CLI options, the search space, ``horovodrun`` flags, ``HOROVOD_*``
environment variables, the docs) is derived from :data:`KNOBS` and :class:`Config`.

Internal units: fusion threshold in **bytes**, cycle time in **milliseconds**. Conversions
happen only at the edges, here.

Sources:
- flags and env vars: ``horovod/runner/launch.py`` and
  ``horovod/runner/common/util/config_parser.py`` (Horovod 0.28.1): ``--fusion-threshold-mb``
  is an integer number of MiB, set as ``HOROVOD_FUSION_THRESHOLD`` = MB * 1024 * 1024 bytes;
  ``--cycle-time-ms`` -> ``HOROVOD_CYCLE_TIME`` (ms, float); ``--cache-capacity`` ->
  ``HOROVOD_CACHE_CAPACITY``; ``--hierarchical-allreduce`` -> ``HOROVOD_HIERARCHICAL_ALLREDUCE=1``;
  ``--hierarchical-allgather`` -> ``HOROVOD_HIERARCHICAL_ALLGATHER=1``.
- defaults: Horovod 0.28.1 ``horovod/common/operations.cc`` / ``global_state.h``: fusion
  threshold 128 MiB, cycle time 1 ms (HOROVOD_CYCLE_TIME default 1 since 0.21.0), cache
  capacity 1024. Horovod 0.20.x: 64 MiB and 5 ms (lab report 000, ``runs/v100-16gbit``).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from .errors import KnobError

MIB = 1024 * 1024


@dataclass(frozen=True)
class Knob:
    """One Horovod knob. ``unit`` is the internal unit of :class:`Config`'s field."""

    field: str
    flag: str
    env: str
    unit: str
    low: float
    high: float
    doc: str


KNOBS: tuple[Knob, ...] = (
    Knob("fusion_threshold_bytes", "--fusion-threshold-mb", "HOROVOD_FUSION_THRESHOLD", "bytes",
         0, 512 * MIB, "tensor fusion threshold; 0 disables fusion"),
    Knob("cycle_time_ms", "--cycle-time-ms", "HOROVOD_CYCLE_TIME", "ms",
         0.1, 100.0, "background loop cycle time"),
    Knob("cache_capacity", "--cache-capacity", "HOROVOD_CACHE_CAPACITY", "entries",
         0, 1 << 20, "response cache capacity; 0 disables the cache"),
    Knob("hierarchical_allreduce", "--hierarchical-allreduce", "HOROVOD_HIERARCHICAL_ALLREDUCE",
         "bool", 0, 1, "intra-node reduce-scatter + inter-node allreduce + intra-node allgather"),
    Knob("hierarchical_allgather", "--hierarchical-allgather", "HOROVOD_HIERARCHICAL_ALLGATHER",
         "bool", 0, 1, "hierarchical allgather (affects allgather ops only)"),
)
KNOB_BY_FIELD = {k.field: k for k in KNOBS}


@dataclass(frozen=True)
class Config:
    """A Horovod knob setting, in internal units (bytes, ms).

    Raises :class:`KnobError` (from :meth:`validate`) for values out of :data:`KNOBS` bounds.
    The cycle-time lower bound 0.1 ms is the search bound; :meth:`validate` accepts any
    cycle time > 0.
    """

    fusion_threshold_bytes: int = 128 * MIB
    cycle_time_ms: float = 1.0
    cache_capacity: int = 1024
    hierarchical_allreduce: bool = False
    hierarchical_allgather: bool = False

    def validate(self) -> "Config":
        if self.fusion_threshold_bytes < 0:
            raise KnobError(f"fusion threshold must be >= 0 bytes, got {self.fusion_threshold_bytes}")
        if not self.cycle_time_ms > 0:
            raise KnobError(f"cycle time must be > 0 ms, got {self.cycle_time_ms}")
        if self.cache_capacity < 0:
            raise KnobError(f"cache capacity must be >= 0, got {self.cache_capacity}")
        return self

    @property
    def fusion_threshold_mb(self) -> float:
        """Fusion threshold in MiB (what ``--fusion-threshold-mb`` calls MB)."""
        return self.fusion_threshold_bytes / MIB

    @property
    def cache_enabled(self) -> bool:
        return self.cache_capacity > 0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["fusion_threshold_mb"] = self.fusion_threshold_mb
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Config":
        """Build from a dict with internal field names (``fusion_threshold_mb`` also accepted)."""
        kw = {k: d[k] for k in KNOB_BY_FIELD if k in d}
        if "fusion_threshold_bytes" not in kw and "fusion_threshold_mb" in d:
            kw["fusion_threshold_bytes"] = int(round(float(d["fusion_threshold_mb"]) * MIB))
        cfg = cls(**kw)
        return replace(cfg, fusion_threshold_bytes=int(cfg.fusion_threshold_bytes),
                       cycle_time_ms=float(cfg.cycle_time_ms), cache_capacity=int(cfg.cache_capacity),
                       hierarchical_allreduce=bool(cfg.hierarchical_allreduce),
                       hierarchical_allgather=bool(cfg.hierarchical_allgather)).validate()


#: Horovod 0.28.x defaults (the last release); see module docstring for sources.
DEFAULTS_0_28 = Config()
#: Horovod 0.20.x defaults (64 MiB, 5 ms), used by lab report 000.
DEFAULTS_0_20 = Config(fusion_threshold_bytes=64 * MIB, cycle_time_ms=5.0)

#: Autotune's four initial (cycle time ms, fusion threshold MiB) points, read off the real
#: Horovod 0.28.1 autotune log in ``../shared/examples`` (rows 1-4 of each categorical block)
#: and ``horovod/common/parameter_manager.cc`` (ParameterManager constructor test points).
AUTOTUNE_START_POINTS: tuple[tuple[float, int], ...] = ((5.0, 4), (50.0, 32), (25.0, 16), (10.0, 8))


def autotune_start_configs(base: Config = DEFAULTS_0_28) -> list[Config]:
    """Autotune's four start points as :class:`Config` (other knobs from ``base``)."""
    return [replace(base, cycle_time_ms=c, fusion_threshold_bytes=m * MIB)
            for c, m in AUTOTUNE_START_POINTS]


def _fmt_num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def horovodrun_flags(cfg: Config) -> list[str]:
    """``horovodrun`` flags for ``cfg``.

    ``--fusion-threshold-mb`` takes an integer number of MiB; a threshold that is not a whole
    MiB cannot be spelled as a flag, so it is left out here and must be given through
    :func:`horovod_env` (``HOROVOD_FUSION_THRESHOLD`` in bytes).
    """
    flags: list[str] = []
    if cfg.fusion_threshold_bytes % MIB == 0:
        flags += ["--fusion-threshold-mb", str(cfg.fusion_threshold_bytes // MIB)]
    flags += ["--cycle-time-ms", _fmt_num(round(cfg.cycle_time_ms, 3))]
    flags += ["--cache-capacity", str(cfg.cache_capacity)]
    if cfg.hierarchical_allreduce:
        flags.append("--hierarchical-allreduce")
    if cfg.hierarchical_allgather:
        flags.append("--hierarchical-allgather")
    return flags


def horovod_env(cfg: Config) -> dict[str, str]:
    """The equivalent ``HOROVOD_*`` environment variables (threshold in bytes, cycle in ms)."""
    return {
        "HOROVOD_FUSION_THRESHOLD": str(int(cfg.fusion_threshold_bytes)),
        "HOROVOD_CYCLE_TIME": _fmt_num(round(cfg.cycle_time_ms, 3)),
        "HOROVOD_CACHE_CAPACITY": str(int(cfg.cache_capacity)),
        "HOROVOD_HIERARCHICAL_ALLREDUCE": "1" if cfg.hierarchical_allreduce else "0",
        "HOROVOD_HIERARCHICAL_ALLGATHER": "1" if cfg.hierarchical_allgather else "0",
    }
