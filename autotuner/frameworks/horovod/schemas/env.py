"""``runs/<env>/env.toml`` per format, and the records ``measure`` appends (sweep, cpu, trickle)."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from ....schemas.core import (
    _unique,
    Count,
    Format,
    GpusPerNode,
    LayoutRef,
    LinkGbit,
    Millis,
    PlainName,
    RelPath,
    Text,
    _Schema,
    _fail,
    check,
)
from .knobs import Knobs


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
    #: CPU cores each host's ranks share (``measure`` records the cores it ran on)
    cores_per_host: Count | None = None
    #: the machine and software stack the env was measured on (``measure`` writes its host, CPU model, cores, Horovod
    #: and torch versions): envs of one ``stack`` share what the host does, and the fit borrows across those measured
    #: in one sitting what one env's phase cannot pin (the float16 sum: :func:`autotuner.fit.collective.borrow_fp16_sum`)
    stack: Annotated[str, Field(min_length=1, max_length=300)] | None = None
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
    (docs/how-to/nccl-tests.md). The cluster needs >= 2 ranks (an allreduce on one rank moves nothing);
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
    """A ``backend-runs`` env (lab report 002, :func:`autotuner.frameworks.horovod.fit.backend_runs.fit_backend_runs_env`):
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
    """A ``cpu-scaling`` env (lab report 003, :func:`autotuner.frameworks.horovod.fit.cpu_scaling.fit_cpu_scaling_env`):
    ``source`` is the report; one host (``nodes`` = 1) whose ``gpus_per_node`` is the default
    rank count to simulate; ``[[model]]``: the report's tables' models in table order, with their
    layouts; ``step_unit``: the unit of the unprinted step-time column; ``fit_model``: the model
    whose curve fits the contention (the others are held out); ``logical_cpus`` / ``cores``:
    the host's CPUs (:class:`autotuner.model.contention.Contention`); ``prior_alpha_us`` /
    ``prior_bandwidth_gbps``: the shared-memory MPI tier, assumed (nothing in the report
    measures it; a range in docs/explanation/laptop-cpu.md)."""

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
    """A ``compression-runs`` env (lab report 004, :func:`autotuner.frameworks.horovod.fit.compression_runs.fit_compression_runs_env`):
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
    """One line of an ``autotuner measure`` record file (:mod:`autotuner.frameworks.horovod.measure`): one
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
    (:mod:`autotuner.frameworks.horovod.cpuprobe`): one job timing compute units beside idle cycles at
    ``cycle_time_ms``, ``repeat`` of the interleaved series. Unknown keys are kept."""

    model_config = ConfigDict(strict=True, extra="allow")
    phase: Literal["cpu"]
    tier: Literal["intra", "inter", "single"]
    cycle_time_ms: Annotated[float, Field(gt=0, allow_inf_nan=False)]
    #: ``idle`` (absent in the first records), or a stream of :data:`autotuner.frameworks.horovod.cpuprobe.STREAMS`
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
    (:mod:`autotuner.frameworks.horovod.trickleprobe`): one job at ``cycle_time_ms``, fusion off, whose
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


class IdleRecord(BaseModel):
    """One line of ``idle.jsonl``, the ``idle`` phase of ``autotuner measure``
    (:mod:`autotuner.frameworks.horovod.idleprobe`): one job, fusion off, whose timeline holds small
    responses run back to back while the ranks' main threads sleep. Unknown keys are kept."""

    model_config = ConfigDict(strict=True, extra="allow")
    phase: Literal["idle"]
    tier: Literal["intra", "inter", "single"]
    repeat: Annotated[int, Field(ge=0)]
    sizes: Annotated[list[Annotated[int, Field(ge=4)]], Field(min_length=1)]
    tensors: Annotated[int, Field(ge=1)]
    rounds: Annotated[int, Field(ge=2)]
    ranks: Annotated[int, Field(ge=1)]
    timeline: str | None = None


class BurstRecord(BaseModel):
    """One line of ``burst.jsonl``, the ``burst`` phase of ``autotuner measure``
    (:mod:`autotuner.frameworks.horovod.burstprobe`): one job, fusion off, no timeline: the wall time (ms) of rounds of
    small tensors enqueued at once, per size and count (``wall_ms``: ``[bytes, count, [ms, ...]]``, the
    first round of each left out). Unknown keys are kept."""

    model_config = ConfigDict(strict=True, extra="allow")
    phase: Literal["burst"]
    tier: Literal["intra", "inter", "single"]
    repeat: Annotated[int, Field(ge=0)]
    sizes: Annotated[list[Annotated[int, Field(ge=4)]], Field(min_length=1)]
    counts: Annotated[list[Annotated[int, Field(ge=1)]], Field(min_length=2)]
    rounds: Annotated[int, Field(ge=2)]
    wait: Literal["spin", "sleep"]
    ranks: Annotated[int, Field(ge=2)]
    wall_ms: Annotated[list[list[Any]], Field(min_length=2)]

    @model_validator(mode="after")
    def _rows(self):
        for row in self.wall_ms:
            ok = (len(row) == 3 and type(row[0]) is int and row[0] >= 4 and type(row[1]) is int and row[1] >= 1
                  and isinstance(row[2], list) and row[2]
                  and all(type(x) in (int, float) and x > 0 and x == x and x != float("inf") for x in row[2]))
            if not ok:
                raise ValueError(f"wall_ms row {row!r}: must be [bytes >= 4, count >= 1, [ms > 0, ...]]")
        return self


