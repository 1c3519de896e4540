"""``autotuner measure``: the allreduce sweep under real horovodrun, its records, resume, and its fit.

The real tests run Horovod 0.28.1 (Gloo) on this machine's loopback with a short sweep; the
committed environment runs/local-gloo-1gbit-sweep is the full one (docs/how-to/measure.md).
"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from autotuner.errors import ValidationError
from autotuner.frameworks.horovod import measure as M
from autotuner.frameworks.horovod.readers.sweep import (parse_burst_records, parse_cpu_records, parse_fp16_records, parse_fused_records,
                                     parse_idle_records, parse_step_records, parse_sweep_records,
                                     parse_trickle_records)
from cli_helpers import ROOT, assert_one_line_error, need_horovod, run

SHORT = dict(sizes=(1024, 4096, 65536), fusion_sizes=(65536, 262144), tiny_counts=(1, 8), unfused_sizes=(1024, 16384),
             cpu_repeats=1, trickle_repeats=1, idle_repeats=1, fp16_repeats=1, burst_repeats=1, step_repeats=1,
             mid_repeats=1, fused_repeats=1)


# --------------------------------------------------------------------------- pure parts

def test_sizes_parse_ranges_lists_and_units():
    assert M.parse_sizes("1K:8K") == (1024, 2048, 4096, 8192)
    assert M.parse_sizes("4096,1k,2M") == (1024, 4096, 2 * 2**20)
    assert M.DEFAULT_SIZES[0] == 1024 and M.DEFAULT_SIZES[-1] == 512 * 2**20 and len(M.DEFAULT_SIZES) == 20
    for bad in ("", "abc", "8K:1K", "3", "1K:", "5G"):
        with pytest.raises(ValidationError, match="--sizes"):
            M.parse_sizes(bad)


def test_tiers_one_host_and_several():
    assert M.tiers(2, "") == [M.Tier("single", 2, "localhost:2")]
    assert M.tiers(4, "a:2,b:2") == [M.Tier("intra", 2, "a:2"), M.Tier("inter", 2, "a:1,b:1")]
    assert M.tiers(3, "a,b,c") == [M.Tier("inter", 3, "a:1,b:1,c:1")]  # one slot per host: no intra tier
    for bad in ("a:x", "a:0", "a:1,a:1", ":2"):
        with pytest.raises(ValidationError, match="--hosts"):
            M.tiers(2, bad)
    with pytest.raises(ValidationError, match="slot"):
        M.tiers(5, "a:2,b:2")


def test_command_asks_exactly_the_missing_items():
    t = M.Tier("single", 2, "localhost:2")
    keys = M._expected(t, "main", (1024, 2048), (65536,), (1, 4), ())
    cmd = M.sweep_command(keys[1:], 5, 1)  # the first allreduce already recorded
    args = dict(zip(cmd[3::2], cmd[4::2]))
    assert args["--sizes"] == "2048" and args["--fusion-sizes"] == "65536" and args["--tiny-counts"] == "1,4"
    assert args["--unfused-sizes"] == ""
    assert M._expected(t, "fusion-off", (), (), (), (1024,)) == [("single", "fusion-off", "unfused", 1024, 16)]


def test_emulated_hosts_record_their_share_of_the_machine_cores(monkeypatch):
    """Emulated hosts are namespaces on this machine: each has the machine's cores divided by the
    hosts, not all of them (2 hosts on 2 cores recorded with 2 cores each would skip the CPU terms of a
    CPU layout there). A real host keeps what it has."""
    assert M.host_cores(2, None) == 2 and M.host_cores(16, 1) == 16
    assert M.host_cores(2, 2) == 1 and M.host_cores(8, 2) == 4 and M.host_cores(2, 4) == 1
    monkeypatch.setattr(M, "cores_per_host", lambda: 2)
    emulated = M.SweepSetup(np=2, hosts="10.77.0.1:1,10.77.0.2:1", bandwidth_gbit=None, repeats=5, warmup=1,
                            testbed_hosts=2, ranks_per_host=1, link_gbit=3.0)
    toml = M.env_toml("e", emulated, (2, 1), 3.0, "2 emulated hosts", "0.28.1")
    assert "\ncores_per_host = 1\n" in toml and "shared by its 2 emulated hosts" in toml
    local = M.SweepSetup(np=2, hosts="localhost:2", bandwidth_gbit=1.0, repeats=5, warmup=1)
    assert "\ncores_per_host = 2\n" in M.env_toml("e", local, (1, 2), 1.0, "loopback", "0.28.1")


def test_env_toml_names_the_stack_it_was_measured_on(monkeypatch):
    """``stack``: the machine (host name, CPU model, cores) and the software (Horovod + Gloo, torch) the ranks ran on,
    one TOML string that the env schema accepts and the fit compares (:func:`autotuner.fit.collective.borrow_fp16_sum`)."""
    import platform
    import tomllib

    from autotuner.frameworks.horovod.schemas import check_env_toml

    monkeypatch.setattr(M, "cores_per_host", lambda: 2)
    monkeypatch.setattr(M, "cpu_model", lambda: 'AMD "EPYC"')
    monkeypatch.setattr(platform, "node", lambda: "node7")
    local = M.SweepSetup(np=2, hosts="localhost:2", bandwidth_gbit=1.0, repeats=5, warmup=1)
    meta = tomllib.loads(M.env_toml("e", local, (1, 2), 1.0, "loopback", "0.28.1"))
    assert meta["stack"].startswith('node7: AMD "EPYC", 2 cores; Horovod 0.28.1 + Gloo; torch ')
    check_env_toml(meta, "env.toml")


def test_committed_one_rank_per_host_testbeds_record_one_core_each():
    """The committed sweeps on 2 emulated hosts x 1 rank (this machine's 2 cores) say 1 core per host,
    in env.toml and in the shipped model, so a CPU layout's cycles are charged there."""
    from autotuner.frameworks.horovod.fit.store import load_env

    for env in ("fresh-2x1-5gbit", "fresh-poll-2x1-2gbit", "fresh-poll-2x1-3gbit"):
        assert "\ncores_per_host = 1\n" in (ROOT / "runs" / env / "env.toml").read_text(), env
        assert load_env(ROOT / "autotuner" / "models", env).cores_per_host == 1, env


def test_stats():
    s = M.stats([1.0, 2.0, 3.0, 10.0])
    assert s == {"mean_ms": 4.0, "median_ms": 2.5, "iqr_ms": pytest.approx(np.percentile([1, 2, 3, 10], 75) - 1.75),
                 "n": 4}


def test_bad_records_are_named_and_skipped():
    good = {"phase": "allreduce", "tier": "single", "job": "main", "cache": True, "bytes": 1024, "tensors": 1,
            "ranks": 2, "times_ms": [1.0], "mean_ms": 1.0, "median_ms": 1.0, "iqr_ms": 0.0, "n": 1, "part": "single-main"}
    text = "\n".join([json.dumps(good), "{cut", json.dumps({**good, "bytes": -1}), json.dumps({**good, "phase": "x"})])
    recs, problems = parse_sweep_records(text, "sweep.jsonl")
    assert len(recs) == 1 and len(problems) == 3
    assert problems[0].startswith("sweep.jsonl:2:") and "sweep.jsonl:3" in problems[1] and "bytes" in problems[1]


@pytest.mark.parametrize("args, needle", [
    (["--sizes", "12Q"], "--sizes"),
    (["--sizes", "8K:1K"], "--sizes"),
    (["--hosts", "a:zero"], "--hosts"),
    (["--np", "0"], "--np"),
    (["--env", "../x"], "--env"),
    (["--cpu-rounds", "-1"], "--cpu-rounds"),
    (["--trickle-rounds", "-2"], "--trickle-rounds"),
    (["--idle-rounds", "-1"], "--idle-rounds"),
    (["--fp16-rounds", "-1"], "--fp16-rounds"),
    (["--mid-rounds", "-1"], "--mid-rounds"),
])
def test_bad_input_one_line_exit_2(tmp_path, args, needle):
    base = {"--env": "e", "--runs-dir": str(tmp_path)}
    argv = ["measure"]
    for k, v in base.items():
        if k not in args:
            argv += [k, v]
    assert_one_line_error(run(*argv, *args), needle)


def test_measure_says_it_fits_nothing_and_names_the_fit_to_run():
    """``measure`` does not run ``autotuner fit`` at the end; it prints the command instead
    (``next: autotuner fit <runs>``, autotuner.cli.horovod_realrun.measure_cmd). Its help and the measure how-to page say that."""
    p = run("measure", "--help")
    assert p.returncode == 0 and "fits nothing" in p.stdout and "autotuner fit" in p.stdout
    doc = (ROOT / "docs" / "how-to" / "measure.md").read_text()
    assert "fits nothing" in doc and "then `autotuner fit`" not in doc
    src = (ROOT / "autotuner" / "cli" / "horovod_realrun.py").read_text()
    assert 'out.print(f"next: autotuner fit {summary[\'runs_dir\']}"' in src


# --------------------------------------------------------------------------- real horovodrun

@pytest.mark.real
@pytest.mark.long
def test_short_sweep_records_resumes_and_fits(tmp_path):
    need_horovod()
    env_dir = tmp_path / "runs" / "sweep-test"
    setup = M.SweepSetup(np=2, hosts="", bandwidth_gbit=None, repeats=2, warmup=1)
    seen = []
    s1 = M.run_measure(env_dir, setup, on_item=seen.append, timeout_s=300, **SHORT)
    want = 3 + 2 + 2 + 2 + 2  # allreduce, fusion, negotiation (cache on), unfused, negotiation (cache off)
    assert s1["items_total"] == want and s1["items_new"] == want == len(seen)
    recs, problems = parse_sweep_records((env_dir / "sweep.jsonl").read_text(), "sweep.jsonl")
    assert problems == [] and len(recs) == want
    assert {r["job"] for r in recs} == {"main", "fusion-off", "cache-off"}
    for r in recs:
        assert r["n"] == 2 == len(r["times_ms"]) and r["median_ms"] > 0 and r["ranks"] == 2
    assert sorted(p.name.rsplit("-", 1)[0] for p in (env_dir / "timelines").glob("*.json.gz")) == [
        "single-cache-off", "single-fusion-off", "single-main"]
    # the cpu phase: one round of jobs: idle cycles of 1 ms and 100 ms, then each stream beside compute and alone
    crecs, problems = parse_cpu_records((env_dir / "cpu.jsonl").read_text(), "cpu.jsonl")
    assert problems == [] and [r["stream"] for r in crecs] == [
        "idle", "idle", "4MiBx1", "4MiBx1-alone", "64KiBx16", "64KiBx16-alone"]
    assert [r["cycle_time_ms"] for r in crecs] == [1.0, 100.0, 1.0, 1.0, 1.0, 1.0]
    assert all(r["ranks"] == 2 and r["unit_ms_max"] >= r["unit_ms"] > 0 and r["tier"] == "single" for r in crecs)
    streams = [r for r in crecs if r["stream"] != "idle"]
    assert all(r["response_ms"] > 0 and (env_dir / r["timeline"]).exists() for r in streams)
    assert [r["compute"] for r in streams] == [True, False, True, False]
    assert s1["cpu"]["jobs_new"] == 6
    # the trickle phase: one job per cycle time, its timeline kept
    trecs, problems = parse_trickle_records((env_dir / "trickle.jsonl").read_text(), "trickle.jsonl")
    assert problems == [] and [r["cycle_time_ms"] for r in trecs] == [1.0, 5.0] and s1["trickle"]["jobs_new"] == 2
    assert all((env_dir / r["timeline"]).exists() and r["gap_ms"] == 1.5 * r["cycle_time_ms"] for r in trecs)
    # the idle phase: one job, its timeline kept
    irecs, problems = parse_idle_records((env_dir / "idle.jsonl").read_text(), "idle.jsonl")
    assert problems == [] and len(irecs) == 1 == s1["idle"]["jobs_new"] and irecs[0]["sizes"] == [4096, 16384, 65536]
    assert (env_dir / irecs[0]["timeline"]).exists() and irecs[0]["ranks"] == 2
    # the burst phase: one job without a timeline, 1 and 32 small responses at once per size, wall times
    brecs, problems = parse_burst_records((env_dir / "burst.jsonl").read_text(), "burst.jsonl")
    assert problems == [] and len(brecs) == 1 == s1["burst"]["jobs_new"] and "timeline" not in brecs[0]
    assert {(b, c) for b, c, _ in brecs[0]["wall_ms"]} == {(b, c) for b in (4096, 16384, 65536) for c in (1, 32)}
    assert not (env_dir / "burst-timelines").exists()
    # the mid-size burst phase: one job of the same probe at 256 KiB-4 MiB, 1 and 8 at once, no timeline
    mrecs, problems = parse_burst_records((env_dir / M.MID_RECORDS).read_text(), M.MID_RECORDS)
    assert problems == [] and len(mrecs) == 1 == s1["mid"]["jobs_new"] and "timeline" not in mrecs[0]
    assert {(b, c) for b, c, _ in mrecs[0]["wall_ms"]} == {(b, c) for b in M.MID_SIZES for c in M.MID_COUNTS}
    # the step phase: one round of replay jobs of its synthetic layout, defaults, fusion off, cache off at 100 ms of
    # compute, then defaults and fusion off at 300 ms, no timeline
    srecs, problems = parse_step_records((env_dir / "step.jsonl").read_text(), "step.jsonl")
    assert problems == [] and [r["job"] for r in srecs] == ["defaults", "fusion-off", "cache-off", "defaults",
                                                            "fusion-off"]
    assert s1["step"]["jobs_new"] == 5 and all("timeline" not in r and r["ranks"] == 2 for r in srecs)
    assert all(r["layout"] == "step-probe/1" and len(r["step_times_ms"]) == 8 for r in srecs)
    assert sorted((r["compute_ms"], r["job"]) for r in srecs) == [(100.0, "cache-off"), (100.0, "defaults"),
                                                                  (100.0, "fusion-off"), (300.0, "defaults"),
                                                                  (300.0, "fusion-off")]
    assert srecs[1]["config"]["fusion_threshold_bytes"] == 0 and srecs[2]["config"]["cache_capacity"] == 0
    # the fp16 phase: one job, float32 and float16 allreduces of the same bytes and the casts
    frecs, problems = parse_fp16_records((env_dir / "fp16.jsonl").read_text(), "fp16.jsonl")
    assert problems == [] and len(frecs) == 1 == s1["fp16"]["jobs_new"] and frecs[0]["ranks"] == 2
    assert len(frecs[0]["fp16_ms"]) == len(frecs[0]["sizes"]) == 3 and len(frecs[0]["casts"]) == 3
    # the fused phase: one job at Horovod's defaults, no timeline, lone and fused responses of each size
    urecs, problems = parse_fused_records((env_dir / M.FUSED_RECORDS).read_text(), M.FUSED_RECORDS)
    assert problems == [] and len(urecs) == 1 == s1["fused"]["jobs_new"] and "timeline" not in urecs[0]
    # a re-run measures nothing again
    s2 = M.run_measure(env_dir, setup, timeout_s=300, **SHORT)
    assert s2["items_new"] == 0 and s2["items_recorded"] == want and s2["cpu"]["jobs_new"] == 0
    assert s2["trickle"]["jobs_new"] == 0 and s2["idle"]["jobs_new"] == 0 and s2["fp16"]["jobs_new"] == 0
    assert s2["burst"]["jobs_new"] == 0 and s2["step"]["jobs_new"] == 0 and s2["mid"]["jobs_new"] == 0
    # another setup in the same environment is refused
    with pytest.raises(ValidationError, match="another setup"):
        M.run_measure(env_dir, M.SweepSetup(np=2, hosts="", bandwidth_gbit=None, repeats=3, warmup=1), **SHORT)
    # fit reads it like any other environment
    p = run("fit", str(tmp_path / "runs"), "--out", str(tmp_path / "models"))
    assert p.returncode == 0, p.stderr
    d = json.loads((tmp_path / "models" / "sweep-test.json").read_text())
    assert d["fit"]["form"].endswith("from an allreduce sweep") and d["workloads"] == {}
    assert d["cost_model"]["inter"]["bandwidth_gbps"] > 0 and d["fit"]["host_passes"]["n_memcpy"] >= 3
    # one pair is fewer than the fit needs for the per-cycle compute cost: said, not fitted
    assert d["fit"]["negotiation"]["cpu"]["cpu_us"] is None and "fewer than" in d["fit"]["negotiation"]["cpu"]["note"]
    assert "compute_delay" not in d["cost_model"]
    # the idle phase's job is read and recorded (not a term of the cost model)
    # the burst phase's job is read and recorded (wall clock, no timeline; not a term of the cost model)
    burst = d["fit"]["small_responses"]["burst"]
    assert burst["jobs"] == 1 and len(burst["points"]) == 3 and burst["charged"] is False
    assert burst["alpha_us"] is not None and burst["alpha_us"] >= 0
    # the mid-size phase's one job is read, never charged (fewer than 3 jobs, or no knee in so short a sweep)
    mid = d["fit"]["small_responses"]["mid"]
    assert mid["jobs"] == 1 and mid["charged"] is False and mid["note"], mid
    # the step phase's one round is fewer than the fit charges: recorded, said, the timelines' price kept
    step = d["fit"]["small_responses"]["step"]
    assert step["fixed_ms"] is None and "fewer than 3" in step["note"] and step["charged"] is False
    assert len(step["rounds"]) == 1 and step["cache_off_delta_ms"] is not None
    assert "long" not in step and "after_backward_us" not in d["cost_model"]
    idle = d["fit"]["idle_response"]
    assert idle["up_to_bytes"] == 65536 and idle["per_response_us"] > 0 and idle["jobs"] == 1
    assert "idle_response" not in d["cost_model"]
    # a sweep env has no workload: simulate takes --compute-ms
    p = run("simulate", "--model", "resnet50", "--env", "sweep-test", "--model-dir", str(tmp_path / "models"),
            "--compute-ms", "100")
    assert p.returncode == 0, p.stderr


@pytest.mark.real
def test_killed_sweep_resumes_where_it_stopped(tmp_path):
    need_horovod()
    runs = tmp_path / "runs"
    argv = [sys.executable, "-m", "autotuner.cli", "measure", "--env", "k", "--runs-dir", str(runs),
            "--sizes", "1K:256K", "--repeats", "2", "--cpu-rounds", "0", "--trickle-rounds", "0", "--idle-rounds", "0",
            "--fp16-rounds", "0", "--burst-rounds", "0", "--step-rounds", "0", "--mid-rounds", "0",
            "--fused-rounds", "0"]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    rec = runs / "k" / "sweep.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not rec.exists() or len(rec.read_text().splitlines()) < 3):
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)  # the CLI and everything it started
    proc.wait()
    before = len(rec.read_text().splitlines())
    assert 3 <= before
    time.sleep(1)
    p = subprocess.run(argv + ["--json"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    recs, problems = parse_sweep_records(rec.read_text(), "sweep.jsonl")
    keys = [M.item_key(r) for r in recs]
    assert len(keys) == len(set(keys)) == s["items_total"] == s["items_recorded"]
    assert s["items_new"] == s["items_total"] - before
    # the killed job's timeline was kept too (gzipped by the re-run), beside the re-run's own
    assert len(list((runs / "k" / "timelines").glob("single-main-*.json.gz"))) == 2


# --------------------------------------------------------------------------- the committed sweep

def _sweep_predicts_training():
    """The committed sweep-only model (runs/local-gloo-1gbit-sweep, fitted into autotuner/models)
    against the committed ResNet50 replay trials of runs/local-gloo-1gbit:
    holdout-sweep and the three validate runs (resnet50, -replication, -replication-2)."""
    from autotuner.frameworks.horovod.environments import accuracy_table as accuracy
    from autotuner.paths import shipped_models

    d = accuracy(ROOT / "runs", shipped_models(), "local-gloo-1gbit", cost_model="local-gloo-1gbit-sweep")
    files = ("holdout-sweep.jsonl", "resnet50.jsonl", "resnet50-replication.jsonl", "resnet50-replication-2.jsonl")
    rows = [c for c in d["cases"] if c["quantity"].endswith("step time (ms)")
            and any(f"/validation/{f} " in c["source"] for f in files)]
    assert len(rows) == 19 and not any(c["used_by_fit"] for c in rows)
    return rows


def test_committed_sweep_alone_predicts_fused_training_within_5_percent_but_one_named_row():
    rows = [c for c in _sweep_predicts_training() if "(0 MiB," not in c["quantity"]]
    assert len(rows) == 18
    bad = {(c["quantity"], c["source"].split("/")[-1].split(" ")[0]): c["error_percent"] for c in rows
           if abs(c["error_percent"]) > 5}
    # one row, a job that ran Horovod's timeline (its writer costs a step 3-10 %), is predicted 5.3 % fast: the sweep
    # env's line below its 16 MiB knee is bounded (fit.sweep.bound_below_knee), then moved 1.4 % cheaper by its
    # mid-size phase, whose 1-4 MiB records lie on one side of it
    named = {("resnet50 proposal-3 (16 MiB, 10 ms, timeline ran): step time (ms)", "holdout-sweep.jsonl"): (-5.5, -5.0)}
    assert set(bad) == set(named), bad
    assert all(lo <= bad[k] <= hi for k, (lo, hi) in named.items()), bad


@pytest.mark.xfail(strict=True, raises=AssertionError,
                   reason="fusion off: ResNet50's 161 small responses cost ~4 ms each in training and ~0.5 ms in the "
                   "sweep; the cost depends on how tensors trickle in (-9.3 %)")
def test_committed_sweep_alone_predicts_unfused_training_within_5_percent():
    (row,) = [c for c in _sweep_predicts_training() if "(0 MiB," in c["quantity"]]  # a ValueError fails the xfail
    assert abs(row["error_percent"]) <= 5, row
