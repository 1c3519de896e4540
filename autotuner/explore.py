"""Views of the knob space: the explorer grid, one-knob sensitivity, and scaling what-ifs.

Pure: a :class:`~autotuner.api.Scenario` (and, for the measured overlay, already-read
validation records) in; pandas DataFrames and frozen dataclasses out. No file I/O, no clocks
except the wall time each view reports, no global random state. Plots are in
:mod:`autotuner.plots_explore`, file reading in :mod:`autotuner.api`.

Units: fusion threshold in **bytes** in :class:`~autotuner.knobs.Config` and in the
``fusion_threshold_bytes`` columns, MiB (2**20 bytes) in ``fusion_threshold_mb`` columns;
cycle time in ms; step times in ms; link rates in Gbit/s (10**9 bit/s); throughput in
steps/s and samples/s.

Every prediction goes through :func:`step_times_ms` (one call per batch of configurations),
the single place to swap in a faster batch simulator.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from .costmodel import Cluster
from .knobs import DEFAULTS_0_28, KNOB_BY_FIELD, MIB, Config, autotune_start_configs
from .search import CACHE_ON, Trial, top_distinct

#: ``(scenario, configs) -> step times in ms, shape (len(configs),)``.
Evaluator = Callable[[Any, Sequence[Config]], np.ndarray]

#: Smallest non-zero fusion threshold on the explorer's axis (64 KiB); the largest is the knob
#: table's bound, 512 MiB.
MIN_THRESHOLD_BYTES = 64 * 1024
#: Two configurations closer than this (relative) are a tie (hierarchical "wins" only beyond it).
TIE_REL = 0.005
#: Thresholds within this (relative) of the best step time count as "as good" in the scale view.
NEAR_REL = 0.01


class ExploreError(ValueError):
    """A view cannot be computed from the arguments (empty node list, bad resolution, ...)."""


def step_times_ms(sc, configs: Sequence[Config]) -> np.ndarray:
    """Predicted steady-state step time (ms) of each configuration on scenario ``sc``.

    Shape (len(configs),), float64. This is the one function every view calls to evaluate a
    grid. It uses the batch simulator (:meth:`Scenario.step_times`, :mod:`autotuner.fastsim`),
    which tests/test_fastsim.py holds equal to :func:`autotuner.simulator.simulate_step`.
    """
    if not len(configs):
        return np.zeros(0)
    a = lambda f: np.array([f(c) for c in configs])  # noqa: E731
    return 1e3 * sc.step_times(fusion_threshold_bytes=a(lambda c: c.fusion_threshold_bytes),
                               cycle_time_ms=a(lambda c: c.cycle_time_ms),
                               cache_capacity=a(lambda c: c.cache_capacity),
                               hierarchical_allreduce=a(lambda c: c.hierarchical_allreduce),
                               hierarchical_allgather=a(lambda c: c.hierarchical_allgather))


# --------------------------------------------------------------------------- combinations
@dataclass(frozen=True)
class Combo:
    """One setting of the on/off knobs: response cache and hierarchical allreduce."""

    cache: bool
    hierarchical_allreduce: bool

    @property
    def label(self) -> str:
        return f"cache {'on' if self.cache else 'off'}, " + ("hierarchical" if self.hierarchical_allreduce else "flat")

    def apply(self, cfg: Config) -> Config:
        """``cfg`` with this combination's on/off knobs (cache capacity 1024 when on, 0 when off)."""
        return replace(cfg, cache_capacity=CACHE_ON if self.cache else 0,
                       hierarchical_allreduce=self.hierarchical_allreduce)

    @classmethod
    def of(cls, cfg: Config) -> "Combo":
        return cls(cfg.cache_capacity > 0, bool(cfg.hierarchical_allreduce))


def combos(cluster: Cluster) -> list[Combo]:
    """Cache on/off × hierarchical allreduce off/on, the latter only when ``cluster.nodes > 1``
    (Horovod turns the flag off when size == local_size, horovod/common/operations.cc)."""
    hier = (False, True) if cluster.nodes > 1 else (False,)
    return [Combo(c, h) for c in (True, False) for h in hier]


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


