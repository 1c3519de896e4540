"""Read and write fitted models (``<model folder>/<env>.json``, schema ``autotuner.model/1``,
:class:`autotuner.schemas.ModelFile`).

Readers take one model folder or a list of them searched in order (what
:func:`autotuner.paths.model_search_path` returns: ``--model-dir``, ``$AUTOTUNER_MODEL_DIR``,
the user's folder, the shipped ``autotuner/models``): for each env the first folder holding
``<env>.json`` wins, the envs offered are the union, and the default env comes from the first
folder holding any model. A folder that does not exist holds nothing.

Writes are atomic (temporary file in the same folder, then ``os.replace``) and strict JSON: a
model holding a non-finite number is refused, as is an env name that is not a plain name (the
file must land in the model folder). Reads check the schema. Raises :class:`ModelStoreError`
(one line: file, field, value) for a missing folder, an unknown environment, a file that cannot
be read or parsed, or one that does not match the schema.
"""
from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from ....errors import ModelStoreError
from ..knobs import Config
from ....model.contention import Contention
from ....model.costmodel import Cluster, CostModel
from ....model.layout import Layout
from ....model.workload import Workload
from ....model.wallclock import RunShape
from ....readers.files import read_json
from ....readers.layouts import load_data_layout
from ....schemas import MODEL_SCHEMA, check, field_path, find_nonfinite, is_plain_name
from ..schemas import ModelFile
from ....writers.atomic import atomic_write_text


@dataclass(frozen=True)
class FittedEnv:
    """A fitted environment: cost model, cluster, measured knobs and per-model workloads."""

    name: str
    cost: CostModel
    cluster: Cluster
    measured_config: Config
    workloads: dict[str, tuple[str, Workload]]  # model -> (layout name, workload)
    raw: dict[str, Any]
    path: Path | None = None  # the model file read, if any
    #: compute contention of ranks sharing a host (CPU ranks), or None
    contention: Contention | None = None
    #: model -> the timed run its workload was calibrated on (wall-time predictions)
    run_shapes: dict[str, RunShape] = field(default_factory=dict)
    #: models whose forward/backward are the whole step's work on one rank, split over the ranks
    global_work: frozenset[str] = frozenset()

    @property
    def cores_per_host(self) -> int | None:
        """CPU cores each host's ranks share (the model file's ``cluster.cores_per_host``, from the
        env's env.toml or ``measure``), or None where the env does not record it."""
        cores = (self.raw.get("cluster") or {}).get("cores_per_host")
        return int(cores) if cores else None

    def cost_for(self, cluster: Cluster) -> CostModel:
        """The cost model for ``cluster``: where the env records its hosts' ``cores_per_host``
        and ``cluster`` puts more ranks on a host than the env was measured with, the host-local
        tier at the ranks' share of the cores (:meth:`autotuner.model.costmodel.CostModel.cpu_shared`);
        else :attr:`cost`."""
        cores = self.cores_per_host
        if cores is None:
            return self.cost
        return self.cost.cpu_shared(cluster.gpus_per_node, cores, self.cluster.gpus_per_node, cluster.nodes)

    def layout_for(self, model: str) -> Layout:
        """The layout of ``model``'s workload, as the model file names it: a shipped layout or a
        .json file in the model file's folder, never code (:func:`autotuner.readers.layouts.load_data_layout`).
        Raises KeyError for a model without a workload, LayoutError."""
        ref = self.workloads[model][0]
        where = f"{self.path or self.name}: workloads.{model}.layout"
        return load_data_layout(ref, self.path.parent if self.path else Path("."), where)


def write_model(model_dir: Path, d: dict[str, Any]) -> Path:
    """Write ``d`` to ``model_dir/<env>.json`` (atomic, strict JSON); returns the path.

    Raises ModelStoreError, before writing anything, when ``env`` is not a plain name (it could
    not land in ``model_dir``), when ``d`` holds a NaN or infinite number (naming the env, the
    field and the value), or when ``d`` does not match :class:`autotuner.schemas.ModelFile`.
    """
    name = d.get("env")
    if not is_plain_name(name):
        raise ModelStoreError(f"{model_dir}: env: {name!r}: must be a plain name (letters, digits, '.', '_', '-'; "
                              "not starting with '.'; no path separators); nothing written")
    bad = find_nonfinite(d)
    if bad:
        raise ModelStoreError(f"{name}: {field_path(bad[0])}: {bad[1]!r}: not a finite number; the model is "
                              "not written")
    check(ModelFile, d, f"model {name}", ModelStoreError)
    path = model_dir / f"{name}.json"
    atomic_write_text(path, json.dumps(d, indent=1, sort_keys=False, allow_nan=False) + "\n")
    return path


#: one model folder, or several searched in order
ModelDirs = Union[Path, Sequence[Path]]


