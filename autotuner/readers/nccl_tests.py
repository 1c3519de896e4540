"""Read nccl-tests ``all_reduce_perf`` output: its stdout table, or the JSON file of ``-J``.

Every GPU cluster admin has these files; docs/how-to/nccl-tests.md says how to produce them. The
formats are those of NVIDIA/nccl-tests, read at commit a0b82b2 (``NCCL_TESTS_VERSION``
"2.19.6"); the facts relied on, by file (line numbers at that commit):

- ``src/util.cu`` ``writeDeviceReport`` (l. 622, the format at l. 687): before the table, one
  line per rank, ``#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s`` (rank, group = the
  ``NCCL_TESTS_SPLIT`` colour, pid, host name, CUDA device, PCI id, GPU name), gathered from
  every MPI process in rank order; older releases print no ``Group`` (accepted).
- ``src/util.cu`` ``writeResultHeader`` (l. 739): the column header
  ``#       size         count      type   redop    root     time   algbw   busbw  #wrong     time ...``
  (out-of-place columns, then in-place ones), then the units line
  ``#        (B)    (elements)  ...  (us)  (GB/s)  (GB/s)``; ``-I 1`` adds ``i_min i_max i_p99
  i_cv%`` after each ``#wrong``, ``-S 1`` a trailing ``timestamp`` (two tokens in a row), ``-C 1``
  names the time column ``cputime``. The columns are found by these names, so older layouts
  (no ``root``) read too.
- ``src/util.cu`` ``writeBenchmarkLinePreamble`` (l. 454) / ``writeBenchmarkLineBody`` (l. 497) /
  ``getFloatStr`` (l. 487):
  a row is ``%12li  %12li  %8s  %6s  %6s`` (size in bytes, count in elements, type, redop, root)
  then per half ``  %7s  %6s  %6s  %6g`` (time, algbw, busbw, #wrong or ``N/A`` with ``-c 0``);
  floats print as ``%.2f``, else ``%.1f``, else ``%.0f``, else ``%.1e``, to fit the width. The
  precision of each printed number bounds the consistency checks below.
- Before v2.13.0 (commit 51af557, "Data corruption errors now reported in number of wrong
  elements instead of max deviation") the column after ``busbw`` was ``error``: the largest
  deviation from the expected result (``src/common.cu`` at 51af557~1, l. 736 ``%5.0le``, e.g.
  ``2e-07`` for float sums), not a count; a size was out of bounds when it exceeded
  ``DeltaMaxValue(type) x (nranks - 1)`` (l. 464), counted in the footer. So an ``error`` cell
  must be a number >= 0, and a ``#wrong`` cell 0.
- ``src/util.cu`` ``writeResultFooter`` (l. 771): ``# Out of bounds values : N OK|FAILED`` ends
  the table (N: the sizes whose check failed, in every layout; N > 0 is refused); ``# Avg bus bandwidth    : %g`` is the mean busbw of every row, out-of-place and
  in-place (``src/common.cu`` ``BenchTime`` l. 895: ``args->bw[0] += busBw``).
- ``src/common.cu`` ``BenchTime`` l. 858: time = the mean seconds per operation x 1.0E6, so
  **µs** (doc/PERFORMANCE.md's "time in ms" is out of date); ``TimeTest`` l. 938: size = count
  x the type's bytes (type names: ``test_typenames``, l. 46).
- ``src/all_reduce.cu`` ``AllReduceGetBw`` (l. 59): algbw = bytes / 1.0E9 / s (**GB/s, 10^9
  bytes/s**, not GiB/s), busbw = algbw x 2(n-1)/n with n = every rank of the run (doc/PERFORMANCE.md,
  "AllReduce").
- JSON (``-J``, ``src/util.cu`` ``jsonOutputInit`` l. 317 ... ``jsonOutputFinalize``, one line):
  ``version`` (``JSON_FILE_VERSION``, l. 52: 1 from 2025-10, 2 and 3 in 2026 added
  per-iteration keys only), ``args``, ``config`` (``nthreads``, ``ngpus``, ``devices``: one
  entry per *process*, parsed from its first ``#  Rank`` line by ``parseRankInfo`` l. 425, so
  ranks = entries x nthreads x ngpus), ``results``
  (per size: ``size``, ``count``, ``type``, ``redop``, ``root``, ``out_of_place`` /
  ``in_place``: ``{time | cpu_time, alg_bw, bus_bw, nwrong}``, doubles printed ``%lf``, NaN as the
  string ``"nan"``). The keys read here have not changed from version 1 to 3, so the format is
  taken as stable for those versions; another version is refused (its keys may differ).

Units of what is returned: sizes in bytes, times in µs, bandwidths in GB/s (10^9 bytes/s).

Errors: :class:`autotuner.errors.NcclTestsError`, one line naming the file and line (stdout)
or the JSON field (``results[4].out_of_place.time``): a data row with a cell that is not a
number, too few or too many columns, a size that is not count x type bytes, a non-zero
``#wrong`` (a negative ``error``), a footer with out-of-bounds values, an algbw that is not size / time or a busbw that is not algbw x 2(n-1)/n within
the printed precision (n from the ``#  Rank`` lines); no table, no rows, no ``#  Rank`` line,
a rank listed twice, several ``NCCL_TESTS_SPLIT`` groups, CPU time (``-C 1``), rows of several
types or reduction ops, a second table, the output of another collective, JSON that does not
parse or has an unknown version. Lines outside the table that are not comments (mpirun
banners, NCCL INFO logs) are ignored; inside it, only NCCL log lines are.
"""
from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import NcclTestsError
from .files import read_text

