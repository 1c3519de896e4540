"""``<name>-report.md`` of ``autotuner tune`` and its plots: the trials over time, predicted vs measured, the
refit's effect (records from :mod:`autotuner.frameworks.horovod.tune`)."""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from ...writers.atomic import atomic_write_text, save_figure


def _plots(records: list[dict[str, Any]], stem: Path) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    ok = [r for r in records if r["status"] == "ok" and r.get("measured_step_time_ms")]
    if not ok:
        return []
    paths = []
    n = [int(r["trial"].rsplit("-", 1)[-1]) for r in ok]
    meas = [r["measured_step_time_ms"] for r in ok]
    best, inc = float("inf"), []
    for m in meas:
        best = min(best, m)
        inc.append(best)
    fig, ax = plt.subplots(figsize=(6.4, 4))
    ax.plot(n, meas, "o", label="measured (one trial)")
    ax.plot(n, [r["tune"]["prior_ms"] for r in ok], "x", color="tab:orange", label="simulator at launch (refitted)")
    ax.step(n, inc, where="post", color="k", lw=1, label="best measured so far")
    for r, x, y in zip(ok, n, meas):
        ax.annotate(r["label"], (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points", rotation=20)
    ax.set(xlabel="trial", ylabel="step time (ms)", title="tune: trials in order")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.margins(y=0.15)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    paths.append(save_figure(fig, Path(f"{stem}-trials.png"), dpi=110))

    fig, ax = plt.subplots(figsize=(5, 5))
    pu = [r["tune"]["prior_unrefit_ms"] for r in ok]
    pr = [r["tune"]["prior_ms"] for r in ok]
    lo, hi = min(meas + pu + pr) * 0.95, max(meas + pu + pr) * 1.05
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="predicted = measured")
    ax.plot(meas, pu, "s", mfc="none", label="env's fit (no refit)")
    ax.plot(meas, pr, "o", label="refitted at launch")
    ax.set(xlabel="measured step time (ms)", ylabel="predicted step time (ms)", xlim=(lo, hi), ylim=(lo, hi),
           title="predicted vs measured")
    ax.legend(fontsize=7)
    fig.tight_layout()
    paths.append(save_figure(fig, Path(f"{stem}-predicted-vs-measured.png"), dpi=110))

    allr = [r for r in records if r.get("tune")]
    fig, ax1 = plt.subplots(figsize=(6.4, 4))
    xs = [int(r["trial"].rsplit("-", 1)[-1]) for r in allr]
    ax1.plot(xs, [r["tune"]["bandwidth_scale"] for r in allr], "o-", label="bandwidth scale (refit)")
    ax1.set(xlabel="trial", ylabel="bandwidth scale (x the env's fit)", title="the sim-to-real refit before each trial")
    ax1.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax2 = ax1.twinx()
    rb = [(x, 100 * r["tune"]["rms_before"]) for x, r in zip(xs, allr) if r["tune"].get("rms_before") is not None]
    ra = [(x, 100 * r["tune"]["rms_after"]) for x, r in zip(xs, allr) if r["tune"].get("rms_after") is not None]
    if rb:
        ax2.plot(*zip(*rb), "s--", color="tab:red", mfc="none", label="rms error, env's fit (%)")
        ax2.plot(*zip(*ra), "s-", color="tab:red", label="rms error, refitted (%)")
    ax2.set_ylabel("rms relative error over measured trials (%)")
    h1, l1 = ax1.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax1.legend(h1 + h2, l1 + l2, fontsize=7, loc="best", framealpha=0.8)
    fig.tight_layout()
    paths.append(save_figure(fig, Path(f"{stem}-refit.png"), dpi=110))
    return paths


def write_tune_report(path: Path, *, setup, records: list[dict[str, Any]], final: dict | None, stop: str, steps: int,
                      budget: int, wall_s: float, band: dict, noise_fallback: float,
                      head_to_head: dict | None) -> Path:
    """Write the report (Markdown, atomically) and its plots beside it; return its path."""
    stem = path.with_suffix("")
    pngs = _plots(records, stem)
    lines = [f"# tune: {setup.model} on {setup.env}", ""]
    if final:
        m = final["measured_ms"]
        rng = f", range {min(m):.1f}-{max(m):.1f} ms over {len(m)} trials" if len(m) > 1 else ", one trial"
        lines += [f"**final: {final['key']}: {final['median_ms']:.1f} ms/step (median{rng})**", "",
                  f"- horovodrun flags: `{' '.join(final['flags'])}`",
                  f"- environment: `{' '.join(f'{k}={v}' for k, v in final['env'].items())}`"]
        if final["compression"] != "none":
            lines.append(f"- in the training script: `{final['compression_code']}`")
    else:
        lines.append("**no configuration was measured**")
    lines += [f"- stopped: {stop}", f"- spent: {steps} steps of a {budget}-step budget, {len(records)} trials, "
              f"{wall_s:.0f} s of jobs", f"- prior: error band {band['band']:.1%} ({band['source']}); one trial's "
              f"noise before repeats: {noise_fallback:.1%}", ""]
    lines += ["| trial | candidate | why | simulator ms (refit) | env's fit ms | measured ms | bandwidth scale | "
              "EI ms |", "|---|---|---|---|---|---|---|---|"]
    for r in records:
        t = r["tune"]
        m = r.get("measured_step_time_ms")
        ei = "" if t.get("ei_ms") is None else f"{t['ei_ms']:.2f}"
        lines.append(f"| {r['trial']} | {t['candidate']} | {t['reason']} | {t['prior_ms']:.1f} | "
                     f"{t['prior_unrefit_ms']:.1f} | {'' if m is None else f'{m:.1f}'}"
                     f"{'' if r['status'] == 'ok' else ' (' + r['status'] + ')'} | {t['bandwidth_scale']:.3f} | {ei} |")
    if head_to_head:
        a = head_to_head["autotune"]
        lines += ["", "## Against Horovod's default autotune", "",
                  f"- autotune {'settled' if a.get('finished') else 'did NOT settle'} after {a.get('steps')} steps, "
                  f"{a.get('wall_s')} s; tune spent {steps} steps, {wall_s:.0f} s"
                  + (f" ({steps / a['steps']:.3f} of autotune's steps)" if a.get("steps") else ""),
                  f"- {head_to_head['verdict']}", f"- report: {Path(head_to_head['report']).name}"]
    ok = [r["measured_step_time_ms"] for r in records if r["status"] == "ok" and r.get("measured_step_time_ms")]
    if ok:
        lines += ["", f"Measured step times over all trials: median {statistics.median(ok):.1f} ms, "
                      f"range {min(ok):.1f}-{max(ok):.1f} ms."]
    lines += [""] + [f"![{p.name}]({p.name})" for p in pngs] + [""]
    atomic_write_text(path, "\n".join(lines))
    return path
