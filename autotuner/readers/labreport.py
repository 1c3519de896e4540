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

Three more formats (issue 13; docs/lab-reports-002-004.md has the tables and their oddities):

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
"""
from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

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


#: Largest size-bucket bound and response count accepted: 2**53 (float64 holds every whole
#: number up to it; a bucket bound in bytes or a count beyond it is not a measurement).
MAX_WHOLE = 2**53


def _num(text: str) -> float:
    """A table cell as a finite non-negative number (``ValueError`` otherwise)."""
    t = text.strip()
    if not re.fullmatch(r"-?" + _NUM, t):
        raise ValueError(f"not a number: {t!r}")
    v = float(t)
    if not v < float("inf") or v < 0:  # a long digit string reads as inf
        raise ValueError(f"not a finite non-negative number: {t!r}")
    return v


def _whole(text: str, what: str) -> int:
    t = text.strip()
    if not re.fullmatch(r"\d{1,16}", t) or int(t) > MAX_WHOLE:
        raise ValueError(f"{what} {t!r} is not a whole number in 0..2**53")
    return int(t)


def _closest(name: str, names) -> str:
    """`` (did you mean 'X'?)`` for the closest of ``names``, or an empty string."""
    m = difflib.get_close_matches(name, sorted(names), n=1, cutoff=0.8)
    return f" (did you mean {m[0]!r}?)" if m else ""


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


# ---------------------------------------------------------------- reports 002, 003, 004 (issue 13)

_CENTER_RE = re.compile(r"<\s*/?\s*center\s*>", re.I)
_BR_RE = re.compile(r"<\s*br\s*/?\s*>", re.I)
_PLAIN_RE = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_GROUPED_RE = re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?")
_DURATION_RE = re.compile(r"(?:([0-9]+)h)?(?:([0-9]+)m)?([0-9]+(?:\.[0-9]+)?)s")
_DEVICE_COUNT_RE = re.compile(r"Device\s*#\s*==?\s*([0-9]+)", re.I)
#: the units a throughput cell may print after its number (report 002: ``images/sec``)
THROUGHPUT_UNITS = ("images/sec", "images/s", "img/sec", "img/s")
#: backend names as the reports spell them, keyed by their lower-case form
BACKENDS = {"mpi": "MPI", "gloo": "Gloo", "nccl": "NCCL"}


def _unwrap(cell: str) -> str:
    """``cell`` without ``<center>`` tags, ``&nbsp;`` and surrounding blanks."""
    return _CENTER_RE.sub(" ", cell).replace("&nbsp;", " ").strip()


def _short(cell: str) -> str:
    return repr(cell.strip()[:40])


def parse_number(cell: str, units: Collection[str] = ()) -> float:
    """A table cell as a finite non-negative number; ``ValueError`` otherwise.

    ``<center>`` tags (opening or closing), ``&nbsp;`` and blanks around the number are dropped;
    thousands separators are read when every group after the first has three digits
    (``1,084.56`` is 1084.56; ``1,08`` is not a number); one of ``units`` may follow the number
    (``530.97 images/sec``). No sign, no exponent.
    """
    t = _unwrap(cell)
    for u in sorted(units, key=len, reverse=True):
        if t.lower().endswith(u.lower()):
            t = t[: len(t) - len(u)].rstrip()
            break
    if not (_PLAIN_RE.fullmatch(t) or _GROUPED_RE.fullmatch(t)):
        raise ValueError(f"{_short(cell)} is not a number")
    v = float(t.replace(",", ""))
    if not v < float("inf"):
        raise ValueError(f"{_short(cell)} is not a finite number")
    return v


def parse_percent(cell: str) -> float:
    """A percentage cell (``98.35%``) as a fraction in [0, 1] (0.9835); ``ValueError`` otherwise."""
    t = _unwrap(cell)
    if not t.endswith("%"):
        raise ValueError(f"{_short(cell)} is not a percentage")
    v = parse_number(t[:-1])
    if v > 100:
        raise ValueError(f"{_short(cell)} is over 100%")
    return float(Decimal(t[:-1].strip().replace(",", "")) / 100)


@dataclass(frozen=True)
class WallClock:
    """The three lines of the shell's ``time``: elapsed, user CPU and system CPU seconds."""

    real_s: float
    user_s: float
    sys_s: float


