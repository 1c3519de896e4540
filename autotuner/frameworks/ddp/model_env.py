"""A DDP environment from a model file (``<env>.json``, ``autotuner.model/1``) where no DDP sweep was measured: one
built from published specs (``autotuner env new``, ``source = "specs"``, :data:`autotuner.specs.SPEC_SOURCE`) or
fitted from nccl-tests ``all_reduce_perf`` runs (``autotuner fit`` on a ``format = "nccl-tests"`` env; its
``fit.form`` names them). The same files Horovod's commands answer from: searched as every command searches
fitted models (``--model-dir``, ``$AUTOTUNER_MODEL_DIR``, the user's folder, the shipped models; the first folder
holding ``<env>.json`` wins, :func:`autotuner.paths.model_search_path`). A measured DDP sweep of the same name
always wins (:func:`autotuner.frameworks.ddp.api.ddp_env_folder`). A model file fitted from measured Horovod runs
is not read here: its tiers hold Horovod's own costs, not DDP's.

What the Reducer simulators (:mod:`.reducer`, :mod:`.fastsim`) read of the cost model, and where each comes from:

- the allreduce of a bucket over all ``nodes`` x ``gpus_per_node`` ranks (NCCL's ring): the model file's
  ``cost_model`` tiers (:meth:`autotuner.model.costmodel.CostModel.allreduce_s`, flat: DDP has no hierarchical
  allreduce): published link rates and NCCL's ring step latencies (:mod:`autotuner.specs`) or the nccl-tests
  fit (``autotuner/frameworks/horovod/fit/nccl_tests.py``'s module docstring);
- the bucket copies (each gradient into its bucket in its hook, ``mark_variable_ready_dense``, and back after the
  collective, ``finalize_bucket_dense``; torch 2.13 ``torch/csrc/distributed/c10d/reducer.cpp``): on a GPU rank a
  kernel that reads and writes every byte, so one copy of ``n`` bytes moves ``2 n`` bytes of device memory and
  runs at half the GPU's datasheet memory bandwidth (:data:`autotuner.specs.GPUS`; ``CostModel.memcpy_Bps`` =
  ``M / 2``, :data:`COPY_PASSES`). A datasheet peak: real copy kernels reach 60-90 % of it. Where the env names
  no GPU of the table, the model file's own copy rate (``memcpy_gbytes_per_s``: 400 GB/s, a V100-class device copy
  rate, ``autotuner/frameworks/horovod/fit/fitters.py`` ``GPU_MEMCPY_BPS``) is kept and listed as assumed;
- the fp16 hook's casts and float16 sum: the model file's ``fp16`` (specs with ``--gpu``), else, for a GPU of the
  table, the same datasheet rates (:func:`autotuner.specs.gpu_fp16_cost`); without a GPU the hook is not proposed;
- ``queued_saving_s``: 0, no burst phase (a bucket queued behind another priced as a lone allreduce);
- ``collective_cpu``: None (GPU ranks: the collectives run on the device and NCCL's proxy thread, and a GPU
  layout's compute does not fill the host's cores, so no workload is ``cpu_bound``).

Every figure that is neither in the model file nor from a datasheet is listed in :attr:`ModelEnv.assumed`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from ...errors import CostModelError, RunsError
from ...model.costmodel import GBIT, Cluster, CostModel, Tier
from .hostcost import ReducerHostCost

#: the ``fit.form`` of a model file fitted from nccl-tests (``autotuner/frameworks/horovod/fit/nccl_tests.py``)
NCCL_TESTS_FORM = "nccl-tests all_reduce_perf"
#: the kinds of model file DDP answers from: ``specs`` (``source``) and ``nccl-tests`` (``fit.form``)
KINDS = ("specs", "nccl-tests")
#: device-memory passes of one bucket copy: it reads its bytes and writes them (``at::mul_out`` / ``copy_``)
COPY_PASSES = 2
#: the band of an env no DDP run has checked (:data:`autotuner.frameworks.ddp.api.DEFAULT_BAND`'s source line)
UNCHECKED_BAND_SOURCE = ("no DDP run on this env: the default band of an unchecked DDP env (run-to-run noise "
                         "measured on the CPU envs), never measured on this cluster")


@dataclass(frozen=True)
class ModelEnv:
    """A DDP environment read from a model file: its ``name``, ``path``, ``kind`` (:data:`KINDS`), the DDP
    ``cost`` model, the ``cluster`` (nodes x GPUs per node), ``gpu`` (the :data:`autotuner.specs.GPUS` row used, or
    None), ``fit`` (one line: the figures and where each comes from), ``trust`` (one line: specs ->
    :data:`autotuner.specs.NEVER_MEASURED`; nccl-tests -> the files it was fitted from), ``assumed`` (every figure
    neither measured nor from a datasheet) and ``info`` (``alpha_us``, ``busbw_gbps``: the tier the ring over all
    ranks runs on, its large-message bandwidth where piecewise; ``link_gbit``) and ``host`` (the Reducer's host work
    per gradient and per bucket: the shipped GPU prior of the env's GPU, with the range of the measured models,
    :func:`autotuner.frameworks.ddp.host_priors.gpu_host_prior`)."""

    name: str
    path: Path
    kind: str
    cost: CostModel
    cluster: Cluster
    gpu: str | None
    fit: str
    trust: str
    assumed: tuple[str, ...]
    info: dict
    host: ReducerHostCost | None = None


def _model_dirs(model_dir) -> list[Path]:
    """The fitted-model folders searched: ``model_dir`` first (one folder, or a list searched in order), then the
    default search (:func:`autotuner.paths.model_search_path`)."""
    from ...paths import model_search_path

    if model_dir is None or isinstance(model_dir, (str, Path)):
        return model_search_path(None if model_dir is None else Path(model_dir))
    return [Path(p) for p in model_dir]


def model_files(model_dir=None) -> dict[str, Path]:
    """``{env: its model file}`` over the model search path, the first folder holding ``<env>.json`` winning.
    Raises ModelStoreError (one line) for a given ``model_dir`` that is not a folder."""
    found: dict[str, Path] = {}
    for d in _model_dirs(model_dir):
        try:
            names = sorted(p for p in d.glob("*.json") if p.is_file()) if d.is_dir() else []
        except OSError:
            names = []
        for p in names:
            found.setdefault(p.stem, p)
    return found


def find_model_file(env: str, model_dir=None) -> Path | None:
    """The model file ``<env>.json`` that wins on the model search path, or None."""
    for d in _model_dirs(model_dir):
        if (d / f"{env}.json").is_file():
            return d / f"{env}.json"
    return None


def model_kind(raw: Any) -> str | None:
    """``"specs"`` or ``"nccl-tests"`` for a model file DDP answers from (:data:`KINDS`), else None."""
    from ...specs import is_spec

    if not isinstance(raw, dict) or raw.get("schema") != "autotuner.model/1":
        return None
    if is_spec(raw):
        return "specs"
    form = str((raw.get("fit") or {}).get("form") or "") if isinstance(raw.get("fit"), dict) else ""
    return "nccl-tests" if NCCL_TESTS_FORM in form else None


def resolve_gpu(name: str | None):
    """``(the :data:`autotuner.specs.GPUS` row, how it was read)`` for a model file's ``cluster.gpu``: the table's
    name or alias (:func:`autotuner.specs.find_gpu`); else, leaving out a leading "NVIDIA"/"Tesla", a table name or
    alias followed only by a memory size and, optionally, that row's own memory type ("H100 SXM 80GB" and
    "NVIDIA H100 80GB HBM3", as nvidia-smi names it, are the H100-SXM: ``how`` says so; "A100 80GB PCIe" is no
    row); else ``(None, "")``."""
    from ...specs import GPU_ALIASES, GPUS, find_gpu

    if not name:
        return None, ""
    g = find_gpu(name)
    if g is not None:
        return g, ""
    key = "".join(ch for ch in str(name).lower() if ch.isalnum())
    key = re.sub(r"^(nvidia|tesla)+", "", key)
    names = {**{n: n for n in GPUS}, **GPU_ALIASES}
    best = None
    for spelled, row in names.items():
        k = "".join(ch for ch in spelled.lower() if ch.isalnum())
        mem = "".join(ch for ch in GPUS[row].memory.lower() if ch.isalnum())
        if (key.startswith(k) and re.fullmatch(rf"(\d+gb({mem})?)?", key[len(k):])
                and (best is None or len(k) > best[0])):
            best = (len(k), GPUS[row])
    if best is None:
        return None, ""
    return best[1], f"{name} read as the {best[1].name}"


def _ring_tier(cost: CostModel, cluster: Cluster) -> Tier:
    """The tier a flat ring over every rank runs on: the intra-node one on one node, else the inter-node one."""
    return (cost.intra or cost.inter) if cluster.nodes == 1 else cost.inter


def _tier_text(t: Tier) -> str:
    """``alpha A us, busbw B Gbit/s`` of a tier, both segments of a piecewise one."""
    s = f"alpha {t.alpha_s * 1e6:.1f} us, busbw {t.bandwidth_Bps / GBIT:.0f} Gbit/s"
    if t.large_from_bytes is not None:
        s += (f" (from {t.large_from_bytes / 2**20:g} MiB: alpha {t.large_alpha_s * 1e6:.1f} us, busbw "
              f"{t.large_bandwidth_Bps / GBIT:.0f} Gbit/s)")
    return s


def ddp_model_env(raw: dict, name: str, path: Path) -> ModelEnv:
    """The DDP environment of a parsed model file ``raw`` (see the module docstring). Raises RunsError (one line
    naming ``path``) for a file DDP does not answer from (:func:`model_kind`) or whose cost model or cluster
    cannot be read."""
    from ...specs import NEVER_MEASURED, gpu_fp16_cost

    kind = model_kind(raw)
    if kind is None:
        raise RunsError(f"{path}: a model file neither from specs nor from nccl-tests (its costs are Horovod's own, "
                        "not DDP's): DDP answers from a DDP sweep (autotuner ddp measure), a model file from specs "
                        "(autotuner env new) or one fitted from nccl-tests (autotuner fit)")
    c = raw.get("cluster") if isinstance(raw.get("cluster"), dict) else {}
    try:
        cluster = Cluster(int(c["nodes"]), int(c["gpus_per_node"]))
        cost = CostModel.from_dict(raw["cost_model"])
    except (KeyError, TypeError, ValueError, CostModelError) as e:
        raise RunsError(f"{path}: cluster or cost_model unreadable ({str(e).splitlines()[0] or type(e).__name__})") \
            from None
    if cluster.size < 2:
        raise RunsError(f"{path}: {cluster.nodes}x{cluster.gpus_per_node} GPU: one rank has no allreduce")
    backend = str(c.get("backend") or "nccl").lower()
    gpu, read_as = resolve_gpu(c.get("gpu"))
    assumed: list[str] = []
    if gpu is not None:
        copy_bps = gpu.gbytes_per_s * 1e9 / COPY_PASSES
        copy_src = (f"half the {gpu.name}'s {gpu.memory} {gpu.gbytes_per_s:g} GB/s, {gpu.datasheet}: each copy "
                    "reads and writes its bytes" + (f"; {read_as}" if read_as else ""))
        cost = replace(cost, memcpy_Bps=copy_bps)
        assumed.append(f"bucket copies at the {gpu.name}'s datasheet peak memory bandwidth: real copy kernels reach "
                       "60-90 % of it")
        if cost.fp16 is None:
            cost = replace(cost, fp16=gpu_fp16_cost(gpu.name))
    else:
        copy_src = f"{cost.memcpy_Bps / 1e9:g} GB/s assumed"
        assumed.append(f"bucket copies at the model file's {cost.memcpy_Bps / 1e9:g} GB/s (memcpy_gbytes_per_s, a "
                       "V100-class device copy rate): "
                       + (f"its GPU {c.get('gpu')!r} is not in the GPU table" if c.get("gpu") else "it names no GPU")
                       + "; the fp16 hook is not proposed without the GPU's memory bandwidth")
    if backend != "nccl":
        assumed.append(f"the model file's backend is {backend}: its tiers are priced as given, not NCCL's")
    if kind == "specs":
        assumed += [str(a) for a in ((raw.get("fit") or {}).get("assumed") or [])
                    if "negotiation" not in str(a)]  # Horovod's negotiation and fusion buffer: not DDP's
        trust = (f"{NEVER_MEASURED} (published link figures: {name}.json fit.figures), never checked against a DDP "
                 "step")
        how = "from specs"
    else:
        fit = raw.get("fit") or {}
        files = [f"{fit.get('source')} ({cluster.nodes}x{cluster.gpus_per_node} ranks)"]
        intra = fit.get("intra") if isinstance(fit.get("intra"), dict) else None
        if intra and intra.get("source"):
            files.append(f"{intra['source']} (1x{cluster.gpus_per_node})")
        trust = f"from nccl-tests all_reduce_perf ({', '.join(files)}), never checked against a DDP step"
        how = "fitted from nccl-tests all_reduce_perf"
    ring = _ring_tier(cost, cluster)
    tiers = f"ring over all {cluster.size} ranks {_tier_text(ring)}"
    if cluster.nodes > 1 and cost.intra is not None:
        tiers += f"; intra-node {_tier_text(cost.intra)} (single-node what-ifs)"
    gpu_text = (f" {gpu.name}" if gpu is not None else f" {c.get('gpu')}" if c.get("gpu") else "")
    fit_line = (f"{name}: {cluster.nodes}x{cluster.gpus_per_node}{gpu_text} GPUs, NCCL allreduce {how}: {tiers}; "
                f"bucket copy {cost.memcpy_Bps / 1e9:.0f} GB/s ({copy_src}); no burst phase (a queued bucket priced "
                "as a lone allreduce)")
    info = {"alpha_us": ring.alpha_s * 1e6,
            "busbw_gbps": (ring.large_bandwidth_Bps if ring.large_from_bytes is not None else ring.bandwidth_Bps) / GBIT,
            "link_gbit": cost.link_gbps}
    from .host_priors import gpu_host_prior

    host = gpu_host_prior(None if gpu is None else gpu.name)
    return ModelEnv(name, Path(path), kind, cost, cluster, None if gpu is None else gpu.name, fit_line, trust,
                    tuple(assumed), info, host)


def read_model_env(path: Path, name: str | None = None) -> ModelEnv:
    """:func:`ddp_model_env` of the model file at ``path`` (``name`` default: its stem). Raises RunsError (one
    line) for an unreadable file or one DDP does not answer from."""
    from ...readers.files import read_json

    path = Path(path)
    return ddp_model_env(read_json(path, RunsError, str(path)), name or path.stem, path)


def model_envs(model_dir=None) -> dict[str, Path]:
    """``{env: model file}`` of every model file on the search path that DDP answers from (:func:`model_kind`;
    an unreadable file is left to the command that reads it, here skipped)."""
    from ...readers.files import read_json

    out = {}
    for name, p in model_files(model_dir).items():
        try:
            raw = read_json(p, RunsError, str(p))
        except RunsError:
            continue
        if model_kind(raw) is not None:
            out[name] = p
    return out


__all__ = ["ModelEnv", "KINDS", "NCCL_TESTS_FORM", "COPY_PASSES", "model_files", "find_model_file", "model_kind",
           "resolve_gpu", "ddp_model_env", "read_model_env", "model_envs"]
