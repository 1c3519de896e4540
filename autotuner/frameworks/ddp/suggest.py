"""DDP's best bucket setting for a layout on an environment: the exact grid over ``bucket_cap_mb``, the
gradient view and the fp16 hook, and a search over ``bucket_cap_mb_list`` (per-bucket caps), all with the batch
simulator (:func:`autotuner.frameworks.ddp.fastsim.simulate_ddp_batch`). Pure: a cost model and a layout in, a
:class:`DdpSuggestion` out.

The rules are the Horovod side's: a setting is proposed only when it is predicted faster than DDP's defaults by
more than the env's error band (else: keep the defaults); the fp16 hook is proposed beside the best setting without
it (the knob-only answer), with what it changes (numerics); a per-bucket list only when it beats the best single
cap by more than the band. powerSGD is lossy and never searched; bf16_compress is not measured on these machines
(Gloo CPU ranks) and not searched.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ...model.costmodel import Cluster, CostModel
from ...model.workload import Workload
from .fastsim import simulate_ddp_batch
from .hostcost import ReducerHostCost
from .knobs import DdpConfig, searched_hooks

#: the single caps searched (MiB): DDP's default (None) and 0.25 .. 256 MiB, 4 per octave
CAPS_MIB = tuple(float(f"{c:.3g}") for c in np.geomspace(0.25, 256, 41))
#: the per-bucket lists searched: integer MiB (``bucket_cap_mb_list: list[int]``), 2 or 3 caps, each cap at least
#: the one before it (small early buckets start the collectives sooner, large late ones pay fewer latencies)
LIST_CAPS_MIB = (1, 2, 4, 8, 16, 32, 64, 128)
FP16_NOTE = ("fp16_compress_hook rounds every gradient to float16 (11-bit significand) before the allreduce; "
             "Horovod's fp16 compression, the same rounding, trained MNIST on T4s to 98.27-98.30 % against "
             "98.27-98.29 % without (lab report 004)")


@dataclass(frozen=True)
class DdpProposal:
    """A DDP setting with its predicted steady-state step and first iteration (ms), its speed-up over DDP's
    defaults, and the code a user pastes."""

    config: DdpConfig
    step_time_ms: float
    first_step_ms: float
    buckets: int
    speedup_vs_default: float

    @property
    def code(self) -> str:
        return self.config.code()

    def to_dict(self) -> dict:
        return {"config": self.config.to_dict(), "label": self.config.label(), "step_time_ms": self.step_time_ms,
                "first_step_ms": self.first_step_ms, "buckets": self.buckets,
                "speedup_vs_default": self.speedup_vs_default, "code": self.code}


@dataclass(frozen=True)
class DdpSuggestion:
    """What :func:`suggest_ddp` answers: ``default`` (DDP's defaults), ``recommended`` (the default itself when no
    setting beats it by more than ``band``), ``knob_only`` (the best without a compress hook), ``fp16`` (the best
    with ``fp16_compress_hook``, or None when not searched), ``per_bucket`` (the best ``bucket_cap_mb_list``) and
    whether it is proposed (``per_bucket_proposed``: it beats the best single cap by more than the band),
    ``band`` (fraction) and its source, ``settings`` (how many were simulated), ``notes``."""

    default: DdpProposal
    recommended: DdpProposal
    keep_defaults: bool
    knob_only: DdpProposal
    fp16: DdpProposal | None
    per_bucket: DdpProposal
    per_bucket_proposed: bool
    band: float
    band_source: str
    settings: int
    notes: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"default": self.default.to_dict(), "recommended": self.recommended.to_dict(),
                "keep_defaults": self.keep_defaults, "knob_only": self.knob_only.to_dict(),
                "fp16": None if self.fp16 is None else self.fp16.to_dict(), "per_bucket": self.per_bucket.to_dict(),
                "per_bucket_proposed": self.per_bucket_proposed, "band": self.band, "band_source": self.band_source,
                "settings": self.settings, "notes": list(self.notes)}


def _lists() -> list[tuple[int, ...]]:
    out = []
    for n in (2, 3):
        for caps in itertools.product(LIST_CAPS_MIB, repeat=n):
            if all(a <= b for a, b in zip(caps, caps[1:])) and len(set(caps)) == n:
                out.append(caps)
    return out


def host_range_note(sizes_bytes, ready_fraction, dtypes, workload: Workload, cost: CostModel, cluster: Cluster,
                    host: ReducerHostCost, default: "DdpProposal", pick: "DdpProposal") -> str:
    """One line: DDP's defaults' and the pick's step (ms) with the Reducer's host work at the low and the high end of
    its range (:meth:`~.hostcost.ReducerHostCost.at`; the figures the step times above charge are its central
    ones), and whether the pick still beats the defaults at both ends. Pure."""
    ends = {}
    for end in ("low", "high"):
        st, _, _ = simulate_ddp_batch(sizes_bytes, ready_fraction, workload, [default.config, pick.config], cost,
                                      cluster, dtypes, host.at(end))
        ends[end] = (float(st[0] * 1e3), float(st[1] * 1e3))
    (d_lo, p_lo), (d_hi, p_hi) = ends["low"], ends["high"]
    holds = p_lo <= d_lo and p_hi <= d_hi
    return (f"with the Reducer's host work at the low and the high end of its range ({host.source.split(':')[0]}), "
            f"DDP's defaults take {d_lo:.1f}-{d_hi:.1f} ms and the pick {p_lo:.1f}-{p_hi:.1f} ms; "
            + ("the pick is no slower than the defaults at both ends" if holds else
               "at one end the pick is slower than the defaults: measure the host phase on one GPU of yours "
               "(autotuner ddp measure --device cuda --np 1)"))


def suggest_ddp(sizes_bytes, ready_fraction, dtypes, workload: Workload, cost: CostModel, cluster: Cluster, *,
                band: float, band_source: str, fp16: bool = True, refault: tuple[float, str] | None = None,
                notes_before: tuple[str, ...] = (), host: ReducerHostCost | None = None) -> DdpSuggestion:
    """The grid (``CAPS_MIB`` and DDP's default x view x [allreduce, fp16_compress]) and the per-bucket lists
    (:data:`LIST_CAPS_MIB`, 2-3 non-decreasing caps) for one layout (arrays as
    :func:`~autotuner.frameworks.ddp.reducer.simulate_ddp_step`). ``band``: the env's error band (fraction of the
    step); ``fp16``: search the fp16 hook (the env measured float16 allreduces); ``host``: the Reducer's host work
    per gradient and per bucket (:class:`~.hostcost.ReducerHostCost`; None: not charged). Raises ScenarioError as
    the simulator."""
    hooks = searched_hooks(fp16)
    grid = [DdpConfig(bucket_cap_mb=c, gradient_as_bucket_view=v, comm_hook=h)
            for h in hooks for v in (False, True) for c in (None, *CAPS_MIB)]
    lists = [DdpConfig(bucket_cap_mb_list=caps, gradient_as_bucket_view=True) for caps in _lists()]
    cfgs = grid + lists
    step, first, count = simulate_ddp_batch(sizes_bytes, ready_fraction, workload, cfgs, cost, cluster, dtypes, host)
    d0 = step[0]

    def prop(j: int) -> DdpProposal:
        return DdpProposal(cfgs[j], float(step[j] * 1e3), float(first[j] * 1e3), int(count[j]), float(d0 / step[j]))

    default = prop(0)
    n_grid = len(grid)
    plain = [j for j in range(n_grid) if cfgs[j].comm_hook == "allreduce"]
    knob_only = prop(min(plain, key=lambda j: (step[j], j)))
    f16 = [j for j in range(n_grid) if cfgs[j].comm_hook == "fp16_compress"]
    fp = prop(min(f16, key=lambda j: (step[j], j))) if f16 else None
    best_list = prop(min(range(n_grid, len(cfgs)), key=lambda j: (step[j], j)))
    per_bucket_proposed = bool(best_list.step_time_ms < knob_only.step_time_ms * (1 - band))
    best_plain = best_list if per_bucket_proposed else knob_only
    candidates = [best_plain] + ([fp] if fp is not None else [])
    best = min(candidates, key=lambda p: p.step_time_ms)
    keep = bool(best.step_time_ms >= default.step_time_ms * (1 - band))
    notes = list(notes_before)
    if fp is not None and fp.step_time_ms < best_plain.step_time_ms * (1 - band):
        notes.append(FP16_NOTE)
    if refault is not None and refault[0] * 1e3 >= 0.5:
        notes.append(f"without the view this env's CPU ranks fault the gradients' pages in again every step: about "
                     f"{refault[0] * 1e3:.0f} ms a step for this layout ({refault[1]}), not in the step times above; "
                     "gradient_as_bucket_view=True avoids it")
    notes.append("the first iteration runs one bucket of every gradient (the Reducer rebuilds its buckets after "
                 f"it): {default.first_step_ms:.1f} ms with DDP's defaults")
    if host is not None and (host.per_tensor_range_s or host.per_bucket_range_s):
        notes.append(host_range_note(sizes_bytes, ready_fraction, dtypes, workload, cost, cluster, host,
                                     default, default if keep else best))
    return DdpSuggestion(default, default if keep else best, keep, knob_only, fp, best_list, per_bucket_proposed,
                         band, band_source, len(cfgs), tuple(notes))
