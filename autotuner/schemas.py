"""Schemas of every file the tool reads or writes, checked at the edge.

Files and their schemas (each a pydantic model; :func:`check` runs one):

- ``runs/<env>/env.toml`` -> :class:`EnvToml`, per ``format`` (:class:`Format`):
  :class:`ResponsesEnv`, :class:`BreakdownEnv`, :class:`ValidationEnv` (:data:`ENV_SCHEMAS`);
- a gradient layout JSON (``autotuner.layout/1``) -> :class:`LayoutFile`;
- a fitted model JSON (``autotuner.model/1``, what ``fit`` writes) -> :class:`ModelFile`;
- a validation record (one JSON object per line of ``validation/*.jsonl``) -> :class:`Record`;
- a proposals file -> :data:`ProposalList` (a list) or :class:`SuggestOutput`; each entry
  :class:`Knobs`, or :class:`ProposalEntry` (a ``suggest --json`` entry holding ``config``).

Why pydantic v2: one declaration both validates and coerces (type, finite, range, required),
its errors carry the location of each failing field, which :func:`check` turns into the
one-line message of the error contract (:mod:`autotuner.errors`), it is well kept, and it is
already a dependency of the stack (typer requires it in this environment).

Every number is finite; counts are whole numbers >= 1; shapes are whole numbers >= 1 whose byte
count fits :data:`autotuner.model.layout.MAX_LAYOUT_BYTES`; shares and durations are >= 0; link
rates are > 0. Bounds that are not physics are sanity limits, the same as the command line's
(:mod:`autotuner.options`): at most 100,000 nodes and 1,024 GPUs per node, link rates up to
10 Tbit/s. Knob values are checked by the knob table (:data:`autotuner.knobs.KNOBS`).

Names that become file names (an environment's ``name``) must be plain names
(:data:`PlainName`); files named inside a data file (``source``, a layout) must be relative
paths inside the data file's folder (:data:`RelPath`, :data:`LayoutRef`), never
``module:factory``: only the command line's ``--model pkg.mod:factory`` imports code.

The readers validate, then hand the original (now checked) dicts on, so that what is computed
from a valid file does not change.
"""
from __future__ import annotations

import math
import re
from enum import StrEnum
from typing import Annotated, Any, Literal, Mapping

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    create_model,
    field_validator,
    model_validator,
)
from pydantic import ValidationError as PydanticValidationError
from pydantic.dataclasses import dataclass as pydantic_dataclass
from pydantic_core import PydanticCustomError

from .errors import AutotunerError, SchemaError
from .knobs import KNOB_BY_FIELD, KNOB_BY_PARAM
from .model.layout import DTYPE_BYTES, MAX_LAYOUT_BYTES

LAYOUT_SCHEMA = "autotuner.layout/1"
MODEL_SCHEMA = "autotuner.model/1"


class Format(StrEnum):
    """``format`` of an env.toml: what kind of measurements ``source`` holds."""

    RESPONSES = "responses"    # per-run response-size tables (lab report 000)
    BREAKDOWN = "breakdown"    # per-model tables, one column per cluster shape (lab report 001)
    VALIDATION = "validation"  # ``autotuner validate`` records (JSON Lines)
    SWEEP = "sweep"            # ``autotuner measure`` records (JSON Lines) and its kept timelines
    NCCL_TESTS = "nccl-tests"  # nccl-tests ``all_reduce_perf`` output, one file per tier
    TIMELINES = "timelines"    # any number of HOROVOD_TIMELINE files of a user's training job
    BACKEND_RUNS = "backend-runs"          # wall times per backend and process count (lab report 002)
    CPU_SCALING = "cpu-scaling"            # step times of CPU ranks on one host (lab report 003)
    COMPRESSION_RUNS = "compression-runs"  # wall times with and without gradient compression (lab report 004)


# --- the one-line error -------------------------------------------------------------------

_ADAPTERS: dict[Any, TypeAdapter] = {}


