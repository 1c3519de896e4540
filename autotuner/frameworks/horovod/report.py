"""Summaries, verdict, ``report.md`` and plots of a validation (records from :mod:`autotuner.frameworks.horovod.validation`).

Throughput is ``1 / step time``; a ratio "A vs B" is B's step time divided by A's (> 1: A is faster).
Per configuration the step time is the median over repeats of each repeat's median step time;
a ratio's spread is the range over repeats: (min B / max A, max B / min A).

A row is one job: its label (knobs), its gradient compression and whether Horovod's timeline ran
(:func:`autotuner.schemas.records.timeline_recorded`). The predictions are for a job without the
timeline, whose writer costs a step several per cent (docs/how-to/validate.md): a row run with it has no
error (it would compare two different jobs), and the verdict compares only rows run alike.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ...render import RANGE_SHOWN
from .schemas.records import timeline_recorded
from ...writers.atomic import atomic_write_text, save_figure
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
    """One row per job: configuration label (default, autotune, autotune_best, proposal-1, ...),
    compression and timeline mode (one label run both with and without the timeline is two rows).

    Columns: label, kind, config (dict), compression (``none`` | ``fp16``), timeline (bool: Horovod's
    timeline ran in its trials), n_ok, n_failed, step_ms (median over repeats), step_min_ms,
    step_max_ms, iqr_ms (median of per-repeat IQRs), predicted_ms (for the job without the timeline),
    error_pct ((predicted - measured) / measured, %; NaN where the timeline ran: another job than the
    prediction's), throughput (steps/s), responses_per_step, score (bytes/µs, Horovod autotune's unit),
    speedup (the defaults' measured step over this row's: > 1 faster; NaN where either ran with the timeline or the
    defaults have no successful trial) and predicted_speedup (the same ratio of the predictions), both dimensionless.
    """
    rows = []
    for r in records:
        rows.append({"label": r.get("label") or r["trial"].split("/")[0], "kind": r["kind"],
                     "compression": str(r.get("compression") or "none"), "timeline": timeline_recorded(r),
                     "config": r.get("config"), "ok": r["status"] == "ok",
                     "step": r.get("measured_step_time_ms"), "iqr": r.get("spread_ms"),
                     "pred": r.get("predicted_step_time_ms"), "score": r.get("score_bytes_per_us"),
                     "rps": (r.get("timeline") or {}).get("responses_per_step")})
    cols = ["label", "kind", "config", "compression", "timeline", "n_ok", "n_failed", "step_ms", "step_min_ms",
            "step_max_ms", "iqr_ms", "predicted_ms", "error_pct", "throughput", "responses_per_step", "score",
            "speedup", "predicted_speedup"]
    if not rows:
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame(rows)
    out = []
    for (label, comp, tl), g in df.groupby(["label", "compression", "timeline"], sort=False):
        ok = g[g["ok"]]
        step = ok["step"].median() if len(ok) else float("nan")
        pred = g["pred"].dropna().median() if g["pred"].notna().any() else float("nan")
        like = step == step and not tl  # the prediction is for the job without the timeline
        out.append({"label": label, "kind": g["kind"].iloc[0], "config": g["config"].iloc[0],
                    "compression": comp, "timeline": bool(tl),
                    "n_ok": int(len(ok)), "n_failed": int(len(g) - len(ok)), "step_ms": step,
                    "step_min_ms": ok["step"].min() if len(ok) else float("nan"),
                    "step_max_ms": ok["step"].max() if len(ok) else float("nan"),
                    "iqr_ms": ok["iqr"].median() if len(ok) else float("nan"),
                    "predicted_ms": pred, "error_pct": 100 * (pred - step) / step if like else float("nan"),
                    "throughput": 1e3 / step if step == step else float("nan"),
                    "responses_per_step": ok["rps"].dropna().median() if ok["rps"].notna().any() else float("nan"),
                    "score": ok["score"].dropna().median() if ok["score"].notna().any() else float("nan")})
    t = pd.DataFrame(out, columns=[c for c in cols if c not in ("speedup", "predicted_speedup")])
    ref = t[(t["kind"] == str(TrialKind.default)) & (t["compression"] == "none") & ~t["timeline"] & (t["n_ok"] > 0)]
    alike = ~t["timeline"]
    t["speedup"] = (ref["step_ms"].iloc[0] / t["step_ms"]).where(alike) if len(ref) else float("nan")
    t["predicted_speedup"] = ((ref["predicted_ms"].iloc[0] / t["predicted_ms"]).where(alike) if len(ref)
                              else float("nan"))
    return t[cols]


def _rows(t: pd.DataFrame, label: str, timeline: bool | None) -> pd.DataFrame:
    r = t[t["label"] == label]
    return r if timeline is None else r[r["timeline"] == timeline]


def ratio(t: pd.DataFrame, a: str, b: str, timeline: bool | None = None) -> Ratio | None:
    """Throughput of ``a`` over throughput of ``b`` (labels in :func:`table`), or None if either is missing;
    ``timeline`` given: only their rows run with (True) or without (False) Horovod's timeline."""
    ra, rb = _rows(t, a, timeline), _rows(t, b, timeline)
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
    :data:`MIN_REPEATS_FOR_VERDICT` successful repeats on either side.

    Like with like: both sides run without Horovod's timeline (the production job) where the best
    proposal has such trials, else both with it (then said); a side measured only in the other mode is
    ``n/a`` with the reason, never compared."""
    best = best_proposal(t)
    if best is None:
        return "verdict: no proposal was measured successfully"
    mine = t[(t["label"] == best) & (t["n_ok"] > 0)]
    mode = bool(mine["timeline"].all())  # False (no timeline) wherever the proposal has such trials
    parts = []
    n_ok = {lab: int(g["n_ok"].sum()) for lab, g in t[t["timeline"] == mode].groupby("label")}
    for other, name in ((TrialKind.default, "Horovod defaults"), (TrialKind.autotune_best, "autotune's best")):
        r = ratio(t, best, other, timeline=mode)
        if r is None:
            elsewhere = _rows(t, str(other), not mode)
            if (elsewhere["n_ok"] > 0).any():
                parts.append(f"n/a vs {name} (its trials ran {'without' if mode else 'with'} Horovod's timeline, "
                             f"{best}'s {'with' if mode else 'without'} it: not the same job)")
            else:
                parts.append(f"n/a vs {name}")
            continue
        if min(n_ok[best], n_ok[str(other)]) < MIN_REPEATS_FOR_VERDICT:
            what = f"fewer than {MIN_REPEATS_FOR_VERDICT} repeats: no verdict, use --repeats 3"
        elif r.low <= 1.0 <= r.high:
            what = "within noise: the ranges overlap"
        else:
            what = "faster" if r.value > 1 else "slower"
        parts.append(f"{r} vs {name} ({what})")
    comp = str(mine["compression"].iloc[0])
    who = best if comp == "none" else f"{best} ({comp})"
    return (f"verdict: {who} measured throughput = " + "; ".join(parts) + " (range over repeats"
            + ("; every side ran with Horovod's timeline)" if mode else ")"))


def _fmt(v: Any, nd: int = 1) -> str:
    return "" if v is None or v != v else f"{v:.{nd}f}"


def _cfg_str(c: dict | None, compression: str = "none") -> str:
    """A configuration as the report names it: its knobs and, unless none, its gradient compression."""
    if not c:
        return "(autotune chooses)"
    s = f"{c['fusion_threshold_mb']:g} MiB, {c['cycle_time_ms']:g} ms, cache {c['cache_capacity']}"
    if c.get("hierarchical_allreduce"):
        s += ", hier. allreduce"
    if compression and compression != "none":
        s += f", {compression} compression"
    return s


def _job(r) -> str:
    """A table row's name: its label, its compression unless none, and "with timeline" where the timeline ran."""
    marks = ([] if r["compression"] == "none" else [str(r["compression"])]) + (["with timeline"] if r["timeline"] else [])
    return r["label"] + (f" ({', '.join(marks)})" if marks else "")


