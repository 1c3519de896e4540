"""DDP's host phase (:mod:`autotuner.frameworks.ddp.hostprobe`): a real job under torchrun, its record's schema, the
fit of the Reducer's host work per gradient and per bucket (:func:`autotuner.frameworks.ddp.fit.host_cost`) on the
committed records of the envs measured with it, and the answers that say whether the term is charged."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import need_module

from autotuner.errors import RunsError

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "runs"
#: the envs whose host phase ran in the same sitting as their held-out replays (every env with a ddp-host.jsonl)
HOST_ENVS = sorted(p.parent.name for p in RUNS.glob("*/ddp-host.jsonl"))


def _record(**over):
    row = {"round": 0, "tensors": 32, "mode": "plain", "cap_bytes": None, "buckets": None, "step_ms": [5.0, 5.1],
           "between_ms": [0.8, 0.9]}
    ddp = dict(row, mode="ddp", cap_bytes=4096, buckets=32, step_ms=[9.0, 8.8], between_ms=[3.0, 2.9])
    return {"ranks": 2, "tensor_bytes": 4096, "gap_us": 100.0, "steps": 4, "rows": [row, ddp], "setup": {"np": 2},
            **over}


def test_the_host_records_schema_names_what_is_wrong():
    from autotuner.frameworks.ddp.schemas import DdpHostRecord
    from autotuner.schemas import check

    check(DdpHostRecord, _record(), "host")
    bad_row = _record()
    bad_row["rows"][1]["cap_bytes"] = None  # a DDP row without its cap
    for rec, what in ((bad_row, "cap_bytes"), (_record(tensor_bytes=0), "tensor_bytes"),
                      (_record(rows=[_record()["rows"][0]]), "rows")):
        with pytest.raises(RunsError) as e:
            check(DdpHostRecord, rec, "host", RunsError)
        assert what in str(e.value) and "\n" not in str(e.value).strip()


def test_the_fit_recovers_the_terms_it_is_given():
    """Rows built from known terms (25 us per gradient, 60 us per bucket, 0.3 ms per step, copies at 2 GB/s) over
    T in {32, 128, 512} and one bucket, T/8 and T: the fit gives them back, and its range holds them."""
    from autotuner.frameworks.ddp.fit import host_cost, host_cost_term

    pt, pb, ps, bps, tb = 25e-3, 60e-3, 0.3, 2e9, 4096
    rows = []
    for rnd in range(3):
        for T in (32, 128, 512):
            base = 0.12 * T + 0.01 * rnd
            rows.append({"round": rnd, "tensors": T, "mode": "plain", "cap_bytes": None, "buckets": None,
                         "step_ms": [base, base], "between_ms": [0.025 * T, 0.025 * T]})
            for B in (1, T // 8, T):
                d = T * pt + B * pb + ps + 2 * T * tb / bps * 1e3 + 0.02 * (rnd - 1)
                rows.append({"round": rnd, "tensors": T, "mode": "ddp", "cap_bytes": tb * T // B, "buckets": B,
                             "step_ms": [base + d, base + d], "between_ms": [0.05 * T, 0.05 * T]})
    fit = host_cost([{"ranks": 2, "tensor_bytes": tb, "rows": rows}], bps)
    assert fit["per_tensor_us"] == pytest.approx(25.0, abs=0.1) and fit["per_bucket_us"] == pytest.approx(60.0, abs=0.1)
    assert fit["per_step_us"] == pytest.approx(300.0, abs=30)
    lo, hi = fit["per_tensor_range_us"]
    assert lo <= fit["per_tensor_us"] <= hi and fit["rounds"] == 3 and fit["plain_between_us"] == pytest.approx(25.0)
    term = host_cost_term(fit)
    assert term.per_tensor_s == pytest.approx(25e-6, abs=1e-7) and "host phase" in term.source
    assert host_cost([], bps) is None and host_cost_term(None) is None


@pytest.mark.skipif(not HOST_ENVS, reason="no committed env has a host phase")
@pytest.mark.parametrize("env", HOST_ENVS)
def test_the_committed_host_phases_give_the_term_their_env_charges(env):
    """Each committed host phase: its records pass their schema, DDP's rebuilt bucket counts are the probe's settings
    (one bucket, T / per_bucket, T), the fit's per-gradient term is positive and inside its range, and the env's
    answers charge exactly that term (``env_cost``'s ``host_cost``)."""
    from autotuner.frameworks.ddp.fit import host_cost
    from autotuner.frameworks.ddp.records import env_cost, read_jsonl
    from autotuner.frameworks.ddp.schemas import DdpHostRecord

    recs = read_jsonl(RUNS / env / "ddp-host.jsonl", DdpHostRecord)
    for rec in recs:
        for r in rec["rows"]:
            if r["mode"] == "ddp":
                T, per = r["tensors"], r["cap_bytes"] // rec["tensor_bytes"]
                assert r["buckets"] == -(-T // per), r
    cost, info, _ = env_cost(RUNS / env)
    fit = host_cost(recs, cost.memcpy_Bps)
    assert fit == info["host"] and fit["per_tensor_us"] > 0
    lo, hi = fit["per_tensor_range_us"]
    assert lo <= fit["per_tensor_us"] <= hi
    assert info["host_cost"].per_tensor_s == pytest.approx(fit["per_tensor_us"] * 1e-6)
    assert info["host_cost"].per_bucket_s == pytest.approx(fit["per_bucket_us"] * 1e-6)


def test_an_env_without_the_host_phase_charges_nothing_and_says_so():
    """ddp-2gbit has no ddp-host.jsonl: its answers charge no Reducer host work, and its suggestion says so once."""
    import autotuner
    from autotuner.frameworks.ddp.records import env_cost

    assert env_cost(RUNS / "ddp-2gbit")[1]["host_cost"] is None
    notes = autotuner.ddp_suggest("resnet18", "ddp-2gbit", runs_dir=RUNS).suggestion.notes
    assert sum("host work" in n for n in notes) == 1 and any("not charged" in n for n in notes)


def test_the_host_probe_refuses_bad_arguments_in_one_line():
    for args, msg in ((["--tensors", "1"], "--tensors"), (["--tensors", "x"], "--tensors"),
                      (["--per-bucket", "1"], "--per-bucket"), (["--gap-us", "-1"], "--gap-us")):
        p = subprocess.run([sys.executable, "-m", "autotuner.frameworks.ddp.hostprobe", *args], capture_output=True,
                           text=True, timeout=60)
        assert p.returncode == 2 and msg in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


@pytest.mark.real
def test_a_real_host_job_under_torchrun_gives_a_record_the_fit_reads():
    """The host phase on 2 ranks of this host, short (T in {8, 32}, 2 rounds of 2 steps): a record its schema
    accepts, every rank's step per setting, DDP's rebuilt buckets as the caps ask (one, T / 4, T), and a fit."""
    need_module("torch")
    from autotuner.frameworks.ddp.fit import host_cost
    from autotuner.frameworks.ddp.launch import run_ddp
    from autotuner.frameworks.ddp.schemas import DdpHostRecord
    from autotuner.schemas import check

    r = run_ddp("autotuner.frameworks.ddp.hostprobe", ["--tensors", "8,32", "--per-bucket", "4", "--rounds", "2",
                                                       "--steps", "2", "--gap-us", "50"], ranks_per_host=2,
                timeout_s=120)
    line = next(x for x in r.stdout.splitlines() if "AUTOTUNER_DDP_HOST " in x)
    rec = {**json.loads(line.split("AUTOTUNER_DDP_HOST ", 1)[1]), "setup": {"np": 2}}
    check(DdpHostRecord, rec, "host")
    assert rec["ranks"] == 2 and len(rec["rows"]) == 2 * 2 * 4 and all(len(x["step_ms"]) == 2 for x in rec["rows"])
    assert sorted({(x["tensors"], x["buckets"]) for x in rec["rows"] if x["mode"] == "ddp"}) == \
        [(8, 1), (8, 2), (8, 8), (32, 1), (32, 8), (32, 32)]
    fit = host_cost([rec], 2e9)
    assert fit is not None and np.isfinite(fit["per_tensor_us"]) and fit["per_tensor_us"] >= 0


@pytest.mark.skipif(not HOST_ENVS, reason="no committed env has a host phase")
def test_a_validations_compute_trials_give_the_compute_its_settings_are_predicted_from(tmp_path):
    """``ddp validate`` runs the replay without DDP once a round (``ddp`` null, label ``no DDP (compute)``): those
    trials are no setting, and the median of their steps is the compute every setting of the file is predicted from;
    the same file without them is predicted from its nominal ``compute_ms``, and the host term adds to a
    compute-bound step what its gradients and buckets cost."""
    import shutil
    import statistics

    from autotuner.frameworks.ddp.realrun import NO_DDP_LABEL
    from autotuner.frameworks.ddp.records import env_cost, read_jsonl, rows

    env = HOST_ENVS[0]
    d = RUNS / env
    cost, info, _ = env_cost(d)
    f = sorted((d / "ddp-validation").glob("*.jsonl"))[0]
    recs = read_jsonl(f)
    plain = [r["measured_step_time_ms"] for r in recs if r["ddp"] is None and r["status"] == "ok"]
    assert plain and all(r["label"] == NO_DDP_LABEL for r in recs if r["ddp"] is None)
    got = rows(d, cost, files=[f], host=info["host_cost"])
    assert got and NO_DDP_LABEL not in {r.label for r in got}
    assert all(r.predicted_compute_ms == pytest.approx(statistics.median(plain)) for r in got)
    bare = tmp_path / env
    shutil.copytree(d, bare)
    g = bare / "ddp-validation" / f.name
    g.write_text("".join(ln + "\n" for ln in f.read_text().splitlines() if '"ddp":null' not in ln.replace(" ", "")))
    nominal = rows(bare, cost, files=[g])
    assert [r.label for r in nominal] == [r.label for r in got]
    assert all(r.predicted_compute_ms == pytest.approx(r.compute_ms) for r in nominal)
    without = {r.label: r.predicted_ms for r in rows(d, cost, files=[f])}
    assert all(r.predicted_ms > without[r.label] for r in got)  # the term only adds host work