def field_path(loc: tuple) -> str:
    """``('run', 0, 'model')`` -> ``run[0].model``; ``()`` -> ``(top level)``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _short(value: Any, limit: int = 60) -> str:
    s = repr(value)
    return s if len(s) <= limit else s[:limit - 3] + "..."


def one_line(e: PydanticValidationError, where: str) -> str:
    """``<where>: <field path>: <value>: <reason>`` for the first error of ``e``, plus
    ``(and N more)``. A missing field's value reads ``(missing)``; a single value checked on its
    own (no field path) gives ``<where>: <value>: <reason>``."""
    errs = e.errors(include_url=False)
    first = errs[0]
    loc, value = tuple(first["loc"]), first.get("input")
    ctx = first.get("ctx") or {}
    if "at" in ctx:  # a list-level check that names the element (see _fail)
        loc, value = loc + tuple(ctx["at"]), ctx.get("value")
    shown = "(missing)" if first["type"] == "missing" else _short(value)
    msg = str(first["msg"])
    msg = re.sub(r"^(Value error|Assertion failed), ", "", msg)
    msg = re.sub(r" or instance of \w+$", "", msg)
    msg = msg[:1].lower() + msg[1:]
    more = f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""
    if not loc and not isinstance(value, (Mapping, list, tuple)):  # a single value: ``where`` names it
        return f"{where}: {shown}: {msg}{more}"
    return f"{where}: {field_path(loc)}: {shown}: {msg}{more}"


def check(schema: Any, data: Any, where: str, error: type[AutotunerError] = SchemaError) -> Any:
    """``data`` validated as ``schema`` (a model class or any annotated type).

    Raises ``error`` (a :class:`SchemaError` unless given) with one line:
    ``<where>: <field path>: <value>: <reason>`` (the first error, plus ``(and N more)``).
    """
    ad = _ADAPTERS.get(schema)
    if ad is None:
        ad = _ADAPTERS.setdefault(schema, TypeAdapter(schema))
    try:
        return ad.validate_python(data)
    except PydanticValidationError as e:
        raise error(one_line(e, where)) from None


def _fail(kind: str, message: str, at: tuple = (), value: Any = None) -> PydanticCustomError:
    """An error a validator raises; ``at`` extends the field path to the element it names."""
    return PydanticCustomError(kind, message, {"at": at, "value": value})


def find_nonfinite(obj: Any, loc: tuple = ()) -> tuple[tuple, float] | None:
    """(location, value) of the first float in ``obj`` (nested dicts and lists) that is NaN or
    infinite, or None. :func:`field_path` renders the location."""
    if isinstance(obj, float):
        return None if math.isfinite(obj) else (loc, obj)
    if isinstance(obj, Mapping):
        items = ((loc + (k,), v) for k, v in obj.items())
    elif isinstance(obj, (list, tuple)):
        items = ((loc + (i,), v) for i, v in enumerate(obj))
    else:
        return None
    for p, v in items:
        bad = find_nonfinite(v, p)
        if bad:
            return bad
    return None


# --- field types ----------------------------------------------------------------------------

Finite = Annotated[float, Field(allow_inf_nan=False)]
#: a finite number >= 0 (durations, shares, byte counts)
NonNeg = Annotated[float, Field(ge=0, allow_inf_nan=False)]
#: a finite number > 0 (rates, scales)
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
#: whole nodes, ranks, steps (>= 1)
Count = Annotated[int, Field(ge=1, le=100_000)]
GpusPerNode = Annotated[int, Field(ge=1, le=1024)]
Index = Annotated[int, Field(ge=0)]
#: a link rate in Gbit/s (10**9 bit/s): 10 Mbit/s to 10 Tbit/s (below, a 100 MB model's allreduce takes
#: minutes and a traced step millions of cycles; nothing measured here is that slow)
LinkGbit = Annotated[float, Field(ge=0.01, le=10_000, allow_inf_nan=False)]
#: a duration in ms, up to one hour
Millis = Annotated[float, Field(ge=0, le=3_600_000, allow_inf_nan=False)]
Text = Annotated[str, Field(min_length=1)]

_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,99}")


def is_plain_name(s: Any) -> bool:
    """True for a name that is safe as a file name: letters, digits, ``.``, ``_``, ``-``, not
    starting with ``.`` (so no path separator, no ``..``, not absolute), 1-100 characters."""
    return isinstance(s, str) and _PLAIN.fullmatch(s) is not None


def _plain_name(s: str) -> str:
    if not is_plain_name(s):
        raise ValueError("must be a plain name (letters, digits, '.', '_', '-'; not starting with '.'; "
                         "no path separators)")
    return s


def _rel_path(s: str) -> str:
    parts = s.split("/")
    if not s or s.startswith("/") or "\\" in s or "\0" in s or ":" in s or any(p in ("", ".", "..") for p in parts):
        raise ValueError("must be a relative path inside the environment's folder (no '..', ':' or leading '/')")
    return s


def _layout_ref(s: str) -> str:
    if ":" in s:
        raise ValueError("a data file names a shipped layout or a .json file in its own folder, "
                         "not module:factory (only the command line's --model imports code)")
    _rel_path(s)
    if not (s.endswith(".json") or is_plain_name(s)):
        raise ValueError("must be a shipped layout name or a relative .json path")
    return s


#: a name that becomes a file name (see :func:`is_plain_name`)
PlainName = Annotated[str, AfterValidator(_plain_name)]
#: a relative path inside the data file's folder
RelPath = Annotated[str, AfterValidator(_rel_path)]
#: a layout named in a data file: a shipped name, or a ``.json`` path inside the file's folder
LayoutRef = Annotated[str, AfterValidator(_layout_ref)]


class _Schema(BaseModel):
    """Strict (no str -> number, no float -> int, no 0/1 -> bool) and closed (unknown keys fail)."""

    model_config = ConfigDict(strict=True, extra="forbid")


# --- knobs (values checked by the knob table) ------------------------------------------------

def _knob_type(key: str) -> Any:
    k = KNOB_BY_PARAM.get(key) or KNOB_BY_FIELD[key]
    conv = k.from_flag if key in KNOB_BY_PARAM else k.check

    def checked(v: Any) -> Any:
        conv(v)  # KnobError is a ValueError: pydantic reports it at this field
        return v
    return Annotated[bool if k.is_switch else Finite, AfterValidator(checked)]


#: knob keys accepted in data files: option names in flag units (``fusion_threshold_mb``) and
#: internal field names (``fusion_threshold_bytes``), as :func:`autotuner.knobs.config_from_values`
KNOB_KEYS = tuple(sorted(set(KNOB_BY_PARAM) | set(KNOB_BY_FIELD)))
#: a knob object (unknown keys fail); values checked by their knob
Knobs = create_model("Knobs", __base__=_Schema, __doc__="Knob values by option or field name.",
                     **{key: (_knob_type(key), None) for key in KNOB_KEYS})


# --- env.toml -------------------------------------------------------------------------------

class RunEntry(Knobs):
    """``[[run]]`` of a ``responses`` env: one measured run (its knobs override the env's)."""

    id: Text
    model: Text
    layout: LayoutRef | None = None
    reference: bool = False


class ColumnEntry(_Schema):
    """``[[column]]`` of a ``breakdown`` env: one cluster shape, left to right."""

    key: Text
    nodes: Count
    gpus_per_node: GpusPerNode
    link_gbps: LinkGbit | None = None


class ModelEntry(_Schema):
    """``[[model]]`` of a ``breakdown`` env: a model of the report and its layout."""

    model: Text
    layout: LayoutRef


def _unique(items: list, key: str, what: str) -> None:
    seen: set = set()
    for i, it in enumerate(items):
        v = getattr(it, key)
        if v in seen:
            raise _fail("duplicate", f"duplicate {what}", (i, key), v)
        seen.add(v)


class EnvToml(Knobs):
    """``env.toml``: what an environment's measurements are and how they were taken."""

    name: PlainName | None = None
    source: RelPath
    format: Annotated[Format, Field(strict=False)]
    default: bool = False
    gpu: str | None = None
    backend: str | None = None
    horovod_version: Annotated[str, Field(pattern=r"^\d+(\.\d+)*$")] | None = None
    nodes: Count | None = None
    gpus_per_node: GpusPerNode | None = None
    link_gbps: LinkGbit | None = None
    #: CPU cores each host's ranks share (``measure`` records the cores it ran on; issue 20)
    cores_per_host: Count | None = None
    overlap: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] | None = None
    #: latency of the inter-node tier (µs) for ``breakdown`` envs; up to 1 s
    alpha_us: Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)] | None = None
    steps: Annotated[int, Field(ge=1)] | None = None
    batch_size: Count | None = None
    host_backward_ms: dict[Text, Millis] | None = None
    run: list[RunEntry] = []
    column: list[ColumnEntry] = []
    model: list[ModelEntry] = []

    @field_validator("run")
    @classmethod
    def _runs_unique(cls, v: list[RunEntry]) -> list[RunEntry]:
        _unique(v, "id", "run id")
        return v

    @field_validator("column")
    @classmethod
    def _columns_unique(cls, v: list[ColumnEntry]) -> list[ColumnEntry]:
        _unique(v, "key", "column key")
        return v

    @field_validator("model")
    @classmethod
    def _models_unique(cls, v: list[ModelEntry]) -> list[ModelEntry]:
        _unique(v, "model", "model")
        return v


