"""The committed two-host environment runs/local-gloo-2x2: fitted from its own sweep only, and
its real trials (records under runs/local-gloo-2x2/validation/) against the model.

No Horovod needed: these read committed records of real runs. Figures: autotuner/frameworks/horovod/views/emulated_2x2.py,
research/notes/validation.md "Two emulated hosts".
"""
import json
from pathlib import Path

import numpy as np
import pytest

from autotuner.frameworks.horovod.fit.fitters import fit_env
from autotuner.frameworks.horovod.readers.runs import parse_records, read_env

from refit import assert_refit_close

ROOT = Path(__file__).resolve().parents[1]
ENV = ROOT / "runs" / "local-gloo-2x2"
MODEL = ROOT / "autotuner" / "models" / "local-gloo-2x2.json"

from autotuner.frameworks.horovod.fit.fitters import workload_for  # noqa: E402
from autotuner.frameworks.horovod.knobs import Config  # noqa: E402
from autotuner.model.costmodel import Cluster  # noqa: E402
from autotuner.frameworks.horovod.simulator import simulate_step  # noqa: E402
from autotuner.readers.layouts import load_layout  # noqa: E402
from autotuner.frameworks.horovod.views.emulated_2x2 import Figures, predict  # noqa: E402

FIG = Figures(ENV / "validation")


@pytest.fixture(scope="module")
def fenv():
    from autotuner.frameworks.horovod.fit.store import load_env

    return load_env(ROOT / "autotuner" / "models", "local-gloo-2x2")


@pytest.fixture(scope="module")
def knobs(fenv):
    return {r["label"]: r for r in FIG.knob_table(fenv)["rows"]}


def test_fitted_from_its_own_sweep_alone():
    """Both tiers come from the env's measure sweep: inter from one rank per host (2 ranks), intra from
    the 2 ranks of one host; a refit of the committed folder gives the shipped cost model."""
    d = fit_env(read_env(ENV))
    shipped = json.loads(MODEL.read_text())
    assert_refit_close(d["cost_model"], shipped["cost_model"])  # tests/refit.py: 1e-4 relative, and why
    assert (d["cluster"]["nodes"], d["cluster"]["gpus_per_node"]) == (2, 2)
    f = d["fit"]
    assert f["tier"] == "inter" and f["p"] == 2 and f["other_tiers"]["intra"]["p"] == 2
    assert sorted(f["timelines"]) == sorted(f"timelines/{t}-{j}-0.json.gz" for t in ("inter", "intra")
                                            for j in ("main", "fusion-off", "cache-off"))
    # the intra tier (one host's loopback) is several times faster than the 1 Gbit/s link
    assert d["cost_model"]["intra"]["bandwidth_gbps"] > 4 * d["cost_model"]["inter"]["large_bandwidth_gbps"]
    assert 0.7 < d["cost_model"]["inter"]["large_bandwidth_gbps"] < 1.0


def _recorded_predictions(fig, fenv, env_dir, every=lambda r: True):
    """(file, record, the model's prediction for the record's shape) for every successful fixed-
    configuration trial under ``env_dir/validation``; every record (failed ones too) must satisfy
    ``every`` and every file must parse without problems."""
    from dataclasses import replace

    # the trials ran before the sweep's busy-cycle negotiation and the ranks' share of a host's
    # cores entered the model: their recorded predictions are the shipped model's without
    neg = replace(fenv.cost.negotiation, busy_s=None, nocache_s=None)
    cl = {k: v for k, v in fenv.raw["cluster"].items() if k != "cores_per_host"}
    fenv = replace(fenv, cost=replace(fenv.cost, negotiation=neg), raw={**fenv.raw, "cluster": cl})
    # nor the bound on the line below the knee (sweep.bound_below_knee: local-gloo-2x2-poll's spans there
    # gave 88 Gbit/s over a 1 Gbit/s link): the line as its sweep fitted it
    borrowed = ((fenv.raw.get("fit") or {}).get("piecewise") or {}).get("small", {}).get("per_byte_borrowed")
    if borrowed:
        from autotuner.model.costmodel import GBIT

        inter = replace(fenv.cost.inter, bandwidth_Bps=borrowed["fitted_busbw_gbps"] * GBIT)
        fenv = replace(fenv, cost=replace(fenv.cost, inter=inter))
    for f in sorted((env_dir / "validation").glob("*.jsonl")):
        recs, problems = parse_records(f.read_text(), f.name)
        assert problems == []
        for r in recs:
            assert every(r), (f.name, r["trial"])
            if r["status"] != "ok" or r.get("config") is None:
                continue
            s = r["setup"]
            cfg = Config.from_dict(r["config"])
            yield f, r, predict(fenv, s["model"], cfg, (s["testbed_hosts"], s["ranks_per_host"]), s["compute_ms"])


