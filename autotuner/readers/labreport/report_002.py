"""Report 002 (``backend runs``): MPI, Gloo and NCCL runs on one g4dn.12xlarge."""
from __future__ import annotations

from dataclasses import dataclass

from ...errors import ReportError
from .common import (
    THROUGHPUT_UNITS,
    _backend,
    _blank,
    _check_width,
    _count,
    _get,
    _header,
    _is_rule,
    _lines,
    _positive,
    _short,
    _tables,
    _unwrap,
    parse_wall_clock,
)


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
