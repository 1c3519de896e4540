"""The fresh-environment protocol's figures: how well a sweep-only model predicts real replays.

Input: the validation records of one environment (``<runs>/<env>/validation/<name>.jsonl``,
:mod:`autotuner.frameworks.horovod.validation`) and that environment's fitted model. Output: per
configuration the measured step time (median over repeats of each trial's median, with the
repeats' range) next to the prediction, and the summary figures:

- **MAPE**, **worst** error and **bias** (mean signed error), in % of the measured step time;
- **Kendall τ** of predicted vs measured step times, over all pairs and over the pairs whose
  measured step times are more than ``min_gap`` (2 %) apart (``scipy.stats.kendalltau`` for all
  pairs; for the filtered pairs τ = (concordant − discordant) / pairs kept, ties counted in neither);
- the pick (``suggest``'s first proposal) vs Horovod's defaults and vs autotune's best, as
  throughput ratios (measured step time of the other / the pick's), with "within noise" when the
  two repeat ranges overlap.

Used by ``research/scripts/fresh_env.py`` and its tests; pure apart from :func:`rows_from_records` taking
the records already read.
"""
from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from ..knobs import Config


@dataclass(frozen=True)
class Row:
    """One configuration of a replay batch: ``label`` (``default``, ``autotune_best``,
    ``proposal-k``), its knobs, the measured step times of its repeats (ms, one per trial: the
    trial's median step), and the predicted step time (ms)."""

    label: str
    config: Config
    measured_ms: tuple[float, ...]
    predicted_ms: float

    @property
    def measured_median_ms(self) -> float:
        return float(np.median(self.measured_ms))

    @property
    def error_pct(self) -> float:
        return (self.predicted_ms - self.measured_median_ms) / self.measured_median_ms * 100.0

    def describe(self) -> str:
        c = self.config
        s = f"{c.fusion_threshold_mb:g} MiB, {c.cycle_time_ms:g} ms"
        if c.cache_capacity == 0:
            s += ", cache off"
        return s


def rows_from_records(records: Iterable[Mapping], predict: Callable[[Config, Mapping], float]) -> list[Row]:
    """Group ok fixed-configuration trials by (label, knobs) and predict each group.

    ``records``: validation records (dicts, :class:`autotuner.schemas.Record`); the autotune run
    (no ``config``) and failed trials are skipped. ``predict(config, setup)`` returns the
    predicted step time in ms for a trial's knobs and setup. Rows come in first-seen order.
    """
    groups: dict[tuple[str, str], list[Mapping]] = {}
    for r in records:
        if r.get("status") != "ok" or not r.get("config"):
            continue
        groups.setdefault((str(r.get("label")), json.dumps(r["config"], sort_keys=True)), []).append(r)
    out = []
    for (label, _), rs in groups.items():
        cfg = Config.from_dict(rs[0]["config"])
        out.append(Row(label, cfg, tuple(float(r["measured_step_time_ms"]) for r in rs),
                       float(predict(cfg, rs[0]["setup"]))))
    return out


def kendall_tau(measured: Sequence[float], predicted: Sequence[float], min_gap: float = 0.0) -> tuple[float, int]:
    """Kendall τ-a of ``predicted`` against ``measured`` over the pairs whose measured values
    differ by more than ``min_gap`` (relative to the smaller one). Returns (τ, pairs kept);
    τ is NaN when no pair is kept. A pair tied in the prediction counts as neither."""
    conc = disc = kept = 0
    for i, j in itertools.combinations(range(len(measured)), 2):
        mi, mj = measured[i], measured[j]
        if abs(mi - mj) <= min_gap * min(mi, mj):
            continue
        kept += 1
        s = np.sign(mi - mj) * np.sign(predicted[i] - predicted[j])
        conc += s > 0
        disc += s < 0
    return ((conc - disc) / kept if kept else float("nan")), kept