def _duration(label: str, t: str) -> float:
    m = _DURATION_RE.fullmatch(t)
    if not m:
        raise ValueError(f"{label} {t[:30]!r} is not a time like 1m53.525s")
    h, mi, s = (Decimal(g) if g is not None else None for g in m.groups())
    if (h is not None or mi is not None) and s >= 60:
        raise ValueError(f"{label} {t[:30]!r}: {t[:30]} has 60 seconds or more after the minutes")
    if h is not None and mi is not None and mi >= 60:
        raise ValueError(f"{label} {t[:30]!r}: {t[:30]} has 60 minutes or more after the hours")
    total = float((h or 0) * 3600 + (mi or 0) * 60 + s)  # exact sum, then the nearest float
    if not total < float("inf"):
        raise ValueError(f"{label} {t[:30]!r} is not a finite time")
    return total


def parse_wall_clock(cell: str) -> WallClock:
    """A wall-clock cell, ``real\\t1m53.525s<br/>user\\t0m29.322s<br/>sys\\t0m4.397s``, in seconds.

    The three ``label time`` pairs may be separated by ``<br/>`` (any spelling) or blanks and come
    in any order; each label exactly once; a time is ``[Hh][Mm]S[.fff]s`` with seconds under 60
    after minutes. ``ValueError`` naming what is wrong for a cell that is not such a time (an
    empty cell, ``real 1m5x.2s``, a missing ``sys``, a real time of 0).
    """
    tokens = _BR_RE.sub(" ", _unwrap(cell)).split()
    if not tokens:
        raise ValueError("empty wall-clock cell")
    if len(tokens) % 2:
        raise ValueError(f"wall-clock cell {_short(cell)} is not 'real <t> user <t> sys <t>'")
    seen: dict[str, float] = {}
    for label, t in zip(tokens[::2], tokens[1::2]):
        if label not in ("real", "user", "sys"):
            raise ValueError(f"wall-clock cell {_short(cell)}: {label[:20]!r} is not real, user or sys")
        if label in seen:
            raise ValueError(f"wall-clock cell {_short(cell)}: {label} given twice")
        seen[label] = _duration(label, t)
    missing = [k for k in ("real", "user", "sys") if k not in seen]
    if missing:
        raise ValueError(f"wall-clock cell {_short(cell)} has no {' or '.join(missing)} time")
    if not seen["real"] > 0:
        raise ValueError(f"wall-clock cell {_short(cell)}: real time is 0")
    return WallClock(seen["real"], seen["user"], seen["sys"])


def _count(cell: str, what: str) -> int:
    t = _unwrap(cell)
    if not t:
        raise ValueError(f"no {what} (empty cell)")
    n = _whole(t, what)
    if n < 1:
        raise ValueError(f"{what} {t!r} is 0")
    return n


def _positive(cell: str, what: str, units: Collection[str] = ()) -> float:
    if not _unwrap(cell):
        raise ValueError(f"no {what} (empty cell)")
    try:
        v = parse_number(cell, units)
    except ValueError as e:
        raise ValueError(f"{what}: {e}") from None
    if not v > 0:
        raise ValueError(f"{what} {_short(cell)} is 0")
    return v


def _backend(cell: str) -> str:
    t = _unwrap(cell)
    if not t:
        raise ValueError("no backend (empty cell)")
    if t.lower() not in BACKENDS:
        raise ValueError(f"unknown backend {_short(t)}{_closest(t, BACKENDS.values())}")
    return BACKENDS[t.lower()]


def _blank(cells: list[str]) -> bool:
    return not any(_unwrap(c) for c in cells)


@dataclass
class _Table:
    """A run of consecutive ``|`` lines: (line number, cells) each, and the text line before it."""

    before: str
    rows: list[tuple[int, list[str]]] = field(default_factory=list)


def _tables(text: str) -> list[_Table]:
    tables: list[_Table] = []
    before, cur = "", None
    for no, line in enumerate(text.splitlines(), start=1):
        s = line.strip()
        if s.startswith("|"):
            if cur is None:
                cur = _Table(before)
                tables.append(cur)
            cur.rows.append((no, _cells(line)))
        else:
            cur = None
            if s:
                before = s
    return tables


def _header(table: _Table, labels: dict[str, str], key: str) -> tuple[int, dict[str, int]] | None:
    """(index in ``table.rows``, {column key: cell index}) of the first row with a ``key`` cell."""
    for i, (_, cells) in enumerate(table.rows):
        names = [re.sub(r"\s+", "", _unwrap(c)) for c in cells]
        if key in names:
            cols: dict[str, int] = {}
            for j, n in enumerate(names):
                if n in labels and labels[n] not in cols:
                    cols[labels[n]] = j
            return i, cols
    return None