class ResponsesEnv(EnvToml):
    """A ``responses`` env: the cluster and every run of the report; a reference run names its layout."""

    nodes: Count
    gpus_per_node: GpusPerNode
    link_gbps: LinkGbit
    run: Annotated[list[RunEntry], Field(min_length=1)]

    @field_validator("run")
    @classmethod
    def _reference_layouts(cls, v: list[RunEntry]) -> list[RunEntry]:
        for i, r in enumerate(v):
            if r.reference and r.layout is None:
                raise _fail("missing", "a reference run needs a layout", (i, "layout"), None)
        return v


class BreakdownEnv(EnvToml):
    """A ``breakdown`` env: the report's columns and models; a multi-node column needs a link rate
    (its own ``link_gbps`` or the env's)."""

    column: Annotated[list[ColumnEntry], Field(min_length=1)]
    model: Annotated[list[ModelEntry], Field(min_length=1)]

    @model_validator(mode="after")
    def _link_rates(self) -> BreakdownEnv:
        for i, c in enumerate(self.column):
            if c.nodes > 1 and c.link_gbps is None and self.link_gbps is None:
                raise _fail("missing", "a multi-node column needs link_gbps (or link_gbps in the env)",
                            ("column", i, "link_gbps"), None)
        return self


class ValidationEnv(EnvToml):
    """A ``validation`` env: the testbed's cluster and link rate."""

    nodes: Count
    gpus_per_node: GpusPerNode
    link_gbps: LinkGbit