def test_every_trials_recorded_prediction_is_the_shipped_model_without_its_later_terms(fenv):
    """The prediction each record carries (made by validate when it ran) is the shipped model's for that trial's
    testbed shape (2x2, and 2x1 / 4x1 / 1x4 in the topology runs) once the terms that entered the model after the
    trials ran are taken out (:func:`_recorded_predictions`: the busy-cycle negotiation, the ranks' share of a
    host's cores, the bound on the line below the knee): the package still reproduces what validate predicted."""
    n = 0
    for f, r, pred in _recorded_predictions(FIG, fenv, ENV):
        s = r["setup"]
        assert pred == pytest.approx(r["predicted_step_time_ms"], rel=1e-6), (f.name, r["trial"])
        assert s["np"] == s["testbed_hosts"] * s["ranks_per_host"] and s["link_gbit"] == 1.0
        n += 1
    assert n >= 18 + 2 * 9


#: configurations whose 2x2 step the model misses by more than 5 %, and why (research/notes/validation.md)
SMALL = ("many small responses: at 4 ranks sharing this machine's 2 cores a small allreduce costs several times "
         "what the 2-rank sweep measured (the testbed's capacity and wait-mode experiments)")
MISSES = {"proposal-1": SMALL, "proposal-7": SMALL, "proposal-6": SMALL,
          "proposal-5": "cache off at a 25 ms cycle: per-tensor negotiation and per-response latency fitted at "
                        "2 ranks, charged at 4 (not identifiable from a 2-host sweep)"}


#: the knob sweep's configurations
LABELS = [f"proposal-{i}" for i in range(1, 9)] + ["default"]


def test_2x2_knob_sweep_ran_each_configuration_twice_and_names_only_its_own_misses(knobs):
    """The records hold every configuration of :data:`LABELS`, 2 repeats each, and each of :data:`MISSES` names one
    of them (no dead entry)."""
    assert set(knobs) == set(LABELS) and all(r["repeats"] == 2 for r in knobs.values()), knobs
    assert set(MISSES) <= set(LABELS), sorted(set(MISSES) - set(LABELS))


@pytest.mark.parametrize("label", LABELS)
def test_2x2_knob_sweep_within_5_percent(knobs, label, request):
    if label in MISSES:
        request.applymarker(pytest.mark.xfail(strict=True, raises=AssertionError, reason=MISSES[label]))
    assert abs(knobs[label]["error_pct"]) <= 5, knobs[label]


def test_2x2_knob_sweep_spans_the_knob_ranges(knobs):
    rows = list(knobs.values())
    assert min(r["fusion_mib"] for r in rows) == 0 and max(r["fusion_mib"] for r in rows) == 256
    assert min(r["cycle_ms"] for r in rows) == 1 and max(r["cycle_ms"] for r in rows) == 50
    assert {r["cache"] for r in rows} == {True, False} and len(rows) >= 6


def test_hierarchical_flags_change_no_prediction_on_gloo_2x2(knobs):
    """Defaults with --hierarchical-allreduce --hierarchical-allgather on 2 hosts x 2 ranks (size 4 !=
    local size 2, so Horovod does not drop them for being on one host): Gloo ignores them, and the model predicts
    the plain defaults' step."""
    on, off = knobs["proposal-8"], knobs["default"]
    assert on["hierarchical"] and (on["fusion_mib"], on["cycle_ms"], on["cache"]) == (128, 1, True)
    assert on["predicted_ms"] == off["predicted_ms"]


