"""Hierarchical allreduce per backend: Horovod 0.28.1 has it only with NCCL (+ MPI); on Gloo and
MPI the flag is ignored (horovod/common/operations.cc:157-168, 221-233, 574-577; docs/reference/knobs.md,
"Hierarchical flags per backend"). So on a gloo env the simulator reads the flag as off, and
suggest (bayes and grid), explore and scale never search nor propose it; a NCCL env keeps it.

local-gloo-1gbit is one host: every test here uses a 2-node what-if, where hierarchical allreduce
would otherwise change the prediction (each gloo test checks that against the same scenario
relabelled nccl, so it cannot pass by the flag simply having no effect).
"""
import json
from dataclasses import replace

import numpy as np
import pytest

from autotuner.frameworks.horovod.predict import make_scenario, suggest_configs
from autotuner.frameworks.horovod.predict import suggest_scenario as suggest
from autotuner.frameworks.horovod.knobs import (
    KNOB_BY_FIELD,
    MIB,
    Config,
    hierarchical_allreduce_note,
    hierarchical_allreduce_supported,
    pin_unsupported_off,
)
from autotuner.frameworks.horovod.search.bayes import BayesStrategy
from autotuner.frameworks.horovod.search.grid import GridStrategy
from autotuner.frameworks.horovod.views.explore import explore
from autotuner.frameworks.horovod.views.scale import scale
from cli_helpers import run

FLAG = KNOB_BY_FIELD["hierarchical_allreduce"].flag
ON, OFF = Config(hierarchical_allreduce=True), Config()


@pytest.fixture(scope="module")
def gloo2():
    """local-gloo-1gbit (backend gloo) on 2 nodes x 2 ranks."""
    sc, _ = make_scenario(None, "local-gloo-1gbit", "resnet50", nodes=2)
    return sc


@pytest.fixture(scope="module")
def v100_2():
    """v100-16gbit (backend nccl) on 2 nodes x 4 GPUs."""
    sc, _ = make_scenario(None, "v100-16gbit", "resnet50", nodes=2, gpus_per_node=4)
    return sc


def test_supported_backends():
    assert hierarchical_allreduce_supported("nccl") and hierarchical_allreduce_supported(None)
    assert not hierarchical_allreduce_supported("gloo") and not hierarchical_allreduce_supported("GLOO")
    assert not hierarchical_allreduce_supported("mpi")
    assert hierarchical_allreduce_note("nccl") is None and "operations.cc" in hierarchical_allreduce_note("gloo")
    assert pin_unsupported_off({}, "gloo") == {"hierarchical_allreduce": False}
    assert pin_unsupported_off({"hierarchical_allreduce": True}, "nccl") == {"hierarchical_allreduce": True}


def test_scenario_knows_the_env_backend(gloo2, v100_2):
    assert gloo2.backend is None and gloo2.effective_backend == "gloo"
    assert not gloo2.has_hierarchical_allreduce and not gloo2.hierarchical_allreduce_applies
    assert v100_2.effective_backend == "nccl" and v100_2.hierarchical_allreduce_applies


def test_gloo_simulates_the_flag_as_off(gloo2):
    assert gloo2.simulate(ON).step_time_s == gloo2.simulate(OFF).step_time_s
    thr = np.array([0, 4 * MIB, 64 * MIB])
    st = gloo2.step_times(fusion_threshold_bytes=thr[None, :], cycle_time_ms=1.0, cache_capacity=1024,
                          hierarchical_allreduce=np.array([[True], [False]]))
    assert np.array_equal(st[0], st[1])
    # the same scenario with a NCCL backend: hierarchical does change it (the what-if is not moot)
    nccl = replace(gloo2, env_backend="nccl")
    assert nccl.simulate(ON).step_time_s != nccl.simulate(OFF).step_time_s
    st = nccl.step_times(fusion_threshold_bytes=thr[None, :], cycle_time_ms=1.0, cache_capacity=1024,
                         hierarchical_allreduce=np.array([[True], [False]]))
    assert not np.array_equal(st[0], st[1])


def test_v100_two_nodes_hierarchical_still_changes_the_prediction(v100_2):
    on, off = v100_2.simulate(ON).step_time_s, v100_2.simulate(OFF).step_time_s
    assert abs(on - off) > 1e-3 * off
    st = v100_2.step_times(fusion_threshold_bytes=64 * MIB, cycle_time_ms=1.0, cache_capacity=1024,
                           hierarchical_allreduce=np.array([True, False]))
    assert st[0] == on and st[1] == off


def test_backend_what_if_turns_it_off():
    """--backend gloo / mpi on a NCCL env (t4x4-pcie fits all three) drops hierarchical; nccl keeps it."""
    on0, off0 = Config(hierarchical_allreduce=True, fusion_threshold_bytes=0), Config(fusion_threshold_bytes=0)
    res = {}
    for b in (None, "nccl", "gloo", "mpi"):
        sc, _ = make_scenario(None, "t4x4-pcie", "resnet50", nodes=2, backend=b, compute_ms=1)
        res[b] = (sc.simulate(on0).step_time_s, sc.simulate(off0).step_time_s)
    assert res[None][0] < res[None][1] and res["nccl"][0] < res["nccl"][1]
    assert res["gloo"][0] == res["gloo"][1] and res["mpi"][0] == res["mpi"][1]


