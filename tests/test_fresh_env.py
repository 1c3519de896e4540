"""The fresh-environment protocol's figures, the per-cycle negotiation a sweep
measures, and the noise-aware, minimal-change pick. Everything here reads committed records
(runs/fresh-*, runs/local-gloo-1gbit-sweep) or is arithmetic; no Horovod is run."""
from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from autotuner.frameworks.horovod.fit.phase_cpu import MIN_CYCLES, _cycle_negotiation, cycle_negotiation_s
from autotuner.frameworks.horovod.knobs import DEFAULTS_0_28, MIB, Config
from autotuner.model.costmodel import Negotiation
from autotuner.frameworks.horovod.fastsim import simulate_configs
from autotuner.frameworks.horovod.simulator import simulate_step
from autotuner.frameworks.horovod.readers.runs import parse_records
from autotuner.readers.timeline import read_timeline
from autotuner.frameworks.horovod.search.grid import COLUMNS
from autotuner.frameworks.horovod.search.ranking import knobs_changed, minimal_change
from autotuner.frameworks.horovod.views.protocol import Row, kendall_tau, rows_from_records, summary, versus

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "runs"
FRESH = {"fresh-3gbit": "vit_s16", "fresh-0.5gbit": "mobilenet_v2", "fresh-2x1-5gbit": "distilbert",
         "fresh-poll-2gbit": "vit_s16", "fresh-poll-0.75gbit": "mobilenet_v2", "fresh-poll-2x1-2gbit": "distilbert"}
#: the environments judged after the fix: measured and replayed with polling waits (research/notes/fresh-environments.md)
JUDGED = [e for e in FRESH if e.startswith("fresh-poll-")]


# --- protocol figures ---------------------------------------------------------------------

def test_kendall_tau_counts_only_pairs_apart():
    meas = [100.0, 101.0, 110.0, 120.0]
    pred = [101.0, 100.0, 111.0, 119.0]  # the 1 % pair is inverted, the others agree
    assert kendall_tau(meas, pred) == (pytest.approx(4 / 6), 6)
    assert kendall_tau(meas, pred, 0.02) == (1.0, 5)
    tau, n = kendall_tau([1.0, 1.0], [1.0, 2.0], 0.02)
    assert n == 0 and math.isnan(tau)


def test_summary_arithmetic_and_versus():
    c = DEFAULTS_0_28
    rows = [Row("default", c, (100.0, 102.0, 104.0), 98.0), Row("proposal-1", replace(c, cycle_time_ms=2.0),
                                                                (90.0, 91.0, 95.0), 93.6)]
    s = summary(rows, "proposal-1")
    assert s["mape_pct"] == pytest.approx((3.921568627 + 2.857142857) / 2)
    assert s["bias_pct"] == pytest.approx((-3.921568627 + 2.857142857) / 2)
    assert s["worst_pct"] == pytest.approx(-3.921568627)
    v = versus(rows[1], rows[0])
    assert v.speedup == pytest.approx(102 / 91) and not v.overlap
    assert s["versus"] == [{"other": "default", "speedup": pytest.approx(102 / 91), "within_noise": False}]


@pytest.mark.parametrize("env", sorted(e for e in FRESH if (RUNS / e / "validation").is_dir()))
def test_fresh_env_records_hold_ten_configurations_three_repeats(env):
    """The protocol's replays as committed: >= 10 configurations (defaults, autotune's best, the
    pick, the grid), each >= 3 interleaved repeats, and the autotune run."""
    f = RUNS / env / "validation" / f"fresh-{FRESH[env]}.jsonl"
    recs, bad = parse_records(f.read_text(), f.name)
    assert not bad
    rows = rows_from_records(recs, lambda cfg, setup: 1.0)
    assert len(rows) >= 10
    assert min(len(r.measured_ms) for r in rows) >= 3
    assert any(r.get("kind") == "autotune" and r["status"] == "ok" for r in recs)
    assert {"default", "autotune_best", "proposal-1"} <= {r.label for r in rows}


# --- the per-cycle negotiation a sweep measures -----------------------------------------------

def test_cycle_negotiation_read_off_a_committed_sweep_timeline():
    """Each busy cycle's negotiation = first response start - MEMCPY_IN - the cycle mark, once per
    cycle, checked by hand on the committed 1 Gbit/s sweep's main job."""
    tl = read_timeline(RUNS / "local-gloo-1gbit-sweep" / "timelines" / "single-main-0.json.gz")
    got = cycle_negotiation_s(tl)
    cyc = np.array(sorted(tl.cycle_starts_us))
    rs = sorted((r for r in tl.responses if r.op == "allreduce"), key=lambda r: r.start_us)
    first = {}
    for r in rs:
        k = int(np.searchsorted(cyc, r.start_us, side="right")) - 1
        first.setdefault(k, r)
    want = [(r.start_us - r.memcpy_in_us - cyc[k]) * 1e-6 for k, r in sorted(first.items()) if k >= 0]
    want = [w for w in want if w >= 0]
    assert len(got) == len(want) > MIN_CYCLES
    assert got == pytest.approx(want)
    info = _cycle_negotiation({("single", True): got, ("single", False): got[:3]}, "single")
    assert info["cache_on_ms"] == pytest.approx(np.mean(got) * 1e3)
    assert info["cache_off_ms"] is None and info["cache_off_cycles"] == 3  # too few: not used


