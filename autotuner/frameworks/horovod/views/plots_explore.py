"""Plots of the explorer and scale views (matplotlib, Agg backend; files only).

Each function writes ``<stem>.png`` and ``<stem>.svg`` and returns both paths. Inputs are the
results of :mod:`autotuner.frameworks.horovod.views.explore`; nothing here simulates.
"""
from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import Normalize  # noqa: E402

from ..knobs import CACHE_ON, MIB  # noqa: E402
from ....writers.atomic import save_png_svg as _save  # noqa: E402
from ..search.grid import Combo  # noqa: E402
from .explore import Exploration  # noqa: E402
from .scale import Scaling  # noqa: E402

MARK_STYLE = {  # kind -> (marker, face colour, size, legend label); the defaults' star is drawn larger and
    # under the other marks, so that a pick equal to the defaults shows as a cross inside the star
    "default": ("*", "white", 320, "Horovod defaults"),  # the legend names the mark (its version)
    "autotune-start": ("^", "none", 70, "autotune start points"),
    "suggest": ("X", "red", 90, "suggest pick"),
    "grid-best": ("o", "lime", 90, "grid best"),
}


#: measured points by (compressed, timeline ran) -> (marker, edge colour, legend label); m/p = measured/predicted ms,
#: the prediction always for the point's own compression and without Horovod's timeline
MEASURED_STYLE = {
    (False, False): ("o", "magenta", "measured (validation), m/p = measured/predicted ms"),
    (True, False): ("D", "magenta", "measured with fp16 compression (predicted with it)"),
    (False, True): ("o", "orange", "measured with Horovod's timeline (tl: its cost is not predicted)"),
    (True, True): ("D", "orange", "measured with fp16 and Horovod's timeline"),
}


def measured_labels(rows) -> dict[tuple[bool, float, float], list]:
    """Measured jobs grouped by where the heatmap draws them: (fusion off, threshold MiB, cycle ms) -> rows
    (pandas rows of :attr:`Exploration.measured`), so that each position gets one label."""
    out: dict[tuple[bool, float, float], list] = {}
    for _, row in rows.iterrows():
        on_off = bool(row["fusion_threshold_bytes"] == 0)
        key = (on_off, 0.5 if on_off else float(row["fusion_threshold_mb"]), float(row["cycle_time_ms"]))
        out.setdefault(key, []).append(row)
    return out


def _measured_line(row) -> str:
    """One job's line of a measured point's label: measured and predicted ms, its compression, timeline."""
    tags = ([str(row["compression"])] if row["compression"] != "none" else []) + (["tl"] if row["timeline"] else [])
    return (f"m {row['measured_step_time_ms']:.0f} p {row['predicted_step_time_ms']:.0f}"
            + (f" {' '.join(tags)}" if tags else ""))


#: label offsets tried, points from the measured point: right of it, then left, each stepping up and down
_LABEL_STEP_PT = 7.0
_LABEL_TRIES = 24


