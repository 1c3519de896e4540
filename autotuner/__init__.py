"""autotuner: predict and tune Horovod's knobs from measured bandwidth data.

Public surface (everything else is internal; ``fit_environments`` and ``accuracy_table`` are named so
because ``autotuner.fit`` is a package), imported on first use so that
``import autotuner`` and the command line start fast (numpy, scipy and skopt load only
when a name that needs them is used).
"""
import sys as _sys

from ._sigint import install_if_program as _install_if_program

# the program's Ctrl-C from its first module on (autotuner/_sigint.py): the console script imports this first
_install_if_program((getattr(_sys, "argv", None) or [""])[0])

from importlib import import_module  # noqa: E402

_EXPORTS = {  # public name -> the module that defines it (relative to the package)
    "fit_runs": ".frameworks.horovod.environments", "fit_environments": ".frameworks.horovod.environments",
    "accuracy_table": ".frameworks.horovod.environments", "compare_timelines": ".frameworks.horovod.environments",
    "inspect_log": ".frameworks.horovod.environments", "env_new": ".frameworks.horovod.environments",
    "envs": ".frameworks",
    "make_scenario": ".frameworks.horovod.predict", "suggest": ".frameworks.horovod.predict",
    "simulate": ".frameworks.horovod.predict", "explore": ".frameworks.horovod.predict",
    "scale": ".frameworks.horovod.predict", "SCALE_NODES": ".frameworks.horovod.predict",
    "Backend": ".frameworks.horovod.predict", "SearchStrategy": ".frameworks.horovod.predict",
    "validate": ".frameworks.horovod.realruns", "tune": ".frameworks.horovod.realruns",
    "measure": ".frameworks.horovod.realruns", "profile_model": ".frameworks.horovod.realruns",
    "ProfileDevice": ".frameworks.horovod.realruns",
    "Compression": ".frameworks.horovod.scenario", "Scenario": ".frameworks.horovod.scenario",
    **{name: ".frameworks.horovod.results" for name in (
        "FitResult", "ExploreResult", "ScaleResult", "ValidateResult", "TuneResult", "SuggestResult",
        "SimulateResult", "Proposal", "Choice", "Response")},
    "Strategy": ".frameworks.horovod.search.ranking",
    "GridStrategy": ".frameworks.horovod.search.grid",
    "BayesStrategy": ".frameworks.horovod.search.bayes",
    "AutotunerError": ".errors", "ScenarioError": ".errors",
    "Pick": ".results", "SuggestAnswer": ".results", "SimulateAnswer": ".results", "ValidateAnswer": ".results",
    "DEFAULTS_0_20": ".frameworks.horovod.knobs", "DEFAULTS_0_28": ".frameworks.horovod.knobs",
    "Config": ".frameworks.horovod.knobs", "KNOBS": ".frameworks.horovod.knobs",
    "horovod_env": ".frameworks.horovod.knobs", "horovodrun_flags": ".frameworks.horovod.knobs",
    "Cluster": ".model.costmodel", "CostModel": ".model.costmodel", "Tier": ".model.costmodel",
    "simulate_batch": ".frameworks.horovod.fastsim", "simulate_configs": ".frameworks.horovod.fastsim",
    "Layout": ".model.layout",
    "StepResult": ".frameworks.horovod.simulator", "simulate_step": ".frameworks.horovod.simulator",
    "Workload": ".model.workload",
    "load_layout": ".readers.layouts",
    "ddp_suggest": ".frameworks.ddp.api", "DdpSuggestResult": ".frameworks.ddp.api",
    "ddp_measure": ".frameworks.ddp.api", "ddp_validate": ".frameworks.ddp.api",
    "DdpValidateResult": ".frameworks.ddp.api", "ddp_simulate": ".frameworks.ddp.api",
    "DdpSimulateResult": ".frameworks.ddp.api", "ddp_tune": ".frameworks.ddp.api",
    "ddp_explore": ".frameworks.ddp.api", "DdpExploreResult": ".frameworks.ddp.api",
    "ddp_scale": ".frameworks.ddp.api", "ddp_envs": ".frameworks.ddp.api", "DdpScaleResult": ".frameworks.ddp.api",
    "DdpConfig": ".frameworks.ddp.knobs", "DDP_KNOBS": ".frameworks.ddp.knobs",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'autotuner' has no attribute {name!r}")
    return getattr(import_module(_EXPORTS[name], __name__), name)