class SweepEnv(EnvToml):
    """A ``sweep`` env (``autotuner measure``): ``source`` is the sweep's record file; the
    cluster as measured (``nodes`` x ``gpus_per_node`` ranks) and the link rate."""

    nodes: Count
    gpus_per_node: GpusPerNode
    link_gbps: LinkGbit


class NcclTestsEnv(EnvToml):
    """A ``nccl-tests`` env: ``source`` is ``all_reduce_perf``'s output across nodes (or on
    one node when ``nodes`` is 1); ``intra_source`` the output on one node, if measured
    (docs/nccl-tests.md). The cluster needs >= 2 ranks (an allreduce on one rank moves nothing);
    ``intra_source`` only with ``nodes`` > 1 and ``gpus_per_node`` > 1."""

    nodes: Count
    gpus_per_node: GpusPerNode
    link_gbps: LinkGbit
    intra_source: RelPath | None = None

    @model_validator(mode="after")
    def _tiers(self) -> NcclTestsEnv:
        if self.nodes * self.gpus_per_node < 2:
            raise _fail("too_small", "an all_reduce_perf fit needs nodes x gpus_per_node >= 2 ranks",
                        ("gpus_per_node",), self.gpus_per_node)
        if self.intra_source is not None and (self.nodes == 1 or self.gpus_per_node == 1):
            raise _fail("unexpected", "intra_source is the one-node run of a multi-node cluster with >= 2 GPUs per "
                        "node (with nodes = 1, source is the one-node run)", ("intra_source",), self.intra_source)
        return self


class TimelinesEnv(EnvToml):
    """A ``timelines`` env: ``source`` is a glob (relative to the env folder) of
    HOROVOD_TIMELINE files, e.g. ``"timelines/*.json*"``; the cluster they were recorded on."""

    nodes: Count
    gpus_per_node: GpusPerNode
    link_gbps: LinkGbit
    #: the training job's layout (shipped name or .json in the folder), optional
    layout: LayoutRef | None = None


class BackendRunsEnv(EnvToml):
    """A ``backend-runs`` env (lab report 002, :func:`autotuner.fit.backend_runs.fit_backend_runs_env`):
    ``source`` is the report; one server of ``gpus_per_node`` devices; the workload's layout
    and the timed run's shape (images per epoch, batch per rank, epochs); ``fit_backend`` and
    ``fit_processes``: the runs the compute and start-up are calibrated on (the rest are held
    out); ``prior_alpha_us`` / ``prior_bandwidth_gbps``: the fit backend's intra-node tier,
    assumed (a range in the docs), since its own runs cannot separate it from the compute."""

    nodes: Count
    gpus_per_node: GpusPerNode
    link_gbps: LinkGbit
    device: Literal["GPU", "CPU"] = "GPU"
    workload_model: PlainName
    layout: LayoutRef
    train_images: Count
    batch_size: Count
    epochs: Count
    fit_backend: PlainName
    fit_processes: Annotated[list[Count], Field(min_length=2)]
    prior_alpha_us: Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)]
    prior_bandwidth_gbps: LinkGbit


