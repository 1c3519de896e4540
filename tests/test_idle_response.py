"""Issue 20: small responses while the ranks' main threads sleep (``measure``'s idle phase,
:class:`autotuner.model.costmodel.IdleResponse`). Arithmetic and the two simulators' contract; the
figures read committed records (runs/*/idle.jsonl); no Horovod is run here."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from autotuner.errors import CostModelError
from autotuner.fit.fitters import workload_for
from autotuner.fit.store import load_env
from autotuner.knobs import DEFAULTS_0_28, MIB, Config
from autotuner.model.costmodel import CostModel, IdleResponse
from autotuner.model.fastsim import simulate_configs
from autotuner.model.simulator import simulate_step
from autotuner.readers.layouts import load_layout

ROOT = Path(__file__).resolve().parent.parent
CFGS = [DEFAULTS_0_28, Config(fusion_threshold_bytes=0, cycle_time_ms=1.0),
        Config(fusion_threshold_bytes=MIB, cycle_time_ms=3.0, cache_capacity=0),
        Config(fusion_threshold_bytes=8 * MIB, cycle_time_ms=0.4), Config(fusion_threshold_bytes=0, cycle_time_ms=7.0)]


def _sweep_env():
    return load_env([ROOT / "autotuner" / "models"], "local-gloo-1gbit-sweep")


def test_idle_cost_is_a_floor_up_to_its_largest_size():
    idle = IdleResponse(1.5e-3, 2e-9, 65536.0)
    n = np.array([4096.0, 65536.0, 65537.0, 1e6])
    coll = np.array([0.4e-3, 3e-3, 0.1e-3, 0.1e-3])
    extra = idle.extra_s(n, coll)
    assert extra[0] == pytest.approx(1.5e-3 + 2e-9 * 4096 - 0.4e-3)
    assert extra[1] == 0.0  # the tier is slower than the idle time: nothing added
    assert extra[2] == 0.0 and extra[3] == 0.0  # above the measured sizes: the tier alone
    d = CostModel.from_dict(replace(_sweep_env().cost, idle=idle).to_dict()).idle
    assert d == idle  # the model file round-trips it


@pytest.mark.parametrize("bad", [(-1e-3, 0.0, 4096.0), (1e-3, 0.0, 0.0), (float("nan"), 0.0, 4096.0)])
def test_idle_cost_refuses_nonsense(bad):
    with pytest.raises(CostModelError):
        IdleResponse(*bad)


@pytest.mark.parametrize("after_backward", [False, True])
@pytest.mark.parametrize("cpu_bound", [False, True])
def test_fast_and_reference_simulators_agree_on_the_idle_cost(after_backward, cpu_bound):
    """Contract: the batch simulator charges the idle-host floor exactly as the reference."""
    fenv = _sweep_env()
    cost = replace(fenv.cost, idle=IdleResponse(1.6e-3, 3e-9, 65536.0, after_backward))
    L = load_layout("mobilenet_v2")
    wl = replace(workload_for(0.15), cpu_bound=cpu_bound)
    fast = simulate_configs(L.sizes_bytes, L.ready_fraction, wl, CFGS, cost, fenv.cluster)
    ref = [simulate_step(L.sizes_bytes, L.ready_fraction, wl, c, cost, fenv.cluster).step_time_s for c in CFGS]
    assert fast == pytest.approx(ref, rel=1e-12)
    base = [simulate_step(L.sizes_bytes, L.ready_fraction, wl, c, fenv.cost, fenv.cluster).step_time_s for c in CFGS]
    off = 1  # fusion off at 1 ms: 158 responses, most of them small
    if cpu_bound and not after_backward:
        assert ref[off] == pytest.approx(base[off], rel=1e-12)  # a computing backward keeps the cores awake
    else:
        assert ref[off] > base[off]


def test_fast_simulator_reads_the_idle_cost_on_large_layouts_too():
    """Above DUR_TABLE_MAX_T tensors the batch simulator computes durations on demand: same answer."""
    from autotuner.model import fastsim

    fenv = _sweep_env()
    cost = replace(fenv.cost, idle=IdleResponse(1.6e-3, 3e-9, 65536.0, True))
    L = load_layout("mobilenet_v2")
    wl = workload_for(0.15)
    a = simulate_configs(L.sizes_bytes, L.ready_fraction, wl, CFGS, cost, fenv.cluster)
    old = fastsim.DUR_TABLE_MAX_T
    try:
        fastsim.DUR_TABLE_MAX_T = 0
        b = simulate_configs(L.sizes_bytes, L.ready_fraction, wl, CFGS, cost, fenv.cluster)
    finally:
        fastsim.DUR_TABLE_MAX_T = old
    assert a == pytest.approx(b, rel=1e-12)
