"""How the command line prints a table: never a number cut to ``1.73…``.

- Output that is not a terminal (a pipe, a file, CI) gets plain aligned text: the title, a header
  line, a rule, one line per row, columns two spaces apart, nothing cut, so ``grep``/``awk`` read it.
  At its full width, unless the environment names a width (``COLUMNS=80 autotuner ... | cat``): then
  text cells and headers wrap between words (and a left-justified cell's path after a ``/``), each column no
  narrower than its longest word, so a row may take several lines and a number is never split
  (:func:`plain_table`'s ``width``).
- A terminal gets a rich table whose columns never go narrower than their longest word: a header
  such as ``hier. allreduce`` wraps between words, a number never. When even that does not fit
  the terminal, the table is as wide as it must be and the terminal wraps whole lines.

Pure rendering: no I/O besides the console it is given.
"""
from __future__ import annotations

import math
import os
import re
import textwrap
from itertools import zip_longest

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


#: a left-justified cell's unbreakable pieces: a path segment with its ``/``, a word, or the space between (ASCII
#: whitespace only: the no-break space :func:`_glue` puts between a number and its unit is part of a word)
_PIECE = re.compile(r"[^ \t\n/]*/+|[^ \t\n/]+|[ \t\n]+")
#: a number and the unit after it, kept on one line of a piped table ("1.2 %", never "1.2" then "%")
_UNIT = re.compile(r"(\d) (%|ms\b|µs\b|us\b|ns\b|s\b|MiB\b|KiB\b|GiB\b|MB\b|GB\b)")
_NBSP = "\u00a0"


def _glue(cell: str) -> str:
    """``cell`` with a no-break space between each number and its unit (:data:`_UNIT`)."""
    return _UNIT.sub("\\1" + _NBSP + "\\2", cell)


def _pieces(cell: str, paths: bool) -> list[str]:
    """``cell``'s words, and with ``paths`` each path segment ending in ``/`` a piece of its own."""
    return [t for t in (_PIECE.findall(cell) if paths else re.split(r"[ \t\n]+", cell)) if t and not t.isspace()]


def _cell_width(cell: str) -> int:
    """The characters ``cell`` takes across: its longest line (a cell's newline breaks it, piped as on a terminal)."""
    return max(len(ln) for ln in cell.split("\n"))


def _wrap(cell: str, width: int, paths: bool) -> list[str]:
    """``cell`` in lines of at most ``width`` characters, broken at its own newlines (as rich does on a terminal),
    then between words (and, with ``paths``, after a ``/``), never inside one; a piece longer than ``width`` stands
    on its own line."""
    if "\n" in cell:
        return [ln for part in cell.split("\n") for ln in _wrap(part, width, paths)]
    if not paths:
        return textwrap.wrap(cell, width, break_long_words=False, break_on_hyphens=False) or [""]
    out, cur = [], ""
    for tok in _PIECE.findall(cell):
        if tok.isspace():
            cur += " " if cur else ""
        elif not cur or len(cur + tok) <= width:
            cur += tok
        else:
            out.append(cur.rstrip())
            cur = tok
    return out + [cur.rstrip()] if cur.strip() else (out or [""])


def _fitted_widths(headers: list[str], rows: list[list[str]], width: int | None,
                   paths: list[bool] | None = None) -> list[int]:
    """Each column's width: its longest cell, narrowed until the columns and their two-space gaps fit ``width``
    characters, or as far as the words allow: first by wrapping headers only (no row gets taller), then text cells
    too; each time the column with the most room first, never under its longest word (in a ``paths`` column, its
    longest path segment)."""
    cells = [[h] + [r[i] for r in rows] for i, h in enumerate(headers)]
    widths = [max(_cell_width(c) for c in col) for col in cells]
    if width is None:
        return widths
    paths = paths or [False] * len(headers)

    def word(c, i):
        return max((len(w) for w in _pieces(c, paths[i])), default=0)

    header_only = [max([word(col[0], i)] + [_cell_width(c) for c in col[1:]]) for i, col in enumerate(cells)]
    any_cell = [max(word(c, i) for c in col) for i, col in enumerate(cells)]
    for floor in (header_only, any_cell):
        while sum(widths) + 2 * (len(widths) - 1) > width:
            room = [w - f for w, f in zip(widths, floor)]
            k = max(range(len(widths)), key=lambda i: (room[i], widths[i]))
            if room[k] <= 0:
                break
            widths[k] -= 1
    return widths