def _get(cells: list[str], col: int | None) -> str:
    return cells[col] if col is not None and col < len(cells) else ""


def _check_width(cells: list[str], cols: dict[str, int], head_line: int) -> None:
    need = max(cols.values()) + 1
    if len(cells) < need:
        raise ValueError(f"missing column: {len(cells)} cells, the header at line {head_line} names {need}")


def _lines(nos: list[int]) -> str:
    return f"line {nos[0]}" if len(nos) == 1 else f"lines {nos[0]}-{nos[-1]}"


# -------------------------------------------------- report 002: backends on one g4dn.12xlarge

#: report 002's header labels -> column keys
BACKEND_COLUMNS = {"通信后端": "backend", "服务器数量": "servers", "每台服务器显卡数量": "per_server",
                   "耗时": "wall", "平均每步耗时": "step", "平均吞吐率": "throughput", "加速比": "speedup",
                   "Devices": "device"}
_BACKEND_REQUIRED = {"backend": "通信后端", "servers": "服务器数量", "per_server": "每台服务器显卡数量",
                     "wall": "耗时", "device": "Devices"}
DEVICES = {"cpu": "CPU", "gpu": "GPU"}


@dataclass(frozen=True)
class BackendRun:
    """One row of report 002's results table: a training run of ``servers`` x ``per_server``
    processes over ``backend`` on ``device``.

    ``per_server``: the column "GPUs per server" (每台服务器显卡数量); on CPU rows it is the
    number of processes per server. ``real_s``/``user_s``/``sys_s``: the shell's ``time`` in
    seconds. ``throughput_img_s`` and ``speedup``: None where the cell is empty. ``device_line``:
    the line the device was read from, ``line`` itself unless the row's Devices cell is empty
    and the device was inferred from its block (:func:`parse_backend_runs`).
    """

    backend: str
    servers: int
    per_server: int
    device: str
    real_s: float
    user_s: float
    sys_s: float
    throughput_img_s: float | None
    speedup: float | None
    line: int
    device_line: int

    @property
    def device_inferred(self) -> bool:
        return self.device_line != self.line

    @property
    def processes(self) -> int:
        return self.servers * self.per_server


def _backend_row(cells: list[str], cols: dict[str, int], head_line: int) -> tuple[dict, str | None]:
    _check_width(cells, cols, head_line)
    wall = parse_wall_clock(cells[cols["wall"]])
    tp = _get(cells, cols.get("throughput"))
    sp = _get(cells, cols.get("speedup"))
    dev = _unwrap(cells[cols["device"]])
    if dev and dev.lower() not in DEVICES:
        raise ValueError(f"device {_short(dev)} is not CPU or GPU")
    return dict(
        backend=_backend(cells[cols["backend"]]),
        servers=_count(cells[cols["servers"]], "server count"),
        per_server=_count(cells[cols["per_server"]], "GPUs per server"),
        real_s=wall.real_s, user_s=wall.user_s, sys_s=wall.sys_s,
        throughput_img_s=_positive(tp, "throughput", THROUGHPUT_UNITS) if _unwrap(tp) else None,
        speedup=_positive(sp, "speedup") if _unwrap(sp) else None,
    ), (DEVICES[dev.lower()] if dev else None)


