"""Report 003 (``cpu scaling``): CPU-only MPI runs on a laptop."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...errors import ReportError
from .common import (
    BACKENDS,
    _backend,
    _blank,
    _check_width,
    _count,
    _header,
    _is_rule,
    _positive,
    _tables,
    _unwrap,
)


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
