"""The one table of Horovod knobs: everything about a knob is said once, in :data:`KNOBS`.

Derived from the table, nowhere spelled by hand:

- :class:`Config` (its fields, defaults, coercion and validation: type, finite, bounds);
- the command-line options of ``simulate``, ``suggest`` and ``explore`` (:mod:`autotuner.cli`);
- ``horovodrun`` flags and ``HOROVOD_*`` environment variables, both ways
  (:func:`horovodrun_flags`, :func:`horovod_env`, :func:`config_from_flags`,
  :func:`config_from_env`);
- the search space and the grid axes (:mod:`autotuner.search`, :mod:`autotuner.frameworks.horovod.views.explore`);
- the knob table in docs/reference/knobs.md (:func:`markdown_table`, ``python scripts/gen_knob_table.py``;
  ``tests/test_knobs.py`` fails when the file is stale).

Internal units: fusion threshold in **bytes**, cycle time in **milliseconds**, cache capacity
in entries. A knob's flag may use another unit (the threshold's flag takes MiB): the
conversion is the knob's ``flag_scale`` (internal units per flag unit), applied here only.

Sources (Horovod 0.28.1):
- flags and variables: ``horovod/runner/launch.py`` (the flags) and
  ``horovod/runner/common/util/config_parser.py`` (``set_env_from_args``: the threshold flag is
  an integer number of MiB, set as bytes = MB * 1024 * 1024; the cycle time is a float in ms;
  the hierarchical switches set ``1``);
- defaults: ``horovod/common/operations.cc`` and ``horovod/common/global_state.h`` (fusion
  threshold 128 MiB, cycle time 1 ms since 0.21.0, cache capacity 1024, hierarchical off);
  Horovod 0.20.x: 64 MiB and 5 ms (lab report 000, ``runs/v100-16gbit``);
- hierarchical allreduce only takes effect on more than one node: ``operations.cc`` turns it
  off when ``size == local_size``; hierarchical allgather only changes allgather operations
  (``ops/mpi_operations.cc`` ``MPIHierarchicalAllgather``), which gradient allreduce does not issue;
- hierarchical allreduce exists only with NCCL (+ MPI): on ``gloo`` and ``mpi`` Horovod ignores it
  (:func:`hierarchical_allreduce_supported`, the "Hierarchical flags per backend" section of docs/reference/knobs.md).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, make_dataclass, replace
from typing import Any, Iterable, Mapping

from ...errors import KnobError
from ...model.units import MIB

#: Horovod versions with their own defaults; "0.28" is the last release and the default.
VERSIONS = ("0.28", "0.20")
#: the release whose defaults :data:`VERSIONS` "0.28" names first: Horovod 0.21.0 changed the default cycle time
#: from 5 ms to 1 ms and the fusion threshold from 64 MB to 128 MB (its CHANGELOG, PR #2468); earlier
#: releases have 0.20's defaults
DEFAULTS_CHANGED_IN = (0, 21)
#: the last Horovod release (the knobs, flags and defaults of this module are its)
LAST_RELEASE = "0.28.1"


def mib_to_bytes(mib: float) -> int:
    """MiB (2**20 bytes) to whole bytes, rounded to the nearest byte (the one conversion)."""
    return int(round(float(mib) * MIB))


@dataclass(frozen=True)
class Knob:
    """One Horovod knob; every other spelling of it is derived from these fields.

    Attributes:
        field: :class:`Config` attribute name; its value is in ``unit``.
        type: ``int``, ``float`` or ``bool`` (the internal value's type).
        unit: internal unit (``bytes``, ``ms``, ``entries``, ``on/off``).
        flag: the ``horovodrun`` flag (also this tool's option name).
        env: the ``HOROVOD_*`` environment variable (its value is in ``unit``).
        flag_unit: the unit of the flag's value (``MiB`` for the threshold).
        flag_scale: internal units per flag unit (``MIB`` for the threshold, else 1).
        flag_int: the flag takes whole numbers only (the threshold's flag: an int).
        low, high: accepted range, internal units (validation, search and grid bounds).
        defaults: default per Horovod version (keys of :data:`VERSIONS`), internal units.
        space: how search and grids cover it: ``"flag-int"`` (every whole flag unit from low to
            high), ``"log"`` (log-uniform), ``"on-off"`` (0 or the default), ``"switch"``
            (False/True), ``None`` (not searched).
        multi_node_only: takes effect only with more than one node.
        doc: one line for humans.
        source: where Horovod defines its effect.
    """

    field: str
    type: type
    unit: str
    flag: str
    env: str
    flag_unit: str
    flag_scale: int
    flag_int: bool
    low: float
    high: float
    defaults: Mapping[str, Any]
    space: str | None
    multi_node_only: bool
    doc: str
    source: str

    @property
    def param(self) -> str:
        """Python identifier of the command-line option (``fusion_threshold_mb``)."""
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def is_switch(self) -> bool:
        return self.type is bool

    @property
    def default(self) -> Any:
        """Horovod 0.28's default, internal units."""
        return self.defaults["0.28"]

    def check(self, value: Any, where: str = "") -> Any:
        """``value`` coerced to :attr:`type`, or KnobError (one line) when it is not a finite
        number in [low, high] (a switch: a bool or 0/1). ``where`` prefixes the message."""
        pre = f"{where}: " if where else ""
        if self.is_switch:
            if not isinstance(value, (str, bytes)) and hasattr(value, "__float__"):  # bool, numpy bool, 0/1
                if float(value) in (0.0, 1.0):
                    return bool(value)
            raise KnobError(f"{pre}{self.field} must be true or false, got {value!r}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
            raise KnobError(f"{pre}{self.field} must be a number, got {value!r}")
        try:
            x = float(value)
        except (TypeError, ValueError, OverflowError):
            raise KnobError(f"{pre}{self.field} must be a number, got {value!r}") from None
        if not math.isfinite(x) or not self.low <= x <= self.high:
            raise KnobError(f"{pre}{self.field} must be in {self.low:g}..{self.high:g} {self.unit}, got {value!r}")
        if self.type is int:
            if x != int(x):
                raise KnobError(f"{pre}{self.field} must be a whole number of {self.unit}, got {value!r}")
            return int(x)
        return x

    def from_flag(self, value: Any) -> Any:
        """A flag value (flag units; a switch: present = True) to internal units, checked.
        Raises KnobError naming the flag."""
        if self.is_switch:
            return self.check(value, self.flag)
        try:
            x = float(value)
        except (TypeError, ValueError, OverflowError):
            raise KnobError(f"{self.flag}: not a number: {value!r}") from None
        if not math.isfinite(x) or not self.low <= x * self.flag_scale <= self.high:
            raise KnobError(f"{self.flag} must be in {self.low / self.flag_scale:g}..{self.high / self.flag_scale:g} "
                            f"{self.flag_unit}, got {value!r}")
        v = int(round(x * self.flag_scale)) if self.type is int else x * self.flag_scale
        return self.check(v, self.flag)

    def to_flag(self, value: Any) -> list[str]:
        """The flag spelling of an internal value: ``[flag, value]``, ``[flag]`` for a switch that
        is on, ``[]`` for a switch that is off or a value the flag cannot spell (a threshold that
        is not a whole MiB: give it through :attr:`env`)."""
        if self.is_switch:
            return [self.flag] if value else []
        x = value / self.flag_scale
        if self.flag_int:
            if value % self.flag_scale:
                return []
            return [self.flag, str(int(value) // self.flag_scale)]
        return [self.flag, _fmt_num(round(x, 3))]

    def from_env(self, text: str) -> Any:
        """An environment variable's value (internal units; a switch: ``0``/``1``) to a checked value.
        Raises KnobError naming the variable."""
        try:
            x = float(text)
        except (TypeError, ValueError, OverflowError):
            raise KnobError(f"{self.env}: not a number: {text!r}") from None
        return self.check(int(x) if self.is_switch and x in (0, 1) else x, self.env)

    def to_env(self, value: Any) -> str:
        """The environment variable's value for an internal value."""
        if self.is_switch:
            return "1" if value else "0"
        if self.type is int:
            return str(int(value))
        return _fmt_num(round(value, 3))


def _fmt_num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


KNOBS: tuple[Knob, ...] = (
    Knob("fusion_threshold_bytes", int, "bytes", "--fusion-threshold-mb", "HOROVOD_FUSION_THRESHOLD", "MiB", MIB, True,
         0, 512 * MIB, {"0.28": 128 * MIB, "0.20": 64 * MIB}, "flag-int", False,
         "tensor fusion threshold: the most bytes fused into one response; 0 disables fusion",
         "horovod/common/fusion_buffer_manager.cc, controller.cc FuseResponses"),
    Knob("cycle_time_ms", float, "ms", "--cycle-time-ms", "HOROVOD_CYCLE_TIME", "ms", 1, False,
         0.1, 100.0, {"0.28": 1.0, "0.20": 5.0}, "log", False,
         "background loop cycle time: the least time between two negotiations",
         "horovod/common/operations.cc RunLoopOnce"),
    Knob("cache_capacity", int, "entries", "--cache-capacity", "HOROVOD_CACHE_CAPACITY", "entries", 1, True,
         0, 1 << 20, {"0.28": 1024, "0.20": 1024}, "on-off", False,
         "response cache capacity; 0 disables the cache (every tensor is negotiated each step)",
         "horovod/common/response_cache.cc"),
    Knob("hierarchical_allreduce", bool, "on/off", "--hierarchical-allreduce", "HOROVOD_HIERARCHICAL_ALLREDUCE", "",
         1, True, 0, 1, {"0.28": False, "0.20": False}, "switch", True,
         "intra-node reduce-scatter + inter-node allreduce + intra-node allgather "
         "(NCCL + MPI only; ignored on gloo and mpi)",
         "horovod/common/ops/nccl_operations.cc NCCLHierarchicalAllreduce"),
    Knob("hierarchical_allgather", bool, "on/off", "--hierarchical-allgather", "HOROVOD_HIERARCHICAL_ALLGATHER", "",
         1, True, 0, 1, {"0.28": False, "0.20": False}, None, True,
         "hierarchical allgather (allgather operations only; not searched: gradients are allreduced)",
         "horovod/common/ops/mpi_operations.cc MPIHierarchicalAllgather"),
)
KNOB_BY_FIELD: dict[str, Knob] = {k.field: k for k in KNOBS}
KNOB_BY_PARAM: dict[str, Knob] = {k.param: k for k in KNOBS}

#: Collective backends (``env.toml``/model ``cluster.backend``, the ``--backend`` what-if) whose
#: Horovod 0.28.1 build has no hierarchical allreduce, each with the one-line reason (source
#: lines at tag v0.28.1). See :func:`hierarchical_allreduce_supported`.
NO_HIERARCHICAL_ALLREDUCE: dict[str, str] = {
    "gloo": "Horovod 0.28.1 has no hierarchical allreduce on Gloo: CreateOperationManager registers only GlooAllreduce "
            "for it (horovod/common/operations.cc:221-226), whose Enabled() never reads the flag "
            "(ops/gloo_operations.cc:223-227), and a build without NCCL GPU allreduce forces the flag off "
            "(operations.cc:574-577); the flag is ignored silently",
    "mpi": "Horovod 0.28.1 has no hierarchical allreduce on MPI: CPU tensors go to MPIAllreduce "
           "(horovod/common/operations.cc:252-253, ops/mpi_operations.cc:107-111), and a build with MPI GPU "
           "allreduce (HOROVOD_GPU_OPERATIONS=MPI) forces the flag off (operations.cc:574-577); the flag is ignored "
           "silently",
}


def hierarchical_allreduce_supported(backend: str | None) -> bool:
    """Whether the ``hierarchical_allreduce`` knob can change anything with collective backend
    ``backend`` (``nccl``, ``gloo``, ``mpi``; None or another name: assumed yes, as before).

    Horovod 0.28.1's only hierarchical allreduce is ``NCCLHierarchicalAllreduce``
    (``horovod/common/ops/nccl_operations.cc:579-587``: GPU tensors only, via
    ``GPUAllreduce::Enabled``, ``ops/gpu_operations.cc:151-155``), registered by
    ``CreateOperationManager`` only in a build with MPI, a GPU and NCCL allreduce, when MPI is
    enabled (``horovod/common/operations.cc:157-168``). The Gloo ops are registered without any
    hierarchical variant (``operations.cc:221-233``; ``GlooAllreduce::Enabled`` returns true,
    ``ops/gloo_operations.cc:223-227``), CPU tensors on MPI go to ``MPIAllreduce``
    (``operations.cc:248-253``), and a build whose GPU allreduce is neither NCCL nor DDL forces
    the flag off (``operations.cc:574-577``: "Hierarchical allreduce is not supported without
    NCCL or DDL"). So ``gloo`` and ``mpi`` are False (:data:`NO_HIERARCHICAL_ALLREDUCE`); with
    them Horovod ignores the flag silently (no warning, no error) and the simulator treats it as
    off.
    """
    return str(backend or "").lower() not in NO_HIERARCHICAL_ALLREDUCE


def hierarchical_allreduce_note(backend: str | None) -> str | None:
    """One line for output where ``hierarchical_allreduce`` is on but ``backend`` ignores it
    (:data:`NO_HIERARCHICAL_ALLREDUCE`), or None where it is supported."""
    b = str(backend or "").lower()
    return NO_HIERARCHICAL_ALLREDUCE.get(b)


def pin_unsupported_off(fixed: Mapping[str, Any], backend: str | None) -> dict[str, Any]:
    """``fixed`` (field name -> value, as a search's fixed knobs) with the knobs ``backend``
    ignores pinned off: ``hierarchical_allreduce`` False when
    :func:`hierarchical_allreduce_supported` is False, so a search neither varies it nor proposes
    it on; unchanged otherwise."""
    out = dict(fixed)
    if not hierarchical_allreduce_supported(backend):
        out["hierarchical_allreduce"] = False
    return out


class _ConfigMethods:
    """Methods of :class:`Config` (the fields come from :data:`KNOBS`)."""

    def __post_init__(self) -> None:
        for k in KNOBS:
            object.__setattr__(self, k.field, k.check(getattr(self, k.field)))

    def validate(self) -> "Config":
        """Kept for callers: a :class:`Config` is validated when it is built."""
        return self

    @property
    def fusion_threshold_mb(self) -> float:
        """Fusion threshold in MiB (what ``horovodrun`` calls MB)."""
        return self.fusion_threshold_bytes / MIB

    @property
    def cache_enabled(self) -> bool:
        return self.cache_capacity > 0

    def to_dict(self) -> dict[str, Any]:
        """Internal field names and values, plus ``fusion_threshold_mb``."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["fusion_threshold_mb"] = self.fusion_threshold_mb
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "") -> "Config":
        """Build from internal field names (``fusion_threshold_mb`` also accepted); missing knobs
        take Horovod 0.28's defaults. Raises KnobError (one line, prefixed with ``where``)."""
        if not isinstance(d, Mapping):
            raise KnobError(f"{where + ': ' if where else ''}a configuration must be an object, got {d!r}")
        kw = {k.field: k.check(d[k.field], where) for k in KNOBS if k.field in d}
        if "fusion_threshold_bytes" not in kw and "fusion_threshold_mb" in d:
            kw["fusion_threshold_bytes"] = KNOB_BY_FIELD["fusion_threshold_bytes"].from_flag(d["fusion_threshold_mb"])
        return cls(**kw)


#: A Horovod knob setting, in internal units (bytes, ms, entries); fields, defaults (Horovod
#: 0.28) and validation come from :data:`KNOBS`. Construction raises :class:`KnobError` for a
#: value that is not finite, out of its knob's range, or of the wrong kind.
Config = make_dataclass(
    "Config", [(k.field, k.type, field(default=k.default)) for k in KNOBS], bases=(_ConfigMethods,), frozen=True,
    namespace={"__doc__": "A Horovod knob setting in internal units (bytes, ms, entries); see autotuner.frameworks.horovod.knobs.KNOBS.",
               "__module__": __name__})


def _release(version: str) -> tuple[int, int] | None:
    """(major, minor) of a Horovod release number ("0.20.3" -> (0, 20)), or None for text that is not one
    (``MAJOR.MINOR[.PATCH]``, digits) or names no release (Horovod's releases are 0.x, the last 0.28)."""
    parts = str(version).strip().split(".")
    if not 2 <= len(parts) <= 3 or not all(p.isdigit() and p.isascii() and len(p) <= 4 for p in parts):
        return None
    major, minor = int(parts[0]), int(parts[1])
    last = tuple(int(x) for x in LAST_RELEASE.split(".")[:2])
    return (major, minor) if major == 0 and (major, minor) <= last else None


def check_horovod_version(version: Any, where: str = "--reference-version") -> str:
    """``version`` stripped, if it names a Horovod release (``0.20.3``, ``0.28``); KnobError (one line) otherwise."""
    if not isinstance(version, str) or _release(version) is None:
        raise KnobError(f"{where} {version!r}: not a Horovod release; give one such as {LAST_RELEASE} or 0.20.3 "
                        f"(0.x up to {LAST_RELEASE}, the last release)")
    return version.strip()


def defaults_key(version: str | None) -> str:
    """The key of :data:`VERSIONS` whose defaults ``version`` has: "0.20" before Horovod 0.21.0
    (:data:`DEFAULTS_CHANGED_IN`), else "0.28"; None or text that names no release -> "0.28"."""
    r = None if version is None else _release(version)
    return "0.20" if r is not None and r < DEFAULTS_CHANGED_IN else "0.28"


def defaults_for(version: str | None) -> Config:
    """Horovod's defaults for ``version``: "0.20.3" or "0.19.4" -> the 0.20 defaults (64 MiB, 5 ms; every
    release before 0.21.0), "0.23" -> 0.28's; None or an unknown version -> 0.28's (the last release)."""
    key = defaults_key(version)
    return Config(**{k.field: k.defaults[key] for k in KNOBS})


#: Horovod 0.28.x defaults (the last release).
DEFAULTS_0_28 = defaults_for("0.28")
#: Horovod 0.20.x defaults (64 MiB, 5 ms), used by lab reports 000 and 001.
DEFAULTS_0_20 = defaults_for("0.20")
#: the cache capacity meaning "cache on" in searches and grids (Horovod's default)
CACHE_ON = KNOB_BY_FIELD["cache_capacity"].default

#: Autotune's four initial (cycle time ms, fusion threshold MiB) points, read off the real
#: Horovod 0.28.1 autotune log in ``../shared/examples`` (rows 1-4 of each categorical block)
#: and ``horovod/common/parameter_manager.cc`` (ParameterManager constructor test points).
AUTOTUNE_START_POINTS: tuple[tuple[float, int], ...] = ((5.0, 4), (50.0, 32), (25.0, 16), (10.0, 8))


def autotune_start_configs(base: Config = DEFAULTS_0_28) -> list[Config]:
    """Autotune's four start points as :class:`Config` (other knobs from ``base``)."""
    return [replace(base, cycle_time_ms=c, fusion_threshold_bytes=m * MIB) for c, m in AUTOTUNE_START_POINTS]


def config_from_values(values: Mapping[str, Any], base: Config = DEFAULTS_0_28, where: str = "") -> Config:
    """``base`` with the knobs in ``values`` replaced; keys are option names in flag units
    (``fusion_threshold_mb``, as on the command line and in env.toml) or internal field names.
    None values are ignored. Raises KnobError (one line, prefixed with ``where``)."""
    kw = {}
    for key, v in values.items():
        if v is None:
            continue
        if key in KNOB_BY_PARAM:
            k = KNOB_BY_PARAM[key]
            try:
                kw[k.field] = k.from_flag(v)
            except KnobError as e:
                raise KnobError(f"{where}: {e}" if where else str(e)) from None
        elif key in KNOB_BY_FIELD:
            kw[key] = KNOB_BY_FIELD[key].check(v, where)
    return replace(base, **kw)


def fixed_fields(values: Mapping[str, Any] | None, where: str = "") -> dict[str, Any]:
    """Knobs a search keeps, normalised once: ``values`` keyed by option names in flag units
    (``fusion_threshold_mb``) or field names (``fusion_threshold_bytes``), None values ignored ->
    ``{field: value in internal units}``, each checked against its range. Raises KnobError for an
    unknown knob or a value out of range (one line)."""
    values = {k: v for k, v in (values or {}).items() if v is not None}
    unknown = [k for k in values if k not in KNOB_BY_PARAM and k not in KNOB_BY_FIELD]
    if unknown:
        raise KnobError(f"{where + ': ' if where else ''}unknown knob {unknown[0]!r}; use one of "
                        f"{', '.join(k.param for k in KNOBS)}")
    cfg = config_from_values(values, where=where)
    fields = [KNOB_BY_PARAM[k].field if k in KNOB_BY_PARAM else k for k in values]
    return {f: getattr(cfg, f) for f in fields}


def horovodrun_flags(cfg: Config) -> list[str]:
    """``horovodrun`` flags for ``cfg`` (a threshold that is not a whole MiB has no flag: it is
    left out here and must be given through :func:`horovod_env`)."""
    return [s for k in KNOBS for s in k.to_flag(getattr(cfg, k.field))]


def horovod_env(cfg: Config) -> dict[str, str]:
    """The equivalent ``HOROVOD_*`` environment variables (threshold in bytes, cycle in ms)."""
    return {k.env: k.to_env(getattr(cfg, k.field)) for k in KNOBS}


def config_from_flags(argv: Iterable[str], base: Config = DEFAULTS_0_28) -> Config:
    """Parse the knob flags in a ``horovodrun`` argument list (other arguments are ignored).
    Raises KnobError for a flag without a value or with a bad one."""
    args = list(argv)
    by_flag = {k.flag: k for k in KNOBS}
    kw: dict[str, Any] = {}
    i = 0
    while i < len(args):
        k = by_flag.get(args[i])
        if k is not None and k.is_switch:
            kw[k.field] = True
        elif k is not None:
            if i + 1 >= len(args):
                raise KnobError(f"{k.flag}: missing value")
            kw[k.field] = k.from_flag(args[i + 1])
            i += 1
        i += 1
    return replace(base, **kw)


def config_from_env(env: Mapping[str, str], base: Config = DEFAULTS_0_28) -> Config:
    """The knobs set in an environment (``HOROVOD_*`` variables; others ignored). Raises KnobError."""
    return replace(base, **{k.field: k.from_env(env[k.env]) for k in KNOBS if k.env in env})


def markdown_table() -> str:
    """The knob table as Markdown (docs/reference/knobs.md is this text; ``python scripts/gen_knob_table.py``)."""
    def show(k: Knob, v: Any) -> str:
        if k.is_switch:
            return "off" if not v else "on"
        return f"{v / k.flag_scale:g} {k.flag_unit}"

    rows = ["| knob | horovodrun flag | environment variable | env unit | range | default 0.28 | default 0.20 "
            "| searched | what it does | Horovod source |", "|---|---|---|---|---|---|---|---|---|---|"]
    space = {"flag-int": "every whole MiB", "log": "log-uniform", "on-off": "off / default", "switch": "off / on",
             None: "no"}
    for k in KNOBS:
        rng = "off / on" if k.is_switch else f"{k.low / k.flag_scale:.10g}-{k.high / k.flag_scale:.10g} {k.flag_unit}"
        searched = space[k.space] + (" (more than one node)" if k.multi_node_only and k.space else "")
        rows.append(f"| `{k.field}` | `{k.flag}` | `{k.env}` | {k.unit} | {rng} | {show(k, k.defaults['0.28'])} | "
                    f"{show(k, k.defaults['0.20'])} | {searched} | {k.doc} | `{k.source}` |")
    return ("# Horovod knobs\n\nGenerated from `autotuner/frameworks/horovod/knobs.py` by `python scripts/gen_knob_table.py`;"
            " `tests/test_knobs.py` fails when this file is stale.\n\n" + "\n".join(rows) + "\n\n"
            + HIERARCHICAL_PER_BACKEND_MD)


#: The "Hierarchical flags per backend" section of docs/reference/knobs.md (source lines at Horovod tag v0.28.1).
HIERARCHICAL_PER_BACKEND_MD = """\
## Hierarchical flags per backend

Checked in Horovod's source at tag v0.28.1 (paths under `horovod/common/`). The backend is the
env's `backend` (`runs/<env>/env.toml`, `cluster.backend` in the model file) or the `--backend`
what-if; `autotuner.frameworks.horovod.knobs.hierarchical_allreduce_supported` is the rule.

| backend | hierarchical allreduce | hierarchical allgather |
|---|---|---|
| `nccl` (NCCL GPU allreduce, MPI controller) | yes: `NCCLHierarchicalAllreduce`, GPU tensors, more than one node | `MPIHierarchicalAllgather` (MPI + GPU builds) |
| `gloo` | **no**: the flag is ignored | no: `GlooAllgather` only |
| `mpi` (CPU ops, or `HOROVOD_GPU_OPERATIONS=MPI`) | **no**: the flag is ignored | not modelled (allgather only; gradients are allreduced) |

- Ops per backend: `operations.cc:146` `CreateOperationManager` tries ops in order, the first
  whose `Enabled()` is true runs (`ops/operation_manager.cc:44-51`). `NCCLHierarchicalAllreduce`
  is registered only under `#if HAVE_MPI && HAVE_GPU`, `if (global_mpi_context.IsEnabled())`,
  `HAVE_NCCL && HOROVOD_GPU_ALLREDUCE == 'N'` (`operations.cc:157-168`), and
  `MPIHierarchicalAllgather` in the same MPI + GPU block (`operations.cc:179-180`). Gloo gets
  `GlooAllreduce`, `GlooAllgather`, ... with no hierarchical variant (`operations.cc:221-233`);
  MPI gets `AdasumMPIAllreduceOp` (Adasum only) and `MPIAllreduce` (`operations.cc:248-262`).
- Enabled(): `GlooAllreduce::Enabled` and `GlooAllgather::Enabled` return true without reading the
  parameter manager (`ops/gloo_operations.cc:223-227`, `:232-236`); so does `MPIAllreduce::Enabled`
  (`ops/mpi_operations.cc:107-111`). Only `NCCLHierarchicalAllreduce::Enabled`
  (`ops/nccl_operations.cc:579-587`: `NCCLAllreduce::Enabled`, i.e. a GPU tensor,
  `ops/gpu_operations.cc:151-155`, and `param_manager.HierarchicalAllreduce()`) and
  `MPIHierarchicalAllgather::Enabled` (`ops/mpi_operations.cc:384-388`) read the flags.
- The two environment variables (table above) are read in
  `operations.cc:553-572` (on only when `size != local_size`, then fixed for autotune). A build
  whose GPU allreduce is neither NCCL nor DDL (CPU-only, Gloo, `HOROVOD_GPU_OPERATIONS=MPI`)
  then forces hierarchical allreduce off and fixed (`operations.cc:574-577`, "Hierarchical
  allreduce is not supported without NCCL or DDL"; torus likewise, `:602-605`).
- On a Gloo build the flag is therefore **ignored silently**: no warning, no error. The only
  message about it is the heterogeneous-cluster warning (`operations.cc:579-590`), which needs the
  flag still on. A NCCL build run with Gloo (`horovodrun --gloo`) keeps the flag on, but no op
  reads it: `NCCLHierarchicalAllreduce` is not registered without MPI, and GPU tensors take the
  flat `NCCLAllreduce` (`operations.cc:194-199`).
- Horovod's own autotune: `hierarchical_allreduce` is a categorical {false, true} parameter in the
  chain (`parameter_manager.cc:44`, `:61-62`), but a fixed value is not tuned
  (`parameter_manager.cc:99-100`, `:324-330`, `:350-355`). On a non-NCCL build it is fixed off,
  so autotune never tries it: the real 0.28.1 Gloo autotune log
  (`runs/local-gloo-1gbit/fixtures/autotune-log-hvd0.28.1-gloo-2ranks.csv`) has
  hierarchical_allreduce 0 in all 24 samples and the best-values row, while
  hierarchical_allgather (not forced off) is toggled (on in 12 samples), with no effect on Gloo. On a NCCL build run with Gloo it would toggle
  hierarchical allreduce too, to no effect.
- Recorded for real (`runs/local-gloo-2x2`, 2 emulated hosts x 2 ranks, so size != local size):
  both hierarchical flags on, this Gloo build starts and finishes with no message; every allreduce in the timeline is `GLOO_ALLREDUCE` and the step time is the defaults'
  within their repeat spread (research/notes/validation.md "Two emulated hosts").

What the tool does: where the backend has no hierarchical allreduce, the simulator treats
`hierarchical_allreduce` on exactly as off; `suggest` (bayes and grid), `explore` and `scale`
neither search nor propose it, and their horovodrun flags never carry it; `simulate` with
the knob on still runs and prints a `note:` line on stderr saying Horovod 0.28.1 ignores it
there.
"""