def parse_backend_runs(text: str, source: str = "<report>") -> tuple[list[BackendRun], list[str]]:
    """Parse report 002's results table(s). Returns (runs, problems).

    A results table is one whose header row has a ``通信后端`` (backend) cell; its columns are
    found by header label: ``服务器数量`` servers, ``每台服务器显卡数量`` GPUs (processes) per
    server, ``耗时`` wall clock, ``平均吞吐率`` throughput (may be empty), ``加速比`` speedup (may be
    empty), ``Devices`` CPU or GPU. Other tables (the environment table) are ignored.

    Devices: the author filled the Devices cell on some rows only (report 002 lines 35-36 are
    empty, under a ``CPU`` row). The rows between two all-empty rows form a block (one backend on
    one device, processes rising); a row with an empty Devices cell takes the device of the
    nearest row above it in its block with the same backend and a filled cell (among the rows
    read), or failing that the nearest such row below it. The record's ``device_line`` names the line it came from and
    ``problems`` has one note per inferred cell; a row with no such row in its block is skipped.

    A table with no ``耗时`` column whose rows carry no step time, throughput or speedup (the
    multi-server table the author left blank: "（暂时还没钱开多个服务器.jpg）", no money yet for
    more servers) is one note in ``problems``, not an error. A row that cannot be read (a wall
    clock that is not a time, a missing column, text in a number column, an unknown backend, a
    repeat of an earlier row's backend, device, servers and GPUs per server) is one
    ``source:line: ...`` line in ``problems`` and skipped. Raises :class:`ReportError` when no run
    is read at all.
    """
    runs: list[BackendRun] = []
    problems: list[str] = []
    seen: dict[tuple, int] = {}
    n_tables = 0

    def flush(block: list[tuple[int, dict, str | None]]) -> None:
        named = [(no, f["backend"], dev) for no, f, dev in block if dev]
        for no, f, dev in block:
            dev_line = no
            if dev is None:
                above = [(n, d) for n, b, d in named if n < no and b == f["backend"]]
                below = [(n, d) for n, b, d in named if n > no and b == f["backend"]]
                pick = above[-1] if above else below[0] if below else None
                if pick is None:
                    problems.append(f"{source}:{no}: skipped row: Devices cell empty and no {f['backend']} "
                                    f"row of its block names a device")
                    continue
                dev_line, dev = pick
                problems.append(f"{source}:{no}: empty Devices cell read as {dev!r} from line {dev_line} "
                                f"(same block and backend)")
            key = (f["backend"], dev, f["servers"], f["per_server"])
            if key in seen:
                problems.append(f"{source}:{no}: skipped row: {f['backend']} on {dev}, {f['servers']} x "
                                f"{f['per_server']} repeats line {seen[key]}")
                continue
            seen[key] = no
            runs.append(BackendRun(device=dev, line=no, device_line=dev_line, **f))

    for table in _tables(text):
        head = _header(table, BACKEND_COLUMNS, "通信后端")
        if head is None:
            continue
        n_tables += 1
        at, cols = head
        head_line = table.rows[at][0]
        body = [(no, c) for no, c in table.rows[at + 1:] if not _blank(c) and not _is_rule(c)]
        if "wall" not in cols:
            values = [no for no, c in body
                      if any(_unwrap(_get(c, cols.get(k))) for k in ("step", "throughput", "speedup"))]
            if not values:
                rows = f"its {len(body)} rows ({_lines([n for n, _ in body])}) carry" if body else "it has"
                problems.append(f"{source}:{head_line}: table left blank: {rows} no step time, throughput or "
                                f"speedup (text before it: {table.before[:60]!r}); nothing read")
            else:
                problems.append(f"{source}:{head_line}: table has no wall-clock column '耗时'; its rows with "
                                f"values ({_lines(values)}) are skipped")
            continue
        missing = [lab for k, lab in _BACKEND_REQUIRED.items() if k not in cols]
        if missing:
            problems.append(f"{source}:{head_line}: results table has no {', '.join(map(repr, missing))} "
                            f"column; its rows are skipped")
            continue
        block: list[tuple[int, dict, str | None]] = []
        for no, cells in table.rows[at + 1:]:
            if _blank(cells):
                flush(block)
                block = []
                continue
            if _is_rule(cells):
                continue
            try:
                f, dev = _backend_row(cells, cols, head_line)
            except ValueError as e:
                problems.append(f"{source}:{no}: skipped row ({e})")
                continue
            block.append((no, f, dev))
        flush(block)
    if not runs:
        raise ReportError(f"{source}: no results table (header row with a '通信后端' cell) found"
                          if not n_tables else f"{source}: no backend run read")
    return runs, problems


# -------------------------------------------------- report 003: CPU-only MPI on a laptop

#: report 003's header labels -> column keys
CPU_SCALING_COLUMNS = {"通信后端": "backend", "使用CPU数量": "processes", "平均每步耗时": "step",
                       "平均吞吐率": "per_process", "总吞吐率": "total", "加速比": "speedup"}


@dataclass(frozen=True)
class CpuScalingRow:
    """One row of a report 003 table: ``processes`` MPI processes on the laptop's CPU.

    ``model``: the caller's name for the table (``table``: its 0-based index in the report).
    ``step_time``: the "mean time per step" (平均每步耗时) as printed; the report gives no unit
    (seconds or milliseconds: it does not say, and neither reading fits the throughput columns),
    so the number is kept and its unit left to the model. ``per_process`` and ``total``: the
    "mean throughput" and "total throughput" columns, as printed (no unit either).
    """

    model: str
    table: int
    backend: str
    processes: int
    step_time: float
    per_process: float
    total: float
    speedup: float
    line: int


