"""Environments from published link figures, never measured (``autotuner env new``, issue 21).

"8 nodes x 8 A100, NVLink inside, 100 Gbit/s InfiniBand, NCCL" becomes a cost model without a
sweep: each tier of the alpha-beta ring model (docs/cost-model.md) takes

- its bandwidth ``B`` (per-link bus bandwidth, busbw) from the link's published rate per
  direction (:data:`INTRA_LINKS`, each with its source), or ``--inter-gbit`` for the node link;
- its per-step latency ``alpha`` from NCCL's own cost model for the ring algorithm with the
  Simple protocol: ``hwLat`` per ring step of 3.4 µs over NVLink, 5.7 µs over PCIe and 9.6 µs
  over the network (NVIDIA/nccl ``src/graph/tuning.cc``, ``hwLat[NVLINK|PCI|NET][Ring][Simple]``).
  NCCL adds a ``baseLat`` of 8.4 µs once per collective; the ring tier has no per-collective
  term, so it is left out (under 1 % of a response of 1 MiB or more on these links) and listed in
  the file's ``fit.assumed``.

Published rates are upper bounds: nccl-tests measures busbw below them (NCCL itself caps A100's
ring busbw at 235 GB/s of NVLink3's 300, ``tuning.cc`` ``compCap80``). Every output of such an
env says "from specs, never measured"; ``autotuner measure`` + ``fit`` on the same name replaces
it. Pure: no I/O.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import ScenarioError
from .knobs import DEFAULTS_0_28
from .model.costmodel import GBIT, CostModel, Tier

#: the ``source`` a spec-built model file carries, and the start of its trust line
SPEC_SOURCE = "specs"
NEVER_MEASURED = "from specs, never measured"


@dataclass(frozen=True)
class Link:
    """A published link: ``gbytes_per_s`` per direction per GPU (GB/s, 1e9 bytes/s), its ring
    step latency ``alpha_us`` (µs, NCCL's ``hwLat``), and where both come from."""

    name: str
    gbytes_per_s: float
    alpha_us: float
    source: str


_NCCL_LAT = "NVIDIA/nccl src/graph/tuning.cc hwLat[{hw}][Ring][Simple] = {us} us per ring step"

#: intra-node links by the name ``--intra`` takes
INTRA_LINKS: dict[str, Link] = {l.name: l for l in (
    Link("nvlink2", 150.0, 3.4, "NVIDIA Tesla V100 SXM2 datasheet: NVLink 300 GB/s total = 150 GB/s per direction "
         "(6 links x 25 GB/s); " + _NCCL_LAT.format(hw="NVLINK", us=3.4)),
    Link("nvlink3", 300.0, 3.4, "NVIDIA A100 SXM4 datasheet: NVLink 600 GB/s total = 300 GB/s per direction "
         "(12 links x 25 GB/s); " + _NCCL_LAT.format(hw="NVLINK", us=3.4)),
    Link("nvlink4", 450.0, 3.4, "NVIDIA H100 SXM5 datasheet: NVLink 900 GB/s total = 450 GB/s per direction "
         "(18 links x 25 GB/s); " + _NCCL_LAT.format(hw="NVLINK", us=3.4)),
    Link("pcie3", 15.75, 5.7, "PCI Express 3.0 x16: 8 GT/s x 16 lanes x 128b/130b = 15.75 GB/s per direction "
         "(PCI-SIG); " + _NCCL_LAT.format(hw="PCI", us=5.7)),
    Link("pcie4", 31.5, 5.7, "PCI Express 4.0 x16: 16 GT/s x 16 lanes x 128b/130b = 31.5 GB/s per direction "
         "(PCI-SIG); " + _NCCL_LAT.format(hw="PCI", us=5.7)),
    Link("pcie5", 63.0, 5.7, "PCI Express 5.0 x16: 32 GT/s x 16 lanes x 128b/130b = 63 GB/s per direction "
         "(PCI-SIG); " + _NCCL_LAT.format(hw="PCI", us=5.7)),
)}

#: NCCL's ring step latency over the network (µs) and its source
NET_ALPHA_US = 9.6
NET_SOURCE = _NCCL_LAT.format(hw="NET", us=NET_ALPHA_US)
#: NCCL's base latency per collective (µs), left out of the ring tier
NCCL_BASE_LAT_US = 8.4
BACKENDS = ("nccl", "mpi", "gloo")


def spec_model(name: str, *, nodes: int, gpus_per_node: int, intra: str | None, inter_gbit: float | None,
               backend: str = "nccl", gpu: str | None = None) -> dict[str, Any]:
    """A model file (``autotuner.model/1``, :class:`autotuner.schemas.ModelFile`) for a cluster
    described by its links: ``nodes`` x ``gpus_per_node`` ranks, ``intra`` one of
    :data:`INTRA_LINKS` (needed with more than one GPU per node), ``inter_gbit`` the node link in
    Gbit/s (needed with more than one node), ``backend`` nccl, mpi or gloo. No workload: a model
    is given by a profiled layout or ``--compute-ms``. Raises ScenarioError (one line) for a
    missing or unknown link, a non-positive rate or an unknown backend."""
    if nodes * gpus_per_node < 2:
        raise ScenarioError("one GPU has no allreduce to model: give --gpus-per-node 2 or more (with --intra) or "
                            "--nodes 2 or more (with --inter-gbit)")
    if backend not in BACKENDS:
        raise ScenarioError(f"--backend {backend!r}: use one of {', '.join(BACKENDS)}")
    if nodes < 1 or gpus_per_node < 1:
        raise ScenarioError(f"--nodes and --gpus-per-node must be >= 1, got {nodes} and {gpus_per_node}")
    if gpus_per_node > 1 and intra is None:
        raise ScenarioError(f"{gpus_per_node} GPUs per node need --intra (one of {', '.join(INTRA_LINKS)})")
    if intra is not None and intra not in INTRA_LINKS:
        raise ScenarioError(f"--intra {intra!r}: use one of {', '.join(INTRA_LINKS)}")
    if nodes > 1 and inter_gbit is None:
        raise ScenarioError(f"{nodes} nodes need --inter-gbit (the node link, Gbit/s: e.g. 100 for EDR InfiniBand)")
    if inter_gbit is not None and not (0.01 <= inter_gbit <= 10_000):
        raise ScenarioError(f"--inter-gbit must be between 0.01 and 10000 Gbit/s, got {inter_gbit}")
    link = INTRA_LINKS[intra] if intra is not None else None
    intra_tier = None if link is None else Tier(link.alpha_us * 1e-6, link.gbytes_per_s * 1e9)
    if inter_gbit is not None:
        inter_tier = Tier(NET_ALPHA_US * 1e-6, inter_gbit * GBIT)
    else:  # one node: the ring runs on the intra-node link only
        inter_tier = intra_tier
    cost = CostModel(inter=inter_tier, intra=intra_tier, link_gbps=float(inter_gbit if inter_gbit is not None
                                                                          else link.gbytes_per_s * 8))
    figures = ([f"intra-node ({intra}): {link.gbytes_per_s:g} GB/s per direction, alpha {link.alpha_us:g} us "
                f"per ring step: {link.source}"] if link else [])
    if inter_gbit is not None:
        figures.append(f"inter-node: {inter_gbit:g} Gbit/s per node as given (--inter-gbit), alpha "
                       f"{NET_ALPHA_US:g} us per ring step: {NET_SOURCE}")
    return {
        "schema": "autotuner.model/1", "env": name, "default": False, "source": SPEC_SOURCE,
        "cluster": {"nodes": nodes, "gpus_per_node": gpus_per_node, "gpu": gpu, "backend": backend},
        "measured_config": {**DEFAULTS_0_28.to_dict()},
        "cost_model": cost.to_dict(),
        "fit": {"form": f"alpha-beta (ring) {NEVER_MEASURED}", "figures": figures,
                "assumed": [f"NCCL's base latency of {NCCL_BASE_LAT_US:g} us per collective (tuning.cc baseLat "
                            "[Ring][Simple]) is left out",
                            "published rates are upper bounds: measured busbw is lower (nccl-tests; NCCL caps "
                            "A100 ring busbw at 235 GB/s)",
                            "negotiation, fusion-buffer copies and host copies: the simulator's defaults "
                            "(autotuner.model.costmodel.Negotiation, CostModel)"]},
        "workloads": {},
        "trust": {"trials": 0, "configurations": 0},
    }


def is_spec(raw: dict[str, Any]) -> bool:
    """Whether a model file was built from specs (never measured)."""
    return raw.get("source") == SPEC_SOURCE


__all__ = ["Link", "INTRA_LINKS", "spec_model", "is_spec", "SPEC_SOURCE", "NEVER_MEASURED", "BACKENDS"]