def model_dirs(model_dirs: ModelDirs) -> list[Path]:
    """``model_dirs`` as a list of folders, in search order."""
    if isinstance(model_dirs, (str, os.PathLike)):
        return [Path(model_dirs)]
    return [Path(d) for d in model_dirs]


def _where(dirs: list[Path]) -> str:
    return str(dirs[0]) if len(dirs) == 1 else f"any of {', '.join(str(d) for d in dirs)}"


def _envs_in(model_dir: Path) -> list[str]:
    try:
        if not model_dir.is_dir():
            return []
        return sorted(p.stem for p in model_dir.glob("*.json"))
    except OSError:
        return []


def find_models(model_dirs_: ModelDirs) -> dict[str, Path]:
    """``{env: the model file that wins}``: for each env the first folder holding ``<env>.json``."""
    found: dict[str, Path] = {}
    for d in model_dirs(model_dirs_):
        for name in _envs_in(d):
            found.setdefault(name, d / f"{name}.json")
    return dict(sorted(found.items()))


def list_envs(model_dir: ModelDirs) -> list[str]:
    """Fitted environment names in ``model_dir`` (one folder or several: the union), sorted."""
    return list(find_models(model_dir))


def env_from_dict(d: dict[str, Any], where: str = "<model>", path: Path | None = None) -> FittedEnv:
    """A :class:`FittedEnv` from a parsed model file, checked by :class:`autotuner.schemas.ModelFile`.
    Raises ModelStoreError ``where: field: value: reason``."""
    if not isinstance(d, dict) or d.get("schema") != MODEL_SCHEMA:
        got = d.get("schema") if isinstance(d, dict) else f"a JSON {type(d).__name__}"
        raise ModelStoreError(f"{where}: schema: {got!r}: not a fitted model (expected {MODEL_SCHEMA!r})")
    check(ModelFile, d, where, ModelStoreError)
    try:
        wls = {m: (w["layout"], Workload(forward_s=w["forward_ms"] * 1e-3, backward_s=w["backward_ms"] * 1e-3,
                                         update_s=w.get("update_ms", 0.0) * 1e-3,
                                         comm_scale=w.get("comm_scale", 1.0), overlap=w.get("overlap", 1.0),
                                         host_backward_s=(None if w.get("host_backward_ms") is None
                                                          else w["host_backward_ms"] * 1e-3),
                                         async_collectives=bool(w.get("async_collectives", False))))
               for m, w in d["workloads"].items()}
        return FittedEnv(name=d["env"], cost=CostModel.from_dict(d["cost_model"]),
                         cluster=Cluster(int(d["cluster"]["nodes"]), int(d["cluster"]["gpus_per_node"])),
                         measured_config=Config.from_dict(d["measured_config"]), workloads=wls, raw=d, path=path,
                         contention=Contention.from_dict(d["contention"]) if d.get("contention") else None,
                         run_shapes={m: RunShape.from_dict(w["run"]) for m, w in d["workloads"].items()
                                     if w.get("run")},
                         global_work=frozenset(m for m, w in d["workloads"].items()
                                               if w.get("work_per_step") == "global"))
    except (KeyError, TypeError, ValueError) as e:
        raise ModelStoreError(f"{where}: malformed model file ({type(e).__name__}: {e})") from None


def default_env(model_dir: ModelDirs) -> str | None:
    """The environment used when none is named, taken from the first folder (in search order)
    holding any model: the one whose ``env.toml`` says ``default = true`` (copied into its model
    file by ``fit``), else that folder's first by name. A user's own fits thus win over the
    shipped models; None when no folder holds a model."""
    for d in model_dirs(model_dir):
        envs = _envs_in(d)
        for name in envs:
            try:
                data = json.loads((d / f"{name}.json").read_bytes().decode("utf-8"))
            except (OSError, ValueError, RecursionError):  # unreadable: load_env names the problem
                continue
            if isinstance(data, dict) and data.get("default") is True:
                return name
        if envs:
            return envs[0]
    return None


def load_env(model_dir: ModelDirs, env: str | None) -> FittedEnv:
    """Load ``<env>.json`` from the first folder of ``model_dir`` holding it; ``env=None`` picks
    :func:`default_env`. Raises ModelStoreError (one line naming the folders searched) when no
    folder holds a model or none holds ``env``."""
    dirs = model_dirs(model_dir)
    found = find_models(dirs)
    if not found:
        raise ModelStoreError(f"no fitted models in {_where(dirs)} (run: autotuner fit RUNS_DIR)")
    name = env or default_env(dirs)
    if name not in found:
        raise ModelStoreError(f"unknown env {name!r}; fitted: {', '.join(found)}"
                              + (f" (searched: {', '.join(str(d) for d in dirs)})" if len(dirs) > 1 else ""))
    path = found[name]
    d = read_json(path, ModelStoreError, str(path))
    return env_from_dict(d, str(path), path)