def parse_cpu_scaling(text: str, models: Sequence[str], source: str = "<report>",
                      ) -> tuple[list[CpuScalingRow], list[str]]:
    """Parse report 003's tables. Returns (rows, problems).

    The report's tables do not name their model; the caller does: the k-th table (in report
    order) belongs to ``models[k]`` (report 003: ResNet50 first, ResNet18 second). A table is a
    run of ``|`` lines with a header row holding ``通信后端`` or ``使用CPU数量`` or, failing that,
    a row starting with a backend name (so that a table whose header is damaged still takes its
    place and the next table keeps its model; its rows are skipped and reported). Columns by
    header label: ``使用CPU数量`` processes, ``平均每步耗时`` step time, ``平均吞吐率`` throughput per
    process, ``总吞吐率`` total throughput, ``加速比`` speedup; every cell may be ``<center>``-wrapped.
    A table beyond ``models``, a model with no table, a row that cannot be read (missing column,
    text in a number column, a count of 0, a process count repeated in its table) is one
    ``source:line: ...`` line in ``problems``. Raises :class:`ReportError` when no row is read.
    """
    rows: list[CpuScalingRow] = []
    problems: list[str] = []
    k = 0
    for table in _tables(text):
        head = _header(table, CPU_SCALING_COLUMNS, "使用CPU数量") or _header(table, CPU_SCALING_COLUMNS, "通信后端")
        data_like = any(c and _unwrap(c[0]).lower() in BACKENDS for _, c in table.rows)
        if head is None and not data_like:
            continue
        idx, k = k, k + 1
        first = table.rows[0][0]
        if idx >= len(models):
            problems.append(f"{source}:{first}: table {idx + 1} has no model name (the caller names "
                            f"{len(models)}); skipped")
            continue
        model = models[idx]
        if head is None:
            problems.append(f"{source}:{first}: the {model!r} table (table {idx + 1}) has no header row naming "
                            f"'通信后端' or '使用CPU数量'; its rows are skipped")
            continue
        missing = [lab for lab, key in CPU_SCALING_COLUMNS.items() if key not in head[1]]
        if missing:
            problems.append(f"{source}:{first}: the {model!r} table (table {idx + 1}) has no "
                            f"{', '.join(map(repr, missing))} header cell; its rows are skipped")
            continue
        at, cols = head
        head_line = table.rows[at][0]
        seen: dict[int, int] = {}
        for no, cells in table.rows[at + 1:]:
            if _blank(cells) or _is_rule(cells):
                continue
            try:
                _check_width(cells, cols, head_line)
                r = CpuScalingRow(model, idx, _backend(cells[cols["backend"]]),
                                  _count(cells[cols["processes"]], "process count"),
                                  _positive(cells[cols["step"]], "step time"),
                                  _positive(cells[cols["per_process"]], "throughput per process"),
                                  _positive(cells[cols["total"]], "total throughput"),
                                  _positive(cells[cols["speedup"]], "speedup"), no)
                if r.processes in seen:
                    raise ValueError(f"{r.processes} processes repeats line {seen[r.processes]}")
            except ValueError as e:
                problems.append(f"{source}:{no}: skipped row of the {model!r} table ({e})")
                continue
            seen[r.processes] = no
            rows.append(r)
    for m in models[k:]:
        problems.append(f"{source}: model {m!r} has no table (the report has {k})")
    if not rows:
        raise ReportError(f"{source}: no CPU scaling row read")
    return rows, problems


# -------------------------------------------------- report 004: gradient compression on MNIST

#: report 004's training-algorithm labels (blanks removed) -> algorithm
COMPRESSION_LABELS = {"串行训练": "serial", "用Horovod并行": "horovod",
                      "float8(8bit)压缩": "int8", "float16(16bit)压缩": "fp16"}
COMPRESSION_COLUMNS = {"训练算法": "algorithm", "训练时间": "wall", "结果正确率": "accuracy"}


@dataclass(frozen=True)
class CompressionRun:
    """One row of report 004's table: MNIST, 10 epochs, trained by ``algorithm`` on ``devices``.

    ``algorithm``: ``serial`` (串行训练), ``horovod`` (用Horovod并行), ``int8`` (the author's own
    8-bit compression, labelled float8(8bit)压缩) or ``fp16`` (float16(16bit)压缩); ``label`` as
    printed on ``label_line`` (a row continuing a group has an empty first cell). ``devices``: 1
    for serial, else N of ``Device# == N``. ``accuracy``: the final test accuracy as a fraction.
    """

    algorithm: str
    label: str
    devices: int
    real_s: float
    user_s: float
    sys_s: float
    accuracy: float
    line: int
    label_line: int


