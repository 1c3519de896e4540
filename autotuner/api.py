"""Public operations behind the CLI: build a scenario, simulate it, fit a runs tree.

A :class:`Scenario` binds a fitted environment, a model's layout and workload and the
what-ifs (nodes, GPUs per node, link rate, compression); :func:`simulate` runs the pure
simulator on it.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .costmodel import Cluster, CostModel, CostModelError
from .fit import fit_env
from .knobs import Config
from .layout import Layout
from .modelstore import FittedEnv, load_env, write_model
from .plots import bandwidth_plot
from .readers.layouts import load_layout
from .readers.runs import read_runs
from .simulator import StepResult, Workload, simulate_step

COMPRESSION_RATIO = {"none": 1.0, "fp16": 0.5}  # fp16 compression halves fp32 gradient bytes


class ScenarioError(ValueError):
    """A scenario cannot be built (unknown model for the env, bad what-if)."""


@dataclass(frozen=True)
class Scenario:
    """Everything the simulator needs besides the knobs."""

    env: str
    model: str
    layout: Layout
    workload: Workload
    cost: CostModel
    cluster: Cluster
    compression: str = "none"

    def simulate(self, config: Config) -> StepResult:
        return simulate_step(self.layout.sizes_bytes, self.layout.ready_fraction, self.workload, config,
                             self.cost, self.cluster, compression_ratio=COMPRESSION_RATIO[self.compression])


def make_scenario(model_dir: Path, env: str | None, model: str, *, nodes: int | None = None,
                  gpus_per_node: int | None = None, bandwidth_gbps: float | None = None,
                  compression: str = "none", compute_ms: float | None = None) -> tuple[Scenario, FittedEnv]:
    """Build a scenario from ``model_dir/<env>.json`` and a model name/path/factory.

    A model calibrated in the env uses its workload (and the layout its run used); another
    layout needs ``compute_ms`` (forward+backward, split 1/3 : 2/3). Raises ScenarioError,
    ModelStoreError, LayoutError, CostModelError with one-line messages.
    """
    fenv = load_env(model_dir, env)
    if compression not in COMPRESSION_RATIO:
        raise ScenarioError(f"unknown compression {compression!r}; use one of {', '.join(COMPRESSION_RATIO)}")
    if model in fenv.workloads and compute_ms is None:
        layout_name, wl = fenv.workloads[model]
        layout = load_layout(layout_name)
    else:
        layout = load_layout(model)
        if compute_ms is None:
            raise ScenarioError(f"model {model!r} has no calibrated compute time in env {fenv.name!r} "
                                f"(calibrated: {', '.join(sorted(fenv.workloads))}); pass --compute-ms")
        if not compute_ms > 0:
            raise ScenarioError(f"compute time must be > 0 ms, got {compute_ms}")
        # no host-side backward measured for this model: hooks at device readiness; collectives
        # asynchronous when the env's fitted workloads are (NCCL backend)
        wl = Workload(forward_s=compute_ms / 3e3, backward_s=compute_ms * 2 / 3e3,
                      async_collectives=any(w.async_collectives for _, w in fenv.workloads.values()))
    try:
        cluster = Cluster(nodes or fenv.cluster.nodes, gpus_per_node or fenv.cluster.gpus_per_node)
    except CostModelError as e:
        raise ScenarioError(str(e)) from None
    cost = fenv.cost if bandwidth_gbps is None else fenv.cost.with_bandwidth(bandwidth_gbps)
    return Scenario(fenv.name, model, layout, wl, cost, cluster, compression), fenv


def fit_runs(runs_dir: Path, model_dir: Path) -> tuple[list[tuple[dict, Path, Path | None]], list[str]]:
    """Fit every environment under ``runs_dir``; write model JSON + bandwidth PNG per env.

    Returns ([(model dict, json path, png path or None)], problems). Raises RunsError when
    nothing can be read.
    """
    envs, problems = read_runs(runs_dir)
    fitted = []
    for env in envs:
        problems += env.problems
        try:
            d = fit_env(env)
        except ValueError as e:
            problems.append(f"{env.name}: not fitted ({e})")
            continue
        path = write_model(model_dir, d)
        png = bandwidth_plot(d, model_dir / f"{d['env']}-bandwidth.png")
        fitted.append((d, path, png))
    return fitted, problems