class StepRecord(BaseModel):
    """One line of ``step.jsonl``, the ``step`` phase of ``autotuner measure``
    (:mod:`autotuner.frameworks.horovod.stepprobe`): one replay job of the phase's synthetic layout (``layout``,
    :data:`autotuner.frameworks.horovod.stepprobe.LAYOUT_NAME`), ``job`` (``defaults``, ``fusion-off`` or
    ``cache-off``) of ``repeat``, no timeline; ``step_times_ms`` and ``compute_ms`` as the replay printed them
    (ms). Unknown keys are kept."""

    model_config = ConfigDict(strict=True, extra="allow")
    phase: Literal["step"]
    tier: Literal["intra", "inter", "single"]
    repeat: Annotated[int, Field(ge=0)]
    job: Literal["defaults", "fusion-off", "cache-off"]
    layout: Annotated[str, Field(min_length=1)]
    ranks: Annotated[int, Field(ge=2)]
    compute_ms: Annotated[float, Field(gt=0, allow_inf_nan=False)]
    wait: Literal["spin", "sleep"]
    step_times_ms: Annotated[list[Annotated[float, Field(gt=0, allow_inf_nan=False)]], Field(min_length=1)]


class Fp16Record(BaseModel):
    """One line of ``fp16.jsonl``, the ``fp16`` phase of ``autotuner measure``
    (:mod:`autotuner.frameworks.horovod.fp16probe`): one job's float32 and float16 allreduces of the same bytes
    (median ms per size) and the two casts of sets of tensors. Unknown keys are kept."""

    model_config = ConfigDict(strict=True, extra="allow")
    phase: Literal["fp16"]
    tier: Literal["intra", "inter", "single"]
    repeat: Annotated[int, Field(ge=0)]
    sizes: Annotated[list[Annotated[int, Field(ge=4)]], Field(min_length=2)]
    fp32_ms: Annotated[list[Annotated[float, Field(gt=0)]], Field(min_length=2)]
    fp16_ms: Annotated[list[Annotated[float, Field(gt=0)]], Field(min_length=2)]
    #: ``[tensors, elements each, down ms, up ms]`` per set of tensors cast
    casts: Annotated[list[Annotated[list[Annotated[float, Field(ge=0)]], Field(min_length=4, max_length=4)]],
                     Field(min_length=2)]
    ranks: Annotated[int, Field(ge=2)]

    @model_validator(mode="after")
    def _same_lengths(self):
        if not len(self.sizes) == len(self.fp32_ms) == len(self.fp16_ms):
            raise ValueError("sizes, fp32_ms and fp16_ms must have one entry per size")
        return self


class FusedRecord(BaseModel):
    """One line of ``fused.jsonl``, the ``fused`` phase of ``autotuner measure``
    (:mod:`autotuner.frameworks.horovod.sweepprobe` with ``--one-line``): one job at Horovod's defaults, no timeline;
    per size S (bytes), the timed samples (ms) of one tensor of S allreduced alone (``lone_ms``) and of 8 float32
    + 8 float64 tensors of S/8 bytes enqueued together, two fused responses of S back to back (``fused_ms``).
    Unknown keys are kept."""

    model_config = ConfigDict(strict=True, extra="allow")
    phase: Literal["fused"]
    tier: Literal["intra", "inter", "single"]
    repeat: Annotated[int, Field(ge=0)]
    sizes: Annotated[list[Annotated[int, Field(ge=64)]], Field(min_length=1)]
    lone_ms: Annotated[list[Annotated[list[Annotated[float, Field(gt=0, allow_inf_nan=False)]], Field(min_length=1)]],
                       Field(min_length=1)]
    fused_ms: Annotated[list[Annotated[list[Annotated[float, Field(gt=0, allow_inf_nan=False)]], Field(min_length=1)]],
                        Field(min_length=1)]
    ranks: Annotated[int, Field(ge=2)]
    wait: Literal["spin", "sleep"]

    @model_validator(mode="after")
    def _same_lengths(self):
        if not len(self.sizes) == len(self.lone_ms) == len(self.fused_ms):
            raise ValueError("sizes, lone_ms and fused_ms must have one entry per size")
        return self


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