def place_labels(fig, items, ax_off, ax) -> list:
    """Label each measured point of one panel where no earlier label is (greedy, in display units).

    ``items``: (axes the point is in, x, y, text). Each label is tried right of its point, then left of
    it, at vertical offsets 0, +1, -1, +2, ... steps of :data:`_LABEL_STEP_PT` points, and kept at the
    first offset whose box overlaps no label placed before and stays inside the panel (its fusion-off
    strip and heatmap); else at the offset overlapping the least. A label moved off its point gets a
    leader line. Labels are figure artists, drawn above every panel (a strip's label crosses into the
    heatmap beside it). Returns the annotations."""
    from matplotlib.text import Annotation
    from matplotlib.transforms import Bbox

    renderer = fig.canvas.get_renderer()
    panel = Bbox.union([ax_off.get_window_extent(renderer), ax.get_window_extent(renderer)])
    placed: list = []
    out = []
    dys = [0.0] + [sgn * i * _LABEL_STEP_PT for i in range(1, _LABEL_TRIES + 1) for sgn in (1, -1)]
    for a, x, y, text in items:
        best = None
        for side in (1, -1):
            for dy in dys:
                ann = Annotation(text, (x, y), xycoords=a.transData, xytext=(4 * side, 3 + dy),
                                 textcoords="offset points", fontsize=6, color="magenta", zorder=7, va="bottom",
                                 ha="left" if side > 0 else "right")
                ann.set_figure(fig)
                bb = ann.get_window_extent(renderer)
                bb = Bbox.from_extents(bb.x0 - 1, bb.y0 - 1, bb.x1 + 1, bb.y1 + 1)
                clash = sum(max(0.0, min(bb.x1, p.x1) - max(bb.x0, p.x0)) * max(0.0, min(bb.y1, p.y1) - max(bb.y0, p.y0))
                            for p in placed)
                inside = panel.x0 <= bb.x0 and bb.x1 <= panel.x1 and panel.y0 <= bb.y0 and bb.y1 <= panel.y1
                score = (clash > 0 or not inside, clash)
                if best is None or score < best[0]:
                    best = (score, side, dy, bb)
                if score == (False, 0.0):
                    break
            if best[0] == (False, 0.0):
                break
        _, side, dy, bb = best
        moved = dy != 0
        ann = Annotation(text, (x, y), xycoords=a.transData, xytext=(4 * side, 3 + dy), textcoords="offset points",
                         fontsize=6, color="magenta", zorder=7, va="bottom", ha="left" if side > 0 else "right",
                         arrowprops=dict(arrowstyle="-", color="magenta", lw=0.5, shrinkA=0, shrinkB=4) if moved else None,
                         bbox=dict(boxstyle="square,pad=0.1", fc="white", alpha=0.65, lw=0))
        fig.add_artist(ann)
        placed.append(bb)
        out.append(ann)
    return out


def _edges(x: np.ndarray) -> np.ndarray:
    """Cell edges for log-spaced centres ``x`` (shape (n,) -> (n + 1,))."""
    lx = np.log(x)
    mid = (lx[1:] + lx[:-1]) / 2
    return np.exp(np.concatenate(([lx[0] - (mid[0] - lx[0])], mid, [lx[-1] + (lx[-1] - mid[-1])])))


