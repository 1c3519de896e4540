"""Readers for the lab reports' Markdown tables (runs/*/report-*.md, copied verbatim).

Two formats:

- ``responses`` (report 000): for each run, a line naming the run (``..._rank_0``), a bold line
  with the total training time and time per batch, then a table of Horovod responses bucketed
  by size: ``| (lo, hi] | count | mean size/MB | rate/Mbps | total time/s | mean time/ms | share |``.
  Sizes are MiB (the 392.00 MB bucket is VGG's fc6 weight, 411,041,792 bytes).
- ``breakdown`` (report 001): per model, a table whose header names the model in parentheses and
  whose columns are cluster shapes; rows are total time, time per batch, data copy, forward,
  loss, backward, update, NIC receive and send rates.

Every record carries the 1-based line number it came from. Whatever is not read is named in
``problems``, one ``source:line: what was skipped and why`` each: a row that cannot be parsed
(a number that is not finite and non-negative, a count or bucket bound that is not a whole
number up to 2**53, a bucket with no response or no time), a table or step line without a run
header or ``(model)`` cell of its own, a repeated run or model, a run or model that env.toml does
not name (when the caller passes its ids) and one env.toml names that the report lacks.
Typos such as ``1359.3.9ms`` are read as the leading number (``1359.3``) and noted.

Three more formats (research/notes/lab-reports-002-004.md has the tables and their oddities):

- ``backend runs`` (report 002, :func:`parse_backend_runs`): backend | servers | GPUs per server |
  wall clock (``real 1m53.525s<br/>user ...<br/>sys ...``) | throughput (``1,084.56 images/sec``)
  | speedup | Devices (CPU or GPU, filled on some rows only).
- ``cpu scaling`` (report 003, :func:`parse_cpu_scaling`): backend | processes | step time |
  throughput per process | total throughput | speedup, every number in a ``<center>`` cell.
- ``compression runs`` (report 004, :func:`parse_compression_runs`): training algorithm (a group
  label on its first row, an empty cell on the rows continuing it) | ``Device# == N`` | wall
  clock | final accuracy (``98.35%``).

Their tables are found by a header row (``通信后端``, ``训练算法``) and their columns by header
label; all-empty rows and ``---`` rows are skipped silently, every other row that is not read is
one ``source:line: ...`` line in ``problems`` and the rest of the table is still read.

One module per report: :mod:`.report_000_001` (responses, breakdown), :mod:`.report_002`
(backend runs), :mod:`.report_003` (cpu scaling), :mod:`.report_004` (compression runs); the
helpers they share in :mod:`.common`. Every name is importable from here.
"""
from __future__ import annotations

from ...errors import ReportError
from .common import (
    BACKENDS,
    MAX_WHOLE,
    THROUGHPUT_UNITS,
    WallClock,
    parse_number,
    parse_percent,
    parse_wall_clock,
)
from .report_000_001 import (
    BREAKDOWN_ROWS,
    BreakdownCell,
    ROW_UNITS,
    ResponseBucket,
    RunStepTime,
    UNIT_BYTES,
    parse_breakdown,
    parse_responses,
)
from .report_002 import (
    BACKEND_COLUMNS,
    BackendRun,
    DEVICES,
    parse_backend_runs,
)
from .report_003 import (
    CPU_SCALING_COLUMNS,
    CpuScalingRow,
    parse_cpu_scaling,
)
from .report_004 import (
    COMPRESSION_COLUMNS,
    COMPRESSION_LABELS,
    CompressionRun,
    parse_compression_runs,
)

__all__ = [
    "BACKENDS",
    "BACKEND_COLUMNS",
    "BREAKDOWN_ROWS",
    "BackendRun",
    "BreakdownCell",
    "COMPRESSION_COLUMNS",
    "COMPRESSION_LABELS",
    "CPU_SCALING_COLUMNS",
    "CompressionRun",
    "CpuScalingRow",
    "DEVICES",
    "MAX_WHOLE",
    "ROW_UNITS",
    "ReportError",
    "ResponseBucket",
    "RunStepTime",
    "THROUGHPUT_UNITS",
    "UNIT_BYTES",
    "WallClock",
    "parse_backend_runs",
    "parse_breakdown",
    "parse_compression_runs",
    "parse_cpu_scaling",
    "parse_number",
    "parse_percent",
    "parse_responses",
    "parse_wall_clock",
]
