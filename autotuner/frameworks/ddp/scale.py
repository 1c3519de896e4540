"""DDP at scale and DDP's bucket cap explored: what-ifs on the Reducer simulator. Pure: a cost model and
a layout in, frozen dataclasses out; the plots are :mod:`.plots`.

**Scale** (:func:`scale_ddp`): per node count and link rate, DDP's defaults and the best setting
(:func:`~autotuner.frameworks.ddp.suggest.suggest_ddp` at that shape) with step time, throughput and scaling
efficiency. Weak scaling, as Horovod's ``scale`` (:func:`autotuner.frameworks.horovod.views.scale.what_if`): each rank keeps its
compute and batch; ``nodes`` x the env's ranks per node share one ring; the ring's alpha-beta line is the env's
(the tier between hosts; a one-host env's only tier stands for it), at another link rate through
:meth:`~autotuner.model.costmodel.CostModel.with_bandwidth` (bandwidth scaled, latency kept); on one node the
host's own tier. Efficiency: throughput(N) / (N / N0 x throughput(N0)), N0 the smallest node count, same link.

**Explore** (:func:`explore_ddp`): the predicted step over ``bucket_cap_mb`` from 0.25 to 256 MiB for each of the
gradient view and the fp16 hook, DDP's default marked, and the env's measured replays of the same layout beside
their predictions.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ...errors import ScenarioError
from ...model.costmodel import Cluster, CostModel, CostModelError
from ...model.workload import Workload
from .fastsim import simulate_ddp_batch
from .knobs import DdpConfig, searched_hooks
from .suggest import CAPS_MIB, DdpProposal, suggest_ddp

#: node counts when none are given (Horovod's ``scale`` uses the same)
SCALE_NODES = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class DdpScaleRow:
    """One (link, node count) of :func:`scale_ddp`: ``nodes``, ``ranks_per_node``, ``ranks``, ``link_gbps``
    (Gbit/s), DDP's defaults (``default``) and the setting recommended there (``best``: the defaults themselves when
    nothing beats them by more than the band), each a :class:`DdpProposal` (ms); ``*_samples_per_s`` (None without
    a batch size) and ``*_efficiency`` (fraction)."""

    nodes: int
    ranks_per_node: int
    ranks: int
    link_gbps: float
    default: DdpProposal
    best: DdpProposal
    default_samples_per_s: float | None
    best_samples_per_s: float | None
    default_efficiency: float
    best_efficiency: float

    def to_dict(self) -> dict:
        return {"nodes": self.nodes, "ranks_per_node": self.ranks_per_node, "ranks": self.ranks,
                "link_gbps": self.link_gbps, "default": self.default.to_dict(), "best": self.best.to_dict(),
                "default_samples_per_s": self.default_samples_per_s, "best_samples_per_s": self.best_samples_per_s,
                "default_efficiency": self.default_efficiency, "best_efficiency": self.best_efficiency}


@dataclass(frozen=True)
class DdpScaling:
    """:func:`scale_ddp`'s answer: ``rows`` (link-major, nodes ascending), ``compute_ms`` (per rank and step),
    ``batch_per_rank`` (or None), ``band`` (fraction) and its source, ``notes``."""

    rows: tuple[DdpScaleRow, ...]
    compute_ms: float
    batch_per_rank: int | None
    band: float
    band_source: str
    notes: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"rows": [r.to_dict() for r in self.rows], "compute_ms": self.compute_ms,
                "batch_per_rank": self.batch_per_rank, "band": self.band, "band_source": self.band_source,
                "notes": list(self.notes)}


def scale_ddp(sizes_bytes, ready_fraction, dtypes, workload: Workload, cost: CostModel, cluster: Cluster, *,
              nodes: Sequence[int] | None = None, links_gbps: Sequence[float] | None = None,
              batch_per_rank: int | None = None, band: float, band_source: str, fp16: bool = True,
              host=None) -> DdpScaling:
    """DDP's defaults and the recommended setting per node count (``nodes``, default :data:`SCALE_NODES`; the env's
    ranks per node, ``cluster.gpus_per_node``) and link rate (``links_gbps``, Gbit/s; default the env's,
    ``cost.link_gbps``). Arrays as :func:`~autotuner.frameworks.ddp.reducer.simulate_ddp_step`; ``band``: the
    env's error band (fraction); ``host``: the Reducer's host work (:class:`~.hostcost.ReducerHostCost`, per rank, the
    same at every scale; None: not charged). Raises ScenarioError for a node count < 1, a non-positive link rate or
    batch."""
    ns = sorted(set(int(n) for n in (nodes if nodes is not None else SCALE_NODES)))
    if not ns or ns[0] < 1:
        raise ScenarioError(f"node counts must be >= 1, got {list(nodes or [])!r}")
    links = list(links_gbps) if links_gbps else [float(cost.link_gbps)]
    if any(not (g > 0 and np.isfinite(g)) for g in links):
        raise ScenarioError(f"link rates must be finite and > 0 Gbit/s, got {links!r}")
    if batch_per_rank is not None and batch_per_rank < 1:
        raise ScenarioError(f"the batch per rank must be >= 1, got {batch_per_rank!r}")
    rpn = cluster.gpus_per_node
    rows = []
    for g in links:
        try:
            c = cost if g == cost.link_gbps else cost.with_bandwidth(g)
        except CostModelError as e:
            raise ScenarioError(str(e)) from None
        base = None
        for n in ns:
            s = suggest_ddp(sizes_bytes, ready_fraction, dtypes, workload, c, Cluster(n, rpn), band=band,
                            band_source=band_source, fp16=fp16, host=host)
            ranks = n * rpn
            tput = [ranks / (p.step_time_ms * 1e-3) for p in (s.default, s.recommended)]
            if base is None:
                base = (n, tput)
            eff = [t / (n / base[0] * b) for t, b in zip(tput, base[1])]
            samples = [None if batch_per_rank is None else t * batch_per_rank for t in tput]
            rows.append(DdpScaleRow(n, rpn, ranks, float(g), s.default, s.recommended, samples[0], samples[1],
                                    eff[0], eff[1]))
    notes = ["weak scaling: each rank keeps its compute and batch; the ring's alpha-beta line is the env's (a "
             "one-host env's only tier stands for the link between hosts), at another link rate with its latency "
             "kept; per-node contention (several ranks on one NIC) is not modelled"]
    return DdpScaling(tuple(rows), workload.compute_s * 1e3, batch_per_rank, band, band_source, tuple(notes))


@dataclass(frozen=True)
class DdpExploration:
    """:func:`explore_ddp`'s answer: ``caps_mib`` (shape (K,)), ``curves`` ({label: step ms per cap, shape (K,)} for
    each of allreduce / fp16_compress x view off / on), ``default`` ({label: DDP's default cap's step ms}), and
    ``measured`` (the env's replays of this layout: label shown, measured ms (median), its range, predicted ms,
    the DDP setting's own label)."""

    caps_mib: tuple[float, ...]
    curves: dict
    default: dict
    measured: tuple

    def to_dict(self) -> dict:
        return {"caps_mib": list(self.caps_mib), "curves": {k: list(v) for k, v in self.curves.items()},
                "default": self.default, "measured": [list(m) for m in self.measured]}


def curve_label(view: bool, hook: str) -> str:
    """The legend's name of one curve."""
    return ("fp16 hook" if hook == "fp16_compress" else "allreduce") + (", view" if view else "")


def explore_ddp(sizes_bytes, ready_fraction, dtypes, workload: Workload, cost: CostModel, cluster: Cluster, *,
                measured: Sequence = (), fp16: bool = True, host=None) -> DdpExploration:
    """The predicted steady-state step (ms) over :data:`~autotuner.frameworks.ddp.suggest.CAPS_MIB` for the view off
    and on and each hook (``fp16``: the fp16 hook too), DDP's default cap per curve, and ``measured`` (tuples
    (label shown, measured ms, low ms, high ms, predicted ms, the setting's label), passed through); ``host``: the
    Reducer's host work (:class:`~.hostcost.ReducerHostCost`; None: not charged). Raises ScenarioError as the
    simulator."""
    hooks = searched_hooks(fp16)
    combos = [(v, h) for h in hooks for v in (False, True)]
    cfgs = [DdpConfig(bucket_cap_mb=c, gradient_as_bucket_view=v, comm_hook=h) for v, h in combos
            for c in (None, *CAPS_MIB)]
    step, _, _ = simulate_ddp_batch(sizes_bytes, ready_fraction, workload, cfgs, cost, cluster, dtypes, host)
    k = len(CAPS_MIB) + 1
    curves, default = {}, {}
    for i, (v, h) in enumerate(combos):
        block = step[i * k:(i + 1) * k] * 1e3
        default[curve_label(v, h)] = float(block[0])
        curves[curve_label(v, h)] = tuple(float(x) for x in block[1:])
    return DdpExploration(CAPS_MIB, curves, default, tuple(tuple(m) for m in measured))