def test_busy_cycle_cost_only_for_cycles_that_negotiate_tensors():
    n = Negotiation(ctrl_op_s=20e-6, busy_s=1.5e-3, nocache_s=2.5e-3, per_tensor_s=5e-6)
    assert n.cycle_s(0, 2, True, True) == pytest.approx(20e-6)  # idle cycle: one bit allreduce
    assert n.cycle_s(4, 2, True, True) == pytest.approx(1.5e-3)  # busy, cache hits
    assert n.cycle_s(4, 2, False, False) == pytest.approx(2.5e-3 + 5e-6 * 4 * 2)  # cache off
    assert n.cycle_s(0, 2, False, False) == pytest.approx(4 * 20e-6)  # idle, cache off: the products
    assert n.cycle_s(4, 2, True, False) == pytest.approx(20e-6 + 2.5e-3 + 5e-6 * 4 * 2)  # misses
    assert Negotiation().cycle_s(4, 2, True, True) == pytest.approx(100e-6)  # unmeasured: unchanged


def test_fast_and_reference_simulators_agree_on_the_busy_cycle_cost():
    """Contract: the batch simulator reads the busy-cycle negotiation exactly as the reference."""
    from autotuner.frameworks.horovod.fit.store import load_env
    from autotuner.readers.layouts import load_layout
    from autotuner.frameworks.horovod.fit.fitters import workload_for

    fenv = load_env([ROOT / "autotuner" / "models"], "local-gloo-1gbit-sweep")
    cost = replace(fenv.cost, negotiation=replace(fenv.cost.negotiation, busy_s=1.7e-3, nocache_s=2.7e-3))
    L = load_layout("mobilenet_v2")
    wl = workload_for(0.15)
    cfgs = [DEFAULTS_0_28, Config(fusion_threshold_bytes=0, cycle_time_ms=1.0),
            Config(fusion_threshold_bytes=MIB, cycle_time_ms=3.0, cache_capacity=0),
            Config(fusion_threshold_bytes=8 * MIB, cycle_time_ms=0.4)]
    fast = simulate_configs(L.sizes_bytes, L.ready_fraction, wl, cfgs, cost, fenv.cluster)
    ref = [simulate_step(L.sizes_bytes, L.ready_fraction, wl, c, cost, fenv.cluster).step_time_s for c in cfgs]
    assert fast == pytest.approx(ref, rel=1e-12)
    base = [simulate_step(L.sizes_bytes, L.ready_fraction, wl, c, fenv.cost, fenv.cluster).step_time_s for c in cfgs]
    assert all(r > b for r, b in zip(ref, base))  # the term costs time on every configuration


# --- the noise-aware, minimal-change pick -------------------------------------------------------

def _table(rows):
    return pd.DataFrame([{"fusion_threshold_mb": f, "cycle_time_ms": c, "cache_capacity": cap,
                          "hierarchical_allreduce": False, "hierarchical_allgather": False, "step_time_ms": ms}
                         for f, c, cap, ms in rows], columns=COLUMNS)


def test_minimal_change_keeps_the_defaults_inside_the_band():
    df = _table([(128, 1.0, 1024, 100.0), (16, 0.5, 1024, 98.0), (8, 1.0, 1024, 99.0)])
    p = minimal_change(df, DEFAULTS_0_28, 0.03)
    assert p.keep_defaults and p.config == DEFAULTS_0_28 and p.gain == pytest.approx(0.02)


def test_minimal_change_prefers_fewest_knobs_then_smallest_buffer():
    df = _table([(128, 1.0, 1024, 100.0), (16, 0.5, 1024, 90.0), (32, 1.0, 1024, 90.5),
                 (24, 1.0, 1024, 90.8), (64, 1.0, 1024, 93.0), (8, 1.0, 0, 90.1)])
    p = minimal_change(df, DEFAULTS_0_28, 0.01)
    assert not p.keep_defaults
    assert p.config.fusion_threshold_bytes == 24 * MIB and p.config.cycle_time_ms == 1.0  # one knob, 24 < 32
    assert knobs_changed(p.config, DEFAULTS_0_28) == 1
    assert p.best.fusion_threshold_bytes == 16 * MIB
    assert p.threshold_mib == (16.0, 32.0) and p.cycle_ms == (0.5, 1.0) and p.equivalent == 3


