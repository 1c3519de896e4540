"""Read and write fitted models (``model/<env>.json``, schema ``autotuner.model/1``).

Writes are atomic (temporary file in the same folder, then ``os.replace``).
Raises :class:`ModelStoreError` (one line) for a missing folder, an unknown environment or a
file of another schema.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ModelStoreError
from ..knobs import Config
from ..model.costmodel import Cluster, CostModel
from ..model.simulator import Workload
from ..writers.atomic import atomic_write_text
from .fitters import MODEL_SCHEMA


@dataclass(frozen=True)
class FittedEnv:
    """A fitted environment: cost model, cluster, measured knobs and per-model workloads."""

    name: str
    cost: CostModel
    cluster: Cluster
    measured_config: Config
    workloads: dict[str, tuple[str, Workload]]  # model -> (layout name, workload)
    raw: dict[str, Any]


def write_model(model_dir: Path, d: dict[str, Any]) -> Path:
    path = model_dir / f"{d['env']}.json"
    atomic_write_text(path, json.dumps(d, indent=1, sort_keys=False) + "\n")
    return path


def list_envs(model_dir: Path) -> list[str]:
    """Fitted environment names in ``model_dir``, sorted (the first is the default env)."""
    if not model_dir.is_dir():
        return []
    return sorted(p.stem for p in model_dir.glob("*.json"))


def env_from_dict(d: dict[str, Any], where: str = "<model>") -> FittedEnv:
    if d.get("schema") != MODEL_SCHEMA:
        raise ModelStoreError(f"{where}: schema {d.get('schema')!r}, expected {MODEL_SCHEMA!r}")
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
                         measured_config=Config.from_dict(d["measured_config"]), workloads=wls, raw=d)
    except (KeyError, TypeError, ValueError) as e:
        raise ModelStoreError(f"{where}: malformed model file ({type(e).__name__}: {e})") from None


def default_env(model_dir: Path) -> str | None:
    """The environment used when none is named: the one whose ``env.toml`` says
    ``default = true`` (copied into its model file by ``fit``), else the first by name."""
    envs = list_envs(model_dir)
    for name in envs:
        try:
            if json.loads((model_dir / f"{name}.json").read_text()).get("default") is True:
                return name
        except (OSError, json.JSONDecodeError):
            continue
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
    try:
        d = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ModelStoreError(f"cannot read {path}: {e}") from None
    return env_from_dict(d, str(path))