def parse_compression_runs(text: str, source: str = "<report>") -> tuple[list[CompressionRun], list[str]]:
    """Parse report 004's results table. Returns (runs, problems).

    The table is the one whose header row has a ``训练算法`` cell; ``训练时间`` is the wall-clock
    column, ``结果正确率`` the accuracy, and the header's first empty cell the device column. A
    row with an empty first cell continues the group of the label above it; an all-empty row
    ends the group. A row that cannot be read (unknown label, a device cell that is not
    ``Device# == N``, a wall clock that is not a time, an accuracy that is not a percentage, a
    missing column, a repeat of an earlier algorithm and device count) is one ``source:line:
    ...`` line in ``problems`` and skipped. Raises :class:`ReportError` when no run is read.
    """
    runs: list[CompressionRun] = []
    problems: list[str] = []
    seen: dict[tuple[str, int], int] = {}
    n_tables = 0
    for table in _tables(text):
        head = _header(table, COMPRESSION_COLUMNS, "训练算法")
        if head is None:
            continue
        n_tables += 1
        at, cols = head
        head_line, head_cells = table.rows[at]
        dev_col = next((j for j, c in enumerate(head_cells) if not _unwrap(c) and j not in cols.values()), None)
        missing = [lab for lab, key in COMPRESSION_COLUMNS.items() if key not in cols]
        if missing or dev_col is None:
            missing += [] if dev_col is not None else ["(empty device header)"]
            problems.append(f"{source}:{head_line}: results table has no {', '.join(map(repr, missing))} "
                            f"column; its rows are skipped")
            continue
        cols = {**cols, "devices": dev_col}
        group: tuple[str, str, int] | None = None   # (algorithm, label, line) of the current group
        bad_label = 0                                # line of a skipped label row opening the group
        for no, cells in table.rows[at + 1:]:
            if _blank(cells):
                group, bad_label = None, 0
                continue
            if _is_rule(cells):
                continue
            try:
                _check_width(cells, cols, head_line)
                label = _unwrap(cells[cols["algorithm"]])
                if label:
                    key = re.sub(r"\s+", "", label)
                    algo = COMPRESSION_LABELS.get(key) or COMPRESSION_LABELS.get(
                        next((k for k in COMPRESSION_LABELS if k.lower() == key.lower()), ""))
                    group, bad_label = ((algo, label, no), 0) if algo else (None, no)
                    if not algo:
                        raise ValueError(f"unknown training algorithm {_short(label)}"
                                         f"{_closest(key, COMPRESSION_LABELS)}")
                elif group is None:
                    raise ValueError(f"empty training-algorithm cell continuing the group of line {bad_label}, "
                                     f"whose label was not read" if bad_label else
                                     "empty training-algorithm cell and no group above it in its block")
                algo, label, label_line = group
                dcell = _unwrap(cells[cols["devices"]])
                dm = _DEVICE_COUNT_RE.fullmatch(dcell)
                if dcell and not dm:
                    raise ValueError(f"device cell {_short(dcell)} is not 'Device# == N'")
                if not dcell and algo != "serial":
                    raise ValueError(f"no device count for {label!r} (empty cell)")
                devices = _count(dm.group(1), "device count") if dm else 1
                if algo == "serial" and devices != 1:
                    raise ValueError(f"serial training on {devices} devices")
                wall = parse_wall_clock(cells[cols["wall"]])
                acc_cell = cells[cols["accuracy"]]
                if not _unwrap(acc_cell):
                    raise ValueError("no accuracy (empty cell)")
                acc = parse_percent(acc_cell)
                if (algo, devices) in seen:
                    raise ValueError(f"{label!r} on {devices} devices repeats line {seen[algo, devices]}")
            except ValueError as e:
                problems.append(f"{source}:{no}: skipped row ({e})")
                continue
            seen[algo, devices] = no
            runs.append(CompressionRun(algo, label, devices, wall.real_s, wall.user_s, wall.sys_s, acc,
                                       no, label_line))
    if not runs:
        raise ReportError(f"{source}: no results table (header row with a '训练算法' cell) found"
                          if not n_tables else f"{source}: no compression run read")
    return runs, problems