class CpuScalingEnv(EnvToml):
    """A ``cpu-scaling`` env (lab report 003, :func:`autotuner.fit.cpu_scaling.fit_cpu_scaling_env`):
    ``source`` is the report; one host (``nodes`` = 1) whose ``gpus_per_node`` is the default
    rank count to simulate; ``[[model]]``: the report's tables' models in table order, with their
    layouts; ``step_unit``: the unit of the unprinted step-time column; ``fit_model``: the model
    whose curve fits the contention (the others are held out); ``logical_cpus`` / ``cores``:
    the host's CPUs (:class:`autotuner.model.contention.Contention`); ``prior_alpha_us`` /
    ``prior_bandwidth_gbps``: the shared-memory MPI tier, assumed (nothing in the report
    measures it; a range in docs/laptop-cpu.md)."""

    nodes: Annotated[int, Field(ge=1, le=1)]
    gpus_per_node: GpusPerNode
    link_gbps: LinkGbit
    model: Annotated[list[ModelEntry], Field(min_length=1)]
    step_unit: Literal["s", "ms"]
    fit_model: PlainName
    logical_cpus: Count
    cores: Annotated[float, Field(gt=0, le=100_000, allow_inf_nan=False)]
    prior_alpha_us: Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)]
    prior_bandwidth_gbps: LinkGbit

    @model_validator(mode="after")
    def _consistent(self) -> CpuScalingEnv:
        if self.fit_model not in [m.model for m in self.model]:
            raise _fail("unknown", "fit_model must be one of the [[model]] entries", ("fit_model",), self.fit_model)
        if self.cores > self.logical_cpus:
            raise _fail("too_large", "cores cannot exceed logical_cpus", ("cores",), self.cores)
        return self


class CompressionRunsEnv(EnvToml):
    """A ``compression-runs`` env (lab report 004, :func:`autotuner.fit.compression_runs.fit_compression_runs_env`):
    ``source`` is the report; one server of ``gpus_per_node`` devices; the workload's layout and
    the timed run's shape (images per epoch, batch per rank, epochs); ``borrow_from``: the
    sibling environment measured on the same instance and workload (a folder beside this one)
    whose start-up and cost model are borrowed, because this report's serial run fixes only one
    of compute and start-up; ``backend``: the sibling backend whose intra-node tier is used."""

    nodes: Count
    gpus_per_node: GpusPerNode
    link_gbps: LinkGbit
    backend: PlainName
    workload_model: PlainName
    layout: LayoutRef
    train_images: Count
    batch_size: Count
    epochs: Count
    borrow_from: PlainName


class SweepRecord(BaseModel):
    """One line of an ``autotuner measure`` record file (:mod:`autotuner.realrun.measure`): one
    measured item of the sweep. Unknown keys are kept (later versions may add some)."""

    model_config = ConfigDict(strict=True, extra="allow")
    phase: Literal["allreduce", "fusion", "unfused", "negotiation"]
    tier: Literal["intra", "inter", "single"]
    #: the job: Horovod's defaults (``main``), response cache off, fusion threshold 0
    job: Literal["main", "cache-off", "fusion-off"]
    cache: bool
    bytes: Annotated[int, Field(ge=1)]
    tensors: Annotated[int, Field(ge=1)]
    ranks: Annotated[int, Field(ge=1)]
    times_ms: Annotated[list[Annotated[float, Field(ge=0, allow_inf_nan=False)]], Field(min_length=1)]
    mean_ms: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    median_ms: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    iqr_ms: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    n: Annotated[int, Field(ge=1)]
    part: PlainName


class CpuProbeRecord(BaseModel):
    """One line of ``cpu.jsonl``, the ``cpu`` phase of ``autotuner measure``
    (:mod:`autotuner.realrun.cpuprobe`): one job timing compute units beside idle cycles at
    ``cycle_time_ms``, ``repeat`` of the interleaved series. Unknown keys are kept."""

    model_config = ConfigDict(strict=True, extra="allow")
    phase: Literal["cpu"]
    tier: Literal["intra", "inter", "single"]
    cycle_time_ms: Annotated[float, Field(gt=0, allow_inf_nan=False)]
    #: ``idle`` (absent in the first records), or a stream of :data:`autotuner.realrun.cpuprobe.STREAMS`
    stream: PlainName = "idle"
    stream_bytes: Annotated[int, Field(ge=4)] | None = None
    stream_tensors: Annotated[int, Field(ge=1)] | None = None
    stream_batches: Annotated[int, Field(ge=1)] | None = None
    wall_s: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    #: a stream's timeline, relative to the env folder
    timeline: str | None = None
    #: a stream's: whether the main thread computed meanwhile; median batch time and its share per response (ms)
    compute: bool | None = None
    batch_ms: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    response_ms: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    repeat: Annotated[int, Field(ge=0)]
    #: mean over ranks of each rank's wall time per unit (ms); the slowest rank's
    unit_ms: Annotated[float, Field(gt=0, allow_inf_nan=False)]
    unit_ms_max: Annotated[float, Field(gt=0, allow_inf_nan=False)]
    #: the compute thread's CPU time over its wall time, mean over ranks
    cpu_share: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    units: Annotated[int, Field(ge=2)]
    ranks: Annotated[int, Field(ge=1)]