def plain_table(table: Table, width: int | None = None) -> str:
    """``table`` as plain aligned text (title, header, rule, rows; right-justified columns stay so).

    ``width``: None prints each row on one line at its full width; a number (characters, e.g. ``COLUMNS``) wraps
    text cells and headers between words (a left-justified column's paths also after a ``/``) so the table fits it
    where the longest words allow (a number has no space, so it never wraps, nor is it parted from its unit:
    ``1.2 %``); a wrapped row continues on the next lines in the same columns."""
    headers, rows = table_cells(table)
    headers, rows = [_glue(h) for h in headers], [[_glue(c) for c in r] for r in rows]
    right = [c.justify == "right" for c in table.columns]
    paths = [not r for r in right]  # a text column's paths may break after a "/"; a number column never
    widths = _fitted_widths(headers, rows, width, paths)

    def lines(cells):
        parts = [_wrap(c, w, pt) for c, w, pt in zip(cells, widths, paths)]
        return ["  ".join(c.rjust(w) if rj else c.ljust(w) for c, w, rj in zip(cs, widths, right)).rstrip()
                for cs in zip_longest(*parts, fillvalue="")]

    out = []
    if table.title:
        out.append(_plain(table.title))
    out += [*lines(headers), "  ".join("-" * w for w in widths), *(ln for r in rows for ln in lines(r))]
    return "\n".join(out).replace(_NBSP, " ")


def _environ_width() -> int | None:
    """The width the environment names (``COLUMNS``, a positive integer), or None."""
    try:
        w = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        return None
    return w if w > 0 else None


def render_table(console: Console, table: Table) -> None:
    """Print ``table`` on ``console`` without cutting a cell (module docstring)."""
    if not console.is_terminal:
        console.print(plain_table(table, _environ_width()), highlight=False, markup=False, soft_wrap=True)
        return
    headers, rows = table_cells(table)
    for i, col in enumerate(table.columns):
        words = [w for cell in [headers[i]] + [r[i] for r in rows] for w in cell.split()]
        col.min_width = max([len(w) for w in words] or [1])
        col.overflow = "fold"
    natural = sum(max(_cell_width(c) for c in [headers[i]] + [r[i] for r in rows]) for i in range(len(headers)))
    if natural + 3 * len(headers) + 1 > console.width:  # too wide with rules and padding
        # no vertical rules, two spaces between columns, each column as narrow as its longest word
        table.box, table.show_edge, table.pad_edge = box.SIMPLE_HEAD, False, False
        table.padding, table.collapse_padding = (0, 1), True
        if natural + 2 * len(headers) > console.width:
            # the piped table's widths where they fit (headers wrap first, then text); else each column as narrow as
            # its longest word
            widths = _fitted_widths(headers, rows, console.width - 1, [c.justify != "right" for c in table.columns])
            fits = sum(widths) + 2 * (len(widths) - 1) <= console.width - 1
            for col, w in zip(table.columns, widths):
                col.max_width = max(w, col.min_width) if fits else col.min_width
                col.width = col.max_width if fits else None
    console.print(table, crop=False)


#: a prediction's range (the small-response price the env's phases leave open) is shown beside it where its ends lie
#: further apart than this fraction of it: ``autotuner accuracy``'s table and ``validate``'s report
RANGE_SHOWN = 0.02

#: the header of ``envs``' and ``ddp envs``' column of an env's checked figures (:func:`checked_cell`)
CHECKED_HEADER = "checked: error % mean/worst (trials)"


def checked_cell(c: dict | None) -> str:
    """An env's checked figures (``envs()``/``ddp_envs()`` rows' ``checked``: ``mean_error_pct``, ``worst_pct``,
    ``trials``, and DDP's ``untrusted``) as one cell, ``1.2/-3.0 (99)``, ``17.6/-25.1 (33) untrusted``; ``never``
    for None."""
    if c is None:
        return "never"
    return f"{c['mean_error_pct']:.1f}/{c['worst_pct']:+.1f} ({c['trials']})" + (" untrusted" if c.get("untrusted") else "")


__all__ = ["render_table", "plain_table", "table_cells", "fmt_num", "MIB", "RANGE_SHOWN", "CHECKED_HEADER",
           "checked_cell"]


def _timeline_fixed(small: dict) -> str:
    """The timelines' back-to-back fixed cost (ms) of ``fit.small_responses``, pooled over its phases."""
    ph = [v for v in (small.get("phases") or {}).values() if v.get("n")]
    n = sum(v["n"] for v in ph)
    return "none" if not n else f"{sum(v['n'] * v['mean_fixed_ms'] for v in ph) / n:.2f} ms"


