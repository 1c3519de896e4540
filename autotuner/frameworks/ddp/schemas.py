"""The DDP records' shapes: a DDP sweep job (``ddp-sweep.jsonl``), a burst-phase job
(``ddp-burst.jsonl``) and a DDP trial
(``ddp-validation/*.jsonl``, ``ddp-tune/*.jsonl``), as :mod:`autotuner.frameworks.ddp.realrun` writes them.
Unknown keys are kept; what a reader uses is checked (types, finite positive times, one sample list per size)."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Pos = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNeg = Annotated[float, Field(ge=0, allow_inf_nan=False)]
#: where a job's ranks ran (the probes' ``--device``, :data:`autotuner.frameworks.ddp.rankside.DEVICES`): a record
#: without the key ran on CPU ranks (Gloo)
Device = Literal["cpu", "cuda"]


class DdpSetup(BaseModel):
    """Where a DDP job ran: ranks, the testbed's shape and links, and the device its ranks ran on (None: not
    recorded, CPU ranks)."""

    model_config = ConfigDict(extra="allow")
    np: Annotated[int, Field(ge=1)]
    bandwidth_gbit: Pos | None = None
    testbed_hosts: Annotated[int, Field(ge=1)] | None = None
    ranks_per_host: Annotated[int, Field(ge=1)] | None = None
    link_gbit: Pos | None = None
    device: Device | None = None


def _two_ranks_on_cpu(rec):
    """``rec`` itself; ValueError for a CPU job of one rank (a GPU's one-rank job measures its device)."""
    if rec.ranks < 2 and rec.device != "cuda":
        raise ValueError(f"ranks {rec.ranks}: a CPU job has at least 2 ranks (1 only with device cuda)")
    return rec


class DdpSweepRecord(BaseModel):
    """One DDP sweep job: per size (bytes) the timed float32 and float16 allreduces (ms), the bucket copies and the
    hook's casts, and its setup. At least 2 ranks, but 1 on a GPU (``device`` "cuda": one GPU's copies and casts at
    its memory rate and NCCL's one-rank floor)."""

    model_config = ConfigDict(extra="allow")
    ranks: Annotated[int, Field(ge=1)]
    sizes: Annotated[list[Annotated[int, Field(ge=4)]], Field(min_length=2)]
    fp32_ms: list[list[Pos]]
    fp16_ms: list[list[Pos]]
    #: the record's ``copy`` (named apart: ``copy`` is a BaseModel method)
    copies: list[Annotated[list[NonNeg], Field(min_length=2, max_length=2)]] = Field(default=[], alias="copy")
    casts: list[Annotated[list[NonNeg], Field(min_length=4, max_length=4)]] = []
    #: ``--device cuda`` jobs: the bf16 hook's casts, as ``casts``
    casts_bf16: list[Annotated[list[NonNeg], Field(min_length=4, max_length=4)]] = []
    device: Device = "cpu"
    setup: DdpSetup

    @model_validator(mode="after")
    def _per_size(self):
        if not len(self.sizes) == len(self.fp32_ms) == len(self.fp16_ms):
            raise ValueError("sizes, fp32_ms and fp16_ms must have one entry per size")
        return _two_ranks_on_cpu(self)


class DdpBurstRecord(BaseModel):
    """One job of the DDP burst phase (``ddp-burst.jsonl``, :mod:`autotuner.frameworks.ddp.burstprobe`): per size
    (bytes) every lone allreduce (ms) and one back-to-back per-call time per round (ms), and its setup. At least 2
    ranks, but 1 on a GPU (as :class:`DdpSweepRecord`)."""

    model_config = ConfigDict(extra="allow")
    ranks: Annotated[int, Field(ge=1)]
    sizes: Annotated[list[Annotated[int, Field(ge=4)]], Field(min_length=1)]
    count: Annotated[int, Field(ge=2)]
    lone_ms: list[list[Pos]]
    burst_ms: list[list[Pos]]
    device: Device = "cpu"
    setup: DdpSetup

    @model_validator(mode="after")
    def _per_size(self):
        if not len(self.sizes) == len(self.lone_ms) == len(self.burst_ms):
            raise ValueError("sizes, lone_ms and burst_ms must have one entry per size")
        return _two_ranks_on_cpu(self)


class DdpFirstTouchRow(BaseModel):
    """One mode of one round of the first-touch phase: the median step's writes (ms), its copies into the bucket
    (ms), its minor page faults, the gradients' bytes."""

    model_config = ConfigDict(extra="allow")
    mode: Literal["held", "dropped"]
    write_ms: Pos
    copy_in_ms: Annotated[float, Field(ge=0)]
    minor_faults: Annotated[int, Field(ge=0)]
    bytes: Annotated[int, Field(ge=1)]


class DdpFirstTouchRecord(BaseModel):
    """One job of the DDP first-touch phase (``ddp-first-touch.jsonl``,
    :mod:`autotuner.frameworks.ddp.firsttouchprobe`): rank 0's rows, both modes, and the setup."""

    model_config = ConfigDict(extra="allow")
    ranks: Annotated[int, Field(ge=1)]
    model: Annotated[str, Field(min_length=1)]
    bytes: Annotated[int, Field(ge=1)]
    rows: Annotated[list[DdpFirstTouchRow], Field(min_length=2)]
    malloc_env: dict[str, str] = {}
    setup: DdpSetup

    @model_validator(mode="after")
    def _both_modes(self):
        if {r.mode for r in self.rows} != {"held", "dropped"}:
            raise ValueError("rows must hold both modes, held and dropped")
        return self


class DdpCpuRow(BaseModel):
    """One round and stream size of the cpu phase: compute units alone and beside the stream (median ms), the
    stream's allreduces alone and beside the compute (median ms), the buffer's bytes and the stream's length."""

    model_config = ConfigDict(extra="allow")
    round: Annotated[int, Field(ge=0)]
    bytes: Annotated[int, Field(ge=4)]
    count: Annotated[int, Field(ge=1)]
    unit_ms_alone: Pos
    unit_ms_beside: Pos | None = None
    units_beside: Annotated[int, Field(ge=0)]
    allreduce_ms_alone: Pos
    allreduce_ms_beside: Pos
    #: every rank's [unit alone, unit beside or None, allreduce alone, allreduce beside] (ms); older jobs: rank 0's
    by_rank: list[Annotated[list[Pos | None], Field(min_length=4, max_length=4)]] | None = None


class DdpCpuRecord(BaseModel):
    """One job of the DDP cpu phase (``ddp-cpu.jsonl``, :mod:`autotuner.frameworks.ddp.cpuprobe`): rank 0's rows,
    the cores one host's ranks share, what a compute unit is, and the setup."""

    model_config = ConfigDict(extra="allow")
    ranks: Annotated[int, Field(ge=1)]
    cores_per_host: Annotated[int, Field(ge=1)]
    unit: str = ""
    rows: Annotated[list[DdpCpuRow], Field(min_length=1)]
    setup: DdpSetup


class DdpHostRow(BaseModel):
    """One round, gradient count and setting of the host phase: the module plain or under DDP (its cap in bytes and
    DDP's rebuilt bucket count), every rank's median step and median time between stages (ms)."""

    model_config = ConfigDict(extra="allow")
    round: Annotated[int, Field(ge=0)]
    tensors: Annotated[int, Field(ge=1)]
    mode: Literal["plain", "ddp"]
    cap_bytes: Annotated[int, Field(ge=1)] | None = None
    buckets: Annotated[int, Field(ge=1)] | None = None
    step_ms: Annotated[list[Pos], Field(min_length=1)]
    between_ms: Annotated[list[NonNeg], Field(min_length=1)]

    @model_validator(mode="after")
    def _ddp_has_a_cap(self):
        if (self.mode == "ddp") != (self.cap_bytes is not None):
            raise ValueError("a ddp row has its cap_bytes, a plain row none")
        return self


class DdpHostRecord(BaseModel):
    """One job of the DDP host phase (``ddp-host.jsonl``, :mod:`autotuner.frameworks.ddp.hostprobe`): every rank's
    rows, the gradients' bytes, the emulated compute per gradient, and the setup."""

    model_config = ConfigDict(extra="allow")
    ranks: Annotated[int, Field(ge=1)]
    tensor_bytes: Annotated[int, Field(ge=4)]
    gap_us: NonNeg
    steps: Annotated[int, Field(ge=1)]
    rows: Annotated[list[DdpHostRow], Field(min_length=2)]
    device: Device = "cpu"
    setup: DdpSetup


class DdpTrialSetup(DdpSetup):
    """A DDP trial's setup: the layout (a shipped name or a path), the emulated compute, the step counts."""

    model: Annotated[str, Field(min_length=1)]
    compute_ms: Pos
    steps: Annotated[int, Field(ge=1)]
    warmup: Annotated[int, Field(ge=0)]
    command: list[str] = []


class DdpTrialRecord(BaseModel):
    """One DDP trial: its setting (``ddp``, checked by :class:`autotuner.frameworks.ddp.knobs.DdpConfig` where
    read; None: the replay without DDP, a validation's compute trial), status, measured median step (ms) and samples,
    first iteration, DDP's rebuilt bucket sizes, setup."""

    model_config = ConfigDict(extra="allow")
    label: Annotated[str, Field(min_length=1)]
    ddp: dict[str, Any] | None
    status: str
    measured_step_time_ms: Pos | None = None
    step_times_ms: list[Pos] = []
    first_step_ms: Pos | None = None
    buckets: list[Annotated[int, Field(ge=1)]] | None = None
    device: Device = "cpu"
    setup: DdpTrialSetup