def test_suggest_on_2x2_never_proposes_a_knob_gloo_ignores(fenv):
    for m in ("resnet50", "bert_medium"):
        picks = json.loads((ENV / "validation" / f"pick-{m}.json").read_text())["proposals"]
        assert picks and not any(p["config"]["hierarchical_allreduce"] for p in picks)
        s = FIG.suggest_table(fenv, m)
        assert s["proposal-1"]["predicted_ms"] <= s["default"]["predicted_ms"]


@pytest.fixture(scope="module")
def topo(fenv):
    return {(r["model"], r["shape"], r["label"]): r for r in FIG.topo_table(fenv)["rows"]}


OVERSUBSCRIBED = ("4 ranks share this machine's 2 cores (every emulated host runs on them): each rank's waiter "
                  "spins (horovod/torch/mpi_ops_v2.cc WaitAndClear), a small allreduce costs 5-15x the 2-rank "
                  "sweep's (runs/local-gloo-2x2/validation/testbed-capacity.json); the 2x2 fit cannot see it")
#: the topology what-ifs the model misses by more than 10 %, as (model, shape, label): :data:`OVERSUBSCRIBED`
TOPOLOGY_MISSES = {(m, "4x1", label) for m in ("resnet50", "bert_medium") for label in ("default", "proposal-1")} \
    | {("bert_medium", "1x4", "default")}


def test_every_named_topology_miss_is_a_what_if_that_ran(topo):
    """No dead entry in :data:`TOPOLOGY_MISSES`: each names a (model, shape, label) the records hold."""
    assert TOPOLOGY_MISSES <= set(topo), sorted(TOPOLOGY_MISSES - set(topo))


@pytest.mark.parametrize("shape", ["2x1", "4x1", "1x4"])
@pytest.mark.parametrize("model", ["resnet50", "bert_medium"])
@pytest.mark.parametrize("label", ["default", "proposal-1"])
def test_topology_what_if_within_10_percent(topo, shape, model, label, request):
    if (model, shape, label) in TOPOLOGY_MISSES:
        request.applymarker(pytest.mark.xfail(strict=True, raises=AssertionError, reason=OVERSUBSCRIBED))
    r = topo[(model, shape, label)]
    assert abs(r["error_pct"]) <= 10, r


def test_one_host_of_four_ranks_is_cpu_bound_arithmetic(fenv, topo):
    """1x4 on one emulated host: the intra-node tier was measured with 2 ranks on 2 cores (one core
    each); with 4 ranks each has half a core, and a CPU-bound loopback collective runs at half the
    rate. That one factor (not fitted: cores / ranks) brings ResNet50's 1x4 prediction within 5 %."""
    from dataclasses import replace as dc_replace

    from autotuner.frameworks.horovod.knobs import DEFAULTS_0_28

    L = load_layout("resnet50")
    cost = dc_replace(fenv.cost, intra=fenv.cost.intra.scaled((2 / 4) / (2 / 2)))
    assert fenv.cost_for(Cluster(1, 4)) == cost  # the model's own term is this arithmetic
    assert fenv.cost_for(Cluster(2, 2)) == fenv.cost and fenv.cost_for(Cluster(4, 1)) == fenv.cost
    pred = simulate_step(L.sizes_bytes, L.ready_fraction, workload_for(0.3), DEFAULTS_0_28, cost,
                             Cluster(1, 4), backend="gloo").step_time_ms
    for label in ("default", "proposal-1"):
        meas = topo[("resnet50", "1x4", label)]["measured_ms"]
        assert abs(pred - meas) / meas <= 0.05, (label, pred, meas)


# --------------------------------------------------------------------------- runs/local-gloo-2x2-poll
# The same cluster measured and trained with polling waits (measure --wait sleep, validate
# --wait sleep): each rank's waiter sleeps instead of spinning on cores the emulated hosts
# share, as on hosts with their own cores.