@dataclass(frozen=True)
class Versus:
    """The pick against another configuration: ``speedup`` = other's measured step / the
    pick's (> 1: the pick is faster); ``overlap``: the repeat ranges overlap (within noise)."""

    other: str
    speedup: float
    overlap: bool


def versus(pick: Row, other: Row) -> Versus:
    """The pick against ``other`` (medians; ranges from the repeats' min and max)."""
    overlap = min(pick.measured_ms) <= max(other.measured_ms) and min(other.measured_ms) <= max(pick.measured_ms)
    return Versus(other.label, other.measured_median_ms / pick.measured_median_ms, overlap)


def summary(rows: Sequence[Row], pick_label: str | None = None, min_gap: float = 0.02) -> dict:
    """The protocol's figures over ``rows`` (see the module docstring). ``pick_label``: the row
    of suggest's pick (None: no comparison). Raises ValueError for no rows."""
    if not rows:
        raise ValueError("no successful fixed-configuration trials to summarise")
    err = np.array([r.error_pct for r in rows])
    meas = [r.measured_median_ms for r in rows]
    pred = [r.predicted_ms for r in rows]
    tau_all, n_all = kendall_tau(meas, pred)
    tau_gap, n_gap = kendall_tau(meas, pred, min_gap)
    out = {"configurations": len(rows), "repeats_min": min(len(r.measured_ms) for r in rows),
           "mape_pct": float(np.mean(np.abs(err))), "worst_pct": float(err[np.argmax(np.abs(err))]),
           "bias_pct": float(np.mean(err)), "kendall_tau_all": tau_all, "pairs_all": n_all,
           "kendall_tau_gap": tau_gap, "pairs_gap": n_gap, "min_gap": min_gap,
           "measured_best": min(rows, key=lambda r: r.measured_median_ms).label,
           "predicted_best": min(rows, key=lambda r: r.predicted_ms).label, "versus": []}
    by = {r.label: r for r in rows}
    if pick_label is not None and pick_label in by:
        for other in ("default", "autotune_best"):
            if other in by and other != pick_label:
                v = versus(by[pick_label], by[other])
                out["versus"].append({"other": v.other, "speedup": v.speedup, "within_noise": v.overlap})
    return out


def format_report(rows: Sequence[Row], s: Mapping) -> list[str]:
    """Plain aligned text lines (no wrapping, nothing cut) for the rows and the summary."""
    w = max(len(r.label) for r in rows + [Row("configuration", rows[0].config, (1.0,), 1.0)])
    kw = max(len(r.describe()) for r in rows)
    lines = [f"{'configuration':<{w}}  {'knobs':<{kw}}  {'measured ms (range)':>24}  {'predicted':>9}  {'error':>6}"]
    for r in sorted(rows, key=lambda r: r.measured_median_ms):
        rng = f"{r.measured_median_ms:.1f} ({min(r.measured_ms):.1f}-{max(r.measured_ms):.1f})"
        lines.append(f"{r.label:<{w}}  {r.describe():<{kw}}  {rng:>24}  {r.predicted_ms:>9.1f}  {r.error_pct:>+5.1f}%")
    lines.append(f"{s['configurations']} configurations, >= {s['repeats_min']} repeats each: MAPE {s['mape_pct']:.1f} %, "
                 f"worst {s['worst_pct']:+.1f} %, bias {s['bias_pct']:+.1f} %")
    lines.append(f"Kendall tau {s['kendall_tau_all']:.2f} over {s['pairs_all']} pairs; "
                 f"{s['kendall_tau_gap']:.2f} over the {s['pairs_gap']} pairs > {s['min_gap']:.0%} apart")
    lines.append(f"measured best: {s['measured_best']}; predicted best: {s['predicted_best']}")
    for v in s["versus"]:
        lines.append(f"pick vs {v['other']}: {v['speedup']:.3f}x throughput"
                     + (" (within noise: the repeat ranges overlap)" if v["within_noise"] else ""))
    return lines
