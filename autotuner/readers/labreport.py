"""Readers for the lab reports' Markdown tables (runs/*/report-*.md, copied verbatim).

Two formats:

- ``responses`` (report 000): for each run, a line naming the run (``..._rank_0``), a bold line
  with the total training time and time per batch, then a table of Horovod responses bucketed
  by size: ``| (lo, hi] | count | mean size/MB | rate/Mbps | total time/s | mean time/ms | share |``.
  Sizes are MiB (the 392.00 MB bucket is VGG's fc6 weight, 411,041,792 bytes).
- ``breakdown`` (report 001): per model, a table whose header names the model in parentheses and
  whose columns are cluster shapes; rows are total time, time per batch, data copy, forward,
  loss, backward, update, NIC receive and send rates.

Every record carries the 1-based line number it came from. Rows that cannot be parsed are
skipped and described in ``problems`` (one line each); typos such as ``1359.3.9ms`` are read
as the leading number (``1359.3``) and noted.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import ReportError

UNIT_BYTES = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3}


@dataclass(frozen=True)
class ResponseBucket:
    """One row of a response-size table: ``count`` responses of sizes in (lo, hi] bytes."""

    run: str
    lo_bytes: int
    hi_bytes: int
    count: int
    mean_mib: float
    rate_mbps: float
    total_s: float
    mean_ms: float
    line: int


@dataclass(frozen=True)
class RunStepTime:
    """A run's total training time (s) and time per batch (ms)."""

    run: str
    total_s: float
    step_ms: float
    line: int


@dataclass(frozen=True)
class BreakdownCell:
    """One cell of a breakdown table: ``value`` in ``unit`` (s, ms, gbps)."""

    model: str
    column: str
    row: str
    value: float
    unit: str
    line: int


_NUM = r"(\d+(?:\.\d+)?)"
_RUN_RE = re.compile(r"^\s*([\w.-]+_rank_\d+)\s*$")
_STEP_RE = re.compile(r"总时间\s*" + _NUM + r"\s*s.*?batch\s*" + _NUM + r"\s*ms")
_BUCKET_RE = re.compile(r"^\(\s*(\d+)\s*([KMG]?B)?\s*,\s*(\d+)\s*([KMG]?B)\s*\]$")


def _cells(line: str) -> list[str]:
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|"):
        s = s[:-1]
    return [c.strip() for c in s.split("|")]


def _is_rule(cells: list[str]) -> bool:
    return all(re.fullmatch(r":?-{2,}:?", c) for c in cells if c)


def _num(text: str) -> float:
    t = text.strip()
    if not re.fullmatch(r"-?" + _NUM, t):
        raise ValueError(f"not a number: {text.strip()!r}")
    return float(t)


def parse_responses(text: str, source: str = "<report>") -> tuple[list[ResponseBucket], list[RunStepTime], list[str]]:
    """Parse a ``responses``-format report. Returns (buckets, step times, problems)."""
    buckets: list[ResponseBucket] = []
    steps: list[RunStepTime] = []
    problems: list[str] = []
    run = None
    for no, line in enumerate(text.splitlines(), start=1):
        m = _RUN_RE.match(line)
        if m:
            run = m.group(1)
            continue
        m = _STEP_RE.search(line)
        if m and run:
            steps.append(RunStepTime(run, float(m.group(1)), float(m.group(2)), no))
            continue
        if not line.lstrip().startswith("|(") or run is None:
            continue
        cells = _cells(line)
        try:
            bm = _BUCKET_RE.match(cells[0].replace(" ", "").replace(",", ", "))
            if not bm:
                raise ValueError(f"bad size bucket {cells[0]!r}")
            lo_unit = bm.group(2) or bm.group(4)
            lo = int(bm.group(1)) * UNIT_BYTES[lo_unit]
            hi = int(bm.group(3)) * UNIT_BYTES[bm.group(4)]
            if len(cells) < 6:
                raise ValueError(f"expected 7 columns, got {len(cells)}")
            buckets.append(ResponseBucket(run, lo, hi, int(_num(cells[1])), _num(cells[2]), _num(cells[3]),
                                          _num(cells[4]), _num(cells[5]), no))
        except (ValueError, KeyError, IndexError) as e:
            problems.append(f"{source}:{no}: skipped broken row ({e})")
    if not buckets and not steps:
        raise ReportError(f"{source}: no response tables found")
    return buckets, steps, problems


#: row labels of the breakdown tables (report 001) -> (row key, expected unit)
BREAKDOWN_ROWS = {
    "总训练时长": "total",
    "单个batch平均时长": "step",
    "batch-data-tocuda平均时长": "data",
    "foword平均时长": "forward",
    "compute_loss平均时长": "loss",
    "backword平均时长": "backward",
    "update gradients平均时长": "update",
    "receving": "recv",
    "sending": "send",
}
_VALUE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)((?:\.\d+)*)\s*(ms|s|Kb/s|Mb/s|Gb/s)\b")
_RATE_GBPS = {"Kb/s": 1e-6, "Mb/s": 1e-3, "Gb/s": 1.0}


def _value(cell: str) -> tuple[float, str, bool]:
    m = _VALUE_RE.match(cell)
    if not m:
        raise ValueError(f"bad value {cell!r}")
    v, unit = float(m.group(1)), m.group(3)
    if unit in _RATE_GBPS:
        return v * _RATE_GBPS[unit], "gbps", bool(m.group(2))
    return v, unit, bool(m.group(2))


def parse_breakdown(text: str, columns: list[str], source: str = "<report>") -> tuple[list[BreakdownCell], list[str]]:
    """Parse a ``breakdown``-format report; ``columns`` names the table's value columns."""
    cells_out: list[BreakdownCell] = []
    problems: list[str] = []
    model = None
    for no, line in enumerate(text.splitlines(), start=1):
        if not line.lstrip().startswith("|"):
            continue
        cells = _cells(line)
        if _is_rule(cells):
            continue
        hm = re.fullmatch(r"\((\w+)\)", cells[0])
        if hm:
            model = hm.group(1)
            continue
        if model is None:
            continue
        label = cells[0].rstrip("*").replace(" ", "")
        key = next((k for lab, k in BREAKDOWN_ROWS.items() if label == lab.replace(" ", "")), None)
        if key is None:
            problems.append(f"{source}:{no}: skipped unknown row {cells[0]!r}")
            continue
        if len(cells) - 1 < len(columns):
            problems.append(f"{source}:{no}: skipped broken row (expected {len(columns)} values, got {len(cells) - 1})")
            continue
        for col, cell in zip(columns, cells[1:]):
            try:
                v, unit, typo = _value(cell)
            except ValueError as e:
                problems.append(f"{source}:{no}: skipped cell {col} ({e})")
                continue
            if typo:
                problems.append(f"{source}:{no}: read {cell.strip()!r} as {v:g} {unit} (typo in report)")
            cells_out.append(BreakdownCell(model, col, key, v, unit, no))
    if not cells_out:
        raise ReportError(f"{source}: no breakdown tables found")
    return cells_out, problems