def _best(configs: Sequence[Config], ms: np.ndarray) -> tuple[Config, float]:
    """Fastest configuration; ties (to the µs) go to the one closest to Horovod's defaults."""
    t = top_distinct([Trial(c, float(m) * 1e-3, "grid") for c, m in zip(configs, ms)], 1, DEFAULTS_0_28)[0]
    return t.config, t.step_time_s * 1e3


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
        measured: real validation trials of this env and model (may be empty): columns
            ``source``, ``label``, config columns, ``n`` (repeats), ``measured_step_time_ms``
            (mean), ``predicted_step_time_ms`` (now), ``error_percent`` (predicted vs measured).
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

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the grid as records (one per cell), marks, sensitivity, measured."""
        return {"scenario": self.scenario, "thresholds_bytes": [int(x) for x in self.thresholds_bytes],
                "cycles_ms": [float(x) for x in self.cycles_ms],
                "grid": self.grid.to_dict(orient="records"), "marks": [m.to_dict() for m in self.marks],
                "best": self.best.to_dict(), "sensitivity": self.sensitivity.to_dict(orient="records"),
                "measured": self.measured.to_dict(orient="records"), "evaluations": self.evaluations,
                "seconds": self.seconds}


def scenario_info(sc) -> dict[str, Any]:
    intra = sc.cost.intra
    return {"env": sc.env, "model": sc.model, "layout": sc.layout.name, "tensors": sc.layout.n_tensors,
            "gradient_mb": sc.layout.total_bytes / MIB, "nodes": sc.cluster.nodes,
            "gpus_per_node": sc.cluster.gpus_per_node, "bandwidth_gbps": sc.cost.link_gbps,
            "intra_bandwidth_gbps": None if intra is None else intra.to_dict()["bandwidth_gbps"],
            "compute_ms": sc.workload.compute_s * 1e3}


def explore(sc, *, resolution: int = 24, suggested: Config | None = None,
            measured_records: Iterable[tuple[str, dict]] = (), evaluate: Evaluator = step_times_ms,
            sensitivity_points: int = 48) -> Exploration:
    """Predicted step time over fusion threshold × cycle time for every on/off combination.

    Args:
        sc: the scenario (:func:`autotuner.api.make_scenario`).
        resolution: points per axis (R): thresholds 0 + R log-spaced in [64 KiB, 512 MiB],
            cycle times R log-spaced in [0.1, 100] ms. Simulations: combos · (R + 1) · R.
        suggested: the ``suggest`` pick to mark (None: not marked).
        measured_records: (source name, validation record) pairs (:func:`measured_points`).
        evaluate: the grid evaluator (default :func:`step_times_ms`).
        sensitivity_points: points per continuous knob in the sensitivity curves.

    Raises:
        ExploreError: resolution < 2 or > 200.
    """
    if not 2 <= resolution <= 200:
        raise ExploreError(f"resolution must be between 2 and 200 points per axis, got {resolution}")
    t0 = time.perf_counter()
    thr, cyc = threshold_axis(resolution), cycle_axis(resolution)
    cmb = combos(sc.cluster)
    configs = [cb.apply(Config(fusion_threshold_bytes=int(f), cycle_time_ms=float(c)))
               for cb in cmb for f in thr for c in cyc]
    ms = evaluate(sc, configs)
    grid = pd.DataFrame([_config_row(c) for c in configs])
    grid.insert(0, "combo", [Combo.of(c).label for c in configs])
    grid["step_time_ms"] = ms
    best_cfg, best_ms = _best(configs, ms)

    marked = [("Horovod 0.28 defaults", "default", DEFAULTS_0_28)]
    for cb in cmb:
        for i, c in enumerate(autotune_start_configs(DEFAULTS_0_28), 1):
            marked.append((f"autotune start {i} ({cb.label})", "autotune-start", cb.apply(c)))
    if suggested is not None:
        marked.append(("suggest pick", "suggest", suggested))
    mark_ms = evaluate(sc, [c for _, _, c in marked])
    marks = [Mark(n, k, c, float(m)) for (n, k, c), m in zip(marked, mark_ms)]
    best = Mark("grid best", "grid-best", best_cfg, best_ms)
    marks.append(best)

    sens = sensitivity(sc, best_cfg, points=sensitivity_points, evaluate=evaluate)
    meas = measured_points(measured_records, sc, evaluate=evaluate)
    n_eval = len(configs) + len(marked) + len(sens) + len(meas)
    return Exploration(scenario_info(sc), grid, thr, cyc, tuple(marks), best, sens, meas, n_eval,
                       time.perf_counter() - t0)


def sensitivity(sc, at: Config, *, points: int = 48, evaluate: Evaluator = step_times_ms) -> pd.DataFrame:
    """Step time vs each knob alone, the others held at ``at``.

    Returns columns ``knob``, ``value`` (threshold in MiB with 0 = fusion off, cycle time in
    ms, 0/1 for cache and hierarchical allreduce), ``step_time_ms``. Hierarchical allreduce
    only when ``sc.cluster.nodes > 1``.
    """
    rows: list[tuple[str, float, Config]] = []
    for f in threshold_axis(points):
        rows.append(("fusion_threshold_mb", f / MIB, replace(at, fusion_threshold_bytes=int(f))))
    for c in cycle_axis(points):
        rows.append(("cycle_time_ms", float(c), replace(at, cycle_time_ms=float(c))))
    for on in (False, True):
        rows.append(("cache", float(on), replace(at, cache_capacity=CACHE_ON if on else 0)))
    if sc.cluster.nodes > 1:
        for on in (False, True):
            rows.append(("hierarchical_allreduce", float(on), replace(at, hierarchical_allreduce=on)))
    ms = evaluate(sc, [c for _, _, c in rows])
    return pd.DataFrame({"knob": [k for k, _, _ in rows], "value": [v for _, v, _ in rows], "step_time_ms": ms})


def measured_points(records: Iterable[tuple[str, dict]], sc, *, evaluate: Evaluator = step_times_ms) -> pd.DataFrame:
    """Real trials of ``sc``'s env and model, averaged per configuration, beside today's prediction.

    ``records``: (source name, record) pairs from ``runs/<env>/validation/*.jsonl``
    (:mod:`autotuner.validation`). Kept: status ``ok``, a fixed configuration (autotune trials,
    whose configuration changes during the run, are left out), ``setup.model`` equal to the
    scenario's model, ``setup.env`` (when present) equal to its env and ``setup.np`` (when
    present) equal to its rank count. Returns the columns listed in :class:`Exploration`.
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
        key = (src, c.fusion_threshold_bytes, round(c.cycle_time_ms, 6), c.cache_capacity > 0, c.hierarchical_allreduce)
        groups.setdefault(key, []).append(float(r["measured_step_time_ms"]))
        cfgs[key] = c
        labels.setdefault(key, str(r.get("label", "")))
    cols = ["source", "label", "fusion_threshold_bytes", "fusion_threshold_mb", "cycle_time_ms", "cache",
            "hierarchical_allreduce", "n", "measured_step_time_ms", "predicted_step_time_ms", "error_percent"]
    if not groups:
        return pd.DataFrame(columns=cols)
    keys = list(groups)
    pred = evaluate(sc, [cfgs[k] for k in keys])
    rows = []
    for k, p in zip(keys, pred):
        m = float(np.mean(groups[k]))
        rows.append({"source": k[0], "label": labels[k], **_config_row(cfgs[k]), "n": len(groups[k]),
                     "measured_step_time_ms": m, "predicted_step_time_ms": float(p),
                     "error_percent": (float(p) - m) / m * 100})
    return pd.DataFrame(rows, columns=cols)


# --------------------------------------------------------------------------- scale
#: Scale view's search grid: whole-MiB thresholds (flag-expressible), cycle times (ms).
SCALE_THRESHOLDS_MB: tuple[int, ...] = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
SCALE_CYCLES_MS: tuple[float, ...] = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)


def what_if(sc, *, nodes: int, gpus_per_node: int | None = None, bandwidth_gbps: float | None = None):
    """``sc`` on ``nodes`` × ``gpus_per_node`` ranks (default: sc's) with the inter-node link at
    ``bandwidth_gbps`` (default: sc's). Kept fixed: the model's per-GPU compute (and so the
    per-GPU batch: weak scaling), the tiers' latencies, the intra-node tier, the negotiation cost
    per controller operation, the memcpy and host-copy rates. Raises ExploreError for nodes or
    GPUs per node < 1 or a non-positive rate."""
    from .costmodel import CostModelError

    try:
        cl = Cluster(nodes, gpus_per_node or sc.cluster.gpus_per_node)
        cost = sc.cost if bandwidth_gbps is None else sc.cost.with_bandwidth(bandwidth_gbps)
    except CostModelError as e:
        raise ExploreError(str(e)) from None
    return replace(sc, cluster=cl, cost=cost)


@dataclass(frozen=True)
class BestAtSize:
    """Search result for one (nodes, link rate): best overall, best flat, best hierarchical (ms)."""

    config: Config
    step_time_ms: float
    flat: Config
    flat_ms: float
    hier: Config | None
    hier_ms: float | None
    near_thresholds_mb: tuple[int, int]  # smallest and largest grid threshold within NEAR_REL of best
    evaluations: int


def best_at_size(sc, *, evaluate: Evaluator = step_times_ms) -> BestAtSize:
    """Best configuration of ``sc`` by a two-stage grid search.

    Stage 1: :data:`SCALE_THRESHOLDS_MB` × :data:`SCALE_CYCLES_MS` with the response cache on,
    for each hierarchical setting (off, and on when nodes > 1). Stage 2, around the best of
    each hierarchical setting: threshold × {2^-½, 1, 2^½} (whole MiB) × cycle × {10^-⅙, 1,
    10^⅙} × cache on/off (the cache's cost is a per-cycle negotiation term, nearly independent
    of the other knobs, so it is searched only here). About 240 simulations per call.
    Ties (to the µs) go to the configuration closest to Horovod's defaults.
    """
    hiers = (False, True) if sc.cluster.nodes > 1 else (False,)
    configs = [Config(fusion_threshold_bytes=f * MIB, cycle_time_ms=c, cache_capacity=CACHE_ON,
                      hierarchical_allreduce=h)
               for h in hiers for f in SCALE_THRESHOLDS_MB for c in SCALE_CYCLES_MS]
    ms = evaluate(sc, configs)
    allc, allm = list(configs), list(ms)
    per_h: dict[bool, tuple[Config, float]] = {}
    for h in hiers:
        idx = [i for i, c in enumerate(configs) if c.hierarchical_allreduce == h]
        b, _ = _best([configs[i] for i in idx], ms[idx])
        mb = b.fusion_threshold_bytes // MIB
        fs = sorted({mb, *(max(1, min(512, round(mb * s))) for s in (2 ** -0.5, 2 ** 0.5))}) if mb else [0]
        cs = sorted({b.cycle_time_ms, *(min(100.0, max(0.1, round(b.cycle_time_ms * s, 3)))
                                        for s in (10 ** (-1 / 6), 10 ** (1 / 6)))})
        extra = [replace(b, fusion_threshold_bytes=f * MIB, cycle_time_ms=c, cache_capacity=cap)
                 for f in fs for c in cs for cap in (CACHE_ON, 0)]
        extra = [c for c in extra if c != b]
        em = evaluate(sc, extra) if extra else np.empty(0)
        allc += extra
        allm += list(em)
        sub = [(c, m) for c, m in zip(allc, allm) if c.hierarchical_allreduce == h]
        per_h[h] = _best([c for c, _ in sub], np.array([m for _, m in sub]))
    best, best_ms = _best(allc, np.array(allm))
    near = [c.fusion_threshold_bytes // MIB for c, m in zip(allc, allm)
            if m <= best_ms * (1 + NEAR_REL) and c.cycle_time_ms == best.cycle_time_ms
            and c.cache_capacity == best.cache_capacity and c.hierarchical_allreduce == best.hierarchical_allreduce]
    flat, flat_ms = per_h[False]
    hier, hier_ms = per_h.get(True, (None, None))
    return BestAtSize(best, best_ms, flat, flat_ms, hier, hier_ms, (min(near), max(near)), len(allc))


@dataclass(frozen=True)
class Scaling:
    """The scale view's result.

    Attributes:
        scenario: the base scenario (dict, :func:`scenario_info`).
        table: one row per (bandwidth_gbps, nodes): ``nodes``, ``gpus_per_node``, ``ranks``,
            ``bandwidth_gbps``; for ``best`` and ``default`` (Horovod 0.28 defaults):
            ``*_step_time_ms``, ``*_steps_per_s``, ``*_samples_per_s`` (NaN without a batch
            size), ``*_gpu_steps_per_s`` (steps/s × ranks, throughput in per-GPU batches),
            ``*_efficiency`` (throughput(N) / (N/N0 · throughput(N0)), N0 = smallest node count,
            same link rate); ``best_fusion_threshold_mb``, ``best_cycle_time_ms``, ``best_cache``,
            ``best_hierarchical_allreduce``, ``near_threshold_lo_mb`` / ``_hi_mb`` (grid thresholds
            within 1% of the best, other knobs at best), ``flat_step_time_ms``,
            ``hier_step_time_ms`` (NaN on one node), ``hier_gain_percent`` (flat / hier - 1, %),
            ``speedup_vs_default``.
        findings: one sentence per link rate: where hierarchical allreduce starts to win, how the
            best threshold moves.
        batch_per_gpu: samples per GPU per step, or None.
    """

    scenario: dict[str, Any]
    table: pd.DataFrame
    findings: tuple[str, ...]
    batch_per_gpu: int | None
    evaluations: int
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        t = self.table.astype(object).where(self.table.notna(), None)
        return {"scenario": self.scenario, "batch_per_gpu": self.batch_per_gpu,
                "rows": t.to_dict(orient="records"), "findings": list(self.findings),
                "evaluations": self.evaluations, "seconds": self.seconds}


def parse_int_list(text: str, what: str) -> list[int]:
    """``"1,2,4"`` -> [1, 2, 4]; each > 0, sorted, deduplicated. Raises ExploreError."""
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(p == "" for p in parts):
        raise ExploreError(f"{what}: expected a comma-separated list of positive integers, got {text!r}")
    try:
        vals = [int(p) for p in parts]
    except ValueError:
        raise ExploreError(f"{what}: not an integer list: {text!r}") from None
    if any(v < 1 for v in vals):
        raise ExploreError(f"{what}: values must be >= 1, got {text!r}")
    return sorted(set(vals))


def parse_float_list(text: str, what: str) -> list[float]:
    """``"1,10,25"`` -> [1.0, 10.0, 25.0]; each finite and > 0, sorted, deduplicated. Raises ExploreError."""
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(p == "" for p in parts):
        raise ExploreError(f"{what}: expected a comma-separated list of positive numbers, got {text!r}")
    try:
        vals = [float(p) for p in parts]
    except ValueError:
        raise ExploreError(f"{what}: not a number list: {text!r}") from None
    if any(not (np.isfinite(v) and v > 0) for v in vals):
        raise ExploreError(f"{what}: values must be > 0, got {text!r}")
    return sorted(set(vals))


def scale(sc, nodes: Sequence[int], *, gpus_per_node: int | None = None,
          bandwidths_gbps: Sequence[float] | None = None, batch_per_gpu: int | None = None,
          evaluate: Evaluator = step_times_ms) -> Scaling:
    """Best configuration and Horovod's defaults at each node count (and link rate).

    Args:
        sc: the base scenario; each point is :func:`what_if` of it.
        nodes: node counts (each >= 1), evaluated in increasing order.
        gpus_per_node: GPUs (ranks) per node for every point (default: the env's).
        bandwidths_gbps: inter-node link rates, Gbit/s (default: the env's fitted rate only).
        batch_per_gpu: samples per GPU per step, for samples/s (None: samples/s is NaN).

    Raises:
        ExploreError: empty node list, a node count or GPUs per node < 1, a rate <= 0,
            batch_per_gpu < 1.
    """
    if not nodes:
        raise ExploreError("the node list is empty")
    if any(int(n) != n or n < 1 for n in nodes):
        raise ExploreError(f"node counts must be integers >= 1, got {list(nodes)}")
    if gpus_per_node is not None and gpus_per_node < 1:
        raise ExploreError(f"GPUs per node must be >= 1, got {gpus_per_node}")
    if batch_per_gpu is not None and batch_per_gpu < 1:
        raise ExploreError(f"batch size per GPU must be >= 1, got {batch_per_gpu}")
    bws = list(bandwidths_gbps) if bandwidths_gbps else [sc.cost.link_gbps]
    if any(not b > 0 for b in bws):
        raise ExploreError(f"bandwidths must be > 0 Gbit/s, got {bws}")
    t0 = time.perf_counter()
    ns = sorted(set(int(n) for n in nodes))
    rows, n_eval = [], 0
    for bw in bws:
        for n in ns:
            s = what_if(sc, nodes=n, gpus_per_node=gpus_per_node, bandwidth_gbps=bw)
            b = best_at_size(s, evaluate=evaluate)
            d_ms = float(evaluate(s, [DEFAULTS_0_28])[0])
            n_eval += b.evaluations + 1
            ranks = s.cluster.size
            row = {"bandwidth_gbps": bw, "nodes": n, "gpus_per_node": s.cluster.gpus_per_node, "ranks": ranks}
            for name, ms_ in (("best", b.step_time_ms), ("default", d_ms)):
                sps = 1e3 / ms_
                row |= {f"{name}_step_time_ms": ms_, f"{name}_steps_per_s": sps, f"{name}_gpu_steps_per_s": sps * ranks,
                        f"{name}_samples_per_s": sps * ranks * batch_per_gpu if batch_per_gpu else np.nan}
            row |= {"best_fusion_threshold_mb": b.config.fusion_threshold_bytes / MIB,
                    "best_cycle_time_ms": b.config.cycle_time_ms, "best_cache": b.config.cache_capacity > 0,
                    "best_hierarchical_allreduce": bool(b.config.hierarchical_allreduce),
                    "near_threshold_lo_mb": b.near_thresholds_mb[0], "near_threshold_hi_mb": b.near_thresholds_mb[1],
                    "flat_step_time_ms": b.flat_ms,
                    "hier_step_time_ms": np.nan if b.hier_ms is None else b.hier_ms,
                    "hier_gain_percent": np.nan if b.hier_ms is None else (b.flat_ms / b.hier_ms - 1) * 100,
                    "speedup_vs_default": d_ms / b.step_time_ms}
            rows.append(row)
    t = pd.DataFrame(rows)
    for name in ("best", "default"):
        eff = np.empty(len(t))
        for bw in bws:
            m = (t["bandwidth_gbps"] == bw).to_numpy()
            g = t[m]
            n0, thr0 = g["nodes"].iloc[0], g[f"{name}_gpu_steps_per_s"].iloc[0]
            eff[m] = g[f"{name}_gpu_steps_per_s"].to_numpy() / (g["nodes"].to_numpy() / n0 * thr0)
        t[f"{name}_efficiency"] = eff
    findings = tuple(_findings(t, bw, sc.cost.intra is not None) for bw in bws)
    return Scaling(scenario_info(sc), t, findings, batch_per_gpu, n_eval, time.perf_counter() - t0)


def _findings(t: pd.DataFrame, bw: float, intra_measured: bool) -> str:
    """One sentence for link rate ``bw``: where hierarchical allreduce wins, how the best threshold moves."""
    g = t[t["bandwidth_gbps"] == bw]
    gpn = int(g["gpus_per_node"].iloc[0])
    multi = g[g["nodes"] > 1]
    wins = multi[multi["hier_gain_percent"] > TIE_REL * 100]
    if multi.empty:
        hier = "hierarchical allreduce: no multi-node size in the list"
    elif wins.empty:
        why = (" (1 GPU per node: no intra-node reduction to gain, only host copies to pay; try --gpus-per-node)"
               if gpn == 1 else "" if intra_measured else
               " (this env never measured an intra-node tier, so intra-node steps are costed at the inter-node "
               "tier's rate and latency: the reduce-scatter and allgather cost about what they save)")
        hier = f"hierarchical allreduce never wins by more than {TIE_REL:.1%} up to {int(multi['nodes'].max())} nodes{why}"
    else:
        win = (multi["hier_gain_percent"] > TIE_REL * 100).to_numpy()
        ns = multi["nodes"].to_numpy()
        gain = multi["hier_gain_percent"].to_numpy()
        # the smallest size from which hierarchical wins at every larger size in the list
        k = len(win)
        while k > 0 and win[k - 1]:
            k -= 1
        if k < len(win):
            hier = (f"hierarchical allreduce wins from {int(ns[k])} nodes on ({gain[k]:+.1f}% vs the best flat there, "
                    f"{gain[-1]:+.1f}% at {int(ns[-1])})")
        else:
            hier = f"hierarchical allreduce does not win at the largest size ({gain[-1]:+.1f}% at {int(ns[-1])})"
        other = [f"{int(n)} ({g:+.1f}%)" for n, g, w in zip(ns[:k], gain[:k], win[:k]) if w]
        if other:
            hier += "; it also wins at " + ", ".join(other)
    thr = ", ".join(f"{int(n)}: {f:g} ({lo:g}-{hi:g})" for n, f, lo, hi in
                    zip(g["nodes"], g["best_fusion_threshold_mb"], g["near_threshold_lo_mb"], g["near_threshold_hi_mb"]))
    return f"{bw:g} Gbit/s, {gpn} GPU(s)/node: {hier}; best fusion threshold MiB by nodes (range within 1%) {thr}"


__all__ = ["BestAtSize", "Combo", "ExploreError", "Exploration", "Mark", "Scaling",
           "best_at_size", "combos", "cycle_axis", "explore", "measured_points", "parse_float_list",
           "parse_int_list", "scale", "sensitivity", "step_times_ms", "threshold_axis", "what_if"]