class TrickleRecord(BaseModel):
    """One line of ``trickle.jsonl``, the ``trickle`` phase of ``autotuner measure``
    (:mod:`autotuner.realrun.trickleprobe`): one job at ``cycle_time_ms``, fusion off, whose
    timeline holds the responses. Unknown keys are kept."""

    model_config = ConfigDict(strict=True, extra="allow")
    phase: Literal["trickle"]
    tier: Literal["intra", "inter", "single"]
    cycle_time_ms: Annotated[float, Field(gt=0, allow_inf_nan=False)]
    repeat: Annotated[int, Field(ge=0)]
    gap_ms: Annotated[float, Field(gt=0, allow_inf_nan=False)]
    sizes: Annotated[list[Annotated[int, Field(ge=4)]], Field(min_length=1)]
    tensors: Annotated[int, Field(ge=2)]
    ranks: Annotated[int, Field(ge=1)]
    timeline: str | None = None


class _EnvHead(BaseModel):
    model_config = ConfigDict(extra="allow")
    format: Format


#: the schema of an env.toml by its ``format``
ENV_SCHEMAS: dict[Format, type[EnvToml]] = {Format.RESPONSES: ResponsesEnv, Format.BREAKDOWN: BreakdownEnv,
                                            Format.VALIDATION: ValidationEnv, Format.SWEEP: SweepEnv,
                                            Format.NCCL_TESTS: NcclTestsEnv, Format.TIMELINES: TimelinesEnv,
                                            Format.BACKEND_RUNS: BackendRunsEnv, Format.CPU_SCALING: CpuScalingEnv,
                                            Format.COMPRESSION_RUNS: CompressionRunsEnv}


def check_env_toml(data: Any, where: str) -> EnvToml:
    """Validate a parsed env.toml: its ``format`` first, then that format's schema. Raises SchemaError."""
    head = check(_EnvHead, data, where)
    return check(ENV_SCHEMAS[head.format], data, where)


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


# --- fitted model JSON ----------------------------------------------------------------------

class TierEntry(_Schema):
    alpha_us: NonNeg
    bandwidth_gbps: Positive
    large_from_bytes: Positive | None = None
    large_alpha_us: NonNeg | None = None
    large_bandwidth_gbps: Positive | None = None

    @model_validator(mode="after")
    def _large_whole(self) -> TierEntry:
        if self.large_from_bytes is not None:
            for k in ("large_alpha_us", "large_bandwidth_gbps"):
                if getattr(self, k) is None:
                    raise _fail("missing", "needed with large_from_bytes", (k,), None)
        return self


class NegotiationEntry(_Schema):
    ctrl_op_us: NonNeg = 100.0
    cache_ops: Index = 1
    nocache_ops: Index = 4
    per_tensor_us: NonNeg = 5.0
    busy_us: NonNeg | None = None
    nocache_us: NonNeg | None = None
    #: compute time a rank with no spare core loses per background-loop cycle (µs; measure's cpu phase)
    cpu_us: NonNeg | None = None


class HostPassesEntry(_Schema):
    knee_mib: NonNeg
    memcpy_ms_per_mib: NonNeg
    memcpy_spill_ms_per_mib: NonNeg = 0.0
    gap_fixed_ms: NonNeg = 0.0
    gap_ms_per_mib: NonNeg = 0.0
    gap_spill_ms_per_mib: NonNeg = 0.0


class BackendEntry(_Schema):
    intra: TierEntry
    ctrl_op_us: NonNeg


class ComputeDelayEntry(_Schema):
    per_response_us: NonNeg
    per_byte_ns: NonNeg = 0.0