#: bytes per element of nccl-tests' type names (src/common.cu ``test_typenames``; NCCL 1's too)
TYPE_BYTES = {"int8": 1, "uint8": 1, "char": 1, "int32": 4, "uint32": 4, "int": 4, "int64": 8, "uint64": 8,
              "half": 2, "float": 4, "double": 8, "bfloat16": 2, "f8e4m3": 1, "f8e5m2": 1}
#: JSON versions whose keys this reader knows (src/util.cu ``JSON_FILE_VERSION``)
JSON_VERSIONS = (1, 2, 3)

_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)")
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_VERSION = re.compile(r"^#\s*nccl-tests version\s+(\S+)")
_FOOTER = re.compile(r"^#\s*Out of bounds values\s*:\s*(\S+)")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_NCCL_LOG = re.compile(r"^\S+:\d+:\d+\s+\[\d+\]\s+NCCL\s")
_WHOLE = re.compile(r"\d+")


@dataclass(frozen=True)
class PerfRow:
    """One size of the sweep. ``where`` names it in messages (``file:line`` or
    ``file: results[i]``); ``line`` is the 1-based line of the stdout file (None for JSON)."""

    where: str
    line: int | None
    size_bytes: int
    count: int
    dtype: str
    redop: str
    #: out-of-place: mean time per allreduce (µs), algbw and busbw (GB/s)
    time_us: float
    algbw_gbs: float
    busbw_gbs: float
    #: in-place time (µs) and busbw (GB/s), or None when the output has no in-place half
    in_place_time_us: float | None = None
    in_place_busbw_gbs: float | None = None


@dataclass(frozen=True)
class AllReducePerf:
    """One ``all_reduce_perf`` run: its ranks and its rows, in file order."""

    source: str
    form: str                      # "stdout" or "json"
    ranks: int                     # n of busbw = algbw x 2(n-1)/n
    ranks_where: str               # where the rank count was read, for messages
    ranks_per_host: dict[str, int]
    rows: tuple[PerfRow, ...]
    avg_busbw_gbs: float | None    # the footer's mean busbw (GB/s), if present
    version: str | None            # nccl-tests version (stdout) or JSON file version


class _Printed(float):
    """A number as printed: its value and its text (for the precision it was printed with)."""

    text: str

    def __new__(cls, text: str) -> "_Printed":
        obj = super().__new__(cls, text)
        obj.text = text
        return obj


def resolution(text: str) -> float:
    """Half a unit in the last printed place of ``text`` (``"12.34"`` -> 0.005, ``"1066"`` -> 0.5,
    ``"1.2e+04"`` -> 500): how far the printed number can be from the value it stands for."""
    t = text.strip().lower()
    mant, _, exp = t.partition("e")
    decimals = len(mant.split(".", 1)[1]) if "." in mant else 0
    return 0.5 * 10.0 ** (-decimals) * (10.0 ** int(exp) if exp else 1.0)