def fit_regime_lines(d: dict) -> list[str]:
    """Where each figure of a ``sweep`` env's fitted model (``d``: the model dict, schema ``autotuner.model/1``)
    comes from, one regime per line (``autotuner fit``'s output; research/notes/accuracy.md, "The small-response
    regime"): the small responses' fixed cost (back to back in a busy cycle) and per-MiB cost, the large
    responses' line, what the mid-size burst phase moved (above the knee, below it), the fused responses' copies
    (the fused phase's, or the timelines'), fp16's float16 sum (the env's fp16 phase, or borrowed from the phases of
    its stack and sitting: :func:`autotuner.fit.collective.borrow_fp16_sum`), the busy cycle's negotiation, a cache-off
    cycle's from the step phase where charged (:func:`autotuner.frameworks.horovod.fit.phase_step.step_cache_off`), and what
    the printed R² and MAPE
    describe. Empty for other formats."""
    f, inter = d.get("fit") or {}, (d.get("cost_model") or {}).get("inter") or {}
    if "small_responses" not in f:
        return []
    p = int(f.get("p", 2))
    small, piece = f["small_responses"], f.get("piecewise")
    knee = inter.get("large_from_bytes")
    below = f" (< {knee / MIB:g} MiB)" if knee else ""
    a_ms = 2 * (p - 1) * float(inter["alpha_us"]) * 1e-3
    b_ms = 2 * (p - 1) / p * 8e-6 * MIB / float(inter["bandwidth_gbps"])  # ms per MiB on p ranks
    ph = small.get("phases", {})
    counts = ", ".join(f"{k.replace('_', ' ')} {v.get('n', 0)}" for k, v in ph.items())
    lines = []
    burst = small.get("burst") or {}
    step = small.get("step") or {}
    if step.get("charged"):
        lo, hi = step["fixed_range_ms"]
        lines.append(f"  small responses{below}: {a_ms:.2f} ms fixed per response ({lo:.2f}-{hi:.2f} over the rounds), "
                     f"from the step phase: a replay of many small gradients, fusion off against the defaults, wall "
                     f"clock, no timeline ({len(step['rounds'])} round(s), {step['delta_ms']:.1f} ms more per step; "
                     f"the timelines' back-to-back spans said "
                     + ("-" if small.get("fixed_ms") is None else f"{small['fixed_ms']:.2f} ms")
                     + f"; the sweep line's own intercept was {small['line_a_ms']:.2f} ms)")
        long = step.get("long") or {}
        if long.get("one_latency_delta_ms") is not None:
            lines.append(f"  the step phase at {long['compute_ms']:g} ms of compute (recorded, not charged): fusion off "
                         f"{long['delta_ms']:.1f} ms more per step ({long['delta_range_ms'][0]:.1f}-"
                         f"{long['delta_range_ms'][1]:.1f} over {len(long['rounds'])} round(s)), the price above "
                         f"simulates {long['one_latency_delta_ms']:.1f} ms: small responses during a long backward "
                         "cost less"
                         + ("" if long.get("after_ms") is None else
                            f" ({long['during_ms']:.2f} ms during it, {long['after_ms']:.2f} ms after it would meet "
                            "both computes)")
                         + "; research/notes/accuracy.md, \"The step phase at 300 ms of compute\"")
        elif long.get("note"):
            lines.append(f"  the step phase at {long['compute_ms']:g} ms of compute: {long['note']}")
        rng = (small.get("range") or {}).get("ms")
        if rng is not None:
            src = small["range"]["from"]
            ends = sorted((("step", src["step"]), ("burst", src["burst"])), key=lambda kv: kv[1])
            lines.append(f"  small-response price left open: {ends[0][1]:.2f} ms ({ends[0][0]} phase) to {ends[1][1]:.2f} "
                         f"ms ({ends[1][0]} phase) per response (recorded, not charged: simulate gives the step time "
                         "at both ends; research/notes/accuracy.md, \"The small-response price the phases leave open\")")
    elif burst.get("alpha_us") is not None and burst.get("charged", True):
        lines.append(f"  small responses{below}: {a_ms:.2f} ms fixed per response, from the burst phase: 1 and 32 "
                     f"responses at once, wall clock, no timeline ({burst['jobs']} job(s), {len(burst['points'])} "
                     f"point(s); the timelines' back-to-back spans said "
                     + ("-" if small.get("phases") is None else f"{_timeline_fixed(small):s}")
                     + f"; the sweep line's own intercept was {small['line_a_ms']:.2f} ms)")
    elif small.get("fixed_ms") is not None and small.get("charged", True):
        lines.append(f"  small responses{below}: {a_ms:.2f} ms fixed per response, from back-to-back responses in a "
                     f"busy cycle ({counts} response(s) <= {int(small['up_to_bytes']) // 1024} KiB; mean span less "
                     f"the bandwidth part; the sweep line's own intercept was {small['line_a_ms']:.2f} ms)")
    else:
        lines.append(f"  small responses{below}: {a_ms:.2f} ms fixed per response, the sweep line's intercept "
                     f"({small.get('note', 'no back-to-back phase')}"
                     + ("" if small.get("fixed_ms") is None else f"; back to back: {small['fixed_ms']:.2f} ms") + ")")
    if step.get("fixed_ms") is not None and not step.get("charged"):
        lines.append(f"  step phase (recorded, not charged: it ran {len(step['rounds'])} round(s) on fewer ranks than the "
                     f"cluster's): {step['fixed_ms']:.2f} ms per small response")
    co = step.get("cache_off") or {}
    if co.get("charged"):
        nc, pt = co["nocache_us"], co["per_tensor_us"]
        lines.append(f"  cache off: {nc[1]:.0f} µs a negotiating cycle + {pt[1]:.1f} µs per tensor per rank, from the "
                     f"step phase (cache off {co['measured_ms']:+.1f} ms per step against the defaults, median of "
                     f"{co['rounds']} round(s), range {co['measured_range_ms'][0]:+.1f} to "
                     f"{co['measured_range_ms'][1]:+.1f}; simulated {co['simulated_ms']:+.1f}): k = {co['k']:.2f} of "
                     f"the timelines' extra ({nc[0]:.0f} µs, {pt[0]:.1f} µs per tensor, "
                     f"{co['simulated_before_ms']:+.1f} ms), whose writer works per tensor in those cycles")
    elif step.get("cache_off_delta_ms") is not None:
        lines.append(f"  cache off in the step phase (recorded, not charged; {co.get('note', 'not resolved')}): "
                     f"{step['cache_off_delta_ms']:+.1f} ms per step against the defaults (128 tensors negotiated "
                     "every step)")
    if burst.get("alpha_us") is not None and not burst.get("charged", True):
        lines.append(f"  burst phase (recorded, not charged): {burst['fixed_ms']:.2f} ms per small response back to back "
                     "in a busy cycle, wall clock without the timeline; a step's small responses also run while the "
                     "ranks sleep (research/notes/accuracy.md, \"The burst phase\")")
    bw_moved = ((small.get("mid") or {}).get("below") or {}).get("charged")
    borrowed = ((piece or {}).get("small") or {}).get("per_byte_borrowed")
    if bw_moved:
        per_byte = "the mid-size burst phase's (below)"
    elif borrowed:
        fitted = borrowed["fitted_busbw_gbps"]
        why = (f"above the {borrowed['link_gbps']:g} Gbit/s link: their slope is the scatter about the fixed part, not "
               "the link" if borrowed.get("why", "above the link") == "above the link" else
               f"more than the {borrowed['busbw_gbps']:.3g} Gbit/s the segment carries: lone allreduces after an idle "
               "link, not a step's queued responses")
        per_byte = (f"borrowed from the segment from the knee (the spans below it gave a busbw of "
                    f"{fitted:.{'0f' if fitted >= 100 else '3g'}} Gbit/s, {why})")
    else:
        per_byte = "the sweep's pooled collective spans" + (" below the knee" if knee else "")
    lines.append(f"  per byte{below}: {b_ms:.2f} ms/MiB, {per_byte}")
    if knee and piece:
        lines.append(f"  large responses (>= {knee / MIB:g} MiB): {piece['large']['a_ms']:.2f} ms + "
                     f"{piece['large']['b_ms_per_mib']:.2f} ms/MiB, the sweep's pooled collective spans from the knee")
    mid = small.get("mid") or {}
    if mid.get("jobs") and mid.get("shift_ms") is not None:
        sizes = ", ".join(f"{r[0] / MIB:g}" for r in mid["sizes"])
        if mid.get("charged"):
            was = (piece or {}).get("large", {}).get("a_ms")
            moved = "" if was is None else f": its {was:.2f} ms becomes {max(0.0, was + mid['shift_ms']):.2f} ms"
            lines.append(f"  large responses queued back to back: {mid['shift_ms']:+.2f} ms each against the line "
                         f"above{moved}, from the mid-size burst phase: 1 and 8 responses of {sizes} MiB at "
                         f"once, wall clock, no timeline ({mid['jobs']} job(s), every size's jobs below "
                         "the line)")
        else:
            lines.append(f"  mid-size burst phase (recorded, not charged): {mid['shift_ms']:+.2f} ms per queued "
                         f"response of {sizes} MiB against the line above; {mid.get('note', '')}")
    elif mid.get("jobs") and mid.get("note"):
        lines.append(f"  mid-size burst phase (recorded, not charged): {mid['note']}")
    low = mid.get("below") or {}
    if low.get("k_ms_per_mib") is not None:
        sizes = ", ".join(f"{r[0] / MIB:g}" for r in low["sizes"])
        b0, b1 = low["bandwidth_gbps"]
        if low.get("charged"):
            step_again = low.get("step_fixed_ms") or []
            lines.append(f"  mid-size responses{below} queued back to back: {low['k_ms_per_mib']:+.2f} ms per MiB "
                         f"against the line, its bandwidth {b0:.2f} -> {b1:.2f} Gbit/s, from the mid-size burst phase "
                         f"({sizes} MiB, {low['jobs']} job(s), every size's jobs on one side, the difference growing "
                         "with the size)"
                         + (f"; the step phase solved again: {step_again[0]:.2f} -> {step_again[1]:.2f} ms per small "
                            "response" if len(step_again) == 2 and None not in step_again else ""))
        else:
            lines.append(f"  mid-size responses{below} (recorded, not charged): {low['k_ms_per_mib']:+.2f} ms per MiB "
                         f"at {sizes} MiB against the line; {low.get('note', '')}")
    fused = (f.get("host_passes") or {}).get("fused") or {}
    if fused.get("ms_per_mib") is not None:
        was = fused.get("timelines_ms_per_mib")
        said = "" if not was else (f"; the sweep's timelines said {was[0]:.2f} ms per MiB"
                                   + ("" if abs(was[1] - was[0]) < 5e-3 else f", {was[1]:.2f} above their knee"))
        sizes = ", ".join(f"{r[0] / MIB:g}" for r in fused["sizes"])
        head = ("  fused responses' copies: " if fused.get("charged") else
                "  fused phase (recorded, not charged): ")
        lines.append(f"{head}{fused['ms_per_mib']:.2f} ms per MiB (MEMCPY_IN + MEMCPY_OUT), from the fused phase: "
                     f"two fused responses against two lone ones of {sizes} MiB, wall clock, no timeline "
                     f"({fused['jobs']} job(s); {fused['fixed_ms']:+.2f} ms per response besides, not a copy)"
                     + said + ("" if fused.get("charged") else f"; {fused.get('note', '')}"))
    elif fused.get("jobs") and fused.get("note"):
        lines.append(f"  fused phase (recorded, not charged): {fused['note']}")
    fp = f.get("fp16") or {}
    if fp.get("sum_extra_ns_per_elem") is not None:
        lent = fp.get("borrowed") or {}
        rng = fp.get("sum_extra_range_ns_per_elem") or [fp["sum_extra_ns_per_elem"]] * 2
        own = (f"; this env's phase: {lent['own_ns_per_elem']:.1f} (quartiles {lent['own_range_ns_per_elem'][0]:.1f}-"
               f"{lent['own_range_ns_per_elem'][1]:.1f}), {lent['spread']:.2f} of its median apart, does not pin it"
               if lent else "")
        src = (f"borrowed from the fp16 phase of {', '.join(lent['from'])} (same stack, same sitting; "
               f"{lent['points']} points)" if lent.get("from") else f"from the fp16 phase ({fp['jobs']} job(s))")
        lines.append(f"  fp16's float16 sum: {fp['sum_extra_ns_per_elem']:.1f} ns per element beyond float32 "
                     f"(quartiles {rng[0]:.1f}-{rng[1]:.1f}), {src}{own}")
    cyc = ((f.get("negotiation") or {}).get("per_cycle") or {})
    if cyc.get("cache_on_ms") is not None:
        off = cyc.get("cache_off_ms")
        lines.append(f"  busy cycle's negotiation: {cyc['cache_on_ms']:.2f} ms cache on"
                     + ("" if off is None else f" / {off:.2f} ms cache off")
                     + " (the sweep's busy cycles, CYCLE_START to the first response, with the timeline"
                     + ("; cache off charged from the step phase, above)" if co.get("charged") else ")"))
    if f.get("r2") is not None:
        lines.append(f"  R² {f['r2']:.4f}, MAPE {f['mape_percent']:.1f} %: the one line through every size's mean span "
                     "of every sweep job (time-share weights), a diagnostic of the sweep, not a step's regime")
    return lines
