"""Reader for ``autotuner measure``'s record file (JSON Lines, :class:`autotuner.schemas.SweepRecord`).

One line per measured item, appended as the sweep goes (:mod:`autotuner.frameworks.horovod.measure`). A
line that is not JSON (a write cut by a kill) or not a sweep record is skipped and named.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ....errors import RunsError, SchemaError
from ....readers.files import read_text
from ....schemas import check
from ..schemas import (BurstRecord, CpuProbeRecord, Fp16Record, FusedRecord, IdleRecord, StepRecord, SweepRecord,
                       TrickleRecord)


def parse_sweep_records(text: str, source: str, schema: type = SweepRecord) -> tuple[list[dict[str, Any]], list[str]]:
    """(records, problems) of a sweep record file's text; each problem names ``source:line``.
    ``schema``: :class:`~autotuner.schemas.SweepRecord` (``sweep.jsonl``) or
    :class:`~autotuner.schemas.CpuProbeRecord` (``cpu.jsonl``, :func:`parse_cpu_records`)."""
    recs, problems = [], []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as e:
            problems.append(f"{source}:{n}: skipped unreadable record ({getattr(e, 'msg', type(e).__name__)})")
            continue
        try:
            check(schema, rec, f"{source}:{n}")
        except SchemaError as e:
            problems.append(f"{e} (record skipped)")
            continue
        recs.append(rec)
    return recs, problems


def read_sweep_records(path: Path, source: str | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """Read and parse ``path`` (:func:`parse_sweep_records`). Raises RunsError when it cannot be read."""
    return parse_sweep_records(read_text(path, RunsError), source or str(path))


def parse_cpu_records(text: str, source: str) -> tuple[list[dict[str, Any]], list[str]]:
    """(records, problems) of a ``cpu.jsonl`` (the ``cpu`` phase of ``autotuner measure``)."""
    return parse_sweep_records(text, source, CpuProbeRecord)


def parse_trickle_records(text: str, source: str) -> tuple[list[dict[str, Any]], list[str]]:
    """(records, problems) of a ``trickle.jsonl`` (the ``trickle`` phase of ``autotuner measure``)."""
    return parse_sweep_records(text, source, TrickleRecord)


def parse_idle_records(text: str, source: str) -> tuple[list[dict[str, Any]], list[str]]:
    """(records, problems) of an ``idle.jsonl`` (the ``idle`` phase of ``autotuner measure``)."""
    return parse_sweep_records(text, source, IdleRecord)


def parse_burst_records(text: str, source: str) -> tuple[list[dict[str, Any]], list[str]]:
    """(records, problems) of a ``burst.jsonl`` (the ``burst`` phase of ``autotuner measure``)."""
    return parse_sweep_records(text, source, BurstRecord)


def parse_step_records(text: str, source: str) -> tuple[list[dict[str, Any]], list[str]]:
    """(records, problems) of a ``step.jsonl`` (the ``step`` phase of ``autotuner measure``)."""
    return parse_sweep_records(text, source, StepRecord)


def parse_fp16_records(text: str, source: str) -> tuple[list[dict[str, Any]], list[str]]:
    """(records, problems) of an ``fp16.jsonl`` (the ``fp16`` phase of ``autotuner measure``)."""
    return parse_sweep_records(text, source, Fp16Record)


def parse_fused_records(text: str, source: str) -> tuple[list[dict[str, Any]], list[str]]:
    """(records, problems) of a ``fused.jsonl`` (the ``fused`` phase of ``autotuner measure``)."""
    return parse_sweep_records(text, source, FusedRecord)


def read_phase_records(path: Path, parse, source: str | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """Read a probe phase's record file (``cpu.jsonl`` with :func:`parse_cpu_records`,
    ``trickle.jsonl`` with :func:`parse_trickle_records`); ([], []) when absent (a sweep measured
    before the phase existed, or with it skipped). Raises RunsError when it cannot be read."""
    if not path.exists():
        return [], []
    return parse(read_text(path, RunsError), source or str(path))