def _timeline_note(t: pd.DataFrame) -> str | None:
    """The report's line on Horovod's timeline where any row ran with it, else None."""
    fixed = t[t["config"].notna()]
    n_tl = int(fixed["timeline"].sum())
    if not n_tl:
        return None
    who = ("Horovod's timeline ran in every fixed-configuration trial (--timeline)" if n_tl == len(fixed)
           else f"{n_tl} of {len(fixed)} configurations ran with Horovod's timeline (marked \"with timeline\")")
    return (f"{who}: its writer's cost (several per cent of a step, more with hundreds of small responses; "
            "docs/how-to/validate.md) was measured into their step times, and the predictions are for a job without it, "
            "so their error % is left out (n/a); the verdict compares trials run alike; responses/step come from it")


#: vertical step (points) by which a label moves down until it overprints no label placed before it
LABEL_STEP_PT = 9


def place_labels(ax, labels: list[tuple[str, tuple[float, float], float]]) -> list:
    """Annotate ``ax`` (its limits set) with ``labels``: ``(text, (x, y) in data units, y offset in points)``, each
    3 points right of its point; a label whose drawn box would overlap one placed before it moves down by
    :data:`LABEL_STEP_PT` points until it overlaps none. Returns the matplotlib texts, in order."""
    renderer = ax.figure.canvas.get_renderer()
    boxes, texts = [], []
    for text, xy, dy in labels:
        for k in range(len(boxes) + 1):  # at most one step per label placed before it
            t = ax.annotate(text, xy, fontsize=7, xytext=(3, dy - LABEL_STEP_PT * k), textcoords="offset points")
            box = t.get_window_extent(renderer)
            if not any(box.overlaps(b) for b in boxes):
                break
            t.remove()
        boxes.append(box)
        texts.append(t)
    return texts