class CostModelEntry(_Schema):
    inter: TierEntry
    intra: TierEntry | None = None
    link_gbps: LinkGbit
    memcpy_gbytes_per_s: Positive = 400.0
    host_copy_gbytes_per_s: Positive = 10.0
    negotiation: NegotiationEntry = NegotiationEntry()
    host_passes: HostPassesEntry | None = None
    #: per collective backend (mpi, gloo, nccl): its intra-node tier and controller cost
    backends: dict[PlainName, BackendEntry] | None = None
    #: how much longer a collective runs beside compute that fills the cores (measure's cpu phase)
    compute_delay: ComputeDelayEntry | None = None


class ClusterEntry(_Schema):
    nodes: Count
    gpus_per_node: GpusPerNode
    cores_per_host: Count | None = None
    gpu: str | None = None
    backend: str | None = None
    horovod_version: str | None = None


class TimedRunEntry(_Schema):
    """A timed run: ``epochs`` over ``train_images`` in batches of ``batch_size`` per rank after
    ``startup_s`` of fixed cost (:class:`autotuner.model.wallclock.RunShape`)."""

    train_images: Count
    batch_size: Count
    epochs: Count
    startup_s: Annotated[float, Field(ge=0, allow_inf_nan=False)]


class ContentionEntry(_Schema):
    """Compute contention of ranks sharing a host (:class:`autotuner.model.contention.Contention`)."""

    model_config = ConfigDict(strict=True, extra="allow")
    form: PlainName
    logical_cpus: Count


class WorkloadEntry(_Schema):
    layout: LayoutRef
    forward_ms: Millis
    backward_ms: Millis
    update_ms: Millis = 0.0
    comm_scale: Positive = 1.0
    overlap: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = 1.0
    host_backward_ms: Millis | None = None
    async_collectives: bool = False
    calibrated_on: str | None = None
    #: ``per-rank``: forward/backward are one rank's step whatever the ranks (data parallel, a
    #: batch per rank); ``global``: they are the whole step's work on one rank alone, split
    #: evenly over the ranks (a fixed global amount of work per step: lab report 003)
    work_per_step: Literal["per-rank", "global"] = "per-rank"
    #: the timed run's shape (:class:`autotuner.model.wallclock.RunShape`), for wall times
    run: TimedRunEntry | None = None


def _all_finite(v: Any) -> Any:
    bad = find_nonfinite(v)
    if bad:
        raise _fail("finite_number", "not a finite number", bad[0], bad[1])
    return v


class TrustEntry(_Schema):
    """A model file's ``trust``: held-out step times compared (``configurations``, from
    ``trials`` real trials), their mean absolute and worst signed error (%), the median range of
    repeated trials of one configuration (% of its median), and the error band (a fraction)."""

    trials: Annotated[int, Field(ge=0)]
    configurations: Annotated[int, Field(ge=0)]
    mean_error_pct: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    worst_pct: Annotated[float, Field(allow_inf_nan=False)] | None = None
    repeat_spread_pct: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    band: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] | None = None


class ModelFile(_Schema):
    """A fitted model (``autotuner.model/1``, written by ``fit``, read by every other command)."""

    schema_: Literal[MODEL_SCHEMA] = Field(alias="schema")  # type: ignore[valid-type]
    env: PlainName
    default: bool = False
    source: str | None = None
    cluster: ClusterEntry
    measured_config: Knobs
    cost_model: CostModelEntry
    fit: Annotated[dict[str, Any], AfterValidator(_all_finite)] = {}
    workloads: dict[Text, WorkloadEntry]
    #: compute contention of ranks sharing one host (CPU ranks), or None
    contention: ContentionEntry | None = None
    #: how far this env's predictions were checked against its real trials (``fit``:
    #: :func:`autotuner.views.accuracy.trust_of`), or None
    trust: TrustEntry | None = None


# --- validation records ---------------------------------------------------------------------

