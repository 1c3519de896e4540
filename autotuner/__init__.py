"""autotuner: predict and tune Horovod's knobs from measured bandwidth data.

Public surface (everything else is internal):
"""
from .api import fit_runs, make_scenario
from .errors import AutotunerError, ScenarioError
from .knobs import DEFAULTS_0_20, DEFAULTS_0_28, Config, horovod_env, horovodrun_flags
from .model.costmodel import Cluster, CostModel, Tier
from .model.fastsim import simulate_batch, simulate_configs
from .model.layout import Layout
from .model.scenario import Scenario
from .model.simulator import StepResult, Workload, simulate_step
from .readers.layouts import load_layout

__all__ = ["AutotunerError", "Scenario", "ScenarioError", "fit_runs", "make_scenario", "Cluster", "CostModel", "Tier",
           "DEFAULTS_0_20", "DEFAULTS_0_28", "Config", "horovod_env", "horovodrun_flags", "Layout",
           "load_layout", "StepResult", "Workload", "simulate_step", "simulate_batch", "simulate_configs"]
