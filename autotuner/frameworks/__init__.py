"""One folder per data-parallel framework, each with the same parts behind one contract (:data:`FRAMEWORKS`):

========== ================================== ==================================================
part       Horovod (:mod:`.horovod`)           PyTorch DDP (:mod:`.ddp`)
========== ================================== ==================================================
knobs      ``knobs`` (``KNOBS``, ``Config``)   ``knobs`` (``DDP_KNOBS``, ``DdpConfig``)
simulator  ``simulator``, ``fastsim``          ``reducer``, ``fastsim`` (the Reducer)
fit        ``fit`` (model files)               ``fit`` (the sweep's alpha-beta line)
search     ``search``                          ``suggest``
probes     ``sweepprobe`` and the phase probes ``sweepprobe`` and the phase probes
launcher   ``launch`` (``horovodrun``)          ``launch`` (``torchrun``)
real runs  ``realruns``                        ``realrun``
views      ``views``                           ``plots``
schemas    ``schemas``                         ``schemas``
========== ================================== ==================================================

The cost model, testbed, readers, writers, render, specs and schemas' shared pieces serve both and import neither;
a framework imports nothing of another (``tests/test_architecture.py``). Each verb answers in one shape across
frameworks (:mod:`autotuner.results`). :func:`envs` lists every environment with the frameworks that answer for it.

- :mod:`autotuner.frameworks.horovod`: Horovod 0.28.1 (0.20.3's defaults too): the knob table, the background loop,
  fusion and negotiation, ``horovodrun``.
- :mod:`autotuner.frameworks.ddp`: PyTorch ``DistributedDataParallel`` (torch 2.13): buckets, the Reducer, comm hooks,
  ``torchrun``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence


@dataclass(frozen=True)
class Parts:
    """Where each part of a framework lives: module names relative to ``autotuner.frameworks.<name>``."""

    knobs: str
    simulator: tuple[str, ...]
    fit: str
    search: str
    probes: tuple[str, ...]
    launcher: str
    realruns: str
    views: str
    schemas: str


#: the frameworks and where each part of theirs lives (the table above)
FRAMEWORKS: dict[str, Parts] = {
    "horovod": Parts(knobs="knobs", simulator=("simulator", "fastsim"), fit="fit", search="search",
                     probes=("sweepprobe", "cpuprobe", "trickleprobe", "idleprobe", "burstprobe", "stepprobe",
                             "fp16probe"),
                     launcher="launch", realruns="realruns", views="views", schemas="schemas"),
    "ddp": Parts(knobs="knobs", simulator=("reducer", "fastsim"), fit="fit", search="suggest",
                 probes=("sweepprobe", "cpuprobe", "burstprobe", "firsttouchprobe"),
                 launcher="launch", realruns="realrun", views="plots", schemas="schemas"),
}


def envs(model_dir: Path | Sequence[Path] | None = None, runs_dir: Path | None = None,
         on_event=None) -> list[dict[str, Any]]:
    """Every environment any framework can answer for, sorted by name: each ``{"env", "frameworks"`` (the
    frameworks that answer for it: ``horovod`` where a model file is found, :func:`autotuner.frameworks.horovod.
    environments.envs`; ``ddp`` where a folder with a DDP sweep is, or a model file from specs or nccl-tests,
    :func:`autotuner.frameworks.ddp.api.ddp_envs`),
    ``nodes``, ``ranks_per_node``, ``link_gbit`` (Gbit/s), ``trust`` (per framework, its trust line or the
    problem that kept it from answering), and ``horovod`` / ``ddp``: that framework's own row (None where it does
    not answer)}``. Model folders and runs folders are searched as every command searches them
    (:mod:`autotuner.paths`); ``on_event(line)``: one line as each framework's list starts. Raises ModelStoreError /
    RunsError (one line) for a given folder that is missing."""
    from .ddp.api import ddp_envs
    from .horovod.environments import envs as horovod_envs

    rows: dict[str, dict[str, dict]] = {}
    say = on_event or (lambda line: None)
    for name, lister in (("horovod", lambda: horovod_envs(model_dir)), ("ddp", lambda: ddp_envs(runs_dir, model_dir=model_dir))):
        say(f"{name} environments")
        for r in lister():
            rows.setdefault(r["env"], {})[name] = r
    out = []
    for env, by in sorted(rows.items()):
        hv, dd = by.get("horovod"), by.get("ddp")
        # the shape and link from the Horovod row where there is one (its model file), else the DDP row
        shape = ((hv.get("nodes"), hv.get("gpus_per_node"), hv.get("link_gbps")) if hv else
                 (dd.get("nodes"), dd.get("ranks_per_node"), dd.get("link_gbit")))
        out.append({
            "env": env, "frameworks": [f for f in FRAMEWORKS if f in by],
            "nodes": shape[0], "ranks_per_node": shape[1], "link_gbit": shape[2],
            "trust": {f: r.get("trust") or r.get("problem") for f, r in by.items()},
            "horovod": hv, "ddp": dd})
    return out


__all__ = ["FRAMEWORKS", "Parts", "envs"]