POLL = ROOT / "runs" / "local-gloo-2x2-poll"
FIGP = Figures(POLL / "validation")


@pytest.fixture(scope="module")
def pfenv():
    from autotuner.frameworks.horovod.fit.store import load_env

    return load_env(ROOT / "autotuner" / "models", "local-gloo-2x2-poll")


def test_poll_env_fitted_from_its_own_polling_sweep():
    d = fit_env(read_env(POLL))
    assert_refit_close(d["cost_model"],
                       json.loads((ROOT / "autotuner" / "models" / "local-gloo-2x2-poll.json").read_text())["cost_model"])
    lines = [json.loads(ln) for ln in (POLL / "sweep.jsonl").read_text().splitlines()]
    assert lines and all(r["setup"]["wait"] == "sleep" and r["setup"]["testbed_hosts"] == 2 for r in lines)
    assert 0.85 < d["cost_model"]["inter"]["large_bandwidth_gbps"] < 0.95


def test_poll_trials_ran_polling_waits_and_carry_the_shipped_models_prediction_without_its_later_terms(pfenv):
    """Every record of runs/local-gloo-2x2-poll replayed with polling waits, and its recorded prediction is the
    shipped model's for its shape without the terms added after it ran (:func:`_recorded_predictions`)."""
    n = 0
    for f, r, pred in _recorded_predictions(FIGP, pfenv, POLL, every=lambda r: r["setup"]["replay_wait"] == "sleep"):
        assert pred == pytest.approx(r["predicted_step_time_ms"], rel=1e-6), (f.name, r["trial"])
        n += 1
    assert n >= 18 + 2 * 9 + 24


@pytest.fixture(scope="module")
def pknobs(pfenv):
    return {r["label"]: r for r in FIGP.knob_table(pfenv)["rows"]}


@pytest.mark.parametrize("label", [f"proposal-{i}" for i in range(1, 9)] + ["default"])
def test_poll_2x2_knob_sweep_within_5_percent(pknobs, label):
    r = pknobs[label]
    assert r["repeats"] == 2 and abs(r["error_pct"]) <= 5, r


@pytest.fixture(scope="module")
def ptopo(pfenv):
    return {(r["model"], r["shape"], r["label"]): r for r in FIGP.topo_table(pfenv)["rows"]}


@pytest.mark.parametrize("shape", ["2x1", "4x1", "1x4"])
@pytest.mark.parametrize("model", ["resnet50", "bert_medium"])
@pytest.mark.parametrize("label", ["default", "proposal-1"])
def test_poll_topology_what_if_within_10_percent(ptopo, shape, model, label):
    """1x4: the host-local tier at the ranks' share of the env's recorded
    cores (:meth:`autotuner.model.costmodel.CostModel.cpu_shared`; was -30 to -34 %)."""
    r = ptopo[(model, shape, label)]
    assert abs(r["error_pct"]) <= 10, r


def test_poll_one_host_of_four_ranks_is_cpu_bound_arithmetic(pfenv, ptopo):
    """1x4 with polling waits: the loopback tier at half a core per rank (cores / ranks = 2/4 against
    the sweep's 2/2, not fitted) predicts both models within 5 %."""
    from dataclasses import replace as dc_replace

    from autotuner.frameworks.horovod.knobs import DEFAULTS_0_28

    cost = dc_replace(pfenv.cost, intra=pfenv.cost.intra.scaled(0.5))
    assert pfenv.cost_for(Cluster(1, 4)) == cost  # the model's own term is this arithmetic
    for model in ("resnet50", "bert_medium"):
        L = load_layout(model)
        pred = simulate_step(L.sizes_bytes, L.ready_fraction, workload_for(0.3), DEFAULTS_0_28, cost,
                                  Cluster(1, 4), backend="gloo").step_time_ms
        for label in ("default", "proposal-1"):
            meas = ptopo[(model, "1x4", label)]["measured_ms"]
            assert abs(pred - meas) / meas <= 0.05, (model, label, pred, meas)
