"""Read and write fitted models (``model/<env>.json``, schema ``autotuner.model/1``,
:class:`autotuner.schemas.ModelFile`).

Writes are atomic (temporary file in the same folder, then ``os.replace``) and strict JSON: a
model holding a non-finite number is refused, as is an env name that is not a plain name (the
file must land in the model folder). Reads check the schema. Raises :class:`ModelStoreError`
(one line: file, field, value) for a missing folder, an unknown environment, a file that cannot
be read or parsed, or one that does not match the schema.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ModelStoreError
from ..knobs import Config
from ..model.costmodel import Cluster, CostModel
from ..model.layout import Layout
from ..model.simulator import Workload
from ..readers.files import read_json
from ..readers.layouts import load_data_layout
from ..schemas import (
    MODEL_SCHEMA,
    ModelFile,
    check,
    field_path,
    find_nonfinite,
    is_plain_name,
)
from ..writers.atomic import atomic_write_text


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


def list_envs(model_dir: Path) -> list[str]:
    """Fitted environment names in ``model_dir``, sorted (the first is the default env)."""
    if not model_dir.is_dir():
        return []
    return sorted(p.stem for p in model_dir.glob("*.json"))


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
                         measured_config=Config.from_dict(d["measured_config"]), workloads=wls, raw=d, path=path)
    except (KeyError, TypeError, ValueError) as e:
        raise ModelStoreError(f"{where}: malformed model file ({type(e).__name__}: {e})") from None


def default_env(model_dir: Path) -> str | None:
    """The environment used when none is named: the one whose ``env.toml`` says
    ``default = true`` (copied into its model file by ``fit``), else the first by name."""
    envs = list_envs(model_dir)
    for name in envs:
        try:
            d = json.loads((model_dir / f"{name}.json").read_bytes().decode("utf-8"))
        except (OSError, ValueError, RecursionError):  # unreadable: load_env names the problem
            continue
        if isinstance(d, dict) and d.get("default") is True:
            return name
    return envs[0] if envs else None


def load_env(model_dir: Path, env: str | None) -> FittedEnv:
    """Load ``model_dir/<env>.json``; ``env=None`` picks :func:`default_env`."""
    envs = list_envs(model_dir)
    if not envs:
        raise ModelStoreError(f"no fitted models in {model_dir} (run: autotuner fit runs/)")
    name = env or default_env(model_dir)
    if name not in envs:
        raise ModelStoreError(f"unknown env {name!r}; fitted: {', '.join(envs)}")
    path = model_dir / f"{name}.json"
    d = read_json(path, ModelStoreError, str(path))
    return env_from_dict(d, str(path), path)
