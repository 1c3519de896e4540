"""Schemas of every file the tool reads or writes, checked at the edge.

Files and their schemas (each a pydantic model; :func:`check` runs one):

- a gradient layout JSON (``autotuner.layout/1``) -> :class:`LayoutFile`, shared by every framework;
- each framework's own files in its folder: Horovod's env.toml, model file, validation records and
  proposals (:mod:`autotuner.frameworks.horovod.schemas`), DDP's phase and replay records
  (:mod:`autotuner.frameworks.ddp.schemas`).

Why pydantic v2: one declaration both validates and coerces (type, finite, range, required),
its errors carry the location of each failing field, which :func:`check` turns into the
one-line message of the error contract (:mod:`autotuner.errors`), it is well kept, and it is
already a dependency of the stack (typer requires it in this environment).

Every number is finite; counts are whole numbers >= 1; shapes are whole numbers >= 1 whose byte
count fits :data:`autotuner.model.layout.MAX_LAYOUT_BYTES`; shares and durations are >= 0; link
rates are > 0. Bounds that are not physics are sanity limits, the same as the command line's
(:mod:`autotuner.options`): at most 100,000 nodes and 1,024 GPUs per node, link rates up to
10 Tbit/s.

Names that become file names (an environment's ``name``) must be plain names
(:data:`PlainName`); files named inside a data file (``source``, a layout) must be relative
paths inside the data file's folder (:data:`RelPath`, :data:`LayoutRef`), never
``module:factory``: only the command line's ``--model pkg.mod:factory`` imports code.

The readers validate, then hand the original (now checked) dicts on, so that what is computed
from a valid file does not change.

Here: :mod:`.core` (the one-line error, field types, plain names) and :mod:`.layout`; every name is importable
from here.
"""
from __future__ import annotations

from .core import (  # noqa: F401
    Count,
    Finite,
    Format,
    GpusPerNode,
    Index,
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
    _layout_ref,
    _plain_name,
    _rel_path,
    _short,
    _unique,
    check,
    field_path,
    find_nonfinite,
    is_plain_name,
    one_line,
)
from .layout import (  # noqa: F401
    Dim,
    LayoutFile,
    TensorEntry,
)

__all__ = [
    "Count",
    "Dim",
    "Finite",
    "Format",
    "GpusPerNode",
    "Index",
    "LAYOUT_SCHEMA",
    "LayoutFile",
    "LayoutRef",
    "LinkGbit",
    "MODEL_SCHEMA",
    "Millis",
    "NonNeg",
    "PlainName",
    "Positive",
    "RelPath",
    "TensorEntry",
    "Text",
    "check",
    "field_path",
    "find_nonfinite",
    "is_plain_name",
    "one_line",
]
