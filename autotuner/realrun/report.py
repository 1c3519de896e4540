"""Summaries, verdict, ``report.md`` and plots of a validation (records from :mod:`autotuner.realrun.validation`).

Throughput is ``1 / step time``; a ratio "A vs B" is B's step time divided by A's (> 1: A is faster).
Per configuration the step time is the median over repeats of each repeat's median step time;
a ratio's spread is the range over repeats: (min B / max A, max B / min A).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ..writers.atomic import atomic_write_text, save_figure
from .validation import TrialKind


@dataclass(frozen=True)
class Ratio:
    """A measured throughput ratio with its spread over repeats (dimensionless)."""

    value: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.value:.3f}x ({self.low:.3f}-{self.high:.3f})"


def table(records: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per configuration label (default, autotune, autotune_best, proposal-1, ...).

    Columns: label, kind, config (dict), n_ok, n_failed, step_ms (median over repeats),
    step_min_ms, step_max_ms, iqr_ms (median of per-repeat IQRs), predicted_ms, error_pct
    ((predicted - measured) / measured, %), throughput (steps/s), responses_per_step, score
    (bytes/µs, Horovod autotune's unit).
    """
    rows = []
    for r in records:
        rows.append({"label": r.get("label") or r["trial"].split("/")[0], "kind": r["kind"],
                     "config": r.get("config"), "ok": r["status"] == "ok",
                     "step": r.get("measured_step_time_ms"), "iqr": r.get("spread_ms"),
                     "pred": r.get("predicted_step_time_ms"), "score": r.get("score_bytes_per_us"),
                     "rps": (r.get("timeline") or {}).get("responses_per_step")})
    cols = ["label", "kind", "config", "n_ok", "n_failed", "step_ms", "step_min_ms", "step_max_ms",
            "iqr_ms", "predicted_ms", "error_pct", "throughput", "responses_per_step", "score"]
    if not rows:
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame(rows)
    out = []
    for label, g in df.groupby("label", sort=False):
        ok = g[g["ok"]]
        step = ok["step"].median() if len(ok) else float("nan")
        pred = g["pred"].dropna().median() if g["pred"].notna().any() else float("nan")
        out.append({"label": label, "kind": g["kind"].iloc[0], "config": g["config"].iloc[0],
                    "n_ok": int(len(ok)), "n_failed": int(len(g) - len(ok)), "step_ms": step,
                    "step_min_ms": ok["step"].min() if len(ok) else float("nan"),
                    "step_max_ms": ok["step"].max() if len(ok) else float("nan"),
                    "iqr_ms": ok["iqr"].median() if len(ok) else float("nan"),
                    "predicted_ms": pred, "error_pct": 100 * (pred - step) / step if step == step else float("nan"),
                    "throughput": 1e3 / step if step == step else float("nan"),
                    "responses_per_step": ok["rps"].dropna().median() if ok["rps"].notna().any() else float("nan"),
                    "score": ok["score"].dropna().median() if ok["score"].notna().any() else float("nan")})
    return pd.DataFrame(out, columns=cols)


def ratio(t: pd.DataFrame, a: str, b: str) -> Ratio | None:
    """Throughput of ``a`` over throughput of ``b`` (labels in :func:`table`), or None if either is missing."""
    ra, rb = t[t["label"] == a], t[t["label"] == b]
    if ra.empty or rb.empty or not (ra["n_ok"].iloc[0] and rb["n_ok"].iloc[0]):
        return None
    ra, rb = ra.iloc[0], rb.iloc[0]
    return Ratio(rb.step_ms / ra.step_ms, rb.step_min_ms / ra.step_max_ms, rb.step_max_ms / ra.step_min_ms)


def best_proposal(t: pd.DataFrame) -> str | None:
    """Label of the tool's best proposal: the first-ranked one (``proposal-1``, ranked by
    predicted step time) that was measured successfully; None if none was. Picking the
    measured-fastest of several proposals instead would favour noise."""
    p = t[(t["kind"] == TrialKind.proposal) & (t["n_ok"] > 0)]
    if p.empty:
        return None
    return str(min(p["label"], key=lambda s: int(s.rsplit("-", 1)[-1]) if s.rsplit("-", 1)[-1].isdigit() else 0))


#: fewest successful repeats of each side before a comparison is called a verdict
MIN_REPEATS_FOR_VERDICT = 2


def verdict(t: pd.DataFrame) -> str:
    """One line: the best proposal's measured throughput vs defaults and vs autotune's best, each
    ratio with its range over repeats and what it means: ``faster``/``slower`` when the ranges do not
    overlap, ``within noise`` when they do, ``one repeat: no verdict`` with fewer than
    :data:`MIN_REPEATS_FOR_VERDICT` successful repeats on either side."""
    best = best_proposal(t)
    if best is None:
        return "verdict: no proposal was measured successfully"
    parts = []
    n_ok = dict(zip(t["label"], t["n_ok"]))
    for other, name in ((TrialKind.default, "Horovod defaults"), (TrialKind.autotune_best, "autotune's best")):
        r = ratio(t, best, other)
        if r is None:
            parts.append(f"n/a vs {name}")
            continue
        if min(n_ok[best], n_ok[str(other)]) < MIN_REPEATS_FOR_VERDICT:
            what = f"fewer than {MIN_REPEATS_FOR_VERDICT} repeats: no verdict, use --repeats 3"
        elif r.low <= 1.0 <= r.high:
            what = "within noise: the ranges overlap"
        else:
            what = "faster" if r.value > 1 else "slower"
        parts.append(f"{r} vs {name} ({what})")
    return f"verdict: {best} measured throughput = " + "; ".join(parts) + " (range over repeats)"