def test_minimal_change_refuses_bad_input():
    df = _table([(16, 0.5, 1024, 90.0)])
    with pytest.raises(ValueError, match="reference"):
        minimal_change(df, DEFAULTS_0_28, 0.01)
    with pytest.raises(ValueError, match="band"):
        minimal_change(_table([(128, 1.0, 1024, 1.0)]), DEFAULTS_0_28, -0.1)


# --- acceptance on the judged environments (fitted on their sweep alone) ---------------------------

def _judged(env):
    from autotuner.frameworks.horovod.fit.fitters import fit_env
    from autotuner.frameworks.horovod.fit.store import env_from_dict
    from autotuner.frameworks.horovod.readers.runs import read_env
    from autotuner.frameworks.horovod.views.accuracy import simulate_trial

    d = fit_env(read_env(RUNS / env))  # the sweep fitter reads env.toml, sweep.jsonl and timelines only
    fenv = env_from_dict(d)
    f = RUNS / env / "validation" / f"fresh-{FRESH[env]}.jsonl"
    recs, _ = parse_records(f.read_text(), f.name)
    rows = rows_from_records(recs, lambda cfg, setup: simulate_trial(fenv, RUNS / env, cfg, dict(setup)).step_time_ms)
    return rows, summary(rows, "proposal-1"), json.loads((RUNS / env / "validation" / f"pick-{FRESH[env]}.json").read_text())


#: where the acceptance is not met, and why (research/notes/fresh-environments.md section 4)
NOT_MET = {
    "fresh-poll-0.75gbit": "0.75 Gbit/s, MobileNetV2: every configuration predicted 2.7-4.8 % low and fusion off "
                           "10.9 % low (MAPE 4.2 %): the small responses cost more in training than in the sweep "
                           "at this link rate; no sweep-measured term explains it yet",
    "fresh-poll-2x1-2gbit": "two emulated hosts: MAPE 1.3 %, worst +3.1 % met; Kendall tau 0.78 over the 37 pairs "
                            "> 2 % apart, just under 0.8 (the defaults and 64 MiB / 25 ms measured 2.6-3.1 % "
                            "faster than predicted, the mid thresholds within 0.7 %)",
}


def test_every_env_named_not_met_is_judged():
    """No dead entry in :data:`NOT_MET`: each names an env the acceptance below judges."""
    judged = {e for e in JUDGED if (RUNS / e / "validation").is_dir()}
    assert set(NOT_MET) <= judged, sorted(set(NOT_MET) - judged)


@pytest.mark.parametrize("env", [e for e in JUDGED if (RUNS / e / "validation").is_dir()])
def test_judged_env_predicted_from_its_sweep_alone(env, request):
    """The protocol's acceptance: MAPE <= 3 %, worst <= 5 %, Kendall tau >= 0.8 over pairs > 2 % apart."""
    if env in NOT_MET:
        request.applymarker(pytest.mark.xfail(strict=True, raises=AssertionError, reason=NOT_MET[env]))
    rows, s, _ = _judged(env)
    assert s["mape_pct"] <= 3.0 and abs(s["worst_pct"]) <= 5.0, s
    assert s["pairs_gap"] >= 10 and s["kendall_tau_gap"] >= 0.8, s


# --- ranks sharing a host's cores --------------------------------------------------------------------

def test_cpu_share_of_the_host_local_tier():
    """min(1, c/L) / min(1, c/L_m): 4 ranks on 2 cores against a tier measured with 2 -> half the
    bandwidth; no change while every rank has a core; the one-host env's only tier on one node."""
    from autotuner.frameworks.horovod.fit.store import load_env

    two = load_env([ROOT / "autotuner" / "models"], "local-gloo-2x2-poll")
    c = two.cost
    assert c.cpu_shared(4, 2, 2, 1).intra.bandwidth_Bps == pytest.approx(c.intra.bandwidth_Bps / 2)
    assert c.cpu_shared(8, 2, 2, 1).intra.bandwidth_Bps == pytest.approx(c.intra.bandwidth_Bps / 4)
    assert c.cpu_shared(2, 2, 2, 2) is c and c.cpu_shared(1, 2, 2, 4) is c
    one = load_env([ROOT / "autotuner" / "models"], "fresh-poll-2gbit").cost
    assert one.intra is None
    assert one.cpu_shared(4, 2, 2, 1).inter.bandwidth_Bps == pytest.approx(one.inter.bandwidth_Bps / 2)
    assert one.cpu_shared(4, 2, 2, 2) is one  # several nodes: the inter tier is a network, not the host
    with pytest.raises(Exception, match=">= 1"):
        c.cpu_shared(0, 2, 2, 1)


