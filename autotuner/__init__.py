"""autotuner: predict and tune Horovod's knobs from measured bandwidth data.

Public surface (everything else is internal):
"""
from .api import Scenario, ScenarioError, fit_runs, make_scenario
from .costmodel import Cluster, CostModel, Tier
from .fastsim import simulate_batch, simulate_configs
from .knobs import DEFAULTS_0_20, DEFAULTS_0_28, Config, horovod_env, horovodrun_flags
from .layout import Layout
from .readers.layouts import load_layout
from .simulator import StepResult, Workload, simulate_step

__all__ = ["Scenario", "ScenarioError", "fit_runs", "make_scenario", "Cluster", "CostModel", "Tier",
           "DEFAULTS_0_20", "DEFAULTS_0_28", "Config", "horovod_env", "horovodrun_flags", "Layout",
           "load_layout", "StepResult", "Workload", "simulate_step", "simulate_batch", "simulate_configs"]
