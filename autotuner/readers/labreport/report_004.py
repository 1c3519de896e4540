"""Report 004 (``compression runs``): gradient compression on MNIST."""
from __future__ import annotations

import re
from dataclasses import dataclass

from ...errors import ReportError
from .common import (
    _DEVICE_COUNT_RE,
    _blank,
    _check_width,
    _closest,
    _count,
    _header,
    _is_rule,
    _short,
    _tables,
    _unwrap,
    parse_percent,
    parse_wall_clock,
)


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