def test_fast_and_reference_simulators_agree_on_the_cpu_shared_tier():
    from autotuner.frameworks.horovod.fit.fitters import workload_for
    from autotuner.frameworks.horovod.fit.store import load_env
    from autotuner.model.costmodel import Cluster
    from autotuner.readers.layouts import load_layout

    fenv = load_env([ROOT / "autotuner" / "models"], "local-gloo-2x2-poll")
    cl = Cluster(1, 4)
    cost = fenv.cost_for(cl)
    assert cost != fenv.cost
    L = load_layout("resnet50")
    cfgs = [DEFAULTS_0_28, Config(fusion_threshold_bytes=4 * MIB, cycle_time_ms=2.0)]
    fast = simulate_configs(L.sizes_bytes, L.ready_fraction, workload_for(0.3), cfgs, cost, cl, backend="gloo")
    ref = [simulate_step(L.sizes_bytes, L.ready_fraction, workload_for(0.3), c, cost, cl, backend="gloo").step_time_s
           for c in cfgs]
    assert fast == pytest.approx(ref, rel=1e-12)


# --- a profiled layout that differs from the env ------------------------------------------------------

def _profiled(tmp_path, device, batch):
    d = json.loads((ROOT / "tests" / "data" / "tiny_layout.json").read_text())
    d.update(device=device, batch_size=batch, forward_ms=10.0, backward_ms=20.0)
    for t in d["tensors"]:
        t.pop("ready_ms", None)
    f = tmp_path / f"tiny-{device}.json"
    f.write_text(json.dumps(d))
    return f


def test_layout_warnings_name_device_and_batch(tmp_path):
    from autotuner.frameworks.horovod.predict import layout_warnings, make_scenario

    models = [ROOT / "autotuner" / "models"]
    sc, fenv = make_scenario(models, "fresh-poll-2gbit", str(_profiled(tmp_path, "cuda", 16)))
    w = layout_warnings(sc, fenv, env_batch=32)
    assert len(w) == 2 and "profiled on cuda" in w[0] and "none (CPU ranks)" in w[0] and "batch 16" in w[1]
    sc, fenv = make_scenario(models, "fresh-poll-2gbit", str(_profiled(tmp_path, "cpu", 16)))
    w = layout_warnings(sc, fenv, env_batch=16)  # same device kind and batch; CPU compute fills the 2 cores
    assert len(w) == 1 and "computes on the CPU with 2 ranks on each host's 2 cores" in w[0]
    sc, fenv = make_scenario(models, "fresh-poll-2x1-2gbit", str(_profiled(tmp_path, "cpu", 16)))
    # one rank per emulated host: the 2 hosts share the machine's 2 cores, 1 each (counted as 2, this CPU
    # layout's cycles would go unnamed); this env's measure ran no cpu phase, so the line says so
    w = layout_warnings(sc, fenv, env_batch=16)
    assert len(w) == 1 and "with 1 rank on each host's 1 core:" in w[0] and "no cpu phase" in w[0], w
    sc, fenv = make_scenario(models, "fresh-poll-2gbit", "vit_s16", compute_ms=300)
    assert layout_warnings(sc, fenv, env_batch=64) == []  # written from published shapes: no device, no batch


def test_simulate_prints_the_device_warning_and_the_trust_line(tmp_path):
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "autotuner.cli", "simulate", "--model", str(_profiled(tmp_path, "cuda", 8)),
                        "--env", "fresh-poll-2gbit", "--json"], capture_output=True, text=True, timeout=120,
                       env={**__import__("os").environ, "COLUMNS": "80"})
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    trials = json.loads((ROOT / "autotuner" / "models" / "fresh-poll-2gbit.json").read_text())["trust"]["trials"]
    # 33 replays with Horovod's timeline (fresh-vit_s16), 30 more without (fresh-vit_s16-nt), 12 fp16 validations
    # over zero gradients (fp16-mobilenet_v2, fp16-resnet18), 9 fixed-knob trials of the head-to-head with Horovod's
    # autotune, 12 fp16 validations with gradient-like values (*-gradients), 12 more beside the fused fp16 phase
    # (*-gradients-3), 12 more with each rank's own values every step (*-gradients-4) and 6 on a layout no fp16
    # replay had used (fp16-resnet50-new): 126, less the trials of another job than predicted, which the trust block
    # leaves out (like with like): the 33 timeline replays, the 6 fp16 trials over zero gradients and the 12 fp16
    # trials of *-gradients and *-gradients-3 over the same values on every rank (their files' uncompressed
    # defaults stay): 126 - 51 = 75
    assert trials == 75
    assert d["trust"].startswith(f"checked on {trials} real trials") and d["warnings"]
    assert "warning: layout" in p.stderr and "Traceback" not in p.stderr
