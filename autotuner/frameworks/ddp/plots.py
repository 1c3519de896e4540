"""Plots of ``ddp explore`` and ``ddp scale`` (matplotlib, Agg backend; files only). Each function writes
``<stem>.png`` and ``<stem>.svg`` atomically and returns both paths; nothing here simulates.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ...writers.atomic import save_png_svg as _save  # noqa: E402
from .scale import DdpExploration, DdpScaling  # noqa: E402

STYLE = {"allreduce": ("tab:blue", "-"), "allreduce, view": ("tab:blue", "--"), "fp16 hook": ("tab:green", "-"),
         "fp16 hook, view": ("tab:green", "--")}


def explore_plot(ex: DdpExploration, stem: Path, title: str) -> list[Path]:
    """Step time (ms) over ``bucket_cap_mb`` (MiB, log axis), one line per hook x view, DDP's default (25 MiB with a
    1 MiB first bucket) as a star on each line at 25 MiB, the env's measured single-cap replays as circles at their
    cap (measured ms; the label gives measured / predicted), every record file's (placed by each row's own setting
    label, the tuples' last field)."""
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for label, ys in ex.curves.items():
        colour, ls = STYLE.get(label, ("grey", "-"))
        ax.plot(ex.caps_mib, ys, ls, color=colour, label=f"predicted: {label}")
        ax.plot([25.0], [ex.default[label]], "*", color=colour, markersize=13, markeredgecolor="black")
    ax.plot([], [], "*", color="white", markeredgecolor="black", markersize=13,
            label="DDP's default (25 MiB, first bucket 1 MiB)")
    shown = set()
    at: dict[float, int] = {}  # labels already written at a cap: the next one goes below them
    for _, meas, lo, hi, pred, lab in ex.measured:
        cap, default = _single_cap(lab), "default" in lab and not lab.startswith("[")
        if cap is None and not default:
            continue  # a per-bucket list has no place on a single-cap axis
        colour = "tab:green" if "fp16" in lab else "tab:blue"
        marker = "D" if default else "o"
        name = ("measured, DDP's default (median, range), m/p in ms" if default
                else "measured, explicit cap (median, range), m/p in ms")
        ax.errorbar([cap or 25.0], [meas], yerr=[[meas - lo], [hi - meas]], fmt=marker, color=colour,
                    markerfacecolor="white", markersize=7, capsize=3, label=None if marker in shown else name)
        k = at.get(cap or 25.0, 0)
        at[cap or 25.0] = k + 1
        ax.annotate(f"{meas:.0f}/{pred:.0f}", (cap or 25.0, meas), textcoords="offset points",
                    xytext=(8, 4 - 10 * k), fontsize=7)
        shown.add(marker)
    ax.set_xscale("log", base=2)
    ticks = [0.25, 1, 4, 16, 64, 256]
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.set_xlabel("bucket_cap_mb (MiB)")
    ax.set_ylabel("step time (ms)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, stem)


def _single_cap(label: str) -> float | None:
    """The cap of a replay's label written as ``<cap> MiB[, view][, fp16_compress]`` (an explicit single cap), else
    None (DDP's default, a per-bucket list)."""
    head = label.split(",")[0].strip()
    if head.startswith("[") or "default" in label or not head.endswith("MiB"):
        return None
    try:
        return float(head[:-3])
    except ValueError:
        return None


def scale_plot(sc: DdpScaling, stem: Path, title: str) -> list[Path]:
    """Step time (ms, left) and scaling efficiency (right) over node count (log axis), DDP's defaults (dashed) and
    the recommended setting (solid), one colour per link rate."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.8))
    links = sorted({r.link_gbps for r in sc.rows})
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, g in enumerate(links):
        rows = [r for r in sc.rows if r.link_gbps == g]
        xs = [r.nodes for r in rows]
        col = colours[k % len(colours)]
        a1.plot(xs, [r.default.step_time_ms for r in rows], "--o", color=col, label=f"{g:g} Gbit/s, DDP's defaults")
        a1.plot(xs, [r.best.step_time_ms for r in rows], "-o", color=col, label=f"{g:g} Gbit/s, recommended")
        a2.plot(xs, [r.default_efficiency * 100 for r in rows], "--o", color=col)
        a2.plot(xs, [r.best_efficiency * 100 for r in rows], "-o", color=col)
    ticks = sorted({r.nodes for r in sc.rows})
    for a in (a1, a2):
        a.set_xscale("log", base=2)
        a.set_xticks(ticks, [str(t) for t in ticks])
        a.set_xlabel("nodes")
        a.grid(True, which="both", alpha=0.3)
    a1.axhline(sc.compute_ms, color="grey", lw=0.8)
    a1.set_ylabel("step time (ms); grey: compute alone")
    a2.set_ylabel("scaling efficiency (%)")
    a2.set_ylim(0, 105)
    a1.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return _save(fig, stem)
