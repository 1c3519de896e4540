"""Views of the knob space: the explorer grid, one-knob sensitivity, and scaling what-ifs.

Pure: a :class:`~autotuner.frameworks.horovod.scenario.Scenario` (and, for the measured overlay, already-read
validation records) in; pandas DataFrames and frozen dataclasses out. No file I/O, no clocks
except the wall time each view reports, no global random state. Plots are in
:mod:`autotuner.frameworks.horovod.views.plots_explore`, file reading in :mod:`autotuner.frameworks.horovod.predict`.

Units: fusion threshold in **bytes** in :class:`~autotuner.frameworks.horovod.knobs.Config` and in the
``fusion_threshold_bytes`` columns, MiB (2**20 bytes) in ``fusion_threshold_mb`` columns;
cycle time in ms; step times in ms; link rates in Gbit/s (10**9 bit/s); throughput in
steps/s and samples/s.

Every prediction goes through :func:`step_times_ms` (one call per batch of configurations),
the single place to swap in a faster batch simulator.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Iterable

import numpy as np
import pandas as pd

from ....errors import ExploreError
from ..knobs import (
    CACHE_ON,
    KNOB_BY_FIELD,
    LAST_RELEASE,
    MIB,
    Config,
    autotune_start_configs,
    defaults_for,
)
from ....model.costmodel import Cluster
from ..search.grid import Combo  # the one on/off combination type
from ..search.at_size import NEAR_REL, Evaluator, has_hierarchical, step_times_ms  # noqa: F401 (shared by the views)
from ..search.at_size import best_closest_to_defaults as _best
from ..search.ranking import MIN_GAIN
from ..schemas.records import timeline_recorded

#: Smallest non-zero fusion threshold on the explorer's axis (64 KiB); the largest is the knob
#: table's bound, 512 MiB.
MIN_THRESHOLD_BYTES = 64 * 1024
TIE_REL = MIN_GAIN  # a gain under the search's tie rule is no gain (hierarchical "wins" only beyond it)


# --------------------------------------------------------------------------- combinations
def combos(cluster: Cluster, hierarchical: bool = True) -> list[Combo]:
    """Cache on/off × hierarchical allreduce off/on, the latter only when ``cluster.nodes > 1``
    (Horovod turns the flag off when size == local_size, horovod/common/operations.cc) and
    ``hierarchical`` (the backend has hierarchical allreduce:
    :attr:`~autotuner.frameworks.horovod.scenario.Scenario.has_hierarchical_allreduce`)."""
    hier = (False, True) if cluster.nodes > 1 and hierarchical else (False,)
    return [Combo(CACHE_ON if c else 0, h) for c in (True, False) for h in hier]


def threshold_axis(resolution: int) -> np.ndarray:
    """Fusion thresholds (bytes, int64): 0 (fusion off), then ``resolution`` log-spaced values
    from 64 KiB to 512 MiB. Shape (resolution + 1,)."""
    hi = KNOB_BY_FIELD["fusion_threshold_bytes"].high
    return np.concatenate(([0], np.round(np.geomspace(MIN_THRESHOLD_BYTES, hi, resolution)))).astype(np.int64)


def cycle_axis(resolution: int) -> np.ndarray:
    """Cycle times (ms): ``resolution`` log-spaced values over the knob table's 0.1-100 ms."""
    k = KNOB_BY_FIELD["cycle_time_ms"]
    return np.geomspace(k.low, k.high, resolution)


def _config_row(c: Config) -> dict[str, Any]:
    return {"fusion_threshold_bytes": int(c.fusion_threshold_bytes), "fusion_threshold_mb": c.fusion_threshold_mb,
            "cycle_time_ms": float(c.cycle_time_ms), "cache": c.cache_capacity > 0,
            "hierarchical_allreduce": bool(c.hierarchical_allreduce)}


# --------------------------------------------------------------------------- explore
@dataclass(frozen=True)
class Mark:
    """A named configuration marked on the explorer's plots, with its predicted step time (ms)."""

    name: str
    kind: str  # "default" | "autotune-start" | "suggest" | "grid-best"
    config: Config
    step_time_ms: float

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "config": self.config.to_dict(), "step_time_ms": self.step_time_ms}