def heatmaps(ex: Exploration, stem: Path) -> list[Path]:
    """One panel per on/off combination: step time (ms) over threshold (MiB, log) × cycle (ms, log).

    A narrow strip left of each panel is threshold 0 (fusion off). All panels share one colour
    scale (clipped at the 95th percentile, so the fused region keeps its detail). Marks:
    Horovod's defaults, autotune's start points, the suggest pick, the grid's best; measured
    validation trials as circles (diamonds: fp16) coloured by their measured time, edged orange where
    Horovod's timeline ran, one label per position with a line per job: measured/predicted ms.
    """
    g = ex.grid
    thr_mb = ex.thresholds_bytes[1:] / MIB
    cyc = ex.cycles_ms
    labels = list(dict.fromkeys(g["combo"]))
    ncols = min(2, len(labels))
    nrows = math.ceil(len(labels) / ncols)
    vmin = float(g["step_time_ms"].min())
    vmax = float(np.percentile(g["step_time_ms"], 95))
    vmax = max(vmax, vmin * 1.001)
    norm = Normalize(vmin, vmax)
    fig = plt.figure(figsize=(6.2 * ncols + 1.2, 4.6 * nrows + 0.8))
    outer = fig.add_gridspec(nrows, ncols + 1, width_ratios=[12] * ncols + [0.4], wspace=0.18, hspace=0.35,
                             top=1 - 0.85 / fig.get_figheight(), bottom=0.95 / fig.get_figheight())
    xe, ye = _edges(thr_mb), _edges(cyc)
    best_ms = ex.best.step_time_ms
    mesh = None
    handles = {}
    labels_of_panel: dict[int, tuple] = {}
    for k, label in enumerate(labels):
        r, c = divmod(k, ncols)
        inner = outer[r, c].subgridspec(1, 2, width_ratios=[1, 11], wspace=0.04)
        ax_off = fig.add_subplot(inner[0])
        ax = fig.add_subplot(inner[1], sharey=ax_off)
        sub = g[g["combo"] == label]
        z = sub.pivot(index="cycle_time_ms", columns="fusion_threshold_bytes", values="step_time_ms")
        z = z.reindex(index=cyc, columns=ex.thresholds_bytes).to_numpy()
        mesh = ax.pcolormesh(xe, ye, z[:, 1:], norm=norm, cmap="viridis_r", shading="flat")
        ax_off.pcolormesh([0, 1], ye, z[:, :1], norm=norm, cmap="viridis_r", shading="flat")
        zf = z[:, 1:]
        levels = [(best_ms * f, t, col) for f, t, col in ((1.01, "+1%", "white"), (1.05, "+5%", "0.7"))
                  if np.nanmin(zf) < best_ms * f < np.nanmax(zf)]
        if levels:
            cs = ax.contour(thr_mb, cyc, zf, levels=[lv for lv, _, _ in levels], colors=[c for _, _, c in levels],
                            linewidths=0.8)
            ax.clabel(cs, fmt={lv: t for lv, (_, t, _) in zip(cs.levels, levels)}, fontsize=6)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(xe[0], xe[-1])
        ax.set_ylim(ye[0], ye[-1])
        ax.tick_params(labelleft=False)
        ax.set_xlabel("fusion threshold (MiB)")
        ax_off.set_xlim(0, 1)
        ax_off.set_xticks([0.5], ["off"])
        if c == 0:
            ax_off.set_ylabel("cycle time (ms)")
        ax.set_title(f"{label}: min {np.nanmin(z):.1f} ms", fontsize=9)
        combo = sub.iloc[0]
        want = Combo(CACHE_ON if combo["cache"] else 0, bool(combo["hierarchical_allreduce"]))
        for m in ex.marks:
            if Combo.of(m.config) != want:
                continue
            mk, face, size, leg = MARK_STYLE[m.kind]
            on_off = m.config.fusion_threshold_bytes == 0
            a, x = (ax_off, 0.5) if on_off else (ax, m.config.fusion_threshold_mb)
            h = a.scatter([x], [m.config.cycle_time_ms], marker=mk, s=size, facecolors=face,
                          edgecolors="red" if m.kind == "autotune-start" else "black", linewidths=1.2,
                          zorder=4 if m.kind == "default" else 5)
            handles.setdefault(m.name if m.kind in ("suggest", "default") else leg, h)  # the defaults' version
        meas = ex.measured
        if len(meas):
            mm = meas[(meas["cache"] == want.cache) & (meas["hierarchical_allreduce"] == want.hierarchical_allreduce)]
            for (on_off, x, y), rows in measured_labels(mm).items():
                a = ax_off if on_off else ax
                for row in rows:
                    mk, edge, leg = MEASURED_STYLE[(row["compression"] != "none", bool(row["timeline"]))]
                    h = a.scatter([x], [y], marker=mk, s=60, c=[row["measured_step_time_ms"]], norm=norm,
                                  cmap="viridis_r", edgecolors=edge, linewidths=1.5, zorder=6)
                    handles.setdefault(leg, h)
                # one label per point, a line per job measured there (several files share configurations)
                labels_of_panel.setdefault(k, (ax_off, ax, []))[2].append(
                    (a, x, y, "\n".join(_measured_line(r) for r in rows)))
    for ax_off, ax, items in labels_of_panel.values():
        place_labels(fig, items, ax_off, ax)
    cax = fig.add_subplot(outer[:, -1])
    fig.colorbar(mesh, cax=cax, extend="max", label="predicted step time (ms)")
    s = ex.scenario
    fig.suptitle(f"{s['model']} on {s['env']} ({s['nodes']}x{s['gpus_per_node']}, {s['bandwidth_gbps']:g} Gbit/s): "
                 f"best {ex.best.step_time_ms:.1f} ms at {ex.best.config.fusion_threshold_mb:.3g} MiB, "
                 f"{ex.best.config.cycle_time_ms:.3g} ms", fontsize=10)
    fig.legend(list(handles.values()), list(handles.keys()), loc="lower center", ncol=min(5, len(handles)),
               fontsize=7, frameon=False)
    return _save(fig, stem)


