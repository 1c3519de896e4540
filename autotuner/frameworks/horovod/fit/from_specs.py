"""Horovod's model file for an environment from published link figures, never measured
(``autotuner env new``): the shared cost model from specs (:func:`autotuner.specs.spec_cost`) in the
``autotuner.model/1`` layout, with Horovod 0.28's default knobs as its ``measured_config`` (nothing was
measured: the field names the configuration the file's figures stand for). Pure: no I/O."""
from __future__ import annotations

from typing import Any

from ....specs import NEVER_MEASURED, SPEC_SOURCE, spec_cost
from ..knobs import DEFAULTS_0_28


def spec_model(name: str, *, nodes: int, gpus_per_node: int, intra: str | None, inter_gbit: float | None,
               backend: str = "nccl", gpu: str | None = None) -> dict[str, Any]:
    """A model file (``autotuner.model/1``, :class:`autotuner.schemas.ModelFile`) for a cluster described by its
    links (arguments as :func:`autotuner.specs.spec_cost`). No workload: a model is given by a profiled layout or
    ``--compute-ms``. Raises ScenarioError (one line) for a missing or unknown link, a non-positive rate or an
    unknown backend."""
    s = spec_cost(nodes=nodes, gpus_per_node=gpus_per_node, intra=intra, inter_gbit=inter_gbit, backend=backend,
                  gpu=gpu)
    return {
        "schema": "autotuner.model/1", "env": name, "default": False, "source": SPEC_SOURCE,
        "cluster": s.cluster,
        "measured_config": {**DEFAULTS_0_28.to_dict()},
        "cost_model": s.cost.to_dict(),
        "fit": {"form": f"alpha-beta (ring) {NEVER_MEASURED}", "figures": s.figures, "assumed": s.assumed},
        "workloads": {},
        "trust": {"trials": 0, "configurations": 0},
    }
