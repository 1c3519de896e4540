"""A scenario: everything the simulator needs besides the knobs (pure: no I/O).

A :class:`Scenario` binds a fitted environment's cost model and cluster, a model's layout and
workload, and the what-ifs (nodes, GPUs per node, link rate, compression).
:func:`autotuner.frameworks.horovod.predict.make_scenario` builds one from files.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

import numpy as np

from .knobs import Config, hierarchical_allreduce_supported
from ...model.contention import Contention
from ...model.costmodel import Cluster, CostModel
from ...model.layout import Layout
from .simulator import PHASES, StepResult, simulate_step, simulate_step_phases
from ...model.workload import Workload
from ...model.wallclock import RunShape


class Compression(StrEnum):
    """Gradient compression before the allreduce.

    ``none`` and ``fp16`` are ``hvd.Compression.none`` / ``hvd.Compression.fp16`` of Horovod
    0.28.1 (``horovod/torch/compression.py``: FP16Compressor casts fp32 gradients to fp16 before
    the allreduce and back after it: half the bytes, and fp16 rounding of every gradient).
    ``int8``: 8-bit gradients (a quarter of the bytes), not in Horovod: lab report 004's own
    numpy compressor (AI-System Lab 4), whose training broke (:data:`LOSSY`).
    """

    none = "none"
    fp16 = "fp16"
    int8 = "int8"


@dataclass(frozen=True)
class CompressionRow:
    """One gradient compression, described once (a row, not five dicts).

    ``ratio``: bytes on the wire per fp32 gradient byte (fp16: 2 of 4 bytes; int8: 1 of 4);
    ``in_horovod``: shipped by Horovod 0.28.1, so ``suggest`` searches it; ``code``: how the
    training script switches it on (none is a horovodrun flag), None where Horovod has none;
    ``numerics``: what it does to the numerics, said wherever it is proposed or simulated;
    ``lossy``: why it is simulated on request but never proposed (one line), or None."""

    name: Compression
    ratio: float
    in_horovod: bool
    code: str | None = None
    numerics: str | None = None
    lossy: str | None = None


#: the compression table: every property of a compression lives in its row
COMPRESSIONS: dict[Compression, CompressionRow] = {r.name: r for r in (
    CompressionRow(Compression.none, 1.0, True, code="compression=hvd.Compression.none"),
    CompressionRow(Compression.fp16, 0.5, True, code="compression=hvd.Compression.fp16",
                   numerics="fp16 compression changes numerics: every gradient is rounded to fp16 before the "
                            "allreduce (11-bit significand; magnitudes under 6.1e-5 lose precision, under 3e-8 "
                            "become 0, over 65504 overflow); check the accuracy (lab report 004, MNIST on T4s: "
                            "98.27 % and 98.30 % with fp16 on 2 and 4 devices against 98.29 % and 98.27 % without)"),
    CompressionRow(Compression.int8, 0.25, False,
                   lossy="int8 compression is lossy and not in Horovod 0.28.1: lab report 004's 8-bit runs "
                         "(report-004.md lines 39-40) ended at 9.58% test accuracy (digit 6's share of MNIST's "
                         "test set: training broke); the step time is simulated for a quarter of the bytes only"),
)}
# Views of the table, by the names the code reads:
#: bytes on the wire per fp32 gradient byte
COMPRESSION_RATIO = {c: r.ratio for c, r in COMPRESSIONS.items()}
#: the compressions Horovod 0.28.1 ships, in table order: the ones ``suggest`` searches
HOROVOD_COMPRESSIONS = tuple(c for c, r in COMPRESSIONS.items() if r.in_horovod)
#: how a compression is switched on in the training script
COMPRESSION_CODE = {c: r.code for c, r in COMPRESSIONS.items() if r.code}
#: what a compression does to the numerics
COMPRESSION_NUMERICS = {c: r.numerics for c, r in COMPRESSIONS.items() if r.numerics}
#: lossy compressions: simulated on request, never proposed (the reason, one line)
LOSSY = {c: r.lossy for c, r in COMPRESSIONS.items() if r.lossy}


@dataclass(frozen=True)
class Scenario:
    """Everything the simulator needs besides the knobs."""

    env: str
    model: str
    layout: Layout
    workload: Workload
    cost: CostModel
    cluster: Cluster
    compression: str = "none"
    #: the timed run the workload was calibrated on, for :meth:`wall_s`, or None
    run: RunShape | None = None
    #: the collective backend simulated (None: the environment's own)
    backend: str | None = None
    #: compute contention of ranks sharing a host: :attr:`workload` is then one rank alone and
    #: the simulated compute is multiplied by ``contention.slowdown(ranks per node)``
    contention: Contention | None = None
    #: True: :attr:`workload` is the whole step's work on one rank, split evenly over the ranks
    global_work: bool = False
    #: the environment's own collective backend (its model file's ``cluster.backend``), or None
    env_backend: str | None = None
    #: True: the ranks compute on the CPU with no spare core (a CPU layout, as many ranks per host
    #: as cores or more): every cycle of Horovod's background loop takes CPU from the compute
    #: (:meth:`compute_stretch`), and the compute slows the collectives that run beside it
    #: (:class:`~autotuner.model.costmodel.ComputeDelay`); both from ``measure``'s cpu phase
    cycle_cpu: bool = False

    @property
    def effective_backend(self) -> str | None:
        """The collective backend simulated: the :attr:`backend` what-if, else the env's own
        (:attr:`env_backend`); None when neither is known."""
        return self.backend or self.env_backend

    @property
    def has_hierarchical_allreduce(self) -> bool:
        """Whether Horovod 0.28.1 has hierarchical allreduce on :attr:`effective_backend`
        (:func:`autotuner.frameworks.horovod.knobs.hierarchical_allreduce_supported`; the node count is not looked
        at). False: the simulator reads ``hierarchical_allreduce`` as off, and the searches
        neither vary nor propose it."""
        return hierarchical_allreduce_supported(self.effective_backend)

    @property
    def hierarchical_allreduce_applies(self) -> bool:
        """Whether the ``hierarchical_allreduce`` knob can change a prediction here: more than
        one node (Horovod turns it off when size == local_size, operations.cc:563-572) and
        :attr:`has_hierarchical_allreduce`."""
        return self.cluster.nodes > 1 and self.has_hierarchical_allreduce

    @property
    def rank_workload(self) -> Workload:
        """The workload one rank runs on :attr:`cluster`: :attr:`workload` scaled by the
        contention slowdown of ``gpus_per_node`` ranks on a host and, with :attr:`global_work`,
        divided by the ranks (``forward_s``, ``backward_s`` and ``host_backward_s`` scale; the
        update does not); with fp16 compression and a measured :class:`~autotuner.model.costmodel.Fp16Cost`,
        the update also casts every gradient back to float32 (``DistributedOptimizer.step()``)."""
        f = 1.0
        if self.contention is not None:
            f *= self.contention.slowdown(self.cluster.gpus_per_node)
        if self.global_work:
            f /= self.cluster.size
        w = self.workload
        if self.compression == "fp16" and self.cost.fp16 is not None:  # step()'s casts back to float32
            w = replace(w, update_s=w.update_s + self.cost.fp16.update_s(float(np.sum(self.layout.sizes_bytes)),
                                                                         len(self.layout.sizes_bytes)))
        if f == 1.0:
            return w
        return replace(w, forward_s=w.forward_s * f, backward_s=w.backward_s * f,
                       host_backward_s=None if w.host_backward_s is None else w.host_backward_s * f)

    @property
    def wire_cost(self) -> CostModel:
        """The cost model the collectives see: :attr:`cost`, with fp16 compression's slower float16
        reduction when the env measured it (:meth:`autotuner.model.costmodel.CostModel.for_fp16`)."""
        return self.cost.for_fp16() if self.compression == "fp16" else self.cost

    def compute_stretch(self, cycle_time_ms: float, cache_enabled: bool = True) -> float:
        """Compute slowdown (>= 1) at cycle time ``cycle_time_ms`` (ms) from the background loop's
        cycles (:meth:`autotuner.model.costmodel.Negotiation.compute_stretch`) when
        :attr:`cycle_cpu`, else 1.0; also 1.0 for an env whose ``measure`` had no cpu phase."""
        if not self.cycle_cpu:
            return 1.0
        return self.cost.negotiation.compute_stretch(cycle_time_ms * 1e-3, self.cluster.size, cache_enabled)

    def workload_at(self, cycle_time_ms: float, cache_enabled: bool = True) -> Workload:
        """:attr:`rank_workload` with forward, backward and the host's backward stretched by
        :meth:`compute_stretch` (the update too: it is compute on the same core) and, with
        :attr:`cycle_cpu`, marked :attr:`~autotuner.frameworks.horovod.simulator.Workload.cpu_bound` (the
        responses' CPU slows the backward while they run)."""
        w = self.rank_workload
        if not self.cycle_cpu:
            return w
        f = self.compute_stretch(cycle_time_ms, cache_enabled)
        return replace(w, cpu_bound=True, forward_s=w.forward_s * f, backward_s=w.backward_s * f, update_s=w.update_s * f,
                       host_backward_s=None if w.host_backward_s is None else w.host_backward_s * f)

    def wall_s(self, step_s: float) -> float | None:
        """Wall time (s) of the calibrated run on this scenario's ranks with a step of
        ``step_s`` seconds (:class:`autotuner.model.wallclock.RunShape`), or None without one."""
        return None if self.run is None else self.run.wall_s(self.cluster.size, step_s)

    def simulate(self, config: Config, **kw) -> StepResult:
        """:func:`simulate_step` on this scenario (with :attr:`effective_backend`: hierarchical
        allreduce reads as off where that backend has none); ``kw`` passes ``trace``,
        ``measure_steps``, ... With :attr:`cycle_cpu` and no ``kw``, the step with the loop's
        phase random (:func:`autotuner.frameworks.horovod.simulator.simulate_step_phases`): a CPU compute
        varies between steps; with ``kw`` the steady state as for any scenario."""
        wl = self.workload_at(config.cycle_time_ms, config.cache_capacity > 0)
        if self.cycle_cpu and not kw:  # CPU compute jitters: the loop's phase at a step's start is random
            return simulate_step_phases(self.layout.sizes_bytes, self.layout.ready_fraction, wl, config, self.wire_cost,
                                        self.cluster, compression_ratio=COMPRESSION_RATIO[self.compression],
                                        backend=self.effective_backend)
        return simulate_step(self.layout.sizes_bytes, self.layout.ready_fraction, wl, config,
                             self.wire_cost, self.cluster, compression_ratio=COMPRESSION_RATIO[self.compression],
                             backend=self.effective_backend, **kw)

    def step_times(self, **knobs) -> np.ndarray:
        """Step times (s) of many configurations at once (:func:`autotuner.frameworks.horovod.fastsim.simulate_batch`).

        ``knobs``: ``fusion_threshold_bytes``, ``cycle_time_ms``, ``cache_capacity``,
        ``hierarchical_allreduce`` and optionally ``hierarchical_allgather``, arrays broadcast
        together to one shape S (internal units: bytes, ms). Returns float64 seconds, shape S,
        equal to :meth:`simulate`'s ``step_time_s`` for each configuration (the same
        :attr:`effective_backend` rule for hierarchical allreduce; with :attr:`cycle_cpu`, each
        configuration's compute stretch goes in as ``compute_scale``, as :meth:`workload_at`).
        """
        from .fastsim import simulate_batch

        wl, extra = self.rank_workload, {}
        if self.cycle_cpu:  # the CPU stretch per configuration (a function of its cycle time and cache)
            cyc, cap = np.broadcast_arrays(np.asarray(knobs["cycle_time_ms"], dtype=float),
                                           np.asarray(knobs["cache_capacity"]))
            wl = replace(wl, cpu_bound=True)
            extra = {"compute_scale": self.cost.negotiation.compute_stretches(cyc * 1e-3, self.cluster.size, cap > 0),
                     "phases": PHASES}
        return simulate_batch(self.layout.sizes_bytes, self.layout.ready_fraction, wl, self.wire_cost, self.cluster,
                              compression_ratio=COMPRESSION_RATIO[self.compression],
                              backend=self.effective_backend, **knobs, **extra)