def sensitivity_plot(ex: Exploration, stem: Path) -> list[Path]:
    """Step time vs each knob alone, the others at the grid's best (marked by a vertical line)."""
    sens = ex.sensitivity
    knobs = list(dict.fromkeys(sens["knob"]))
    fig, axes = plt.subplots(1, len(knobs), figsize=(3.6 * len(knobs), 3.6), sharey=True)
    best = ex.best.config
    for ax, knob in zip(axes, knobs):
        d = sens[sens["knob"] == knob]
        if knob == "fusion_threshold_mb":
            on = d[d["value"] > 0]
            ax.plot(on["value"], on["step_time_ms"], "-", color="C0")
            off = d[d["value"] == 0]["step_time_ms"]
            if len(off):
                ax.axhline(float(off.iloc[0]), color="C3", ls="--", lw=1, label=f"fusion off {float(off.iloc[0]):.0f} ms")
                ax.legend(fontsize=7)
            ax.set_xscale("log")
            ax.set_xlabel("fusion threshold (MiB)")
            if best.fusion_threshold_bytes > 0:
                ax.axvline(best.fusion_threshold_mb, color="k", lw=0.8, ls=":")
        elif knob == "cycle_time_ms":
            ax.plot(d["value"], d["step_time_ms"], "-", color="C1")
            ax.set_xscale("log")
            ax.set_xlabel("cycle time (ms)")
            ax.axvline(best.cycle_time_ms, color="k", lw=0.8, ls=":")
        else:
            ax.bar(["off", "on"], d["step_time_ms"], color=["C7", "C2"], width=0.5)
            for x, y in enumerate(d["step_time_ms"]):
                ax.annotate(f"{y:.1f}", (x, y), ha="center", va="bottom", fontsize=7)
            ax.set_xlabel("response cache" if knob == "cache" else "hierarchical allreduce")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("predicted step time (ms)")
    lo = float(sens["step_time_ms"].min())
    hi = max(float(np.percentile(sens["step_time_ms"], 97)),
             float(sens[sens["knob"] == "fusion_threshold_mb"]["step_time_ms"].max()))
    axes[0].set_ylim(lo * 0.98, max(hi, lo * 1.02) * 1.02)
    s = ex.scenario
    fig.suptitle(f"{s['model']} on {s['env']}: one knob at a time, others at the grid best", fontsize=10)
    fig.tight_layout()
    return _save(fig, stem)