@dataclass(frozen=True)
class Exploration:
    """The explorer's result.

    Attributes:
        scenario: env, model, layout, cluster and link rate it was computed for (dict).
        grid: one row per (combination, threshold, cycle time); columns ``combo`` (label),
            ``cache``, ``hierarchical_allreduce``, ``fusion_threshold_bytes``,
            ``fusion_threshold_mb``, ``cycle_time_ms``, ``step_time_ms``. Threshold 0 = fusion off.
        thresholds_bytes: the threshold axis, shape (R + 1,), first entry 0.
        cycles_ms: the cycle-time axis, shape (R,).
        marks: defaults, autotune's start points (per combination), the ``suggest`` pick, the
            grid's best.
        best: the grid's fastest configuration (also in ``marks``).
        sensitivity: columns ``knob`` (``fusion_threshold_mb`` | ``cycle_time_ms`` | ``cache`` |
            ``hierarchical_allreduce``), ``value`` (MiB, ms, 0/1), ``step_time_ms``; each knob
            varied with the others at ``best``.
        measured: real validation trials of this env and model (may be empty), one row per job of
            each source: columns ``source``, ``label``, config columns, ``compression``, ``timeline``
            (Horovod's timeline ran), ``n`` (repeats), ``measured_step_time_ms`` (mean),
            ``predicted_step_time_ms`` (now, for that compression, without the timeline),
            ``error_percent`` (predicted vs measured; None where the timeline ran: :func:`measured_points`).
        evaluations: configurations simulated; seconds: wall time of the computation.
    """

    scenario: dict[str, Any]
    grid: pd.DataFrame
    thresholds_bytes: np.ndarray
    cycles_ms: np.ndarray
    marks: tuple[Mark, ...]
    best: Mark
    sensitivity: pd.DataFrame
    measured: pd.DataFrame
    evaluations: int
    seconds: float = 0.0
    #: per on/off combination: (label, its best configuration, its step time ms, fusion off's best ms),
    #: ties broken as :attr:`best`'s (closest to Horovod's defaults)
    by_combination: tuple[tuple[str, Config, float, float], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the grid as records (one per cell), marks, sensitivity, measured."""
        return {"scenario": self.scenario, "thresholds_bytes": [int(x) for x in self.thresholds_bytes],
                "cycles_ms": [float(x) for x in self.cycles_ms],
                "grid": self.grid.to_dict(orient="records"), "marks": [m.to_dict() for m in self.marks],
                "best": self.best.to_dict(), "sensitivity": self.sensitivity.to_dict(orient="records"),
                "measured": [{k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()}
                             for r in self.measured.to_dict(orient="records")], "evaluations": self.evaluations,
                "seconds": self.seconds}


def scenario_info(sc) -> dict[str, Any]:
    """The scenario as JSON-ready facts: sizes (MiB), shape, link rates (Gbit/s), one rank's
    compute (ms, :attr:`~autotuner.frameworks.horovod.scenario.Scenario.rank_workload`), the backend what-if."""
    intra = sc.cost.intra
    return {"env": sc.env, "model": sc.model, "layout": sc.layout.name, "tensors": sc.layout.n_tensors,
            "gradient_mb": sc.layout.total_bytes / MIB, "nodes": sc.cluster.nodes,
            "gpus_per_node": sc.cluster.gpus_per_node, "bandwidth_gbps": sc.cost.link_gbps,
            "intra_bandwidth_gbps": None if intra is None else intra.to_dict()["bandwidth_gbps"],
            "compute_ms": sc.rank_workload.compute_s * 1e3, "backend": getattr(sc, "backend", None)}


def explore(sc, *, resolution: int = 24, suggested: Config | None = None,
            measured_records: Iterable[tuple[str, dict]] = (), evaluate: Evaluator = step_times_ms,
            sensitivity_points: int = 48, pick_label: str = "suggest pick",
            reference_version: str = LAST_RELEASE) -> Exploration:
    """Predicted step time over fusion threshold × cycle time for every on/off combination.

    Args:
        sc: the scenario (:func:`autotuner.frameworks.horovod.predict.make_scenario`).
        resolution: points per axis (R): thresholds 0 + R log-spaced in [64 KiB, 512 MiB],
            cycle times R log-spaced in [0.1, 100] ms. Simulations: combos · (R + 1) · R.
        suggested: the ``suggest`` pick (or any configuration) to mark (None: not marked).
        pick_label: its name in the marks and the plots' legends.
        measured_records: (source name, validation record) pairs (:func:`measured_points`).
        evaluate: the grid evaluator (default :func:`step_times_ms`).
        sensitivity_points: points per continuous knob in the sensitivity curves.
        reference_version: the Horovod release whose defaults are marked (and where its autotune starts:
            :func:`autotuner.frameworks.horovod.knobs.defaults_for`); the env's own, as ``suggest`` compares.

    Raises:
        ExploreError: resolution < 2 or > 200.
    """
    if not 2 <= resolution <= 200:
        raise ExploreError(f"resolution must be between 2 and 200 points per axis, got {resolution}")
    t0 = time.perf_counter()
    thr, cyc = threshold_axis(resolution), cycle_axis(resolution)
    cmb = combos(sc.cluster, has_hierarchical(sc))
    configs = [cb.apply(Config(fusion_threshold_bytes=int(f), cycle_time_ms=float(c)))
               for cb in cmb for f in thr for c in cyc]
    ms = evaluate(sc, configs)
    grid = pd.DataFrame([_config_row(c) for c in configs])
    grid.insert(0, "combo", [Combo.of(c).label for c in configs])
    grid["step_time_ms"] = ms
    best_cfg, best_ms = _best(configs, ms)
    by_combo = []
    labels = grid["combo"].to_numpy()
    for label in dict.fromkeys(labels):
        idx = np.flatnonzero(labels == label)
        c_best, m_best = _best([configs[i] for i in idx], ms[idx])
        off = [ms[i] for i in idx if configs[i].fusion_threshold_bytes == 0]
        by_combo.append((str(label), c_best, m_best, float(min(off)) if off else float("nan")))

    ref = defaults_for(reference_version)
    marked = [(f"Horovod {reference_version} defaults", "default", ref)]
    for cb in cmb:
        for i, c in enumerate(autotune_start_configs(ref), 1):
            marked.append((f"autotune start {i} ({cb.label})", "autotune-start", cb.apply(c)))
    if suggested is not None:
        marked.append((pick_label, "suggest", suggested))
    mark_ms = evaluate(sc, [c for _, _, c in marked])
    marks = [Mark(n, k, c, float(m)) for (n, k, c), m in zip(marked, mark_ms)]
    best = Mark("grid best", "grid-best", best_cfg, best_ms)
    marks.append(best)

    sens = sensitivity(sc, best_cfg, points=sensitivity_points, evaluate=evaluate)
    meas = measured_points(measured_records, sc, evaluate=evaluate)
    n_eval = len(configs) + len(marked) + len(sens) + len(meas)
    return Exploration(scenario_info(sc), grid, thr, cyc, tuple(marks), best, sens, meas, n_eval,
                       time.perf_counter() - t0, tuple(by_combo))


def sensitivity(sc, at: Config, *, points: int = 48, evaluate: Evaluator = step_times_ms) -> pd.DataFrame:
    """Step time vs each knob alone, the others held at ``at``.

    Returns columns ``knob``, ``value`` (threshold in MiB with 0 = fusion off, cycle time in
    ms, 0/1 for cache and hierarchical allreduce), ``step_time_ms``. Hierarchical allreduce
    only when ``sc.cluster.nodes > 1`` and the backend has it (:func:`has_hierarchical`).
    """
    rows: list[tuple[str, float, Config]] = []
    for f in threshold_axis(points):
        rows.append(("fusion_threshold_mb", f / MIB, replace(at, fusion_threshold_bytes=int(f))))
    for c in cycle_axis(points):
        rows.append(("cycle_time_ms", float(c), replace(at, cycle_time_ms=float(c))))
    for on in (False, True):
        rows.append(("cache", float(on), replace(at, cache_capacity=CACHE_ON if on else 0)))
    if sc.cluster.nodes > 1 and has_hierarchical(sc):
        for on in (False, True):
            rows.append(("hierarchical_allreduce", float(on), replace(at, hierarchical_allreduce=on)))
    ms = evaluate(sc, [c for _, _, c in rows])
    return pd.DataFrame({"knob": [k for k, _, _ in rows], "value": [v for _, v, _ in rows], "step_time_ms": ms})


def measured_points(records: Iterable[tuple[str, dict]], sc, *, evaluate: Evaluator = step_times_ms) -> pd.DataFrame:
    """Real trials of ``sc``'s env and model, averaged per job, beside today's prediction for that job.

    ``records``: (source name, record) pairs from ``runs/<env>/validation/*.jsonl``
    (:mod:`autotuner.frameworks.horovod.validation`). Kept: status ``ok``, a fixed configuration (autotune trials,
    whose configuration changes during the run, are left out), ``setup.model`` equal to the
    scenario's model, ``setup.env`` (when present) equal to its env and ``setup.np`` (when
    present) equal to its rank count. A job is one source's knobs, gradient compression and timeline
    mode: an fp16 trial is never pooled with an uncompressed one of the same knobs, and is predicted
    with fp16 whatever ``sc``'s compression. The predictions are for a job without Horovod's timeline,
    whose writer's cost a timeline trial's step time holds: such a row keeps its prediction beside it
    but has no ``error_percent`` (None). Returns the columns listed in :class:`Exploration`.
    """
    groups: dict[tuple, list[float]] = {}
    cfgs: dict[tuple, Config] = {}
    labels: dict[tuple, str] = {}
    for src, r in records:
        setup = r.get("setup") or {}
        if (r.get("status") != "ok" or not r.get("config") or r.get("kind") == "autotune"
                or r.get("measured_step_time_ms") is None or setup.get("model") != sc.model
                or setup.get("env", sc.env) != sc.env or setup.get("np", sc.cluster.size) != sc.cluster.size):
            continue
        try:
            c = Config.from_dict(r["config"])
        except (TypeError, ValueError):
            continue
        comp = str(r.get("compression") or "none")
        key = (src, c.fusion_threshold_bytes, round(c.cycle_time_ms, 6), c.cache_capacity > 0, c.hierarchical_allreduce,
               comp, timeline_recorded(r))
        groups.setdefault(key, []).append(float(r["measured_step_time_ms"]))
        cfgs[key] = c
        labels.setdefault(key, str(r.get("label", "")))
    cols = ["source", "label", "fusion_threshold_bytes", "fusion_threshold_mb", "cycle_time_ms", "cache",
            "hierarchical_allreduce", "compression", "timeline", "n", "measured_step_time_ms",
            "predicted_step_time_ms", "error_percent"]
    if not groups:
        return pd.DataFrame(columns=cols)
    keys = list(groups)
    pred: dict[tuple, float] = {}
    for comp in dict.fromkeys(k[5] for k in keys):  # each job predicted with its own compression
        ks = [k for k in keys if k[5] == comp]
        s = sc if getattr(sc, "compression", "none") == comp else replace(sc, compression=comp)
        pred.update(zip(ks, (float(x) for x in evaluate(s, [cfgs[k] for k in ks]))))
    rows = []
    for k in keys:
        m, p = float(np.mean(groups[k])), pred[k]
        rows.append({"source": k[0], "label": labels[k], **_config_row(cfgs[k]), "compression": k[5],
                     "timeline": k[6], "n": len(groups[k]), "measured_step_time_ms": m, "predicted_step_time_ms": p,
                     "error_percent": None if k[6] else (p - m) / m * 100})
    df = pd.DataFrame(rows, columns=cols)
    df["error_percent"] = df["error_percent"].astype(object).where(df["error_percent"].notna(), None)
    return df


__all__ = ["Combo", "Exploration", "Mark", "combos", "cycle_axis", "explore", "measured_points",
           "sensitivity", "step_times_ms", "threshold_axis"]
