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

from dataclasses import dataclass, field, replace
from typing import Any

GBIT = 1e9 / 8  # bytes per second in one Gbit/s


class CostModelError(ValueError):
    """A cost model is malformed or asked for an impossible what-if."""


@dataclass(frozen=True)
class Tier:
    """One link tier of the alpha-beta model.

    Attributes:
        alpha_s: per-step latency, seconds.
        bandwidth_Bps: effective per-link (bus) bandwidth, bytes/second.
    """

    alpha_s: float
    bandwidth_Bps: float

    def __post_init__(self) -> None:
        if not (self.alpha_s >= 0 and self.bandwidth_Bps > 0):
            raise CostModelError(f"tier needs alpha >= 0 and bandwidth > 0, got {self}")

    def allreduce_s(self, nbytes: float, p: int) -> float:
        """Ring allreduce time (s) of ``nbytes`` on ``p`` ranks; 0 for p <= 1."""
        if p <= 1:
            return 0.0
        return 2 * (p - 1) * self.alpha_s + 2 * (p - 1) / p * nbytes / self.bandwidth_Bps

    def reduce_scatter_s(self, nbytes: float, p: int) -> float:
        """Ring reduce-scatter (= ring allgather) time (s) of ``nbytes`` on ``p`` ranks."""
        if p <= 1:
            return 0.0
        return (p - 1) * self.alpha_s + (p - 1) / p * nbytes / self.bandwidth_Bps

    @classmethod
    def from_linear(cls, a_s: float, b_s_per_byte: float, p: int) -> "Tier":
        """Tier from a fit ``T(n) = a + b·n`` measured at ``p`` ranks (see module docstring)."""
        if p < 2:
            raise CostModelError("an allreduce fit needs p >= 2 ranks")
        return cls(alpha_s=a_s / (2 * (p - 1)), bandwidth_Bps=2 * (p - 1) / (p * b_s_per_byte))

    def to_dict(self) -> dict[str, float]:
        return {"alpha_us": self.alpha_s * 1e6, "bandwidth_gbps": self.bandwidth_Bps / GBIT}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Tier":
        return cls(alpha_s=float(d["alpha_us"]) * 1e-6, bandwidth_Bps=float(d["bandwidth_gbps"]) * GBIT)


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
    """

    ctrl_op_s: float = 100e-6
    cache_ops: int = 1
    nocache_ops: int = 4
    per_tensor_s: float = 5e-6

    def cycle_s(self, n_tensors: int, p: int, cache_enabled: bool, all_hits: bool) -> float:
        """Negotiation time (s) of a cycle negotiating ``n_tensors`` on ``p`` ranks."""
        if p <= 1:
            return 0.0
        t = self.cache_ops * self.ctrl_op_s if cache_enabled else 0.0
        if not cache_enabled or (n_tensors > 0 and not all_hits):
            t += self.nocache_ops * self.ctrl_op_s + self.per_tensor_s * n_tensors * p
        return t


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
    """

    inter: Tier
    intra: Tier | None = None
    link_gbps: float = 10.0
    memcpy_Bps: float = 400e9
    host_copy_Bps: float = 10e9
    negotiation: Negotiation = field(default_factory=Negotiation)

    def with_bandwidth(self, gbps: float) -> "CostModel":
        """What-if: the inter-node link at ``gbps`` Gbit/s, same efficiency and latency.

        Raises CostModelError for a non-positive rate.
        """
        if not gbps > 0:
            raise CostModelError(f"bandwidth must be > 0 Gbit/s, got {gbps}")
        s = gbps / self.link_gbps
        return replace(self, inter=replace(self.inter, bandwidth_Bps=self.inter.bandwidth_Bps * s),
                       link_gbps=gbps)

    def allreduce_s(self, nbytes: float, cluster: Cluster, hierarchical: bool) -> float:
        """Time (s) of one allreduce of ``nbytes`` (a fused response) on ``cluster``.

        Flat: one ring over all ranks, limited by the slowest tier it crosses. Hierarchical
        (only when ``cluster.nodes > 1``; Horovod ignores the flag when size == local_size,
        operations.cc): see module docstring.
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
                            "per_tensor_us": self.negotiation.per_tensor_s * 1e6},
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
                                    per_tensor_s=float(n.get("per_tensor_us", 5)) * 1e-6),
        )

