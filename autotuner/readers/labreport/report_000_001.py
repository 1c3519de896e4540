"""Reports 000 (``responses``: Horovod responses bucketed by size) and 001 (``breakdown``: per-model step breakdown per cluster shape)."""
from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from ...errors import ReportError
from .common import (
    MAX_WHOLE,
    _NUM,
    _cells,
    _closest,
    _is_rule,
    _num,
    _whole,
)


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


_RUN_RE = re.compile(r"^\s*([\w.-]+_rank_\d+)\s*$")
_STEP_RE = re.compile(r"总时间\s*" + _NUM + r"\s*s.*?batch\s*" + _NUM + r"\s*ms")
_BUCKET_RE = re.compile(r"^\(\s*(\d+)\s*([KMG]?B)?\s*,\s*(\d+)\s*([KMG]?B)\s*\]$")


def parse_responses(text: str, source: str = "<report>", runs: Collection[str] | None = None,
                    ) -> tuple[list[ResponseBucket], list[RunStepTime], list[str]]:
    """Parse a ``responses``-format report. Returns (buckets, step times, problems).

    ``runs``: the run ids the environment names (env.toml ``[[run]] id``); when given, a run
    header that is not one of them is reported (with the closest id) and its step line and
    table are skipped, and every id with no header in the report is reported. Without it
    every run is kept. Each skipped row, table, step line or run is one ``source:line: ...``
    line in ``problems``; a table row is kept only under its own run header (a second table
    after one header means the header before it was not recognised). Raises
    :class:`ReportError` when no table or step line is found at all.
    """
    buckets: list[ResponseBucket] = []
    steps: list[RunStepTime] = []
    problems: list[str] = []
    run: str | None = None   # the run whose header came last
    keep = False             # its rows are kept
    headers: dict[str, int] = {}   # run -> line of its header
    tables: dict[str, int] = {}    # run -> line of its table
    step_at: dict[str, int] = {}   # run -> line of its step line
    owner: str | None = None       # run owning the current table (None: rows skipped)
    in_table = seen_rule = False
    for no, line in enumerate(text.splitlines(), start=1):
        where = f"{source}:{no}"
        stripped = line.strip()
        if not stripped.startswith("|"):
            in_table = False
        m = _RUN_RE.match(line)
        if m:
            run, keep = m.group(1), True
            if run in headers:
                problems.append(f"{where}: run header {run!r} repeats line {headers[run]}; its step line "
                                f"and table are skipped")
                keep = False
            elif runs is not None and run not in runs:
                problems.append(f"{where}: run {run!r} is not a [[run]] id of env.toml{_closest(run, runs)}; "
                                f"its step line and table are skipped")
                keep = False
            headers.setdefault(run, no)
            continue
        if not stripped.startswith("|") and re.search(r"rank[\W_]*\d+$", stripped):
            problems.append(f"{where}: {stripped[:80]!r} looks like a run header but is not "
                            f"'<name>_rank_<n>'; not read as one")
        m = _STEP_RE.search(line)
        if m or (run is not None and not stripped.startswith("|") and "总时间" in line and "batch" in line):
            if run is None:
                problems.append(f"{where}: step-time line before any run header; skipped")
            elif not keep:
                pass  # reported with the header
            elif not m:
                problems.append(f"{where}: unreadable step-time line for run {run!r} (expected "
                                f"'总时间<s>s ... batch <ms>ms'); skipped")
            elif run in step_at:
                problems.append(f"{where}: second step-time line for run {run!r} (first at line "
                                f"{step_at[run]}); skipped")
            else:
                try:
                    total_s, step_ms = _num(m.group(1)), _num(m.group(2))
                    if not (total_s > 0 and step_ms > 0):
                        raise ValueError(f"total {total_s:g} s, batch {step_ms:g} ms: a time of 0")
                    steps.append(RunStepTime(run, total_s, step_ms, no))
                    step_at[run] = no
                except ValueError as e:
                    problems.append(f"{where}: skipped step-time line for run {run!r} ({e})")
            continue
        if not stripped.startswith("|"):
            continue
        cells = _cells(line)
        if not in_table:  # a new table: whose is it?
            in_table, seen_rule, owner = True, False, None
            if run is not None and keep:
                if run in tables:
                    problems.append(f"{where}: table has no run header of its own (run {run!r}, line "
                                    f"{headers[run]}, already has the table at line {tables[run]}); "
                                    f"its rows are skipped")
                else:
                    owner, tables[run] = run, no
        if _is_rule(cells):
            seen_rule = True
            continue
        if not (seen_rule or cells[0].startswith("(")):
            continue  # the header row
        if owner is None:
            if run is None and cells[0].startswith("("):
                problems.append(f"{where}: size-bucket row before any run header; skipped")
            continue
        try:
            bm = _BUCKET_RE.match(cells[0].replace(" ", "").replace(",", ", "))
            if not bm:
                raise ValueError(f"bad size bucket {cells[0]!r}")
            lo_unit = bm.group(2) or bm.group(4)
            lo = _whole(bm.group(1), "bucket bound") * UNIT_BYTES[lo_unit]
            hi = _whole(bm.group(3), "bucket bound") * UNIT_BYTES[bm.group(4)]
            if not lo < hi <= MAX_WHOLE:
                raise ValueError(f"bad size bucket {cells[0]!r} (needs lo < hi <= 2**53 bytes)")
            if len(cells) < 6:
                raise ValueError(f"expected 7 columns, got {len(cells)}")
            b = ResponseBucket(owner, lo, hi, _whole(cells[1], "count"), _num(cells[2]),
                               _num(cells[3]), _num(cells[4]), _num(cells[5]), no)
            if not (b.count > 0 and b.mean_ms > 0):  # no response, or no time: not a sample
                raise ValueError(f"count {b.count}, mean time {b.mean_ms:g} ms: no sample")
            buckets.append(b)
        except (ValueError, KeyError, IndexError) as e:
            problems.append(f"{where}: skipped broken row ({e})")
    for r, at in headers.items():
        missing = [what for what, seen in (("step-time line", step_at), ("response table", tables))
                   if r not in seen]
        if missing and (runs is None or r in runs):
            problems.append(f"{source}:{at}: run {r!r} has no {' and no '.join(missing)}")
    for r in [] if runs is None else sorted(set(runs) - set(headers)):
        problems.append(f"{source}: run {r!r} of env.toml has no header line in the report"
                        f"{_closest(r, set(headers) - set(runs))}; it has no samples")
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
#: the unit each row's values must have (rates are converted to gbps by :func:`_value`)
ROW_UNITS = {"total": "s", "step": "ms", "data": "ms", "forward": "ms", "loss": "ms", "backward": "ms",
             "update": "ms", "recv": "gbps", "send": "gbps"}
