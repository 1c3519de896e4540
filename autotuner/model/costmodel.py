"""Cost model: time of collectives on a cluster, from fitted alpha-beta link tiers.

Pure: numbers in, numbers out; no I/O. Units: seconds and bytes inside; the JSON form
(:meth:`CostModel.to_dict`) spells units in its keys (``alpha_us``, ``bandwidth_gbps``).

Formulas (ring algorithms, Thakur, Rabenseifner & Gropp, "Optimization of Collective
Communication Operations in MPICH", IJHPCA 2005; Patarasuk & Yuan, "Bandwidth optimal
all-reduce algorithms for clusters of workstations", JPDC 2009):

- ring allreduce of n bytes on p ranks: ``2(p-1)·alpha + 2(p-1)/p · n / B``
- ring reduce-scatter / allgather:      ``(p-1)·alpha + (p-1)/p · n / B``

``alpha`` is the per-step latency and ``B`` the effective per-link bandwidth (its "bus
bandwidth", busbw = algbw · 2(p-1)/p in NCCL-tests' terms). A fit of ``T(n) = a + b·n`` at
``p`` ranks maps to ``alpha = a / (2(p-1))`` and ``B = 2(p-1)/(p·b)``.

Hierarchical allreduce (Horovod ``NCCLHierarchicalAllreduce``, horovod/common/ops/
nccl_operations.cc): intra-node reduce-scatter, device->host copy of ``n/L`` bytes, inter-node
MPI allreduce of ``n/L`` bytes over the nodes, host->device copy, intra-node allgather. Every
local rank does the cross-node allreduce of its own shard (``MPI_Allreduce`` on the CROSS
communicator), concurrently; with one inter-node link per node (the assumption throughout:
the inter tier is fitted per node link) the L shards share it, so the inter-node phase costs
``2(N-1)·alpha + 2(N-1)/N · n / B``: hierarchical saves latency steps (``2(N-1)`` instead of
``2(NL-1)``) and a little bandwidth (``(N-1)/N`` instead of ``(NL-1)/(NL)``), and pays the
intra-node reduce-scatter, allgather and host copies.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from ..errors import CostModelError

GBIT = 1e9 / 8  # bytes per second in one Gbit/s


@dataclass(frozen=True)
class Tier:
    """One link tier of the alpha-beta model, optionally piecewise in message size.

    Attributes:
        alpha_s: per-step latency, seconds.
        bandwidth_Bps: effective per-link (bus) bandwidth, bytes/second.
        large_from_bytes: messages of at least this many bytes (the whole collective's size)
            use ``large_alpha_s`` / ``large_bandwidth_Bps`` instead, or None: one line for all
            sizes. A size-dependent latency, as transports switch protocol with message size
            (MPI eager/rendezvous; Gloo over TCP here: small messages pay rank skew and
            queueing tails, large ones stream): fitted by :func:`autotuner.frameworks.horovod.fit.fitters.fit_validation_env`.
        large_alpha_s, large_bandwidth_Bps: the large-message segment (s, bytes/s).
    """

    alpha_s: float
    bandwidth_Bps: float
    large_from_bytes: float | None = None
    large_alpha_s: float = 0.0
    large_bandwidth_Bps: float = 0.0

    def __post_init__(self) -> None:
        if not (self.alpha_s >= 0 and self.bandwidth_Bps > 0):
            raise CostModelError(f"tier needs alpha >= 0 and bandwidth > 0, got {self}")
        if self.large_from_bytes is not None and not (
                self.large_from_bytes > 0 and self.large_alpha_s >= 0 and self.large_bandwidth_Bps > 0):
            raise CostModelError(f"tier's large-message segment needs size > 0, alpha >= 0 and bandwidth > 0, got {self}")

    def _pick(self, nbytes, small, large):
        if self.large_from_bytes is None:
            return small
        if isinstance(nbytes, (int, float, np.number)) or np.ndim(nbytes) == 0:
            return large if nbytes >= self.large_from_bytes else small
        return np.where(np.asarray(nbytes) >= self.large_from_bytes, large, small)

    def allreduce_s(self, nbytes: float, p: int) -> float:
        """Ring allreduce time (s) of ``nbytes`` (scalar or array) on ``p`` ranks; 0 for p <= 1."""
        if p <= 1:
            return 0.0
        small = 2 * (p - 1) * self.alpha_s + 2 * (p - 1) / p * nbytes / self.bandwidth_Bps
        if self.large_from_bytes is None:
            return small
        large = 2 * (p - 1) * self.large_alpha_s + 2 * (p - 1) / p * nbytes / self.large_bandwidth_Bps
        return self._pick(nbytes, small, large)

    def reduce_scatter_s(self, nbytes: float, p: int) -> float:
        """Ring reduce-scatter (= ring allgather) time (s) of ``nbytes`` on ``p`` ranks."""
        if p <= 1:
            return 0.0
        small = (p - 1) * self.alpha_s + (p - 1) / p * nbytes / self.bandwidth_Bps
        if self.large_from_bytes is None:
            return small
        large = (p - 1) * self.large_alpha_s + (p - 1) / p * nbytes / self.large_bandwidth_Bps
        return self._pick(nbytes, small, large)

    def scaled(self, s: float) -> "Tier":
        """This tier with every bandwidth multiplied by ``s`` (a link-rate what-if)."""
        return replace(self, bandwidth_Bps=self.bandwidth_Bps * s,
                       large_bandwidth_Bps=self.large_bandwidth_Bps * s)

    @classmethod
    def from_linear(cls, a_s: float, b_s_per_byte: float, p: int) -> "Tier":
        """Tier from a fit ``T(n) = a + b·n`` measured at ``p`` ranks (see module docstring)."""
        if p < 2:
            raise CostModelError("an allreduce fit needs p >= 2 ranks")
        return cls(alpha_s=a_s / (2 * (p - 1)), bandwidth_Bps=2 * (p - 1) / (p * b_s_per_byte))

    def with_large(self, from_bytes: float, a_s: float, b_s_per_byte: float, p: int) -> "Tier":
        """This tier plus a large-message segment fitted as ``T(n) = a + b·n`` at ``p`` ranks."""
        big = Tier.from_linear(a_s, b_s_per_byte, p)
        return replace(self, large_from_bytes=float(from_bytes), large_alpha_s=big.alpha_s,
                       large_bandwidth_Bps=big.bandwidth_Bps)

    def to_dict(self) -> dict[str, float]:
        d = {"alpha_us": self.alpha_s * 1e6, "bandwidth_gbps": self.bandwidth_Bps / GBIT}
        if self.large_from_bytes is not None:
            d.update(large_from_bytes=self.large_from_bytes, large_alpha_us=self.large_alpha_s * 1e6,
                     large_bandwidth_gbps=self.large_bandwidth_Bps / GBIT)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Tier":
        t = cls(alpha_s=float(d["alpha_us"]) * 1e-6, bandwidth_Bps=float(d["bandwidth_gbps"]) * GBIT)
        if d.get("large_from_bytes") is not None:
            t = replace(t, large_from_bytes=float(d["large_from_bytes"]),
                        large_alpha_s=float(d["large_alpha_us"]) * 1e-6,
                        large_bandwidth_Bps=float(d["large_bandwidth_gbps"]) * GBIT)
        return t


#: the largest share of a compute thread's time Horovod's loop can take (:meth:`Negotiation.compute_stretch`):
#: a never-sleeping loop thread and the compute thread share one core fairly
MAX_CYCLE_SHARE = 0.5


@dataclass(frozen=True)
class Negotiation:
    """Cost of one background-loop cycle's negotiation (controller.cc ComputeResponseList).

    - Cache enabled: every cycle, idle or not, runs ``cache_ops`` bit-vector allreduces
      (CoordinateCacheAndState: one MPI_Allreduce with MPI_BAND each cycle; a second, MPI_BOR,
      only when some rank holds invalid bits, which the steady state does not).
    - A cycle with any cache miss, and every cycle when the cache is disabled (capacity 0),
      also gathers the requests at the coordinator and broadcasts the response list:
      ``nocache_ops`` small controller collectives (MPI_Gather of lengths, MPI_Gatherv of
      requests, MPI_Bcast of length and of the list) plus ``per_tensor_s`` of coordinator
      work per tensor per rank.

    ``ctrl_op_s`` (one small controller collective, s) is set by ``fit`` from the fitted
    latency; ``per_tensor_s`` is an estimate, not identifiable from the lab reports.
    Where a sweep measured them (:mod:`autotuner.frameworks.horovod.fit.sweep` :func:`~autotuner.frameworks.horovod.fit.phase_cpu.cycle_negotiation_s`:
    the timeline from a cycle's mark to its first response, mean over the busy cycles), a cycle
    that negotiates tensors costs ``busy_s`` with the cache on and hitting, and ``nocache_s``
    (+ the per-tensor work) with the cache off or missing, in place of the products of
    ``ctrl_op_s``: those cycles start when the slowest rank reaches them, which one small
    collective's latency does not show. Idle cycles keep the products. None: not measured.

    ``cpu_s``: compute time (s) a rank loses to one cycle of its background thread when its
    compute has no spare core (CPU ranks filling their host's cores): measured
    by ``measure``'s ``cpu`` phase (:mod:`autotuner.frameworks.horovod.cpuprobe`, fitted by
    :func:`autotuner.frameworks.horovod.fit.phase_cpu.cycle_cpu`); :meth:`compute_stretch` turns it into the compute's
    slowdown at a cycle time. None: not measured.
    """

    ctrl_op_s: float = 100e-6
    cache_ops: int = 1
    nocache_ops: int = 4
    per_tensor_s: float = 5e-6
    busy_s: float | None = None
    nocache_s: float | None = None
    cpu_s: float | None = None

    def idle_period_s(self, cycle_s: float, p: int, cache_enabled: bool) -> float:
        """Spacing (s) of idle cycles at cycle time ``cycle_s`` (s): ``RunLoopOnce`` sleeps what
        is left of the cycle time after a cycle's work (operations.cc), so the larger of the two."""
        return max(cycle_s, self.cycle_s(0, p, cache_enabled, cache_enabled))

    def compute_stretch(self, cycle_s: float, p: int, cache_enabled: bool) -> float:
        """Compute time with the background loop cycling every :meth:`idle_period_s` / compute
        time alone (dimensionless, >= 1) for a rank whose compute has no spare core: each cycle
        takes :attr:`cpu_s` from the compute thread, a share ``f = cpu_s / period`` of its wall
        time, so the compute runs ``1 / (1 - f)`` longer. ``f`` is capped at :data:`MAX_CYCLE_SHARE`:
        a loop whose cycles need more CPU than their period holds is a thread that never sleeps,
        and the OS scheduler (CFS) gives it and the compute thread a fair half of the core each
        (measured only at 1 and 100 ms cycles; below ~0.3 ms the cap decides). 1.0 when
        :attr:`cpu_s` is None or ``p`` is 1 (no background loop work). Raises CostModelError for a
        non-positive ``cycle_s``."""
        return float(self.compute_stretches(np.array([cycle_s]), p, np.array([cache_enabled]))[0])

    def compute_stretches(self, cycle_s: np.ndarray, p: int, cache_enabled: np.ndarray) -> np.ndarray:
        """:meth:`compute_stretch` of many cycle times at once (arrays of one shape: s, bool);
        the same arithmetic, elementwise. Raises CostModelError for a non-positive cycle time."""
        cycle_s = np.asarray(cycle_s, dtype=float)
        if not np.all(cycle_s > 0):
            raise CostModelError(f"cycle time must be > 0 s, got {cycle_s[~(cycle_s > 0)][0]}")
        if self.cpu_s is None or p <= 1:
            return np.ones(cycle_s.shape)
        idle = np.where(np.asarray(cache_enabled, dtype=bool), self.idle_period_s(0.0, p, True),
                        self.idle_period_s(0.0, p, False))  # an idle cycle's own work, cache on / off
        f = np.minimum(MAX_CYCLE_SHARE, max(0.0, self.cpu_s) / np.maximum(cycle_s, idle))
        return 1.0 / (1.0 - f)

    def cycle_s(self, n_tensors: int, p: int, cache_enabled: bool, all_hits: bool) -> float:
        """Negotiation time (s) of a cycle negotiating ``n_tensors`` on ``p`` ranks."""
        if p <= 1:
            return 0.0
        busy = n_tensors > 0
        if busy and cache_enabled and all_hits and self.busy_s is not None:
            return self.busy_s
        t = self.cache_ops * self.ctrl_op_s if cache_enabled else 0.0
        if not cache_enabled or (busy and not all_hits):
            t += ((self.nocache_s if busy and self.nocache_s is not None else self.nocache_ops * self.ctrl_op_s)
                  + self.per_tensor_s * n_tensors * p)
        return t


def _finite_non_negative(obj, what: str, *values: float) -> None:
    """Raise CostModelError (naming ``what`` and ``obj``) unless every value is finite and >= 0."""
    if not all(v >= 0 and np.isfinite(v) for v in values):
        raise CostModelError(f"{what} needs finite values >= 0, got {obj}")


@dataclass(frozen=True)
class ComputeDelay:
    """How much longer a response's collective runs while the ranks' compute fills the host's
    cores (the collective slowed by compute).

    A Gloo collective is a chain of TCP sends and receives driven by Horovod's background thread
    and Gloo's threads (Horovod 0.28.1 ``horovod/common/ops/gloo_operations.cc``
    ``GlooAllreduce::Execute``): each step needs its thread scheduled, and with a compute
    thread on every core it waits for one. ``extra_s(n) = per_response_s + per_byte_s · n``,
    fitted by :func:`autotuner.frameworks.horovod.fit.phase_cpu.stream_delay` from ``measure``'s cpu phase (streams
    timed beside compute and alone); the simulators add it to each response that starts before
    the backward ends in a :attr:`~autotuner.frameworks.horovod.simulator.Workload.cpu_bound` workload.

    Raises CostModelError for a negative or non-finite value.
    """

    per_response_s: float
    per_byte_s: float = 0.0

    def __post_init__(self) -> None:
        _finite_non_negative(self, "compute delay", self.per_response_s, self.per_byte_s)

    def extra_s(self, nbytes):
        """Added duration (s) of a response of ``nbytes`` wire bytes (scalar or array)."""
        return self.per_response_s + self.per_byte_s * nbytes


@dataclass(frozen=True)
class CollectiveCpu:
    """The CPU time a rank's collective takes from the compute beside it, on a host whose cores the ranks' compute
    fills (CPU ranks, one compute thread per core): ``per_collective_s + per_byte_s · n`` seconds for a collective
    of ``n`` bytes (its buffer as sent). Every collective wakes Gloo's worker and TCP device threads for each ring
    step (``ProcessGroupGloo``, ``gloo/transport/tcp``) and the kernel's network work runs on the same cores; the
    byte part is the copies and the reduction. Measured by DDP's cpu phase (:mod:`autotuner.frameworks.ddp.cpuprobe`:
    compute units beside a stream of allreduces and alone; fitted by :func:`autotuner.frameworks.ddp.fit.cpu_share`
    by non-negative least squares). Raises CostModelError for a negative or non-finite value."""

    per_collective_s: float
    per_byte_s: float = 0.0

    def __post_init__(self) -> None:
        _finite_non_negative(self, "collective CPU", self.per_collective_s, self.per_byte_s)

    def share(self, nbytes, duration_s):
        """The share of a core (0 to :data:`MAX_CYCLE_SHARE`) a collective of ``nbytes`` lasting ``duration_s`` (s)
        takes from a compute thread while it runs (scalar or arrays): its CPU time over its duration, the compute
        running at ``1 - share`` of its speed (processor sharing); capped at :data:`MAX_CYCLE_SHARE`, the fair half
        of a core the scheduler gives two runnable threads. 0 for a collective of no duration."""
        d = np.asarray(duration_s, dtype=float)
        cpu = self.per_collective_s + self.per_byte_s * np.asarray(nbytes, dtype=float)
        out = np.where(d > 0, np.minimum(MAX_CYCLE_SHARE, cpu / np.where(d > 0, d, 1.0)), 0.0)
        return float(out) if out.ndim == 0 else out


@dataclass(frozen=True)
class HostPasses:
    """Host (CPU) time around each response besides its collective, with a cache knee.

    Horovod's CPU path (0.28.1 ``horovod/common/ops/gloo_operations.cc``
    ``GlooAllreduce::Execute``) makes memory-bound passes over every response: MEMCPY_IN and
    MEMCPY_OUT_FUSION_BUFFER for a fused one, ``ScaleBuffer`` (the postscale that turns the sum
    into an average) between the collective and MEMCPY_OUT, which the timeline does not show,
    then the callbacks and the next cycle's negotiation. Such passes run from the last-level
    cache while the buffer fits and from DRAM when it does not, so their cost per byte rises
    beyond a knee (measured on the 1 Gbit/s testbed: fused copies at ~13 GB/s up to 8-10 MiB,
    5-6 GB/s at 20-90 MiB; docs/how-to/validate.md):

    - ``memcpy_s(n)`` (fused responses only) = ``memcpy_s_per_byte·n +
      memcpy_spill_s_per_byte·max(0, n - knee_bytes)``;
    - ``gap_s(n)`` (every response) = ``gap_fixed_s + gap_s_per_byte·n +
      gap_spill_s_per_byte·max(0, n - knee_bytes)``: the untimed time between one response's
      end and the next one's start, charged half to each neighbour (one rank's timeline cannot
      tell which of the two it belongs to), i.e. once per response.

    Fitted by :func:`autotuner.fit.regression.fit_host_passes` from timelines (seconds, bytes).
    """

    knee_bytes: float
    memcpy_s_per_byte: float
    memcpy_spill_s_per_byte: float = 0.0
    gap_fixed_s: float = 0.0
    gap_s_per_byte: float = 0.0
    gap_spill_s_per_byte: float = 0.0

    def __post_init__(self) -> None:
        vals = (self.knee_bytes, self.memcpy_s_per_byte, self.memcpy_spill_s_per_byte,
                self.gap_fixed_s, self.gap_s_per_byte, self.gap_spill_s_per_byte)
        if not all(v >= 0 for v in vals):
            raise CostModelError(f"host passes need non-negative terms, got {self}")

    def _spill(self, nbytes):
        """Bytes of ``nbytes`` (scalar or array) past the cache knee, at least 0 (a plain float for a scalar:
        the simulator calls this per response)."""
        if isinstance(nbytes, (int, float)):
            return max(nbytes - self.knee_bytes, 0.0)
        return np.maximum(nbytes - self.knee_bytes, 0.0)

    def memcpy_s(self, nbytes):
        """MEMCPY_IN + MEMCPY_OUT time (s) of a fused response of ``nbytes`` (scalar or array)."""
        return self.memcpy_s_per_byte * nbytes + self.memcpy_spill_s_per_byte * self._spill(nbytes)

    def gap_s(self, nbytes):
        """Untimed host time (s) charged to a response of ``nbytes`` (scalar or array)."""
        return self.gap_fixed_s + self.gap_s_per_byte * nbytes + self.gap_spill_s_per_byte * self._spill(nbytes)

    def to_dict(self) -> dict[str, float]:
        return {"knee_mib": self.knee_bytes / 2**20,
                "memcpy_ms_per_mib": self.memcpy_s_per_byte * 2**20 * 1e3,
                "memcpy_spill_ms_per_mib": self.memcpy_spill_s_per_byte * 2**20 * 1e3,
                "gap_fixed_ms": self.gap_fixed_s * 1e3,
                "gap_ms_per_mib": self.gap_s_per_byte * 2**20 * 1e3,
                "gap_spill_ms_per_mib": self.gap_spill_s_per_byte * 2**20 * 1e3}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "HostPasses":
        ms_mib = 1e-3 / 2**20
        return cls(knee_bytes=float(d["knee_mib"]) * 2**20,
                   memcpy_s_per_byte=float(d["memcpy_ms_per_mib"]) * ms_mib,
                   memcpy_spill_s_per_byte=float(d.get("memcpy_spill_ms_per_mib", 0)) * ms_mib,
                   gap_fixed_s=float(d.get("gap_fixed_ms", 0)) * 1e-3,
                   gap_s_per_byte=float(d.get("gap_ms_per_mib", 0)) * ms_mib,
                   gap_spill_s_per_byte=float(d.get("gap_spill_ms_per_mib", 0)) * ms_mib)


@dataclass(frozen=True)
class BackendCost:
    """What a Horovod build's collective backend changes on one node: the intra-node tier its
    collectives run on and the cost of one small controller collective (negotiation).

    Attributes:
        intra: the intra-node ring tier measured with this backend.
        ctrl_op_s: one small controller collective (s), :attr:`Negotiation.ctrl_op_s`.
    """

    intra: Tier
    ctrl_op_s: float

    def to_dict(self) -> dict[str, Any]:
        return {"intra": self.intra.to_dict(), "ctrl_op_us": self.ctrl_op_s * 1e6}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "BackendCost":
        return cls(intra=Tier.from_dict(d["intra"]), ctrl_op_s=float(d["ctrl_op_us"]) * 1e-6)


@dataclass(frozen=True)
class Cluster:
    """Cluster shape: ``nodes`` × ``gpus_per_node`` ranks (local_size = gpus_per_node)."""

    nodes: int
    gpus_per_node: int

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.gpus_per_node < 1:
            raise CostModelError(f"nodes and gpus per node must be >= 1, got {self.nodes}x{self.gpus_per_node}")

    @property
    def size(self) -> int:
        return self.nodes * self.gpus_per_node


#: Gloo's ring allreduce pipeline segment cap (bytes): ``gloo/allreduce.h`` ``AllreduceOptions::kMaxSegmentSize``
#: (1 MiB) in the Gloo Horovod 0.28.1 bundles; ``gloo/allreduce.cc`` ``ring()`` splits a buffer into
#: ``max(ceil(n / 1 MiB), 2 p)`` segments (rounded up to a multiple of ``p``) and keeps two in flight
GLOO_SEGMENT_BYTES = float(1 << 20)


def ring_segments(nbytes, p: int, segment_bytes: float):
    """(segments reduced per rank, bytes per segment) of a Gloo ring allreduce of ``nbytes`` on ``p`` ranks
    (``gloo/allreduce.cc`` ``ring()``): ``S = roundUp(max(ceil(n / segment_bytes), 2 p), p)`` segments of ``n / S``
    bytes, of which each rank receives and reduces ``(p - 1) S / p`` in the reduce-scatter. Scalar or array."""
    n = np.asarray(nbytes, dtype=float)
    s = np.maximum(np.ceil(n / segment_bytes), 2 * p)
    s = np.ceil(s / p) * p
    return (p - 1) * s / p, n / s


@dataclass(frozen=True)
class Fp16Tier(Tier):
    """A :class:`Tier` carrying float16 payloads (:meth:`Fp16Cost.tier`): its alpha and bandwidth are the float32
    tier's (the wire does not care what the bytes hold), and a ring allreduce of ``n`` wire bytes pays what of
    its float16 sum the transfers do not hide (:meth:`sum_exposed_s`).

    Attributes:
        sum_s_per_byte: the float16 sum per wire byte (s; the per-element figure / 2), beyond float32's.
        segment_bytes: the ring's pipeline segment cap (bytes), :data:`GLOO_SEGMENT_BYTES`.
    """

    sum_s_per_byte: float = 0.0
    segment_bytes: float = GLOO_SEGMENT_BYTES

    def sum_exposed_s(self, nbytes, p: int):
        """The float16 sum a ring allreduce of ``nbytes`` (scalar or array) on ``p`` ranks adds (s).

        Gloo's ring (``gloo/allreduce.cc`` ``ring()``) keeps two segments in flight: while one rank sums the
        segment it received, the next one is on the wire. With ``k`` segments to reduce per rank, ``w`` the
        wire time of one (``segment / bandwidth``) and ``s`` its sum (``segment · sum_s_per_byte``), the
        reduce-scatter is a two-stage pipeline: ``k · max(w, s) + min(w, s)`` against float32's ``k · w``, so
        the sum adds ``k · max(0, s - w) + min(w, s)``: one segment's sum where the wire is the slower stage
        (the last segment's sum has nothing left to hide behind), all of the sum but the hidden wire where
        the sum is. The allgather has no sum. 0 for ``p`` <= 1."""
        if p <= 1:
            return 0.0 if np.ndim(nbytes) == 0 else np.zeros(np.shape(nbytes))
        k, seg = ring_segments(nbytes, p, self.segment_bytes)
        bw = self._pick(nbytes, self.bandwidth_Bps, self.large_bandwidth_Bps)
        w = seg / np.asarray(bw, dtype=float)
        s = seg * self.sum_s_per_byte
        out = k * np.maximum(0.0, s - w) + np.minimum(w, s)
        return float(out) if np.ndim(out) == 0 else out

    def allreduce_s(self, nbytes, p: int):
        """The float32 tier's ring allreduce of ``nbytes`` wire bytes plus :meth:`sum_exposed_s`."""
        base = super().allreduce_s(nbytes, p)
        if p <= 1:
            return base
        return base + self.sum_exposed_s(nbytes, p)


@dataclass(frozen=True)
class Fp16Cost:
    """What fp16 gradient compression costs besides halving the bytes on the wire: measured by ``autotuner
    measure``'s fp16 phase (:mod:`autotuner.frameworks.horovod.fp16probe`, fitted by :func:`autotuner.fit.collective.fp16_cost`)
    on CPU ranks, or from a GPU's datasheet memory bandwidth (:func:`autotuner.specs.gpu_fp16_cost`).

    ``hvd.Compression.fp16`` (Horovod 0.28.1 ``horovod/torch/compression.py``) casts each gradient to
    float16 in its hook, the collective reduces float16 elements, and ``DistributedOptimizer.step()``'s
    ``synchronize`` casts each result back (``horovod/torch/optimizer.py``).

    Attributes:
        sum_extra_s_per_elem: time per float16 element one rank sums, beyond a float32 sum of the same bytes (s).
            With :attr:`segment_bytes` the ring's pipeline hides part of it behind the wire
            (:meth:`Fp16Tier.sum_exposed_s`); without (None: a model file fitted before the overlap was
            modelled), every element's sum is charged: a response of ``n`` wire bytes costs
            ``(p - 1) / p · n / 2 · sum_extra`` more.
        cast_up_s_per_elem, cast_up_s_per_tensor: float16 -> float32, per element and per tensor (s), in
            ``step()`` after the last response: charged to the step's update (:meth:`update_s`).
        cast_down_s_per_elem, cast_down_s_per_tensor: float32 -> float16 in each gradient's hook during the
            backward. On CPU ranks recorded, not charged (measured so; docs/how-to/tune.md section 4); on a GPU
            (:attr:`device`) a kernel on the backward's stream: charged with the update (:meth:`update_s`).
        segment_bytes: the ring's pipeline segment cap (bytes; :data:`GLOO_SEGMENT_BYTES`), or None: no overlap.
        device: the GPU whose datasheet gave the figures (:data:`autotuner.specs.GPUS`), or None: measured on
            the env's own CPU ranks.
        source: one line: where the figures come from (printed where fp16 is proposed).
        sum_extra_range_s_per_elem: (low, high), the quartiles of the fp16 phase's per-point figures for the
            float16 sum (s per element; :func:`autotuner.fit.collective.fp16_cost`'s ``per_point_ns_per_elem``):
            how far the phase pins :attr:`sum_extra_s_per_elem` (where the wire hides the sum, its points spread
            up to 3.4x, docs/explanation/fp16-compression.md "How well the phase pins the sum"); None: not known (a GPU's
            datasheet, a DDP sweep, or an older fit).
    """

    sum_extra_s_per_elem: float
    cast_up_s_per_elem: float
    cast_up_s_per_tensor: float = 0.0
    cast_down_s_per_elem: float = 0.0
    cast_down_s_per_tensor: float = 0.0
    segment_bytes: float | None = None
    device: str | None = None
    source: str | None = None
    sum_extra_range_s_per_elem: tuple[float, float] | None = None

    def tier(self, t: "Tier") -> "Tier":
        """``t`` for float16 payloads. With :attr:`segment_bytes`: an :class:`Fp16Tier` (the pipelined ring's
        exposed sum, :meth:`Fp16Tier.sum_exposed_s`). Without: per wire byte ``sum_extra / 4`` more in the
        bandwidth term, since ``2 (p-1)/p · n · x = (p-1)/p · n/2 · sum_extra`` gives ``x = sum_extra / 4``."""
        if self.segment_bytes is not None:
            base = {f.name: getattr(t, f.name) for f in fields(Tier)}  # every field of the float32 tier
            return Fp16Tier(**base, sum_s_per_byte=self.sum_extra_s_per_elem / 2, segment_bytes=self.segment_bytes)
        x = self.sum_extra_s_per_elem / 4

        def slower(bw: float) -> float:
            return 1.0 / (1.0 / bw + x) if bw > 0 else bw

        return replace(t, bandwidth_Bps=slower(t.bandwidth_Bps), large_bandwidth_Bps=slower(t.large_bandwidth_Bps))

    def update_s(self, fp32_bytes: float, tensors: int) -> float:
        """The casts charged to a step of ``tensors`` gradients of ``fp32_bytes`` in all (s): back to float32,
        and on a GPU (:attr:`device`) also down to float16 (both kernels on the compute stream)."""
        t = fp32_bytes / 4 * self.cast_up_s_per_elem + tensors * self.cast_up_s_per_tensor
        if self.device is not None:
            t += fp32_bytes / 4 * self.cast_down_s_per_elem + tensors * self.cast_down_s_per_tensor
        return t

    def to_dict(self) -> dict[str, Any]:
        return {"sum_extra_ns_per_elem": self.sum_extra_s_per_elem * 1e9,
                "cast_up_ns_per_elem": self.cast_up_s_per_elem * 1e9,
                "cast_up_us_per_tensor": self.cast_up_s_per_tensor * 1e6,
                "cast_down_ns_per_elem": self.cast_down_s_per_elem * 1e9,
                "cast_down_us_per_tensor": self.cast_down_s_per_tensor * 1e6,
                **({} if self.segment_bytes is None else {"segment_bytes": self.segment_bytes}),
                **({} if self.device is None else {"device": self.device}),
                **({} if self.source is None else {"source": self.source}),
                **({} if self.sum_extra_range_s_per_elem is None else
                   {"sum_extra_range_ns_per_elem": [v * 1e9 for v in self.sum_extra_range_s_per_elem]})}

    @classmethod
    def from_fit(cls, info: dict[str, Any], source: str) -> "Fp16Cost | None":
        """The cost from a fit's summary (:func:`autotuner.fit.collective.fp16_cost`: ns per element, µs per tensor,
        ``segment_bytes``), or None where it found no float16 sum (no records)."""
        if info.get("sum_extra_ns_per_elem") is None:
            return None
        rng = info.get("sum_extra_range_ns_per_elem")
        return cls(info["sum_extra_ns_per_elem"] * 1e-9, info["cast_up_ns_per_elem"] * 1e-9,
                   info["cast_up_us_per_tensor"] * 1e-6, info["cast_down_ns_per_elem"] * 1e-9,
                   info["cast_down_us_per_tensor"] * 1e-6, segment_bytes=info["segment_bytes"], source=source,
                   sum_extra_range_s_per_elem=None if rng is None else (rng[0] * 1e-9, rng[1] * 1e-9))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Fp16Cost":
        return cls(float(d["sum_extra_ns_per_elem"]) * 1e-9, float(d["cast_up_ns_per_elem"]) * 1e-9,
                   float(d.get("cast_up_us_per_tensor", 0.0)) * 1e-6, float(d.get("cast_down_ns_per_elem", 0.0)) * 1e-9,
                   float(d.get("cast_down_us_per_tensor", 0.0)) * 1e-6,
                   None if d.get("segment_bytes") is None else float(d["segment_bytes"]),
                   d.get("device"), d.get("source"),
                   None if d.get("sum_extra_range_ns_per_elem") is None else
                   tuple(float(v) * 1e-9 for v in d["sum_extra_range_ns_per_elem"]))


@dataclass(frozen=True)
class CostModel:
    """Collective costs for one environment.

    Attributes:
        inter: inter-node tier (fitted at ``link_gbps`` nominal link rate).
        intra: intra-node tier (GPU-GPU inside a node), or None when never measured; then the
            inter tier is used for intra-node traffic too.
        link_gbps: nominal inter-node link rate (Gbit/s) the inter tier was measured at.
        memcpy_Bps: fusion-buffer copy bandwidth (bytes/s), for MEMCPY_IN/OUT_FUSION_BUFFER.
        host_copy_Bps: device<->host copy bandwidth (bytes/s), hierarchical allreduce only.
        negotiation: per-cycle negotiation costs.
        host: size-dependent host passes (:class:`HostPasses`), or None: then a fused response
            pays ``2 · bytes / memcpy_Bps`` of copies and nothing else on the host.
        backends: ``((name, BackendCost), ...)``: the intra-node tier and negotiation of each
            collective backend measured in this environment (``mpi``, ``gloo``, ``nccl``), for
            the ``--backend`` what-if (:meth:`with_backend`); empty when only one was measured.
        compute_delay: how much longer a collective runs beside compute that fills the cores
            (:class:`ComputeDelay`), or None when not measured.
        fp16: what fp16 compression costs besides halving the bytes (:class:`Fp16Cost`), or None when
            not measured: then fp16 only halves the bytes.
        queued_saving_s: what a collective launched while the one before it still runs costs less than a lone
            one (s, >= 0; at most the ring's latency term): measured by DDP's burst phase
            (:func:`autotuner.frameworks.ddp.fit.queued_saving`), charged by DDP's Reducer simulator to a bucket
            that waits for the link. 0 where not measured; Horovod's simulator does not read it (its burst phase
            prices small responses through the tier's latency, research/notes/accuracy.md).
        collective_cpu: the CPU a rank's collective takes from its compute where the ranks' compute fills the
            host's cores (:class:`CollectiveCpu`), measured by DDP's cpu phase on the env's own link; None where not
            measured.
        after_backward_s: what a response that starts after the backward has ended costs more than one during it
            (s per response, may be negative): the ranks' main threads then wait for it (``synchronize``) on the
            cores the background thread runs on, where during the backward they sleep through the emulated compute
            or run it. Horovod's simulators add it where set; DDP's do not read it. The fit sets it only to identify
            it from the ``step`` phase at two computes (:func:`autotuner.frameworks.horovod.fit.phase_step._long_compute`):
            recorded, not charged, so 0 in every model file the fit writes (research/notes/accuracy.md, "The step phase at 300
            ms of compute").
        small_alpha_range_s: ``(low, high)``, the inter tier's small-message latency ``alpha`` (s; a small
            response's fixed cost is ``2(p-1)·alpha``) at either end of what the env's phases leave open: the burst
            phase's price (small responses queued back to back from a busy loop) and the step phase's (a training
            step's small responses, the one charged in :attr:`inter`), low to high. Not charged: predictions give the
            step time at both ends beside the charged one (:meth:`at_small_alpha`; research/notes/accuracy.md, "The
            small-response price the phases leave open"). None where the fit measured only one of them.
    """

    inter: Tier
    intra: Tier | None = None
    link_gbps: float = 10.0
    memcpy_Bps: float = 400e9
    host_copy_Bps: float = 10e9
    negotiation: Negotiation = field(default_factory=Negotiation)
    host: HostPasses | None = None
    backends: tuple[tuple[str, BackendCost], ...] = ()
    compute_delay: ComputeDelay | None = None
    fp16: Fp16Cost | None = None
    queued_saving_s: float = 0.0
    collective_cpu: "CollectiveCpu | None" = None
    after_backward_s: float = 0.0
    small_alpha_range_s: tuple[float, float] | None = None

    def at_small_alpha(self, alpha_s: float) -> "CostModel":
        """This model with the inter tier's small-message latency at ``alpha_s`` (s, >= 0), every other term as it
        is: the step time at either end of :attr:`small_alpha_range_s`. Raises CostModelError for a negative or
        non-finite latency."""
        if not (alpha_s >= 0 and math.isfinite(alpha_s)):
            raise CostModelError(f"small-message latency must be a finite number >= 0 s, got {alpha_s}")
        return replace(self, inter=replace(self.inter, alpha_s=float(alpha_s)))

    def small_alpha_ends(self) -> "list[CostModel | None]":
        """This model at each end of :attr:`small_alpha_range_s`, low then high (:meth:`at_small_alpha`), with None for
        an end equal to the charged latency (within 1e-9 relative: this model itself, so a caller reuses what it
        already simulated); [] without the range."""
        return [None if math.isclose(a, self.inter.alpha_s, rel_tol=1e-9) else self.at_small_alpha(a)
                for a in self.small_alpha_range_s or ()]

    def for_fp16(self) -> "CostModel":
        """The tiers a float16 payload sees (:meth:`Fp16Cost.tier`); unchanged without :attr:`fp16`."""
        if self.fp16 is None:
            return self
        return replace(self, inter=self.fp16.tier(self.inter),
                       intra=None if self.intra is None else self.fp16.tier(self.intra),
                       backends=tuple((k, replace(b, intra=self.fp16.tier(b.intra))) for k, b in self.backends))

    def with_backend(self, name: str) -> "CostModel":
        """What-if: this environment with collective backend ``name`` (its fitted intra-node tier
        and controller cost). Raises CostModelError for a backend not measured here."""
        have = dict(self.backends)
        if name not in have:
            known = ", ".join(have) if have else "none: this environment measured one backend only"
            raise CostModelError(f"no fitted tier for backend {name!r} (fitted: {known})")
        b = have[name]
        return replace(self, intra=b.intra, negotiation=replace(self.negotiation, ctrl_op_s=b.ctrl_op_s))

    def memcpy_s(self, nbytes):
        """Fusion-buffer copy time (s) of a fused response of ``nbytes`` (scalar or array)."""
        if self.host is None:
            return 2 * nbytes / self.memcpy_Bps
        return self.host.memcpy_s(nbytes)

    def host_gap_s(self, nbytes):
        """Untimed host time (s) charged to every response of ``nbytes``; 0.0 without
        :attr:`host`."""
        return 0.0 if self.host is None else self.host.gap_s(nbytes)

    def with_bandwidth(self, gbps: float) -> "CostModel":
        """What-if: the inter-node link at ``gbps`` Gbit/s, same efficiency and latency.

        Raises CostModelError for a non-positive rate.
        """
        if not gbps > 0:
            raise CostModelError(f"bandwidth must be > 0 Gbit/s, got {gbps}")
        s = gbps / self.link_gbps
        return replace(self, inter=self.inter.scaled(s), link_gbps=gbps)

    def allreduce_s(self, nbytes: float, cluster: Cluster, hierarchical: bool) -> float:
        """Time (s) of one allreduce of ``nbytes`` (a fused response) on ``cluster``.

        Flat: one ring over all ranks, limited by the slowest tier it crosses. Hierarchical
        (only when ``cluster.nodes > 1``; Horovod ignores the flag when size == local_size,
        operations.cc): see module docstring. Whether the backend has hierarchical allreduce at
        all is the caller's (the simulators' ``backend``, :func:`autotuner.frameworks.horovod.knobs.hierarchical_allreduce_supported`).
        """
        L, N = cluster.gpus_per_node, cluster.nodes
        intra = self.intra or self.inter
        if N == 1:
            return intra.allreduce_s(nbytes, L)
        if not hierarchical:
            return self.inter.allreduce_s(nbytes, N * L)
        shard = nbytes / L
        # The L local ranks run their cross-node allreduces (one shard of n/L bytes each) at the
        # same time over the node's one inter-node link: together n bytes per node, so the
        # bandwidth term is that of n bytes on N nodes, the latency that of one ring of N.
        return (intra.reduce_scatter_s(nbytes, L) + 2 * shard / self.host_copy_Bps
                + self.inter.allreduce_s(nbytes, N) + intra.reduce_scatter_s(nbytes, L))

    def cpu_shared(self, ranks_per_host: int, cores: int, measured_ranks_per_host: int, nodes: int) -> "CostModel":
        """This model for ``ranks_per_host`` ranks sharing a host's ``cores`` CPU cores, when its
        host-local tier was measured with ``measured_ranks_per_host`` ranks on such a host.

        Gloo moves host-local traffic over TCP loopback: the copies into and out of the socket
        buffers and the reduction run on the ranks' own cores, so that tier is CPU-bound. With
        ``L`` ranks on ``c`` < ``L`` cores each rank's threads get ``c / L`` of a core (processor
        sharing, the OS scheduler's fair share), so the tier's bandwidth is scaled by
        ``min(1, c/L) / min(1, c/L_m)``. The tier is ``intra`` where fitted, else, on one node,
        ``inter`` (a one-host env's only tier). Nothing is fitted: ``c`` is the env's recorded
        ``cores_per_host``. Unchanged when the ratio is 1. Raises CostModelError for counts < 1."""
        if min(ranks_per_host, cores, measured_ranks_per_host, nodes) < 1:
            raise CostModelError("ranks, cores and nodes must be >= 1")
        s = min(1.0, cores / ranks_per_host) / min(1.0, cores / measured_ranks_per_host)
        if s == 1.0:
            return self
        if self.intra is not None:
            return replace(self, intra=self.intra.scaled(s))
        return replace(self, inter=self.inter.scaled(s)) if nodes == 1 else self

    def to_dict(self) -> dict[str, Any]:
        return {
            "inter": self.inter.to_dict(),
            "intra": self.intra.to_dict() if self.intra else None,
            "link_gbps": self.link_gbps,
            "memcpy_gbytes_per_s": self.memcpy_Bps / 1e9,
            "host_copy_gbytes_per_s": self.host_copy_Bps / 1e9,
            "negotiation": {"ctrl_op_us": self.negotiation.ctrl_op_s * 1e6,
                            "cache_ops": self.negotiation.cache_ops,
                            "nocache_ops": self.negotiation.nocache_ops,
                            "per_tensor_us": self.negotiation.per_tensor_s * 1e6,
                            **({} if self.negotiation.busy_s is None
                               else {"busy_us": self.negotiation.busy_s * 1e6}),
                            **({} if self.negotiation.nocache_s is None
                               else {"nocache_us": self.negotiation.nocache_s * 1e6}),
                            **({} if self.negotiation.cpu_s is None
                               else {"cpu_us": self.negotiation.cpu_s * 1e6})},
            **({"host_passes": self.host.to_dict()} if self.host else {}),
            **({"backends": {k: b.to_dict() for k, b in self.backends}} if self.backends else {}),
            **({"compute_delay": {"per_response_us": self.compute_delay.per_response_s * 1e6,
                                  "per_byte_ns": self.compute_delay.per_byte_s * 1e9}} if self.compute_delay else {}),
            **({"fp16": self.fp16.to_dict()} if self.fp16 else {}),
            **({"queued_saving_us": self.queued_saving_s * 1e6} if self.queued_saving_s else {}),
            **({"collective_cpu": {"per_collective_us": self.collective_cpu.per_collective_s * 1e6,
                                   "per_byte_ns": self.collective_cpu.per_byte_s * 1e9}}
               if self.collective_cpu is not None else {}),
            **({"after_backward_us": self.after_backward_s * 1e6} if self.after_backward_s else {}),
            **({"small_alpha_range_us": [x * 1e6 for x in self.small_alpha_range_s]}
               if self.small_alpha_range_s is not None else {}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CostModel":
        n = d.get("negotiation", {})
        return cls(
            inter=Tier.from_dict(d["inter"]),
            intra=Tier.from_dict(d["intra"]) if d.get("intra") else None,
            link_gbps=float(d["link_gbps"]),
            memcpy_Bps=float(d.get("memcpy_gbytes_per_s", 400)) * 1e9,
            host_copy_Bps=float(d.get("host_copy_gbytes_per_s", 10)) * 1e9,
            negotiation=Negotiation(ctrl_op_s=float(n.get("ctrl_op_us", 100)) * 1e-6,
                                    cache_ops=int(n.get("cache_ops", 1)),
                                    nocache_ops=int(n.get("nocache_ops", 4)),
                                    per_tensor_s=float(n.get("per_tensor_us", 5)) * 1e-6,
                                    busy_s=None if n.get("busy_us") is None else float(n["busy_us"]) * 1e-6,
                                    nocache_s=(None if n.get("nocache_us") is None
                                               else float(n["nocache_us"]) * 1e-6),
                                    cpu_s=None if n.get("cpu_us") is None else float(n["cpu_us"]) * 1e-6),
            host=HostPasses.from_dict(d["host_passes"]) if d.get("host_passes") else None,
            backends=tuple((k, BackendCost.from_dict(v)) for k, v in (d.get("backends") or {}).items()),
            compute_delay=(ComputeDelay(float(d["compute_delay"]["per_response_us"]) * 1e-6,
                                        float(d["compute_delay"].get("per_byte_ns", 0.0)) * 1e-9)
                           if d.get("compute_delay") else None),
            fp16=Fp16Cost.from_dict(d["fp16"]) if d.get("fp16") else None,
            queued_saving_s=float(d.get("queued_saving_us", 0.0)) * 1e-6,
            collective_cpu=(CollectiveCpu(float(d["collective_cpu"]["per_collective_us"]) * 1e-6,
                                          float(d["collective_cpu"].get("per_byte_ns", 0.0)) * 1e-9)
                            if d.get("collective_cpu") else None),
            after_backward_s=float(d.get("after_backward_us", 0.0)) * 1e-6,
            small_alpha_range_s=(None if d.get("small_alpha_range_us") is None
                                 else tuple(float(x) * 1e-6 for x in d["small_alpha_range_us"])),
        )

