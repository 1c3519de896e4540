"""Helpers shared by the lab-report parsers: table cells, numbers, wall clocks, table finding."""
from __future__ import annotations

import difflib
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from decimal import Decimal


_NUM = r"(\d+(?:\.\d+)?)"


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



# ---------------------------------------------------------------- reports 002, 003, 004

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