@pydantic_dataclass(frozen=True, config=ConfigDict(extra="ignore"))
class Setup:
    """What must be equal for two trials to be comparable (and for a resume to reuse records):
    the ``setup`` of every validation record, and the runtime object of
    :mod:`autotuner.realrun.validation` (one definition, validated when built or read).

    Attributes: env, model (layout name), np (ranks), hosts (``-H``; empty = localhost),
    bandwidth_gbit (testbed HTB rate, Gbit/s; None = no shaping), compute_ms/update_ms (replay
    workload's emulated compute per step, ms), steps/warmup (measured and warm-up steps per
    trial), command (a user's own training command instead of the replay workload, or empty),
    batch_size (images per rank per step, to turn img/sec output into step times; or None),
    testbed_hosts / ranks_per_host (an emulated cluster of that many hosts x ranks, each host a
    network namespace, :func:`autotuner.realrun.testbed.emulated_cluster`; then ``np`` =
    hosts x ranks and ``hosts`` its ``-H``; None: one host), link_gbit (the cluster's host-link
    HTB rate, Gbit/s; ``bandwidth_gbit`` then shapes each host's loopback), replay_wait (the replay
    workload's ``--wait``: ``spin``, Horovod's own synchronize, or ``sleep``, polling; see
    :data:`autotuner.realrun.replay.WAIT_POLL_S`).
    """

    env: str
    model: Text
    np: Count = 2
    hosts: str = ""
    bandwidth_gbit: LinkGbit | None = None
    compute_ms: Millis = 300.0
    update_ms: Millis = 0.0
    steps: Count = 6
    warmup: Index = 2
    command: tuple[str, ...] = ()
    batch_size: Count | None = None
    testbed_hosts: Annotated[int, Field(ge=1, le=16)] | None = None
    ranks_per_host: Count | None = None
    link_gbit: LinkGbit | None = None
    replay_wait: Literal["spin", "sleep"] = "spin"

    def __post_init__(self) -> None:
        if (self.testbed_hosts is None) != (self.ranks_per_host is None):
            raise ValueError("--testbed-hosts and --ranks-per-host go together")
        if self.testbed_hosts is None and self.link_gbit is not None:
            raise ValueError("--link-gbit needs --testbed-hosts (one host has no link)")
        if self.testbed_hosts is not None and self.np != self.testbed_hosts * self.ranks_per_host:
            raise ValueError(f"np={self.np} is not --testbed-hosts {self.testbed_hosts} x --ranks-per-host "
                             f"{self.ranks_per_host}")

    @property
    def topology(self) -> tuple[int, int] | None:
        """(hosts, ranks per host) of an emulated cluster, else None."""
        return None if self.testbed_hosts is None else (self.testbed_hosts, self.ranks_per_host)

    def to_dict(self) -> dict[str, Any]:
        """As recorded: ``command`` a list, ``batch_size`` and the testbed topology left out when
        None (records written before they existed stay comparable)."""
        d = {f: getattr(self, f) for f in self.__dataclass_fields__}
        d["command"] = list(self.command)
        for k in ("batch_size", "testbed_hosts", "ranks_per_host", "link_gbit"):
            if d[k] is None:
                del d[k]
        if d["replay_wait"] == "spin":  # Horovod's own wait: left out, as every record before it
            del d["replay_wait"]
        return d


class TimelineSummary(_Schema):
    """``timeline`` of a record (:func:`autotuner.realrun.validation.summarize_timeline`)."""

    model_config = ConfigDict(extra="allow")
    #: ``[nbytes, count, median µs, mean µs]`` per response size
    samples: list[Annotated[list[NonNeg], Field(min_length=4, max_length=4)]] = []
    responses: Index | None = None
    #: ``[bytes, µs]`` of fusion-buffer copies
    memcpy: Annotated[list[NonNeg], Field(min_length=2, max_length=2)] | None = None
    negotiation_us: NonNeg | None = None
    responses_per_step: NonNeg | None = None
    form: str | None = None
    problems: list[str] = []


class Record(_Schema):
    """One trial of ``autotuner validate`` (one line of ``validation/*.jsonl``)."""

    model_config = ConfigDict(extra="allow")
    trial: Text
    kind: str | None = None
    label: str | None = None
    repeat: Index | None = None
    config: Knobs | None = None
    status: Text
    measured_step_time_ms: Positive | None = None
    spread_ms: NonNeg | None = None
    step_times_ms: list[NonNeg] = []
    predicted_step_time_ms: NonNeg | None = None
    score_bytes_per_us: NonNeg | None = None
    timeline: TimelineSummary | None = None
    autotune: dict[str, Any] | None = None
    setup: Setup
    wall_s: NonNeg | None = None
    error: str | None = None


# --- proposals ------------------------------------------------------------------------------

class ProposalEntry(_Schema):
    """An entry of ``suggest --json``'s ``proposals``: its ``config`` (other keys are kept)."""

    model_config = ConfigDict(extra="allow")
    config: Knobs


class SuggestOutput(_Schema):
    """``suggest --json`` output, as a proposals file: its ``proposals`` (other keys are kept)."""

    model_config = ConfigDict(extra="allow")
    proposals: Annotated[list[Any], Field(min_length=1)]


#: a proposals file that is a list: one entry per configuration
ProposalList = Annotated[list[Any], Field(min_length=1)]