def _number(text: str, where: str, what: str) -> _Printed:
    try:
        v = _Printed(text)
    except ValueError:
        raise NcclTestsError(f"{where}: {what}: {text!r}: not a number") from None
    if not math.isfinite(v):
        raise NcclTestsError(f"{where}: {what}: {text!r}: not a finite number")
    return v


def check_bandwidths(where: str, size: int, time: _Printed, algbw: _Printed, busbw: _Printed, ranks: int,
                     half: str) -> None:
    """Raise NcclTestsError unless algbw = size / time and busbw = algbw x 2(n-1)/n, each within
    the precision the numbers were printed with (src/all_reduce.cu ``AllReduceGetBw``; bytes,
    µs, GB/s)."""
    eps = 1e-9
    rt, ra, rb = resolution(time.text), resolution(algbw.text), resolution(busbw.text)
    lo = size / ((time + rt) * 1e3)
    hi = size / (max(time - rt, 1e-12) * 1e3)
    if not (lo - ra - eps * max(1.0, algbw) <= algbw <= hi + ra + eps * max(1.0, algbw)):
        raise NcclTestsError(f"{where}: algbw{half}: {algbw.text}: not size / time = {size / (time * 1e3):.4g} GB/s "
                             f"({size} B in {time.text} us; src/all_reduce.cu AllReduceGetBw)")
    f = 2 * (ranks - 1) / ranks
    if abs(busbw - f * algbw) > rb + f * ra + eps * max(1.0, busbw):
        raise NcclTestsError(f"{where}: busbw{half}: {busbw.text}: not algbw x 2(n-1)/n = {f * algbw:.4g} GB/s for "
                             f"the n = {ranks} ranks of the run (doc/PERFORMANCE.md, AllReduce)")


def _size_check(where: str, size: int, count: int, dtype: str) -> None:
    tb = TYPE_BYTES.get(dtype)
    if tb is not None and size != count * tb:
        raise NcclTestsError(f"{where}: size: {size}: not count x {tb} bytes ({count} {dtype} elements)")


def _same_kind(where: str, row: PerfRow, first: PerfRow | None) -> None:
    if first is not None and (row.dtype, row.redop) != (first.dtype, first.redop):
        raise NcclTestsError(f"{where}: type/redop: {row.dtype} {row.redop}: differs from the first row's "
                             f"{first.dtype} {first.redop} ({first.where}): measure one type and op "
                             "(no -d all / -o all)")


def _not_all_reduce(name: str) -> bool:
    return "all_reduce" not in Path(name).name


# --- stdout ---------------------------------------------------------------------------------

@dataclass
class _Columns:
    line: int
    width: int          # tokens in a row
    size: int
    count: int | None
    dtype: int | None
    redop: int | None
    halves: list[tuple[int, int, int, int | None]]  # (time, algbw, busbw, #wrong) per half
    #: the check column is the pre-2.13 ``error`` (max deviation), not ``#wrong`` (a count)
    deviation: bool = False


def _columns(tokens: list[str], where: str, line: int) -> _Columns:
    if "cputime" in tokens:
        raise NcclTestsError(f"{where}: the time column is cputime (-C 1): CPU launch time, not the collective's "
                             "latency; run all_reduce_perf without -C")
    halves = []
    for i, t in enumerate(tokens):
        if t == "time":
            try:
                a = tokens.index("algbw", i)
                b = tokens.index("busbw", a)
            except ValueError:
                raise NcclTestsError(f"{where}: column header has 'time' without 'algbw' and 'busbw' "
                                     "after it") from None
            w = b + 1 if b + 1 < len(tokens) and tokens[b + 1] in ("#wrong", "error") else None
            halves.append((i, a, b, w))
    if not halves:
        raise NcclTestsError(f"{where}: column header has no 'time' column")

    def idx(name: str) -> int | None:
        return tokens.index(name) if name in tokens else None
    width = len(tokens) + (1 if tokens[-1] == "timestamp" else 0)  # "%Y-%m-%d %H:%M:%S": two tokens
    return _Columns(line, width, 0, idx("count"), idx("type"), idx("redop"), halves,
                    deviation="error" in tokens and "#wrong" not in tokens)


