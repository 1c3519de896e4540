"""Scaling what-ifs: step time, throughput and scaling efficiency per node count and link rate.

Pure, like :mod:`autotuner.frameworks.horovod.views.explore` (whose evaluator and tie rules it shares): a
:class:`~autotuner.frameworks.horovod.scenario.Scenario` in; pandas DataFrames and frozen dataclasses out.
Units: step times in ms, link rates in Gbit/s (10**9 bit/s), throughput in steps/s and
samples/s, fusion threshold in MiB in the ``*_mb`` columns.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ....errors import ExploreError
from ..knobs import DEFAULTS_0_28, LAST_RELEASE, MIB, Config, defaults_for
from ....model.costmodel import Cluster
from ..search.at_size import (  # noqa: F401 (best_at_size, BestAtSize: the scale view's search)
    BestAtSize,
    Evaluator,
    best_at_size,
    has_hierarchical,
    step_times_ms,
)
from .explore import TIE_REL, scenario_info



def what_if(sc, *, nodes: int, gpus_per_node: int | None = None, bandwidth_gbps: float | None = None):
    """``sc`` on ``nodes`` × ``gpus_per_node`` ranks (default: sc's) with the inter-node link at
    ``bandwidth_gbps`` (default: sc's). Kept fixed: the model's per-GPU compute (and so the
    per-GPU batch: weak scaling), the tiers' latencies, the intra-node tier, the negotiation cost
    per controller operation, the memcpy and host-copy rates. Raises ExploreError for nodes or
    GPUs per node < 1 or a non-positive rate."""
    from ....model.costmodel import CostModelError

    try:
        cl = Cluster(nodes, gpus_per_node or sc.cluster.gpus_per_node)
        cost = sc.cost if bandwidth_gbps is None else sc.cost.with_bandwidth(bandwidth_gbps)
    except CostModelError as e:
        raise ExploreError(str(e)) from None
    return replace(sc, cluster=cl, cost=cost)


@dataclass(frozen=True)
class Scaling:
    """The scale view's result.

    Attributes:
        scenario: the base scenario (dict, :func:`scenario_info`).
        table: one row per (bandwidth_gbps, nodes): ``nodes``, ``gpus_per_node``, ``ranks``,
            ``bandwidth_gbps``; for ``best`` and ``default`` (the defaults of :attr:`reference_version`):
            ``*_step_time_ms``, ``*_steps_per_s``, ``*_samples_per_s`` (NaN without a batch
            size), ``*_gpu_steps_per_s`` (steps/s × ranks, throughput in per-GPU batches),
            ``*_efficiency`` (throughput(N) / (N/N0 · throughput(N0)), N0 = smallest node count,
            same link rate); ``best_fusion_threshold_mb``, ``best_cycle_time_ms``, ``best_cache``,
            ``best_hierarchical_allreduce``, ``near_threshold_lo_mb`` / ``_hi_mb`` (grid thresholds
            within 1% of the best, other knobs at best), ``flat_step_time_ms``,
            ``hier_step_time_ms`` (NaN on one node), ``hier_gain_percent`` (flat / hier - 1, %),
            ``speedup_vs_default``.
        findings: one sentence per link rate: where hierarchical allreduce starts to win, how the
            best threshold moves (by ranks: how the best threshold and the speed-up move).
        batch_per_gpu: samples per GPU per step, or None.
        axis: ``"nodes"`` (points are node counts, ``gpus_per_node`` fixed) or ``"ranks"`` (points
            are ranks on one node: single-server scaling); the efficiency's N counts it.

    Every row also has ``compute_ms`` (one rank's compute at that point, ms: it changes with the
    ranks under contention or a global workload, :attr:`~autotuner.frameworks.horovod.scenario.Scenario.rank_workload`)
    and, when the scenario has a run shape (:attr:`~autotuner.frameworks.horovod.scenario.Scenario.run`),
    ``steps_per_rank``, ``best_wall_time_s`` and ``default_wall_time_s`` (predicted wall time of
    the whole run, s, :meth:`~autotuner.frameworks.horovod.scenario.Scenario.wall_s` at that point's ranks).
    """

    scenario: dict[str, Any]
    table: pd.DataFrame
    findings: tuple[str, ...]
    batch_per_gpu: int | None
    evaluations: int
    seconds: float = 0.0
    axis: str = "nodes"
    #: the Horovod release whose defaults the ``default`` columns are, and those defaults
    reference_version: str = LAST_RELEASE
    reference: Config = DEFAULTS_0_28

    def to_dict(self) -> dict[str, Any]:
        t = self.table.astype(object).where(self.table.notna(), None)
        return {"scenario": self.scenario, "batch_per_gpu": self.batch_per_gpu, "axis": self.axis,
                "rows": t.to_dict(orient="records"), "findings": list(self.findings),
                "evaluations": self.evaluations, "seconds": self.seconds,
                "reference_version": self.reference_version, "reference": self.reference.to_dict()}


def scale(sc, nodes: Sequence[int] | None, *, gpus_per_node: int | None = None,
          bandwidths_gbps: Sequence[float] | None = None, batch_per_gpu: int | None = None,
          ranks: Sequence[int] | None = None, evaluate: Evaluator = step_times_ms,
          reference_version: str = LAST_RELEASE) -> Scaling:
    """Best configuration and Horovod's defaults (those of ``reference_version``,
    :func:`autotuner.frameworks.horovod.knobs.defaults_for`) at each node count (and link rate), or at each
    rank count on one node (single-server scaling).

    Args:
        sc: the base scenario; each point is :func:`what_if` of it.
        nodes: node counts (each >= 1), evaluated in increasing order; None or empty with ``ranks``.
        gpus_per_node: GPUs (ranks) per node for every point (default: the env's); not with ``ranks``.
        bandwidths_gbps: inter-node link rates, Gbit/s (default: the env's fitted rate only).
        batch_per_gpu: samples per GPU per step, for samples/s (None: samples/s is NaN).
        ranks: rank counts on one node (each >= 1; 1 = no Horovod work, step = compute): each
            point is ``what_if(sc, nodes=1, gpus_per_node=r)``.

    Raises:
        ExploreError: empty node list, both node counts and ranks, ranks with gpus_per_node, a
            node count, rank count or GPUs per node < 1, a rate <= 0, batch_per_gpu < 1.
    """
    if ranks is not None:
        if nodes:
            raise ExploreError("give node counts or ranks on one node, not both")
        if gpus_per_node is not None:
            raise ExploreError("ranks on one node set the GPUs per node: give ranks or GPUs per node, not both")
        if not ranks:
            raise ExploreError("the rank list is empty")
        if any(int(r) != r or r < 1 for r in ranks):
            raise ExploreError(f"rank counts must be integers >= 1, got {list(ranks)}")
        points = [(1, r) for r in sorted(set(int(r) for r in ranks))]
    else:
        if not nodes:
            raise ExploreError("the node list is empty")
        if any(int(n) != n or n < 1 for n in nodes):
            raise ExploreError(f"node counts must be integers >= 1, got {list(nodes)}")
        points = [(n, gpus_per_node) for n in sorted(set(int(n) for n in nodes))]
    if gpus_per_node is not None and gpus_per_node < 1:
        raise ExploreError(f"GPUs per node must be >= 1, got {gpus_per_node}")
    if batch_per_gpu is not None and batch_per_gpu < 1:
        raise ExploreError(f"batch size per GPU must be >= 1, got {batch_per_gpu}")
    bws = list(bandwidths_gbps) if bandwidths_gbps else [sc.cost.link_gbps]
    if any(not b > 0 for b in bws):
        raise ExploreError(f"bandwidths must be > 0 Gbit/s, got {bws}")
    reference = defaults_for(reference_version)
    t0 = time.perf_counter()
    rows, n_eval = [], 0
    for bw in bws:
        for n, gpn in points:
            s = what_if(sc, nodes=n, gpus_per_node=gpn, bandwidth_gbps=bw)
            b = best_at_size(s, evaluate=evaluate)
            d_ms = float(evaluate(s, [reference])[0])
            n_eval += b.evaluations + 1
            size = s.cluster.size
            row = {"bandwidth_gbps": bw, "nodes": n, "gpus_per_node": s.cluster.gpus_per_node, "ranks": size,
                   "compute_ms": s.rank_workload.compute_s * 1e3}
            for name, ms_ in (("best", b.step_time_ms), ("default", d_ms)):
                sps = 1e3 / ms_
                row |= {f"{name}_step_time_ms": ms_, f"{name}_steps_per_s": sps, f"{name}_gpu_steps_per_s": sps * size,
                        f"{name}_samples_per_s": sps * size * batch_per_gpu if batch_per_gpu else np.nan}
            if s.run is not None:  # steps per rank change with the ranks: the point's own scenario
                row |= {"steps_per_rank": s.run.steps_per_rank(size), "best_wall_time_s": s.wall_s(b.step_time_ms / 1e3),
                        "default_wall_time_s": s.wall_s(d_ms / 1e3)}
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
    axis = "ranks" if ranks is not None else "nodes"
    for name in ("best", "default"):
        eff = np.empty(len(t))
        for bw in bws:
            m = (t["bandwidth_gbps"] == bw).to_numpy()
            g = t[m]
            n0, thr0 = g[axis].iloc[0], g[f"{name}_gpu_steps_per_s"].iloc[0]
            eff[m] = g[f"{name}_gpu_steps_per_s"].to_numpy() / (g[axis].to_numpy() / n0 * thr0)
        t[f"{name}_efficiency"] = eff
    no_hier = None if has_hierarchical(sc) else str(getattr(sc, "effective_backend", None))
    findings = tuple(_findings_ranks(t, bw) if axis == "ranks" else
                     _findings(t, bw, sc.cost.intra is not None, no_hier=no_hier) for bw in bws)
    return Scaling(scenario_info(sc), t, findings, batch_per_gpu, n_eval, time.perf_counter() - t0, axis=axis,
                   reference_version=reference_version, reference=reference)


def _findings_ranks(t: pd.DataFrame, bw: float) -> str:
    """One sentence for link rate ``bw`` of a single-server scaling: the best threshold and the
    speed-up over Horovod's defaults by ranks (no hierarchical allreduce on one node)."""
    g = t[t["bandwidth_gbps"] == bw]
    thr = ", ".join(f"{int(r)}: {f:g} ({lo:g}-{hi:g})" for r, f, lo, hi in
                    zip(g["ranks"], g["best_fusion_threshold_mb"], g["near_threshold_lo_mb"], g["near_threshold_hi_mb"]))
    gain = ", ".join(f"{int(r)}: {x:.3f}x" for r, x in zip(g["ranks"], g["speedup_vs_default"]))
    return (f"{bw:g} Gbit/s, one node: best fusion threshold MiB by ranks (range within 1%) {thr}; "
            f"speed-up of the best over the defaults by ranks {gain}")


def _findings(t: pd.DataFrame, bw: float, intra_measured: bool, no_hier: str | None = None) -> str:
    """One sentence for link rate ``bw``: where hierarchical allreduce wins (``no_hier``: the
    backend, one without hierarchical allreduce: then it is not searched), how the best threshold moves."""
    g = t[t["bandwidth_gbps"] == bw]
    gpn = int(g["gpus_per_node"].iloc[0])
    multi = g[g["nodes"] > 1]
    wins = multi[multi["hier_gain_percent"] > TIE_REL * 100]
    if no_hier is not None:
        hier = (f"hierarchical allreduce not searched: Horovod 0.28.1 has none on {no_hier} "
                "(horovod/common/operations.cc:157-168, 574-577; docs/reference/knobs.md)")
    elif multi.empty:
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


__all__ = ["BestAtSize", "Scaling", "best_at_size", "scale", "what_if"]