def _fmt(v: Any, nd: int = 1) -> str:
    return "" if v is None or v != v else f"{v:.{nd}f}"


def _cfg_str(c: dict | None) -> str:
    if not c:
        return "(autotune chooses)"
    s = f"{c['fusion_threshold_mb']:g} MiB, {c['cycle_time_ms']:g} ms, cache {c['cache_capacity']}"
    if c.get("hierarchical_allreduce"):
        s += ", hier. allreduce"
    return s


def plots(t: pd.DataFrame, records: list[dict[str, Any]], stem: Path) -> list[Path]:
    """``<stem>-predicted-vs-measured.png`` and ``<stem>-throughput.png``; returns the paths written."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    ok = t[(t["n_ok"] > 0) & t["step_ms"].notna()]  # a default autotune run has no fixed-knob steps
    pv = ok[ok["predicted_ms"].notna()]
    if not pv.empty:
        fig, ax = plt.subplots(figsize=(5, 5))
        lo = min(pv["step_min_ms"].min(), pv["predicted_ms"].min()) * 0.9
        hi = max(pv["step_max_ms"].max(), pv["predicted_ms"].max()) * 1.1
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="predicted = measured")
        ax.fill_between([lo, hi], [lo * 0.9, hi * 0.9], [lo * 1.1, hi * 1.1], color="0.9", label="±10%")
        ax.errorbar(pv["step_ms"], pv["predicted_ms"],
                    xerr=[pv["step_ms"] - pv["step_min_ms"], pv["step_max_ms"] - pv["step_ms"]], fmt="o")
        for _, r in pv.iterrows():
            ax.annotate(r["label"], (r["step_ms"], r["predicted_ms"]), fontsize=7, xytext=(3, 3),
                        textcoords="offset points")
        ax.set(xlabel="measured step time (ms)", ylabel="predicted step time (ms)", xlim=(lo, hi), ylim=(lo, hi),
               title="predicted vs measured step time")
        ax.legend(fontsize=7)
        fig.tight_layout()
        p = Path(f"{stem}-predicted-vs-measured.png")
        paths.append(save_figure(fig, p, dpi=110))
    if not ok.empty:
        fig, ax = plt.subplots(figsize=(max(5, 0.9 * len(ok) + 2), 4))
        x = range(len(ok))
        ax.bar(x, ok["throughput"], color="tab:blue", alpha=0.6)
        for i, (_, r) in enumerate(ok.iterrows()):
            per = [1e3 / rec["measured_step_time_ms"] for rec in records
                   if (rec.get("label") or rec["trial"].split("/")[0]) == r["label"] and rec["status"] == "ok"
                   and rec.get("measured_step_time_ms")]
            ax.plot([i] * len(per), per, "k.", ms=5)
        ax.set_xticks(list(x), ok["label"], rotation=30, ha="right", fontsize=8)
        ax.set(ylabel="throughput (steps/s)", title="measured throughput per configuration (dots: repeats)")
        fig.tight_layout()
        p = Path(f"{stem}-throughput.png")
        paths.append(save_figure(fig, p, dpi=110))
    return paths


def write_report(records: list[dict[str, Any]], path: Path, *, title: str, notes: list[str]) -> tuple[str, list[Path]]:
    """Write ``path`` (Markdown, atomically) and its plots beside it; return (verdict line, plot paths)."""
    t = table(records)
    v = verdict(t)
    stem = path.with_suffix("")
    pngs = plots(t, records, stem)
    lines = [f"# {title}", "", f"**{v}**", ""]
    lines += [f"- {n}" for n in notes]
    lines += ["", "| configuration | knobs | ok/failed | measured step ms (min-max) | IQR ms | predicted ms | error % "
              "| responses/step | score bytes/µs |", "|---|---|---|---|---|---|---|---|---|"]
    for _, r in t.iterrows():
        steps = (f"{_fmt(r['step_ms'])} ({_fmt(r['step_min_ms'])}-{_fmt(r['step_max_ms'])})" if r["step_ms"] == r["step_ms"]
                 else "no fixed-knob steps (see below)")
        lines.append(f"| {r['label']} | {_cfg_str(r['config'])} | {r['n_ok']}/{r['n_failed']} | "
                     f"{steps} | {_fmt(r['iqr_ms'])} | "
                     f"{_fmt(r['predicted_ms'])} | {_fmt(r['error_pct'])} | {_fmt(r['responses_per_step'], 2)} | "
                     f"{_fmt(r['score'], 2)} |")
    failed = [r for r in records if r["status"] != "ok"]
    if failed:
        lines += ["", "## Failed trials", ""] + [f"- {r['trial']}: {r['status']}: {r['error']}" for r in failed]
    at = [r for r in records if r["kind"] == "autotune" and r.get("autotune")]
    if at:
        a = at[-1]["autotune"]
        lines += ["", "## Horovod autotune", ""]
        if "error" in a:
            lines.append(f"- log unreadable: {a['error']}")
        else:
            lines.append(f"- {len(a['samples'])} samples scored; tuning {'finished' if a['finished'] else 'did NOT finish'}")
            if a.get("best"):
                b = a["best"]
                lines.append(f"- best row: fusion {b['fusion_threshold_mb']:g} MiB, cycle {b['cycle_time_ms']:g} ms, "
                             f"cache {'on' if b['cache_enabled'] else 'off'}, score {b['score_bytes_per_us']:g} bytes/µs")
    lines += [""] + [f"![{p.name}]({p.name})" for p in pngs] + [""]
    atomic_write_text(path, "\n".join(lines))
    return v, pngs