def parse_stdout(text: str, source: str) -> AllReducePerf:
    """The stdout of one ``all_reduce_perf`` run (see the module docstring). ``source`` names the
    file in messages. Raises NcclTestsError."""
    ranks: dict[int, int] = {}       # rank -> line
    hosts: Counter[str] = Counter()
    groups: dict[int, int] = {}      # group -> first line
    cols: _Columns | None = None
    rows: list[PerfRow] = []
    avg = None
    version = None
    done = False
    lines = text.lstrip("\ufeff").splitlines()
    for n, raw in enumerate(lines, 1):
        s = raw.strip()
        where = f"{source}:{n}"
        if not s:
            continue
        if s.startswith("#"):
            tokens = s[1:].split()
            if tokens[:1] == ["size"]:
                if cols is not None:
                    raise NcclTestsError(f"{where}: a second table (the first starts at line {cols.line}): "
                                         "one all_reduce_perf run per file")
                if not ranks:
                    raise NcclTestsError(f"{where}: no '#  Rank N Group G Pid P on HOST device D' line before the "
                                         "table: the rank count is unknown (keep all_reduce_perf's whole output)")
                cols = _columns(tokens, where, n)
                continue
            if done or cols is not None:
                if m := _FOOTER.match(s):
                    done = True
                    if m.group(1) != "0":
                        raise NcclTestsError(f"{where}: out of bounds values: {m.group(1)}, not 0: nccl-tests found "
                                             "wrong allreduce results; fix the cluster before fitting its timings")
                elif (m := _AVG.match(s)) and done:
                    try:
                        avg = float(m.group(1))
                    except ValueError:
                        pass
                continue
            if m := _RANK.match(s):
                r, g, host = int(m.group(1)), int(m.group(2) or 0), m.group(4)
                if r in ranks:
                    raise NcclTestsError(f"{where}: rank {r} is listed twice (line {ranks[r]}): one run per file")
                groups.setdefault(g, n)
                if len(groups) > 1:
                    raise NcclTestsError(f"{where}: group {g}: a second NCCL_TESTS_SPLIT group (group "
                                         f"{min(groups)} at line {groups[min(groups)]}); busbw is per group: "
                                         "measure without NCCL_TESTS_SPLIT")
                ranks[r] = n
                hosts[host] += 1
            elif m := _STARTING.match(s):
                if _not_all_reduce(m.group(1)):
                    raise NcclTestsError(f"{where}: the output of {m.group(1)}, not all_reduce_perf")
            elif m := _VERSION.match(s):
                version = m.group(1)
            continue
        if cols is None or done or _NCCL_LOG.match(s):
            continue  # mpirun banners and NCCL logs around the table
        rows.append(_stdout_row(s.split(), cols, where, n, len(ranks), rows[0] if rows else None))
    if cols is None:
        raise NcclTestsError(f"{source}: no all_reduce_perf table (no '#  size  count  type  redop  root  time  "
                             "algbw  busbw ...' column header line)")
    if not rows:
        raise NcclTestsError(f"{source}:{cols.line}: the table has no rows (did the run stop early?)")
    first, last = min(ranks.values()), max(ranks.values())
    return AllReducePerf(source, "stdout", len(ranks), f"{source}:{first}-{last}", dict(hosts), tuple(rows), avg,
                         version)


