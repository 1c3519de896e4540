"""Environments from published link figures, never measured (``autotuner env new``).

"8 nodes x 8 A100, NVLink inside, 100 Gbit/s InfiniBand, NCCL" becomes a cost model without a
sweep: each tier of the alpha-beta ring model (docs/explanation/cost-model.md) takes

- its bandwidth ``B`` (per-link bus bandwidth, busbw) from the link's published rate per
  direction (:data:`INTRA_LINKS`, each with its source), or ``--link-gbit`` for the node link;
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

@dataclass(frozen=True)
class Gpu:
    """A published GPU: its device memory's peak bandwidth ``gbytes_per_s`` (GB/s, 1e9 bytes/s) and where it
    comes from. fp16 compression's casts and float16 sum run on the device at memory bandwidth
    (:func:`gpu_fp16_cost`)."""

    name: str
    memory: str
    gbytes_per_s: float
    source: str

    @property
    def datasheet(self) -> str:
        """The document :attr:`source` cites (its text before the first colon)."""
        return self.source.split(":")[0]


#: GPUs by the name ``--gpu`` and a model file's ``cluster.gpu`` take (matched ignoring case, spaces, ``-``, ``_``)
GPUS: dict[str, Gpu] = {g.name: g for g in (
    Gpu("V100", "HBM2", 900.0, "NVIDIA Tesla V100 datasheet (SXM2 and PCIe): HBM2, memory bandwidth 900 GB/s"),
    Gpu("T4", "GDDR6", 320.0, "NVIDIA T4 datasheet / board specification: 16 GB GDDR6, peak memory bandwidth "
        "up to 320 GB/s"),
    Gpu("A100-40GB", "HBM2", 1555.0, "NVIDIA A100 Tensor Core GPU datasheet: A100 40GB, HBM2, 1,555 GB/s"),
    Gpu("A100-80GB", "HBM2e", 2039.0, "NVIDIA A100 Tensor Core GPU datasheet: A100 80GB SXM, HBM2e, 2,039 GB/s"),
    Gpu("H100-SXM", "HBM3", 3350.0, "NVIDIA H100 Tensor Core GPU datasheet: H100 SXM, HBM3, 3.35 TB/s"),
    Gpu("H100-PCIe", "HBM2e", 2000.0, "NVIDIA H100 Tensor Core GPU datasheet: H100 PCIe, HBM2e, 2 TB/s"),
    Gpu("H200", "HBM3e", 4800.0, "NVIDIA H200 Tensor Core GPU datasheet: H200 SXM, 141 GB HBM3e, 4.8 TB/s"),
)}

#: bytes of device memory per element: a cast float32 -> float16 reads 4 and writes 2 (and back: 2 + 4); the
#: float16 sum of a received segment into the local one reads 2 x 2 and writes 2
CAST_BYTES_PER_ELEM = 6
SUM_BYTES_PER_ELEM = 6
#: NCCL's ring pipeline step (bytes): the default NCCL_BUFFSIZE of 4 MiB over NCCL_STEPS = 8 slots (NVIDIA/nccl
#: src/include/device.h NCCL_STEPS, src/init.cc DEFAULT_BUFFSIZE); the float16 sum of one step is exposed
NCCL_STEP_BYTES = float((4 << 20) // 8)
#: host time to launch one cast back to float32 in ``step()`` (µs per tensor; ``hvd.Compression.fp16``'s
#: ``decompress``, one ``tensor.type()`` per gradient): measured, not from a datasheet, on one H100 with PyTorch
#: 2.11 (runs/gpu-profiles/h100-fp16: least squares over 8 shipped layouts' cast loops, 8-199 tensors, gives
#: 10.0 µs per tensor up and 9.6 down). It is the host's Python call and kernel launch, so it is borrowed for
#: every GPU of the table. The casts down run in the gradients' hooks while the device still works through the
#: backward (the host runs ahead of it), so their launches are not charged.
CAST_UP_LAUNCH_US = 10.0


#: other spellings of a :data:`GPUS` row: a bare "A100" is the 40GB part (the lower bandwidth of the two, the
#: launch part), a bare "H100" the SXM one (the part of the H100 in runs/gpu-profiles)
GPU_ALIASES = {"A100": "A100-40GB", "H100": "H100-SXM", "Tesla V100": "V100", "V100-SXM2": "V100", "V100-PCIe": "V100",
               "Tesla T4": "T4", "A100-SXM4-40GB": "A100-40GB", "A100-SXM4-80GB": "A100-80GB", "H100-SXM5": "H100-SXM"}


def _gpu_key(name: str) -> str:
    return "".join(ch for ch in str(name).lower() if ch.isalnum())


def find_gpu(name: str | None) -> Gpu | None:
    """The :data:`GPUS` row named ``name`` or one of its :data:`GPU_ALIASES` (ignoring case, spaces, ``-`` and
    ``_``), or None."""
    if not name:
        return None
    keys = {_gpu_key(g.name): g for g in GPUS.values()}
    keys.update({_gpu_key(a): GPUS[n] for a, n in GPU_ALIASES.items()})
    return keys.get(_gpu_key(name))


def gpu_fp16_cost(name: str | None):
    """fp16 compression's cost on GPU ``name`` (:class:`autotuner.model.costmodel.Fp16Cost`) from its datasheet
    memory bandwidth ``M`` (:data:`GPUS`), or None for a GPU not in the table.

    - the casts (``hvd.Compression.fp16``: down in each gradient's hook, up in ``step()``), each
      :data:`CAST_BYTES_PER_ELEM` / ``M`` per element, both charged to the step (kernels on the compute stream);
    - the float16 sum: :data:`SUM_BYTES_PER_ELEM` / ``M`` per element, pipelined with the transfers in NCCL
      steps of :data:`NCCL_STEP_BYTES` (:meth:`autotuner.model.costmodel.Fp16Tier.sum_exposed_s`: one step's sum
      exposed where the wire is slower). An upper bound: NCCL sums float32 at the same bytes per wire byte, and
      that is already inside the fitted tier;
    - per tensor cast back, :data:`CAST_UP_LAUNCH_US` of host launch (measured on an H100 and borrowed: no
      datasheet gives it); the casts down launch in the hooks during the backward, not charged.

    Every figure is a datasheet peak: real kernels reach 60-90 % of it (docs/explanation/fp16-compression.md)."""
    from .model.costmodel import Fp16Cost

    g = find_gpu(name)
    if g is None:
        return None
    bw = g.gbytes_per_s * 1e9
    return Fp16Cost(SUM_BYTES_PER_ELEM / bw, CAST_BYTES_PER_ELEM / bw, CAST_UP_LAUNCH_US * 1e-6,
                    CAST_BYTES_PER_ELEM / bw, 0.0,
                    segment_bytes=NCCL_STEP_BYTES, device=g.name,
                    source=(f"from specs ({g.name} {g.memory} {g.gbytes_per_s:g} GB/s, {g.datasheet}): casts "
                            f"{CAST_BYTES_PER_ELEM} B and float16 sum {SUM_BYTES_PER_ELEM} B per element at that rate, "
                            f"{CAST_UP_LAUNCH_US:g} µs of launch per tensor cast back (measured on an H100, "
                            "runs/gpu-profiles/h100-fp16); never measured on this cluster"))


def check_gpu(name: str | None) -> str | None:
    """``name`` as :data:`GPUS` spells it (None stays None). Raises ScenarioError (one line listing the known
    GPUs) for a name not in the table."""
    if not name:
        return None
    g = find_gpu(name)
    if g is None:
        raise ScenarioError(f"--gpu {name!r}: not in the GPU table; use one of {', '.join(GPUS)}")
    return g.name


#: NCCL's ring step latency over the network (µs) and its source
NET_ALPHA_US = 9.6
NET_SOURCE = _NCCL_LAT.format(hw="NET", us=NET_ALPHA_US)
#: NCCL's base latency per collective (µs), left out of the ring tier
NCCL_BASE_LAT_US = 8.4
BACKENDS = ("nccl", "mpi", "gloo")


@dataclass(frozen=True)
class SpecCost:
    """A cost model from published figures (:func:`spec_cost`): ``cost`` the alpha-beta tiers (and fp16's device
    rates with a GPU), ``cluster`` the model file's ``cluster`` table (``nodes``, ``gpus_per_node``, ``gpu``,
    ``backend``), ``figures`` one line per figure used with its source, ``assumed`` what the figures leave out."""

    cost: CostModel
    cluster: dict[str, Any]
    figures: list[str]
    assumed: list[str]


def spec_cost(*, nodes: int, gpus_per_node: int, intra: str | None, inter_gbit: float | None,
              backend: str = "nccl", gpu: str | None = None) -> SpecCost:
    """The cost model of a cluster described by its links: ``nodes`` x ``gpus_per_node`` ranks, ``intra`` one of
    :data:`INTRA_LINKS` (needed with more than one GPU per node), ``inter_gbit`` the node link in Gbit/s (needed
    with more than one node), ``backend`` nccl, mpi or gloo, ``gpu`` a name of :data:`GPUS` (fp16's device rates).
    Each framework writes its own environment from it. Raises ScenarioError (one line) for a missing or unknown
    link, a non-positive rate or an unknown backend."""
    if nodes * gpus_per_node < 2:
        raise ScenarioError("one GPU has no allreduce to model: give --gpus-per-node 2 or more (with --intra) or "
                            "--nodes 2 or more (with --link-gbit)")
    if backend not in BACKENDS:
        raise ScenarioError(f"--backend {backend!r}: use one of {', '.join(BACKENDS)}")
    if nodes < 1 or gpus_per_node < 1:
        raise ScenarioError(f"--nodes and --gpus-per-node must be >= 1, got {nodes} and {gpus_per_node}")
    if gpus_per_node > 1 and intra is None:
        raise ScenarioError(f"{gpus_per_node} GPUs per node need --intra (one of {', '.join(INTRA_LINKS)})")
    if intra is not None and intra not in INTRA_LINKS:
        raise ScenarioError(f"--intra {intra!r}: use one of {', '.join(INTRA_LINKS)}")
    if nodes > 1 and inter_gbit is None:
        raise ScenarioError(f"{nodes} nodes need --link-gbit (the node link, Gbit/s: e.g. 100 for EDR InfiniBand)")
    if inter_gbit is not None and not (0.01 <= inter_gbit <= 10_000):
        raise ScenarioError(f"--link-gbit must be between 0.01 and 10000 Gbit/s, got {inter_gbit}")
    gpu = check_gpu(gpu)
    link = INTRA_LINKS[intra] if intra is not None else None
    intra_tier = None if link is None else Tier(link.alpha_us * 1e-6, link.gbytes_per_s * 1e9)
    if inter_gbit is not None:
        inter_tier = Tier(NET_ALPHA_US * 1e-6, inter_gbit * GBIT)
    else:  # one node: the ring runs on the intra-node link only
        inter_tier = intra_tier
    cost = CostModel(inter=inter_tier, intra=intra_tier, link_gbps=float(inter_gbit if inter_gbit is not None
                                                                          else link.gbytes_per_s * 8),
                     fp16=gpu_fp16_cost(gpu))
    figures = ([f"intra-node ({intra}): {link.gbytes_per_s:g} GB/s per direction, alpha {link.alpha_us:g} us "
                f"per ring step: {link.source}"] if link else [])
    if inter_gbit is not None:
        figures.append(f"inter-node: {inter_gbit:g} Gbit/s per node as given (--link-gbit), alpha "
                       f"{NET_ALPHA_US:g} us per ring step: {NET_SOURCE}")
    if gpu is not None:
        g = GPUS[gpu]
        figures.append(f"fp16 compression on the {g.name}: casts {CAST_BYTES_PER_ELEM} B and float16 sum "
                       f"{SUM_BYTES_PER_ELEM} B per element at {g.gbytes_per_s:g} GB/s: {g.source}")
    else:
        figures.append("fp16 compression: no --gpu, so no device memory bandwidth: fp16 is not proposed")
    return SpecCost(
        cost=cost, cluster={"nodes": nodes, "gpus_per_node": gpus_per_node, "gpu": gpu, "backend": backend},
        figures=figures,
        assumed=[f"NCCL's base latency of {NCCL_BASE_LAT_US:g} us per collective (tuning.cc baseLat "
                 "[Ring][Simple]) is left out",
                 "published rates are upper bounds: measured busbw is lower (nccl-tests; NCCL caps "
                 "A100 ring busbw at 235 GB/s)",
                 "negotiation, fusion-buffer copies and host copies: the simulator's defaults "
                 "(autotuner.model.costmodel.Negotiation, CostModel)"])


def is_spec(raw: dict[str, Any]) -> bool:
    """Whether a model file was built from specs (never measured)."""
    return raw.get("source") == SPEC_SOURCE


__all__ = ["Link", "INTRA_LINKS", "Gpu", "GPUS", "GPU_ALIASES", "find_gpu", "gpu_fp16_cost", "check_gpu", "SpecCost", "spec_cost", "is_spec", "SPEC_SOURCE", "NEVER_MEASURED", "BACKENDS"]