def plots(t: pd.DataFrame, records: list[dict[str, Any]], stem: Path,
          ranges: dict[tuple[str, str], tuple[float, float]] | None = None) -> list[Path]:
    """``<stem>-predicted-vs-measured.png`` and ``<stem>-throughput.png``; returns the paths written. ``ranges``
    (:func:`write_report`'s): a prediction's range, drawn as its vertical bar."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    ok = t[(t["n_ok"] > 0) & t["step_ms"].notna()]  # a default autotune run has no fixed-knob steps
    pv = ok[ok["predicted_ms"].notna()]
    if not pv.empty:
        ranges = ranges or {}
        ends = pd.DataFrame([ranges.get((r["label"], r["compression"]), (r["predicted_ms"], r["predicted_ms"]))
                             for _, r in pv.iterrows()], index=pv.index, columns=["lo", "hi"])
        fig, ax = plt.subplots(figsize=(5, 5))
        lo = min(pv["step_min_ms"].min(), pv["predicted_ms"].min(), ends["lo"].min()) * 0.9
        hi = max(pv["step_max_ms"].max(), pv["predicted_ms"].max(), ends["hi"].max()) * 1.1
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="predicted = measured")
        ax.fill_between([lo, hi], [lo * 0.9, hi * 0.9], [lo * 1.1, hi * 1.1], color="0.9", label="±10%")
        for tl, sub in pv.groupby("timeline"):
            e = ends.loc[sub.index]
            ax.errorbar(sub["step_ms"], sub["predicted_ms"],
                        xerr=[sub["step_ms"] - sub["step_min_ms"], sub["step_max_ms"] - sub["step_ms"]],
                        yerr=[(sub["predicted_ms"] - e["lo"]).clip(lower=0), (e["hi"] - sub["predicted_ms"]).clip(lower=0)],
                        fmt="o", mfc="none" if tl else None, color="tab:orange" if tl else "tab:blue",
                        label=("with Horovod's timeline (its cost not predicted)" if tl
                               else "without timeline (the predicted job)"))
        ax.set(xlabel="measured step time (ms): median, bar = range over repeats",
               ylabel="predicted step time (ms)" + (": bar = the small-response price left open"
                                                    if (ends["hi"] > ends["lo"]).any() else ""),
               xlim=(lo, hi), ylim=(lo, hi), title="predicted vs measured step time")
        # timeline rows labelled below their point: a label's two jobs can sit together
        place_labels(ax, [(_job(r), (r["step_ms"], r["predicted_ms"]), -9 if r["timeline"] else 3)
                          for _, r in pv.iterrows()])
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
                   and str(rec.get("compression") or "none") == r["compression"]
                   and timeline_recorded(rec) == r["timeline"] and rec.get("measured_step_time_ms")]
            ax.plot([i] * len(per), per, "k.", ms=5)
        ax.set_xticks(list(x), [_job(r) for _, r in ok.iterrows()], rotation=30, ha="right", fontsize=8)
        ax.set(ylabel="throughput (steps/s)", title="measured throughput per configuration (dots: repeats)")
        fig.tight_layout()
        p = Path(f"{stem}-throughput.png")
        paths.append(save_figure(fig, p, dpi=110))
    return paths


def _predicted_cell(r, ranges) -> str:
    """A row's predicted step (ms), and where the small-response price the env's phases leave open moves it by more
    than :data:`RANGE_SHOWN`, its range: ``715.6 (600.6-715.6)``."""
    lo, hi = ranges.get((r["label"], r["compression"]), (r["predicted_ms"], r["predicted_ms"]))
    if r["predicted_ms"] == r["predicted_ms"] and hi - lo > RANGE_SHOWN * r["predicted_ms"]:
        return f"{_fmt(r['predicted_ms'])} ({_fmt(lo)}-{_fmt(hi)})"
    return _fmt(r["predicted_ms"])


#: a sitting's defaults predicted further off than this (|error %|) get a line saying the sitting is shifted
SHIFTED_SITTING_PCT = 10.0


def _speedup_cell(r) -> str:
    """``0.979x / 0.999x``: the row's throughput over the defaults', measured / predicted; blank where not alike."""
    if r["speedup"] != r["speedup"] or r["predicted_speedup"] != r["predicted_speedup"]:
        return ""
    return f"{r['speedup']:.3f}x / {r['predicted_speedup']:.3f}x"


def _speedup_note(t: pd.DataFrame) -> str | None:
    """The report's line on the ratio column, and on a sitting whose defaults miss their prediction by more than
    :data:`SHIFTED_SITTING_PCT`; None where no row has the ratio."""
    if not t["speedup"].notna().any():
        return None
    note = ("vs defaults: each configuration's throughput over the defaults' of this sitting, measured / predicted "
            "(> 1: faster; production jobs only): it compares configurations run in one sitting, where the "
            "error column compares each with the env's fit, measured in another")
    ref = t[(t["kind"] == str(TrialKind.default)) & t["speedup"].notna()]
    if len(ref) and abs(ref["error_pct"].iloc[0]) > SHIFTED_SITTING_PCT:
        e = ref["error_pct"].iloc[0]
        note += (f". This sitting's defaults are predicted {e:+.1f} % off their measured step: the whole sitting may "
                 f"run {'slower' if e < 0 else 'faster'} than the env's fit saw, so read each error % beside the "
                 "defaults' and the ratio")
    return note


def write_report(records: list[dict[str, Any]], path: Path, *, title: str, notes: list[str],
                 ranges: dict[tuple[str, str], tuple[float, float]] | None = None) -> tuple[str, list[Path]]:
    """Write ``path`` (Markdown, atomically) and its plots beside it; return (verdict line, plot paths).
    ``ranges``: per job ``(label, compression)``, the predicted step (ms, low to high) at either end of the
    small-response price the env's phases leave open
    (:func:`autotuner.frameworks.horovod.predict.prediction_ranges`), shown beside the prediction where it moves it
    by more than :data:`RANGE_SHOWN`; the error column compares the charged prediction."""
    t = table(records)
    v = verdict(t)
    ranges = ranges or {}
    stem = path.with_suffix("")
    pngs = plots(t, records, stem, ranges)
    lines = [f"# {title}", "", f"**{v}**", ""]
    tl_note = _timeline_note(t)
    shown = sum(_predicted_cell(r, ranges) != _fmt(r["predicted_ms"]) for _, r in t.iterrows())
    rng_note = (f"{shown} prediction(s) with a range in brackets: the step time with a small response priced at "
                "either of the env's burst and step phases (the error column compares the charged step phase's); "
                "the price they leave open moves it by more than 2 % (research/notes/accuracy.md, \"The small-response price "
                "the phases leave open\")") if shown else None
    lines += [f"- {n}" for n in list(notes) + [x for x in (tl_note, rng_note, _speedup_note(t)) if x]]
    lines += ["", "| configuration | knobs | ok/failed | measured step ms (min-max) | IQR ms | predicted ms | error % "
              "| vs defaults, measured / predicted | responses/step | score bytes/µs |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for _, r in t.iterrows():
        steps = (f"{_fmt(r['step_ms'])} ({_fmt(r['step_min_ms'])}-{_fmt(r['step_max_ms'])})" if r["step_ms"] == r["step_ms"]
                 else "no fixed-knob steps (see below)")
        err = ("n/a (timeline ran)" if r["timeline"] and r["predicted_ms"] == r["predicted_ms"]
               and r["step_ms"] == r["step_ms"] else _fmt(r["error_pct"]))
        lines.append(f"| {_job(r)} | {_cfg_str(r['config'], r['compression'])} | {r['n_ok']}/{r['n_failed']} | "
                     f"{steps} | {_fmt(r['iqr_ms'])} | "
                     f"{_predicted_cell(r, ranges)} | {err} | {_speedup_cell(r)} | {_fmt(r['responses_per_step'], 2)} | "
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
