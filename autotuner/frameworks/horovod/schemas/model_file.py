"""A fitted model JSON (``autotuner.model/1``, what ``fit`` writes)."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    model_validator,
)

from ....schemas.core import (
    Count,
    GpusPerNode,
    Index,
    LayoutRef,
    LinkGbit,
    MODEL_SCHEMA,
    Millis,
    NonNeg,
    PlainName,
    Positive,
    Text,
    _Schema,
    _fail,
    find_nonfinite,
)
from .knobs import Knobs


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


class Fp16Entry(_Schema):
    """:class:`autotuner.model.costmodel.Fp16Cost` as stored (ns per element)."""

    sum_extra_ns_per_elem: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    cast_up_ns_per_elem: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    cast_up_us_per_tensor: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.0
    cast_down_ns_per_elem: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.0
    cast_down_us_per_tensor: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.0
    #: the ring's pipeline segment cap (bytes): the float16 sum overlaps the wire; absent: no overlap (older fits)
    segment_bytes: Positive | None = None
    #: the GPU whose datasheet gave the figures (autotuner.specs.GPUS); absent: measured on CPU ranks
    device: str | None = None
    #: where the figures come from, one line
    source: str | None = None
    #: the quartiles of the fp16 phase's per-point figures for the float16 sum (ns per element): how far the phase
    #: pins ``sum_extra_ns_per_elem``; absent: not known (a GPU's datasheet, a DDP sweep, an older fit)
    sum_extra_range_ns_per_elem: Annotated[list[Annotated[float, Field(ge=0, allow_inf_nan=False)]],
                                           Field(min_length=2, max_length=2)] | None = None


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
    #: what fp16 compression costs besides halving the bytes (measure's fp16 phase)
    fp16: Fp16Entry | None = None
    #: what a response that starts after the backward costs more than one during it, µs (may be negative; measure's
    #: step phase at two computes)
    after_backward_us: Annotated[float, Field(ge=-1e6, le=1e6, allow_inf_nan=False)] | None = None
    #: the inter tier's small-message latency at either end of what the burst and step phases leave open, µs (low,
    #: high; recorded beside the charged one, not charged)
    small_alpha_range_us: Annotated[list[NonNeg], Field(min_length=2, max_length=2)] | None = None

    @model_validator(mode="after")
    def _range_ordered(self) -> CostModelEntry:
        r = self.small_alpha_range_us
        if r is not None and r[0] > r[1]:
            raise _fail("value_error", "low end above the high end", ("small_alpha_range_us",), list(r))
        return self


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
    repeated trials of one configuration (% of its median), and the error band (a fraction); rows whose
    trials ran another job than predicted (Horovod's timeline, fp16 over zeros or the same values) are left
    out and counted, unless they are all there is (``only_other_job``)."""

    trials: Annotated[int, Field(ge=0)]
    configurations: Annotated[int, Field(ge=0)]
    mean_error_pct: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    worst_pct: Annotated[float, Field(allow_inf_nan=False)] | None = None
    repeat_spread_pct: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    band: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] | None = None
    #: held-out configurations whose trials ran another job than predicted (timeline, ...), left out
    other_job_configurations: Annotated[int, Field(ge=0)] | None = None
    #: every held-out configuration ran another job: the figures are theirs
    only_other_job: bool | None = None
    #: which other jobs those rows ran (the accuracy table's tags: "timeline ran", "zero gradients", ...)
    other_jobs: list[Text] | None = None


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
    #: :func:`autotuner.frameworks.horovod.views.accuracy.trust_of`), or None
    trust: TrustEntry | None = None
