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
10 Tbit/s. Knob values are checked by the knob table (:data:`autotuner.frameworks.horovod.knobs.KNOBS`).

Names that become file names (an environment's ``name``) must be plain names
(:data:`PlainName`); files named inside a data file (``source``, a layout) must be relative
paths inside the data file's folder (:data:`RelPath`, :data:`LayoutRef`), never
``module:factory``: only the command line's ``--model pkg.mod:factory`` imports code.

The readers validate, then hand the original (now checked) dicts on, so that what is computed
from a valid file does not change.

One module per file kind: :mod:`.core` (the one-line error, field types, plain names,
knob values), :mod:`.env` (env.toml and ``measure``'s records), :mod:`.layout`, :mod:`.model_file`,
:mod:`.records` (validation records, setup, proposals). Every name is importable from here.
"""
from __future__ import annotations

from .core import (  # noqa: F401
    Count,
    Finite,
    Format,
    GpusPerNode,
    Index,
    KNOB_KEYS,
    Knobs,
    LAYOUT_SCHEMA,
    LayoutRef,
    LinkGbit,
    MODEL_SCHEMA,
    Millis,
    NonNeg,
    PlainName,
    Positive,
    RelPath,
    Text,
    _ADAPTERS,
    _PLAIN,
    _Schema,
    _fail,
    _knob_type,
    _layout_ref,
    _plain_name,
    _rel_path,
    _short,
    check,
    field_path,
    find_nonfinite,
    is_plain_name,
    one_line,
)
from .env import (  # noqa: F401
    BackendRunsEnv,
    BreakdownEnv,
    ColumnEntry,
    CompressionRunsEnv,
    CpuProbeRecord,
    CpuScalingEnv,
    ENV_SCHEMAS,
    EnvToml,
    ModelEntry,
    NcclTestsEnv,
    ResponsesEnv,
    RunEntry,
    SweepEnv,
    SweepRecord,
    TimelinesEnv,
    TrickleRecord,
    IdleRecord,
    BurstRecord,
    FusedRecord,
    StepRecord,
    Fp16Record,
    ValidationEnv,
    _EnvHead,
    _unique,
    check_env_toml,
)
from .layout import (  # noqa: F401
    Dim,
    LayoutFile,
    TensorEntry,
)
from .model_file import (  # noqa: F401
    BackendEntry,
    ClusterEntry,
    ComputeDelayEntry,
    ContentionEntry,
    CostModelEntry,
    HostPassesEntry,
    ModelFile,
    NegotiationEntry,
    TierEntry,
    TimedRunEntry,
    TrustEntry,
    WorkloadEntry,
    _all_finite,
)
from .records import (  # noqa: F401
    ProposalEntry,
    ProposalList,
    Record,
    Setup,
    SuggestOutput,
    TimelineSummary,
)

__all__ = [
    "BackendEntry",
    "BackendRunsEnv",
    "BreakdownEnv",
    "ClusterEntry",
    "ColumnEntry",
    "CompressionRunsEnv",
    "ComputeDelayEntry",
    "ContentionEntry",
    "CostModelEntry",
    "Count",
    "CpuProbeRecord",
    "CpuScalingEnv",
    "Dim",
    "ENV_SCHEMAS",
    "EnvToml",
    "Finite",
    "Format",
    "GpusPerNode",
    "HostPassesEntry",
    "Index",
    "KNOB_KEYS",
    "Knobs",
    "LAYOUT_SCHEMA",
    "LayoutFile",
    "LayoutRef",
    "LinkGbit",
    "MODEL_SCHEMA",
    "Millis",
    "ModelEntry",
    "ModelFile",
    "NcclTestsEnv",
    "NegotiationEntry",
    "NonNeg",
    "PlainName",
    "Positive",
    "ProposalEntry",
    "ProposalList",
    "Record",
    "RelPath",
    "ResponsesEnv",
    "RunEntry",
    "Setup",
    "SuggestOutput",
    "SweepEnv",
    "SweepRecord",
    "TensorEntry",
    "Text",
    "TierEntry",
    "TimedRunEntry",
    "TimelineSummary",
    "TimelinesEnv",
    "TrickleRecord",
    "IdleRecord",
    "BurstRecord",
    "FusedRecord",
    "StepRecord",
    "Fp16Record",
    "TrustEntry",
    "ValidationEnv",
    "WorkloadEntry",
    "check",
    "check_env_toml",
    "field_path",
    "find_nonfinite",
    "is_plain_name",
    "one_line",
]