def scale_plot(sc: Scaling, stem: Path) -> list[Path]:
    """2×2: step time, scaling efficiency, best fusion threshold (band: within 1%), hierarchical gain,
    each vs node count (log2), one colour per link rate; best solid, Horovod's defaults dashed.

    Single-server scaling (``sc.axis == "ranks"``): vs ranks on one node, and the fourth panel is
    the predicted wall time of the whole run (s) when the rows have it, else throughput (GPU-steps/s)."""
    t = sc.table
    by_ranks = sc.axis == "ranks"
    dflt = f"Horovod {sc.reference_version} defaults"
    fig, axs = plt.subplots(2, 2, figsize=(11, 7.5))
    (a_t, a_e), (a_f, a_h) = axs
    for i, (bw, g) in enumerate(t.groupby("bandwidth_gbps", sort=True)):
        col = f"C{i}"
        n = g[sc.axis]
        a_t.plot(n, g["best_step_time_ms"], "o-", color=col, label=f"{bw:g} Gbit/s best")
        a_t.plot(n, g["default_step_time_ms"], "s--", color=col, alpha=0.7, label=f"{bw:g} Gbit/s {dflt}")
        a_e.plot(n, g["best_efficiency"], "o-", color=col, label=f"{bw:g} Gbit/s best")
        a_e.plot(n, g["default_efficiency"], "s--", color=col, alpha=0.7, label=f"{bw:g} Gbit/s {dflt}")
        a_f.fill_between(n, g["near_threshold_lo_mb"].clip(lower=0.5), g["near_threshold_hi_mb"].clip(lower=0.5),
                         color=col, alpha=0.15)
        a_f.plot(n, g["best_fusion_threshold_mb"].clip(lower=0.5), "o-", color=col, label=f"{bw:g} Gbit/s")
        h = g["best_hierarchical_allreduce"].to_numpy()
        if h.any():  # no legend entry where hierarchical allreduce never wins (or does not exist: Gloo)
            a_f.scatter(n[h], g["best_fusion_threshold_mb"].clip(lower=0.5)[h], s=90, facecolors="none",
                        edgecolors="k", zorder=5,
                        label=None if any(x.get_label() == "hierarchical is best" for x in a_f.collections)
                        else "hierarchical is best")
        if by_ranks:
            y = "wall_time_s" if "best_wall_time_s" in g else "gpu_steps_per_s"
            a_h.plot(n, g[f"best_{y}"], "o-", color=col, label=f"{bw:g} Gbit/s best")
            a_h.plot(n, g[f"default_{y}"], "s--", color=col, alpha=0.7, label=f"{bw:g} Gbit/s {dflt}")
        else:
            m = (g["nodes"] > 1) & g["hier_gain_percent"].notna()
            if m.any():
                a_h.plot(n[m], g["hier_gain_percent"][m], "o-", color=col, label=f"{bw:g} Gbit/s")
    if not by_ranks:
        a_h.axhline(0, color="k", lw=0.8)
        if not a_h.lines[:-1]:  # only the zero line: no hierarchical gain to draw (a backend without it)
            a_h.text(0.5, 0.5, "no hierarchical allreduce on this backend", ha="center", va="center",
                     transform=a_h.transAxes, fontsize=9)
    lo, hi = float(t[sc.axis].min()), float(t[sc.axis].max())
    for a in axs.flat:
        a.set_xlim(lo / 1.3, hi * 1.3)  # the points' range: an empty panel has none of its own
        a.set_xscale("log", base=2)
        a.set_xlabel("ranks (one node)" if by_ranks else "nodes")
        a.grid(True, which="both", alpha=0.3)
        if a.get_legend_handles_labels()[0]:
            a.legend(fontsize=7)
    a_t.set_ylabel("predicted step time (ms)")
    a_e.set_ylabel("scaling efficiency")
    a_e.set_ylim(0, 1.05)
    a_f.set_yscale("log", base=2)
    a_f.set_ylabel("best fusion threshold (MiB; 0.5 = off)")
    s = sc.scenario
    if by_ranks:
        a_h.set_ylabel("predicted wall time of the run (s)" if "best_wall_time_s" in t else "throughput (GPU-steps/s)")
        fig.suptitle(f"{s['model']} scaled from {s['env']}: ranks on one node", fontsize=10)
    else:
        a_h.set_ylabel("hierarchical gain (%): best flat / best hier. - 1")
        gpn = int(t["gpus_per_node"].iloc[0])
        fig.suptitle(f"{s['model']} scaled from {s['env']}: {gpn} GPU(s)/node, per-GPU compute fixed (weak scaling)",
                     fontsize=10)
    fig.tight_layout()
    return _save(fig, stem)