def _stdout_row(tok: list[str], cols: _Columns, where: str, n: int, nranks: int, first: PerfRow | None) -> PerfRow:
    if len(tok) != cols.width:
        raise NcclTestsError(f"{where}: {len(tok)} columns, the column header (line {cols.line}) has {cols.width}: "
                             "not a row of the table")
    if not _WHOLE.fullmatch(tok[cols.size]):
        raise NcclTestsError(f"{where}: size: {tok[cols.size]!r}: not a whole number of bytes")
    size = int(tok[cols.size])
    count = size
    if cols.count is not None:
        if not _WHOLE.fullmatch(tok[cols.count]):
            raise NcclTestsError(f"{where}: count: {tok[cols.count]!r}: not a whole number of elements")
        count = int(tok[cols.count])
    dtype = tok[cols.dtype] if cols.dtype is not None else "?"
    redop = tok[cols.redop] if cols.redop is not None else "?"
    _size_check(where, size, count, dtype)
    vals = []
    for k, (ti, ai, bi, wi) in enumerate(cols.halves):
        half = " (out-of-place)" if k == 0 else " (in-place)" if k == 1 else f" (half {k + 1})"
        t = _number(tok[ti], where, "time" + half)
        a = _number(tok[ai], where, "algbw" + half)
        b = _number(tok[bi], where, "busbw" + half)
        if not t > 0:
            raise NcclTestsError(f"{where}: time{half}: {tok[ti]}: not > 0 us")
        if a < 0 or b < 0:
            raise NcclTestsError(f"{where}: bandwidth{half}: {tok[ai]} {tok[bi]}: negative")
        if wi is not None and tok[wi] != "N/A" and cols.deviation:
            if _number(tok[wi], where, "error" + half) < 0:
                raise NcclTestsError(f"{where}: error{half}: {tok[wi]}: a negative deviation (the column is the "
                                     "largest deviation from the expected sum, nccl-tests before 2.13)")
        elif wi is not None and tok[wi] != "N/A":
            w = _number(tok[wi], where, "#wrong" + half)
            if w != 0:
                raise NcclTestsError(f"{where}: #wrong{half}: {tok[wi]}: the allreduce gave wrong results; fix the "
                                     "cluster before fitting its timings")
        check_bandwidths(where, size, t, a, b, nranks, half)
        vals.append((t, a, b))
    row = PerfRow(where, n, size, count, dtype, redop, float(vals[0][0]), float(vals[0][1]), float(vals[0][2]),
                  float(vals[1][0]) if len(vals) > 1 else None, float(vals[1][2]) if len(vals) > 1 else None)
    _same_kind(where, row, first)
    return row


# --- JSON -----------------------------------------------------------------------------------