_VALUE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)((?:\.\d+)*)\s*(ms|s|Kb/s|Mb/s|Gb/s)\b")
_RATE_GBPS = {"Kb/s": 1e-6, "Mb/s": 1e-3, "Gb/s": 1.0}


def _value(cell: str) -> tuple[float, str, bool]:
    m = _VALUE_RE.match(cell)
    if not m:
        raise ValueError(f"bad value {cell!r}")
    v, unit = float(m.group(1)), m.group(3)
    if not v < float("inf"):  # a long digit string reads as inf
        raise ValueError(f"value {cell.strip()[:40]!r} is not finite")
    if unit in _RATE_GBPS:
        return v * _RATE_GBPS[unit], "gbps", bool(m.group(2))
    return v, unit, bool(m.group(2))


def _row_key(cell: str) -> str | None:
    label = cell.rstrip("*").replace(" ", "")
    return next((k for lab, k in BREAKDOWN_ROWS.items() if label == lab.replace(" ", "")), None)


def parse_breakdown(text: str, columns: list[str], source: str = "<report>",
                    models: Collection[str] | None = None) -> tuple[list[BreakdownCell], list[str]]:
    """Parse a ``breakdown``-format report; ``columns`` names the table's value columns.

    A table belongs to the model named in its header cell ``(model)``. ``models``: the
    environment's model names (env.toml ``[[model]] model``); when given, a table of any other
    model is skipped, and each model with no table is reported. Each skipped table, row or cell
    is one ``source:line: ...`` line in ``problems``. Raises :class:`ReportError` when no value
    is read at all.
    """
    cells_out: list[BreakdownCell] = []
    problems: list[str] = []
    model = None     # the current table's model (None: its rows are skipped)
    headed = False   # the current table has a (model) header cell
    in_table = False
    tables: dict[str, int] = {}              # model -> line of its header
    rows_at: dict[tuple[str, str], int] = {}  # (model, row key) -> line
    for no, line in enumerate(text.splitlines(), start=1):
        where = f"{source}:{no}"
        if not line.lstrip().startswith("|"):
            in_table = False
            continue
        cells = _cells(line)
        if not in_table:
            in_table, model, headed = True, None, False
        if _is_rule(cells):
            continue
        hm = re.fullmatch(r"\((\w+)\)", cells[0])
        if hm:
            name, model, headed = hm.group(1), None, True
            n_cols = len(cells) - 1
            while n_cols and not cells[n_cols]:
                n_cols -= 1
            if name in tables:
                problems.append(f"{where}: second table for model {name!r} (first at line {tables[name]}); "
                                f"its rows are skipped")
            elif models is not None and name not in models:
                problems.append(f"{where}: model {name!r} is not a [[model]] of env.toml"
                                f"{_closest(name, models)}; its table is skipped")
            else:
                model, tables[name] = name, no
                if n_cols != len(columns):
                    problems.append(f"{where}: the {name!r} table has {n_cols} value columns, env.toml's "
                                    f"[[column]] entries name {len(columns)}; reading them left to right")
            continue
        if model is None:
            if not headed and _row_key(cells[0]) is not None:
                problems.append(f"{where}: table of breakdown rows (e.g. {cells[0]!r}) without a '(model)' "
                                f"header cell; its rows are skipped")
                headed = True  # one line per table
            continue
        key = _row_key(cells[0])
        if key is None:
            problems.append(f"{where}: skipped unknown row {cells[0]!r}")
            continue
        if (model, key) in rows_at:
            problems.append(f"{where}: skipped row {cells[0]!r}: it repeats line {rows_at[model, key]} "
                            f"of the {model!r} table")
            continue
        rows_at[model, key] = no
        if len(cells) - 1 < len(columns):
            problems.append(f"{where}: skipped broken row (expected {len(columns)} values, got {len(cells) - 1})")
            continue
        for col, cell in zip(columns, cells[1:]):
            try:
                v, unit, typo = _value(cell)
            except ValueError as e:
                problems.append(f"{where}: skipped cell {col} ({e})")
                continue
            if unit != ROW_UNITS[key]:
                problems.append(f"{where}: skipped cell {col} ({cell.strip()!r} is in {unit}, the {key} row "
                                f"is in {ROW_UNITS[key]})")
                continue
            if key in ("total", "step") and not v > 0:
                problems.append(f"{where}: skipped cell {col} ({key} time {cell.strip()!r} is 0)")
                continue
            if typo:
                problems.append(f"{where}: read {cell.strip()!r} as {v:g} {unit} (typo in report)")
            cells_out.append(BreakdownCell(model, col, key, v, unit, no))
    for m in [] if models is None else sorted(set(models) - set(tables)):
        problems.append(f"{source}: model {m!r} of env.toml has no '({m})' table in the report")
    if not cells_out:
        raise ReportError(f"{source}: no breakdown tables found")
    return cells_out, problems