@pytest.mark.parametrize("strategy", [BayesStrategy(n_calls=6, seed=0),
                                      GridStrategy(fusion_mb=(0, 8, 64), cycle_ms=(1.0, 5.0))])
def test_searches_never_try_hierarchical_on_gloo(gloo2, v100_2, strategy):
    trials, top = suggest_configs(gloo2, top=3, strategy=strategy)
    assert trials and not any(t.config.hierarchical_allreduce for t in trials)
    # a fixed hierarchical allreduce is pinned off too
    trials, top = suggest_configs(gloo2, top=3, strategy=strategy, fixed={"hierarchical_allreduce": True})
    assert not any(t.config.hierarchical_allreduce for t in trials)
    # control: on the NCCL env the same strategy does try it
    trials, _ = suggest_configs(v100_2, top=3, strategy=strategy)
    assert any(t.config.hierarchical_allreduce for t in trials)


def test_suggest_proposals_and_flags_on_gloo(gloo2):
    res = suggest(gloo2, top=3, compressions=("none",), fixed={"hierarchical_allreduce": True})
    for p in [res["default"], *res["proposals"]]:
        assert p["config"]["hierarchical_allreduce"] is False
        assert FLAG not in p["horovodrun_flags"]
        assert p["env_vars"][KNOB_BY_FIELD["hierarchical_allreduce"].env] == "0"
    assert res["fixed"] == {"hierarchical_allreduce": False}
    assert len(res["notes"]) == 1 and "Gloo" in res["notes"][0]
    assert suggest(gloo2, top=1, compressions=("none",))["notes"] == []


def test_explore_on_gloo_has_no_hierarchical_combination(gloo2, v100_2):
    ex = explore(gloo2, resolution=3, sensitivity_points=3)
    assert not ex.grid["hierarchical_allreduce"].any()
    assert "hierarchical_allreduce" not in set(ex.sensitivity["knob"])
    assert not any(m.config.hierarchical_allreduce for m in ex.marks)
    ex = explore(v100_2, resolution=3, sensitivity_points=3)  # control
    assert ex.grid["hierarchical_allreduce"].any() and "hierarchical_allreduce" in set(ex.sensitivity["knob"])


def test_scale_on_gloo_never_proposes_hierarchical(gloo2, v100_2):
    res = scale(gloo2, [1, 2, 4])
    assert not res.table["best_hierarchical_allreduce"].any()
    assert res.table["hier_step_time_ms"].isna().all()
    assert "not searched" in res.findings[0] and "gloo" in res.findings[0]
    res = scale(v100_2, [1, 2, 4])  # control: searched on more than one node
    assert res.table.loc[res.table["nodes"] > 1, "hier_step_time_ms"].notna().all()


def test_cli_simulate_with_the_flag_on_gloo_notes_it():
    base = ["simulate", "--env", "local-gloo-1gbit", "--model", "resnet50", "--nodes", "2", "--json"]
    on, off = run(*base, FLAG), run(*base)
    assert on.returncode == 0 and off.returncode == 0, (on.stderr, off.stderr)
    assert json.loads(on.stdout)["step_time_ms"] == json.loads(off.stdout)["step_time_ms"]
    notes = [ln for ln in on.stderr.splitlines() if ln.startswith("note:")]
    assert len(notes) == 1 and notes[0].startswith(f"note: {FLAG}") and "gloo_operations.cc" in notes[0]
    # besides: 2 ranks per node on 2 nodes, and this env measured no intra-node tier
    assert [ln for ln in on.stderr.splitlines() if ln.strip() and not ln.startswith("note:")] == \
        [ln for ln in off.stderr.splitlines() if ln.strip()]
    assert "note:" not in off.stderr
    v = run("simulate", "--env", "v100-16gbit", "--model", "resnet50", "--nodes", "2", "--json", FLAG)
    assert v.returncode == 0 and "note:" not in v.stderr


def test_cli_suggest_on_gloo_prints_no_hierarchical_flag():
    """Even with the flag given as a knob to keep fixed, the printed flags leave it out (and say why)."""
    p = run("suggest", "--env", "local-gloo-1gbit", "--model", "resnet50", "--nodes", "2", "--n-calls", "4",
            "--compression", "none", FLAG)
    assert p.returncode == 0, p.stderr
    flags = next(ln for ln in p.stdout.splitlines() if ln.startswith("horovodrun flags:"))
    assert FLAG not in flags and FLAG not in p.stdout
    assert [ln for ln in p.stderr.splitlines() if ln.startswith(f"note: {FLAG} not kept")]


def test_measured_two_host_gloo_env():
    """local-gloo-2x2 (2 emulated hosts x 2 ranks, Gloo): the env's own 2 nodes, no what-if."""
    sc, _ = make_scenario(None, "local-gloo-2x2", "resnet50", compute_ms=300)
    assert sc.cluster.nodes == 2 and sc.effective_backend == "gloo"
    assert sc.simulate(ON).step_time_s == sc.simulate(OFF).step_time_s
    nccl = replace(sc, env_backend="nccl")
    assert nccl.simulate(ON).step_time_s != nccl.simulate(OFF).step_time_s
    trials, _ = suggest_configs(sc, strategy=BayesStrategy(n_calls=4, seed=0))
    assert not any(t.config.hierarchical_allreduce for t in trials)