def parse_json_output(text: str, source: str) -> AllReducePerf:
    """The ``-J`` JSON file of one ``all_reduce_perf`` run (versions :data:`JSON_VERSIONS`; see
    the module docstring). Unknown keys are ignored. Raises NcclTestsError."""
    try:
        doc = json.loads(text.lstrip("\ufeff"), parse_float=_Printed)
    except json.JSONDecodeError as e:
        raise NcclTestsError(f"{source}: not JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except RecursionError:
        raise NcclTestsError(f"{source}: nested too deeply") from None
    if not isinstance(doc, dict):
        raise NcclTestsError(f"{source}: (top level): a JSON {type(doc).__name__}: not an nccl-tests JSON object")
    v = doc.get("version")
    if type(v) is not int or v not in JSON_VERSIONS:
        raise NcclTestsError(f"{source}: version: {v!r}: not a known nccl-tests JSON version "
                             f"({', '.join(map(str, JSON_VERSIONS))}; src/util.cu JSON_FILE_VERSION)")
    args = doc.get("args")
    if isinstance(args, list) and args and isinstance(args[0], str) and _not_all_reduce(args[0]):
        raise NcclTestsError(f"{source}: args[0]: {args[0]!r}: the output of another test, not all_reduce_perf")
    cfg = doc.get("config")
    if not isinstance(cfg, dict):
        raise NcclTestsError(f"{source}: config: {_short(cfg)}: missing or not an object")
    per = 1
    for key in ("nthreads", "ngpus"):
        x = cfg.get(key)
        if type(x) is not int or x < 1:
            raise NcclTestsError(f"{source}: config.{key}: {_short(x)}: not a whole number >= 1")
        per *= x
    devs = cfg.get("devices")
    if not isinstance(devs, list) or not devs:
        raise NcclTestsError(f"{source}: config.devices: {_short(devs)}: no device list: the rank count is unknown")
    hosts: Counter[str] = Counter()
    groups: set[Any] = set()
    for i, d in enumerate(devs):
        if not isinstance(d, dict) or not isinstance(d.get("hostname"), str):
            raise NcclTestsError(f"{source}: config.devices[{i}]: {_short(d)}: not a device entry with a hostname")
        groups.add(d.get("group", 0))
        if len(groups) > 1:
            raise NcclTestsError(f"{source}: config.devices[{i}].group: {d.get('group')!r}: a second "
                                 "NCCL_TESTS_SPLIT group; busbw is per group: measure without NCCL_TESTS_SPLIT")
        hosts[d["hostname"]] += per
    nranks = len(devs) * per
    res = doc.get("results")
    if not isinstance(res, list) or not res:
        raise NcclTestsError(f"{source}: results: {_short(res)}: no results (did the run stop early?)")
    rows: list[PerfRow] = []
    for i, e in enumerate(res):
        rows.append(_json_row(e, f"{source}: results[{i}]", nranks, rows[0] if rows else None))
    avg = doc.get("average_bus_bandwidth")
    avg = avg.get("bandwidth") if isinstance(avg, dict) else None
    return AllReducePerf(source, "json", nranks, f"{source}: config.devices ({len(devs)} processes x {per} GPUs)",
                         dict(hosts), tuple(rows), float(avg) if isinstance(avg, float) else None, str(v))


def _short(x: Any, limit: int = 60) -> str:
    s = repr(x)
    return s if len(s) <= limit else s[:limit - 3] + "..."


def _json_num(x: Any, where: str, integral: bool = False) -> Any:
    if integral:
        if type(x) is not int or x < 0:
            raise NcclTestsError(f"{where}: {_short(x)}: not a whole number >= 0")
        return x
    if type(x) is int:
        x = _Printed(str(x))
    if not isinstance(x, _Printed):
        raise NcclTestsError(f"{where}: {_short(x)}: not a number")
    if not math.isfinite(x):
        raise NcclTestsError(f"{where}: {x.text}: not a finite number")
    return x


def _json_row(e: Any, where: str, nranks: int, first: PerfRow | None) -> PerfRow:
    if not isinstance(e, dict):
        raise NcclTestsError(f"{where}: {_short(e)}: not a result object")
    size = _json_num(e.get("size"), f"{where}.size", integral=True)
    count = _json_num(e.get("count"), f"{where}.count", integral=True)
    dtype, redop = str(e.get("type", "?")), str(e.get("redop", "?"))
    _size_check(where, size, count, dtype)
    vals = []
    for key in ("out_of_place", "in_place"):
        half = e.get(key)
        if half is None and key == "in_place":
            continue
        if not isinstance(half, dict):
            raise NcclTestsError(f"{where}.{key}: {_short(half)}: missing or not an object")
        if "cpu_time" in half:
            raise NcclTestsError(f"{where}.{key}.cpu_time: CPU launch time (-C 1), not the collective's latency; "
                                 "run all_reduce_perf without -C")
        t = _json_num(half.get("time"), f"{where}.{key}.time")
        a = _json_num(half.get("alg_bw"), f"{where}.{key}.alg_bw")
        b = _json_num(half.get("bus_bw"), f"{where}.{key}.bus_bw")
        if not t > 0:
            raise NcclTestsError(f"{where}.{key}.time: {t.text}: not > 0 us")
        if a < 0 or b < 0:
            raise NcclTestsError(f"{where}.{key}: bandwidth {a.text} {b.text}: negative")
        w = half.get("nwrong")
        if w is not None and _json_num(w, f"{where}.{key}.nwrong") != 0:
            raise NcclTestsError(f"{where}.{key}.nwrong: {_short(w)}: the allreduce gave wrong results; fix the "
                                 "cluster before fitting its timings")
        check_bandwidths(where, size, t, a, b, nranks, f" ({key.replace('_', '-')})")
        vals.append((t, a, b))
    row = PerfRow(where, None, size, count, dtype, redop, float(vals[0][0]), float(vals[0][1]), float(vals[0][2]),
                  float(vals[1][0]) if len(vals) > 1 else None, float(vals[1][2]) if len(vals) > 1 else None)
    _same_kind(where, row, first)
    return row


# --- either ---------------------------------------------------------------------------------

def parse_all_reduce_perf(text: str, source: str) -> AllReducePerf:
    """``all_reduce_perf`` output in either form: JSON when the text starts with ``{``, else
    stdout. ``source`` names the file in messages. Raises NcclTestsError."""
    if text.lstrip("\ufeff \t\r\n").startswith("{"):
        return parse_json_output(text, source)
    return parse_stdout(text, source)


def read_all_reduce_perf(path: Path, source: str | None = None) -> AllReducePerf:
    """Read and parse ``path`` (:func:`parse_all_reduce_perf`); ``source`` names it in messages
    (default: the path). Raises NcclTestsError, also for a file that is missing, unreadable or
    not UTF-8."""
    src = source or str(path)
    return parse_all_reduce_perf(read_text(path, NcclTestsError, src), src)
