"""How the command line prints a table: never a number cut to ``1.73…`` (issue 21).

- Output that is not a terminal (a pipe, a file, CI) gets plain aligned text at its full width:
  the title, a header line, a rule, one line per row, columns two spaces apart. Nothing is cut or
  wrapped, so ``grep``/``awk``/``column`` read it.
- A terminal gets a rich table whose columns never go narrower than their longest word: a header
  such as ``hier. allreduce`` wraps between words, a number never. When even that does not fit
  the terminal, the table is as wide as it must be and the terminal wraps whole lines.

Pure rendering: no I/O besides the console it is given.
"""
from __future__ import annotations

import math

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text


#: bytes in a MiB (sizes print in MiB)
MIB = 2**20


def fmt_num(x: float | None, spec: str = ".2f") -> str:
    """``x`` formatted, or ``-`` for None / non-finite."""
    return "-" if x is None or not math.isfinite(x) else format(x, spec)


def _plain(cell) -> str:
    if isinstance(cell, Text):
        return cell.plain
    return Text.from_markup(cell).plain if isinstance(cell, str) else str(cell)


def table_cells(table: Table) -> tuple[list[str], list[list[str]]]:
    """The header and the rows of ``table`` as plain strings (markup removed)."""
    headers = [_plain(c.header) for c in table.columns]
    cols = [[_plain(x) for x in c.cells] for c in table.columns]
    rows = [list(r) for r in zip(*cols)] if cols else []
    return headers, rows


def plain_table(table: Table) -> str:
    """``table`` as plain aligned text (title, header, rule, rows; right-justified columns stay so)."""
    headers, rows = table_cells(table)
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    right = [c.justify == "right" for c in table.columns]

    def line(cells):
        return "  ".join(c.rjust(w) if rj else c.ljust(w) for c, w, rj in zip(cells, widths, right)).rstrip()

    out = []
    if table.title:
        out.append(_plain(table.title))
    out += [line(headers), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]
    return "\n".join(out)


def render_table(console: Console, table: Table) -> None:
    """Print ``table`` on ``console`` without cutting a cell (module docstring)."""
    if not console.is_terminal:
        console.print(plain_table(table), highlight=False, markup=False, soft_wrap=True)
        return
    headers, rows = table_cells(table)
    for i, col in enumerate(table.columns):
        words = [w for cell in [headers[i]] + [r[i] for r in rows] for w in cell.split()]
        col.min_width = max([len(w) for w in words] or [1])
        col.overflow = "fold"
    natural = sum(max([len(headers[i])] + [len(r[i]) for r in rows]) for i in range(len(headers)))
    if natural + 3 * len(headers) + 1 > console.width:  # too wide with rules and padding
        # no vertical rules, two spaces between columns, each column as narrow as its longest word
        table.box, table.show_edge, table.pad_edge = box.SIMPLE_HEAD, False, False
        table.padding, table.collapse_padding = (0, 1), True
        if natural + 2 * len(headers) > console.width:
            for col in table.columns:
                col.max_width = col.min_width
    console.print(table, crop=False)


__all__ = ["render_table", "plain_table", "table_cells", "fmt_num", "MIB"]
