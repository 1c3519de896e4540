"""DDP under real torchrun: the replay workload's output contract, DDP's own rebuilt buckets against the
Reducer simulator's, and the committed DDP environments' replays against their predictions from the sweep alone."""
from __future__ import annotations

import functools
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import run

from autotuner.frameworks.ddp.knobs import DdpConfig
from autotuner.frameworks.ddp.launch import run_ddp
from autotuner.frameworks.ddp.records import env_cost, read_jsonl, rows
from autotuner.frameworks.ddp.reducer import assign_buckets
from autotuner.readers.layouts import load_layout, load_recorded_layout
from autotuner.readers.replay_output import parse_output

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "runs"
TINY = ROOT / "tests" / "data" / "tiny_layout.json"
DDP_ENVS = sorted(p.parent.name for p in RUNS.glob("*/ddp-sweep.jsonl"))
#: envs whose only validations ran a user's script (examples/train_ddp.py), not the replay: the cpu phase's check
SCRIPT_ONLY_ENVS = {"ddp-3gbit", "ddp-2x1-2gbit"}


# tests marked `real` start real horovodrun/torchrun jobs (or time this machine): alone under pytest-xdist (conftest.py)


def _rebuilt(layout, cfg: DdpConfig) -> list[int]:
    order = np.argsort(layout.ready_fraction, kind="stable")
    b, _ = assign_buckets(layout.sizes_bytes, layout.dtypes, cfg.rebuild_limits(), order)
    return [int(np.asarray(layout.sizes_bytes)[list(x)].sum()) for x in b]


@pytest.mark.real
def test_a_real_ddp_replay_under_torchrun_rebuilds_the_buckets_the_simulator_does():
    """2 ranks on this host, the tiny layout (1.2 MB), 0.2 MiB caps: the result line parses as a replay's and DDP's
    logging data gives the rebuilt bucket sizes the simulator assigns; the first iteration is reported apart."""
    r = run_ddp("autotuner.frameworks.ddp.replay", ["--model", str(TINY), "--compute-ms", "30", "--steps", "3",
                                                    "--warmup", "2", "--bucket-cap-mb", "0.2"],
                ranks_per_host=2, timeout_s=120)
    parsed = parse_output(r.stdout)  # the result line, whatever the teardown's exit status
    assert len(parsed.step_times_ms) == 3 and parsed.extra["framework"] == "ddp", (r.returncodes, r.stderr[-800:])
    L = load_layout(str(TINY))
    assert parsed.extra["buckets"] == _rebuilt(L, DdpConfig(bucket_cap_mb=0.2))
    assert parsed.extra["first_step_ms"] > 0 and parsed.extra["ddp"]["bucket_cap_mb"] == 0.2


@pytest.mark.parametrize("args, msg", [(["--model", "nope"], "unknown model"),
                                       (["--model", "resnet18", "--bucket-cap-mb", "0"], "bucket_cap_mb"),
                                       (["--model", "resnet18", "--bucket-cap-mb-list", "1,x"], "error"),
                                       (["--model", "resnet18", "--warmup", "0"], "--warmup")])
def test_the_replay_refuses_bad_arguments_in_one_line(args, msg):
    p = subprocess.run([sys.executable, "-m", "autotuner.frameworks.ddp.replay", *args], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 2 and msg in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


@pytest.mark.real
def test_a_real_burst_job_under_torchrun_gives_a_record_the_fit_reads():
    """The burst phase (:mod:`autotuner.frameworks.ddp.burstprobe`) on 2 ranks of this host, small: one size, 4 calls,
    2 rounds: a record its schema accepts, every lone call and one back-to-back time per round, positive, and one
    job's raw saving for the fit (the clipping is :func:`test_the_queued_saving_from_burst_records`'s)."""
    from autotuner.frameworks.ddp.fit import queued_saving
    from autotuner.model.costmodel import Tier
    from autotuner.schemas import check
    from autotuner.frameworks.ddp.schemas import DdpBurstRecord

    r = run_ddp("autotuner.frameworks.ddp.burstprobe", ["--sizes", "65536", "--count", "4", "--rounds", "2"],
                ranks_per_host=2, timeout_s=120)
    line = next(x for x in r.stdout.splitlines() if "AUTOTUNER_DDP_BURST " in x)
    rec = {**json.loads(line.split("AUTOTUNER_DDP_BURST ", 1)[1]), "setup": {"np": 2}}
    check(DdpBurstRecord, rec, "burst")
    assert rec["sizes"] == [65536] and len(rec["lone_ms"][0]) == 8 and len(rec["burst_ms"][0]) == 2
    q = queued_saving([rec], Tier(5e-4, 1e9), 2)
    assert q["jobs"] == 1 and np.isfinite(q["raw_us"]) and all(t > 0 for t in rec["lone_ms"][0] + rec["burst_ms"][0])


@pytest.mark.real
def test_a_real_first_touch_job_under_torchrun_gives_a_record_the_fit_reads():
    """The first-touch phase (:mod:`autotuner.frameworks.ddp.firsttouchprobe`) on 2 ranks of this host, short (its
    ResNet-50's 102 MB, 2 steps, 1 round): a record its schema accepts, both modes, held gradients faulting in three
    times the pages of dropped ones (whose pages the allocator reuses), and a per-byte cost the fit reads (>= 0: held minus dropped,
    clipped)."""
    from autotuner.frameworks.ddp.fit import first_touch
    from autotuner.schemas import check
    from autotuner.frameworks.ddp.schemas import DdpFirstTouchRecord

    r = run_ddp("autotuner.frameworks.ddp.firsttouchprobe", ["--steps", "2", "--rounds", "1"], ranks_per_host=2,
                timeout_s=120)
    line = next(x for x in r.stdout.splitlines() if "AUTOTUNER_DDP_FIRST_TOUCH " in x)
    rec = {**json.loads(line.split("AUTOTUNER_DDP_FIRST_TOUCH ", 1)[1]), "setup": {"np": 2}}
    check(DdpFirstTouchRecord, rec, "first-touch")
    assert rec["ranks"] == 2 and rec["bytes"] == load_layout("resnet50").total_bytes
    assert [x["mode"] for x in rec["rows"]] == ["held", "dropped"]
    # held: every page again (bytes / 4 KiB, fewer with transparent huge pages); dropped: the pages reused, but now
    # and then thousands of faults in so short a job (glibc's dynamic thresholds: ResNet-18, 2 steps, once faulted
    # 4,576 dropped against 9,760 held), so the check is a ratio
    assert rec["rows"][0]["minor_faults"] > 3 * max(1, rec["rows"][1]["minor_faults"])
    ft = first_touch([rec])
    assert ft["jobs"] == 1 and ft["refault_s_per_byte"] >= 0 and ft["held_ms"] > 0 and ft["dropped_ms"] > 0


def test_the_first_touch_fit_and_suggests_note():
    """The fit (:func:`autotuner.frameworks.ddp.fit.first_touch`): median held less median dropped, per byte; none for
    no records. ``ddp suggest`` on an env with the phase names what the view saves besides the predicted step (the
    layout's bytes at that rate), and says nothing where the phase was not measured."""
    from autotuner.frameworks.ddp.fit import first_touch

    row = lambda mode, ms: {"mode": mode, "write_ms": ms, "copy_in_ms": 5.0, "minor_faults": 0, "bytes": 10**8}
    rec = {"ranks": 2, "model": "resnet50", "bytes": 10**8, "rows": [row("held", 60.0), row("dropped", 20.0),
                                                                      row("held", 50.0), row("dropped", 30.0)]}
    ft = first_touch([rec])
    assert ft["held_ms"] == 55.0 and ft["dropped_ms"] == 25.0
    assert ft["refault_s_per_byte"] == pytest.approx(30e-3 / 1e8)
    assert first_touch([]) is None
    from autotuner.frameworks.ddp.suggest import suggest_ddp
    from autotuner.model.costmodel import Cluster
    from autotuner.model.workload import Workload

    L = load_layout("resnet50")
    cost, _, _ = env_cost(RUNS / "ddp-2gbit")
    args = (L.sizes_bytes, L.ready_fraction, L.dtypes, Workload(forward_s=0.1, backward_s=0.2), cost, Cluster(1, 2))
    with_note = suggest_ddp(*args, band=0.02, band_source="test", refault=(0.031, "a test"))
    assert any("about 31 ms a step for this layout (a test)" in n for n in with_note.notes)
    without = suggest_ddp(*args, band=0.02, band_source="test")
    assert not any("pages in again" in n for n in without.notes)


@pytest.mark.real
def test_a_real_cpu_job_under_torchrun_gives_a_record_the_fit_reads():
    """The cpu phase (:mod:`autotuner.frameworks.ddp.cpuprobe`) on 2 ranks of this host, short (1 round, 2 units,
    streams of about 0.15 s): a record its schema accepts, both stream sizes, units timed alone and beside the
    stream, and a law the fit reads (what it charges is the committed records', not timed here)."""
    from autotuner.frameworks.ddp.fit import cpu_share
    from autotuner.schemas import check
    from autotuner.frameworks.ddp.schemas import DdpCpuRecord

    r = run_ddp("autotuner.frameworks.ddp.cpuprobe", ["--rounds", "1", "--units", "2", "--stream-s", "0.15"],
                ranks_per_host=2, timeout_s=120)
    line = next(x for x in r.stdout.splitlines() if "AUTOTUNER_DDP_CPU " in x)
    rec = {**json.loads(line.split("AUTOTUNER_DDP_CPU ", 1)[1]), "setup": {"np": 2}}
    check(DdpCpuRecord, rec, "cpu")
    assert rec["ranks"] == 2 and rec["cores_per_host"] >= 1 and [x["bytes"] for x in rec["rows"]] == [1 << 20, 16 << 20]
    assert all(x["unit_ms_alone"] > 0 and x["allreduce_ms_alone"] > 0 and x["count"] >= 3 for x in rec["rows"])
    fit = cpu_share([rec])
    if fit is not None:  # None only where no unit ran while a stream was in flight
        assert fit["per_collective_us"] >= 0 and fit["per_byte_ns"] >= 0 and fit["jobs"] == 1


@pytest.mark.parametrize("args", [["--cpu-rounds", "-1"], ["--cpu-rounds", "x"], ["--first-touch-rounds", "abc"],
                                  ["--burst-rounds", "-2"], ["--sweep-rounds", "0"], ["--np", "1"]])
def test_ddp_measure_refuses_bad_counts_in_one_line(tmp_path, args):
    p = run("ddp", "measure", "--env", "x", "--runs-dir",
            str(tmp_path), *args, timeout=120)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr, p.stderr
    assert not (tmp_path / "x").exists() or not any((tmp_path / "x").iterdir())


def test_ddp_measure_on_a_complete_env_runs_nothing_and_names_every_phase(tmp_path):
    """A second ``ddp measure`` adds only the phases an env lacks: on ddp-2gbit (every phase but the host phase,
    skipped here with ``--host-rounds 0``) it starts no job, appends nothing, and says what is there."""
    import shutil

    shutil.copytree(RUNS / "ddp-2gbit", tmp_path / "ddp-2gbit")
    before = {f.name: f.read_bytes() for f in (tmp_path / "ddp-2gbit").glob("*.jsonl")}
    p = run("ddp", "measure", "--env", "ddp-2gbit", "--np", "2",
            "--link-gbit", "2", "--host-rounds", "0", "--runs-dir", str(tmp_path), timeout=120)
    assert p.returncode == 0, p.stderr
    assert "3 burst job(s); 1 first-touch job(s); 1 cpu job(s); 0 host job(s)" in p.stderr
    assert {f.name: f.read_bytes() for f in (tmp_path / "ddp-2gbit").glob("*.jsonl")} == before


def test_the_cpu_fit_recovers_the_law_and_suggest_says_what_it_charges():
    """The fit (:func:`autotuner.frameworks.ddp.fit.cpu_share`): rows made from a known law (each collective takes 3
    ms + 0.5 ns per byte of CPU; a unit beside the stream runs at 1 - cpu / duration) give it back; a row whose unit
    ran no slower counts as 0; no rows with units beside: None. ``ddp suggest`` of a CPU-profiled layout filling the
    host's cores says what it charges (ddp-2gbit has the phase) or that the env never measured it (ddp-1x4-16core)."""
    from autotuner.frameworks.ddp.fit import cpu_share

    def row(nbytes, dur_ms):
        f = (3.0 + 0.5e-6 * nbytes) / dur_ms
        return {"round": 0, "bytes": nbytes, "count": 10, "unit_ms_alone": 30.0, "unit_ms_beside": 30.0 / (1 - f),
                "units_beside": 5, "allreduce_ms_alone": dur_ms * 0.98, "allreduce_ms_beside": dur_ms}

    rec = {"ranks": 2, "cores_per_host": 2, "unit": "u", "rows": [row(1 << 20, 10.0), row(16 << 20, 140.0)]}
    fit = cpu_share([rec])
    assert fit["per_collective_us"] == pytest.approx(3000.0) and fit["per_byte_ns"] == pytest.approx(0.5)
    assert fit["slowdown"] == pytest.approx(1 / 0.98) and fit["cores_per_host"] == 2
    slow = dict(row(1 << 20, 10.0), unit_ms_beside=29.0)
    assert cpu_share([dict(rec, rows=[slow])])["points"][0][1] == 0.0
    assert cpu_share([dict(rec, rows=[dict(slow, unit_ms_beside=None, units_beside=0)])]) is None
    # every rank's view where the job has one: the mean share over the ranks that ran units beside the stream
    two = dict(row(1 << 20, 10.0), by_rank=[[30.0, 37.5, 9.0, 10.0], [30.0, 50.0, 9.0, 10.0], [30.0, None, 9.0, 10.0]])
    assert cpu_share([dict(rec, rows=[two])])["points"][0][1:3] == pytest.approx([0.3, 3.0])
    layout = str(ROOT / "docs" / "records" / "train-ddp-2gbit" / "layout.json")
    for env, says in (("ddp-2gbit", "charged in the step times above"), ("ddp-1x4-16core", "never measured")):
        p = run("ddp", "suggest", "--env", env, "--model", layout, timeout=120)
        assert p.returncode == 0 and says in p.stdout, (env, p.stdout, p.stderr)
    p = run("ddp", "suggest", "--env", "ddp-2gbit", "--model",
            "resnet50", timeout=120)
    assert p.returncode == 0 and "cpu phase" not in p.stdout and "never measured" not in p.stdout  # no device


@pytest.mark.parametrize("module, args, msg", [("burstprobe", ["--sizes", "x"], "--sizes"),
                                               ("burstprobe", ["--count", "1"], "--count"),
                                               ("burstprobe", [], "torchrun"),
                                               ("firsttouchprobe", ["--steps", "0"], "--steps"),
                                               ("firsttouchprobe", ["--model", "nope"], "unknown model"),
                                               ("firsttouchprobe", [], "torchrun"),
                                               ("cpuprobe", ["--rounds", "0"], "--rounds"),
                                               ("cpuprobe", ["--stream-s", "-1"], "--stream-s"),
                                               ("cpuprobe", [], "torchrun"),
                                               ("sweepprobe", ["--sizes", "2"], "--sizes"),
                                               ("sweepprobe", ["--sizes", "8", "--backend", "nccl"], "nccl")])
def test_the_probes_refuse_bad_arguments_in_one_line(module, args, msg):
    env = {k: v for k, v in os.environ.items() if k != "RANK"}
    p = subprocess.run([sys.executable, "-m", f"autotuner.frameworks.ddp.{module}", *args], capture_output=True,
                       text=True, timeout=60, env=env)
    assert p.returncode == 2 and msg in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


@pytest.mark.parametrize("env", DDP_ENVS)
def test_ddps_own_rebuilt_buckets_are_the_simulators(env):
    """Every committed replay recorded DDP's own rebuilt bucket sizes (``_get_ddp_logging_data``): the simulator's
    assignment gives the same sizes for every setting, on every layout (the first-bucket effect included: the
    default's 1 MiB first bucket, an explicit 25 MiB's 25 MiB one)."""
    n, want = 0, {}  # (layout, setting) -> the simulator's sizes: a setting's repeats are computed once
    for f in sorted((RUNS / env / "ddp-validation").glob("*.jsonl")):
        for r in read_jsonl(f):
            # a user's script reports no buckets; a compute trial (the replay without DDP) has none
            if r["status"] != "ok" or r["setup"].get("command") or r["ddp"] is None:
                continue
            key = (r["setup"]["model"], json.dumps(r["ddp"], sort_keys=True))
            if key not in want:
                cfg = DdpConfig.from_dict({k: tuple(v) if isinstance(v, list) else v for k, v in r["ddp"].items()})
                want[key] = _rebuilt(load_recorded_layout(r["setup"]["model"], RUNS / env, f.name), cfg)
            assert r["buckets"] == want[key], (f.name, r["label"])
            n += 1
    assert n >= 30 or env in SCRIPT_ONLY_ENVS


@functools.cache
def _env_rows(env):
    cost, info, _ = env_cost(RUNS / env)
    return rows(RUNS / env, cost, host=info["host_cost"])  # the env's Reducer host term, where it measured one


#: the acceptance items the committed DDP envs the product trusts miss, as (env, record file, item); each must still
#: miss, and each must name an item :func:`_acceptance` checks (:func:`test_every_named_ddp_miss_names_a_checked_item`)
#: (research/notes/ddp.md, "Measured environments", states them). On 2 emulated hosts x 1 rank the small caps (1-10
#: MiB: dozens of buckets) are predicted 6-15 % too slow and DDP's default up to 6 % too fast. ddp-2x1-3gbit-b
#: (sweep and replays in one sitting) misses too: 10 MiB -8.6 %, the fp16 hook -14.9 %.
#: ddp-2gbit (1 host x 2 ranks) meets every item. Two fresh envs (sweep, phases and replays in one
#: sitting, shifted stages): ddp-5gbit (1 host x 2 at 5 Gbit/s) meets every item on ResNet-18; on ResNet-101 its
#: 1 MiB cap is +7.0 % (outside its repeats) and tau 0.79; ddp-2x1-4gbit (2 hosts x 1 at 4 Gbit/s) shows the
#: 2-host pattern again: small caps +4.5 to +6.3 %, the large ones -2 to -5 %, the fp16 hook -7.3 / -13.4 %.
#: ddp-4gbit (1 host x 2 at 4 Gbit/s, fresh, one sitting of 19 minutes): ResNet-18 and ResNet-101 meet every item;
#: ResNet-50 every item but the fp16 hook, -5.6 % (279.4 ms measured, 269.1-282.4; 263.9 predicted). ddp-1.5gbit
#: (1 host x 2 at 1.5 Gbit/s, fresh, one sitting of 41 minutes): ResNet-18, ResNet-101 and DistilBERT meet every
#: item; so do ResNet-50 and ResNet-101 on ddp-2x1-1.5gbit (2 hosts x 1 at 1.5 Gbit/s, 26 minutes).
#: ddp-2x1-2.5gbit (the same shape at 2.5 Gbit/s, 17 minutes) shows the 2-host pattern again: every setting but the
#: small caps 2-9 % too fast, tau 0.5.
#: ddp-1.75gbit and ddp-3.5gbit (1 host x 2 ranks, fresh, one sitting each, the host phase charged and each round's
#: compute trial, measured in one sitting): DenseNet-121 (364 tensors, 300 ms of compute) meets every
#: item on both; ResNet-101, whose steps the wire sets, is predicted too slow where many buckets overlap the backward
#: (+3 to +6 %, [1, 4, 25] MiB the most) and with the fp16 hook (+13.5 and +10.6 %), which the host term moves by
#: under 0.5 %.
#: The envs whose replays miss on most settings are not excused here: the product marks them untrusted
#: (:func:`test_an_env_is_untrusted_exactly_where_its_replays_miss_on_most_settings`): ddp-2x2-5gbit (4 ranks on
#: this machine's 2 cores: ResNet-101 10-24 % too fast in every setting, MobileNetV2 2-15 %), ddp-1x4-16core (4
#: ranks on a lent machine's 16 cores: 20-25 % too fast without the view, by what re-faulting the held gradients'
#: pages costs there; not modelled, research/notes/ddp.md, "An uncontended machine") and the two envs checked only
#: on a user's script (:data:`SCRIPT_ONLY_ENVS`).
DDP_MISSED = {("ddp-2x1-3gbit", "resnet101", k) for k in ("mape", "rows", "fp16", "tau", "first-bucket")} \
    | {("ddp-2x1-3gbit", "resnet101-long", k) for k in ("mape", "rows", "tau")} \
    | {("ddp-2x1-3gbit", "resnet50", k) for k in ("mape", "rows", "tau")} \
    | {("ddp-2x1-3gbit-b", "resnet101", k) for k in ("mape", "rows", "fp16", "tau")} \
    | {("ddp-5gbit", "resnet101", k) for k in ("rows", "tau")} \
    | {("ddp-2x1-4gbit", "resnet101", k) for k in ("mape", "rows", "fp16")} \
    | {("ddp-2x1-4gbit", "resnet50", k) for k in ("mape", "fp16", "tau")} \
    | {("ddp-4gbit", "resnet50", "fp16")} \
    | {("ddp-2x1-2.5gbit", m, k) for m in ("resnet50", "resnet101") for k in ("mape", "rows", "fp16", "tau")} \
    | {("ddp-1.75gbit", "resnet101", k) for k in ("mape", "rows", "fp16", "tau")} \
    | {("ddp-3.5gbit", "resnet101", k) for k in ("mape", "rows", "fp16")}


def _setting_missed(r) -> bool:
    """The acceptance's row item for one setting, failed: more than 5 % off and outside its trials' range widened
    by 3 % (the test's own arithmetic, not the product's)."""
    return not (abs(r.error_pct) <= 5.0 or r.low_ms * 0.97 <= r.predicted_ms <= r.high_ms * 1.03)


def _untrusted(env) -> bool:
    """More than half of the env's checked settings (replays and a user's script's runs) missed."""
    rs = _env_rows(env)
    return sum(_setting_missed(r) for r in rs) > len(rs) / 2


def _acceptance(env):
    """Per record file of ``env`` (one layout's settings): {item: passes} for MAPE <= 3 %, every row within 5 % or its own repeats' range
    (widened by 3 %), the fp16 hook within 5 %, Kendall's tau >= 0.8 over pairs measured > 2 % apart, the first
    bucket effect on the side measured (where measured > 2 % apart), and the pick measured no slower than DDP's
    defaults."""
    rs = [r for r in _env_rows(env) if not r.command]  # the replay workload's (a user's script: its own test)
    out = {}
    for source in sorted({r.source for r in rs}):  # one record file: its layout's settings
        m = {r.label: r for r in rs if r.source == source}
        assert len(m) == len([r for r in rs if r.source == source]), source  # a label once per file
        assert len(m) >= 10 and all(r.trials >= 3 for r in m.values()), (source, [(r.label, r.trials) for r in m.values()])
        rows_ok = all(abs(r.error_pct) <= 5.0 or r.low_ms * 0.97 <= r.predicted_ms <= r.high_ms * 1.03
                      for r in m.values())
        fp16_ok = all(abs(r.error_pct) <= 5.0 for r in m.values() if "fp16_compress" in r.label)
        pairs = [(a, b) for a in m.values() for b in m.values()
                 if a.label < b.label and abs(a.measured_ms - b.measured_ms) / min(a.measured_ms, b.measured_ms) > 0.02]
        tau = 2 * np.mean([np.sign(a.measured_ms - b.measured_ms) == np.sign(a.predicted_ms - b.predicted_ms)
                           for a, b in pairs]) - 1
        d, e = m["25 MiB (default, first 1 MiB)"], m["25 MiB"]
        first_ok = (abs(d.measured_ms - e.measured_ms) / d.measured_ms <= 0.02
                    or np.sign(e.measured_ms - d.measured_ms) == np.sign(e.predicted_ms - d.predicted_ms))
        pick = min(m.values(), key=lambda r: r.predicted_ms)
        out[source] = {"mape": statistics.mean(abs(r.error_pct) for r in m.values()) <= 3.0, "rows": rows_ok,
                      "fp16": fp16_ok, "tau": tau >= 0.8, "first-bucket": first_ok,
                      "pick": pick.measured_ms <= d.measured_ms}
    return out


@pytest.mark.parametrize("env", DDP_ENVS)
def test_ddp_replays_are_predicted_from_the_sweep_alone_or_the_miss_is_named_or_the_env_untrusted(env):
    """Acceptance (per env and layout, >= 10 settings x 3 interleaved repeats, no timeline, predicted from
    the env's sweep alone): every item of :func:`_acceptance` passes, or it is named in :data:`DDP_MISSED` and still
    fails; an env whose settings miss on most of them is not judged item by item: the product says it is untrusted
    (``autotuner ddp envs``, the trust line)."""
    if _untrusted(env):
        assert _product_row(env)["trust"].startswith("untrusted: "), _product_row(env)["trust"]
        assert not any(e == env for e, _, _ in DDP_MISSED), f"{env} is untrusted: its named misses excuse nothing"
        return
    for model, items in _acceptance(env).items():
        for item, ok in items.items():
            if (env, model, item) in DDP_MISSED:
                assert not ok, ("named miss now passes", env, model, item)
            else:
                assert ok, (env, model, item)


def test_every_named_ddp_miss_names_a_checked_item():
    """No dead entry: each (env, record file, item) of :data:`DDP_MISSED` is one :func:`_acceptance` checks on a
    committed env the product trusts, so that a renamed record file or env cannot leave an excuse behind."""
    checked = {(env, source, item) for env in {e for e, _, _ in DDP_MISSED} if env in DDP_ENVS and not _untrusted(env)
               for source, items in _acceptance(env).items() for item in items}
    assert DDP_MISSED <= checked, sorted(DDP_MISSED - checked)


@functools.cache
def _product_rows() -> dict:
    import autotuner

    return {r["env"]: r for r in autotuner.ddp_envs()}


def _product_row(env) -> dict:
    return _product_rows()[env]


@pytest.mark.parametrize("env", DDP_ENVS)
def test_an_env_is_untrusted_exactly_where_its_replays_miss_on_most_settings(env):
    """``ddp envs`` and the trust line mark an env untrusted where more than half of its checked settings missed
    (over 5 % off and outside their trials' range widened by 3 %), and only there; its predictions are unchanged
    (the trust line's figures are the same rows')."""
    row, rs = _product_row(env), _env_rows(env)
    missed = sum(_setting_missed(r) for r in rs)
    assert row["checked"]["settings"] == len(rs) and row["checked"]["missed"] == missed
    assert row["checked"]["untrusted"] is (missed > len(rs) / 2) is _untrusted(env)
    assert row["trust"].startswith("untrusted: ") is _untrusted(env), row["trust"]
    assert row["checked"]["mean_error_pct"] == pytest.approx(statistics.mean(abs(r.error_pct) for r in rs))


def test_the_uncontended_envs_miss_without_the_view_matches_the_first_touch_probe():
    """ddp-1x4-16core (4 Gloo ranks on a lent machine's 16 cores): with the view its
    ResNet-101 replays are predicted within 7 %, without it 20-25 % too fast. The same machine's first-touch probe
    (4 processes at once, ``first-touch-x4.json``): gradients held to the step's end (as DDP without the view
    holds them) fault in all their pages again every step (bytes / 4 KiB minor faults) and cost ~58 ms more per step
    than gradients dropped after their copy into the bucket (with the view: no faults). The measured gap between DDP's
    default and the view, less the simulator's (its copy back), is that size to within 30 %. Established by the real
    jobs' own fault counts and glibc's tunables (next test); not modelled (research/notes/ddp.md, "An uncontended machine")."""
    d = RUNS / "ddp-1x4-16core"
    ft = json.loads((d / "first-touch-x4.json").read_text())
    assert ft["procs"] == 4 and ft["model"] == "resnet101"
    held = [r for r in ft["rows"] if r["mode"] == "held"]
    dropped = [r for r in ft["rows"] if r["mode"] == "dropped"]
    assert len(held) == len(dropped) == 8
    assert all(r["minor_faults"] >= 0.9 * r["bytes"] / 4096 for r in held)
    assert all(r["minor_faults"] == 0 for r in dropped)
    extra = statistics.median(r["write_ms"] for r in held) - statistics.median(r["write_ms"] for r in dropped)
    assert 40 < extra < 90, extra
    m = {r.label: r for r in _env_rows("ddp-1x4-16core") if r.model == "resnet101"}
    dflt, view = m["25 MiB (default, first 1 MiB)"], m["25 MiB (default, first 1 MiB), view"]
    unexplained = (dflt.measured_ms - view.measured_ms) - (dflt.predicted_ms - view.predicted_ms)
    assert 0.7 * extra <= unexplained <= 1.3 * extra, (unexplained, extra)
    assert abs(view.error_pct) < 7 and all(r.error_pct < -15 for k, r in m.items() if k != "1 MiB"
                                          and "view" not in k and "fp16" not in k)


def _experiment(env, name):
    """(rows predicted from the env's sweep alone, the trial records) of ``runs/<env>/ddp-experiments/<name>.jsonl``."""
    d = RUNS / env
    f = d / "ddp-experiments" / f"{name}.jsonl"
    cost, _, _ = env_cost(d)
    return {r.label: r for r in rows(d, cost, files=[f])}, read_jsonl(f)


def test_the_held_gradients_re_faults_are_the_uncontended_envs_miss():
    """Real DDP replays on the lent machine (ResNet-101, 4 ranks, 100 ms, the replay's deadline stages
    as in the env's records). With glibc's defaults the real DDP job faults ~40,000 pages a step on rank 0 without
    the view (178 MB / 4 KiB = 43,500) and none with it. With ``MALLOC_TRIM_THRESHOLD_``/``MALLOC_MMAP_THRESHOLD_``
    set, glibc keeps the freed pages: no faults, and the shipped simulator, which prices no fault, predicts every
    setting within 3 %. The step the faults cost, default less default without them, is the probe's ~58 ms to within
    30 %."""
    faulting, recs = _experiment("ddp-1x4-16core", "resnet101-faults")
    kept, kept_recs = _experiment("ddp-1x4-16core", "resnet101-notrim")
    by = {r["label"]: r for r in recs}
    assert by["25 MiB (default, first 1 MiB)"]["minor_faults_per_step"] > 30000
    assert by["25 MiB (default, first 1 MiB), view"]["minor_faults_per_step"] == 0
    assert all(r["malloc_env"] and r["minor_faults_per_step"] < 1000 for r in kept_recs)
    assert all(r["malloc_env"] == {} for r in recs)
    assert set(kept) == set(faulting) and len(kept) == 3
    assert all(abs(r.error_pct) <= 3.0 for r in kept.values()), {k: r.error_pct for k, r in kept.items()}
    assert all(r.error_pct < -15 for k, r in faulting.items() if "view" not in k and k != "1 MiB")
    ft = json.loads((RUNS / "ddp-1x4-16core" / "first-touch-x4.json").read_text())
    probe = (statistics.median(r["write_ms"] for r in ft["rows"] if r["mode"] == "held")
             - statistics.median(r["write_ms"] for r in ft["rows"] if r["mode"] == "dropped"))
    d = "25 MiB (default, first 1 MiB)"
    assert 0.7 * probe <= faulting[d].measured_ms - kept[d].measured_ms <= 1.3 * probe


def test_the_replay_stages_decide_where_the_hooks_work_goes():
    """The same machine at 300 ms of compute (``ddp-experiments/resnet101-300ms*.jsonl``).
    With deadline stages (the oldest records' kind) the hooks' work hides in the slack before each next
    deadline: the view's step ends under 10 ms after its 300 ms compute, while the simulator charges the copies
    into the buckets on the backward's thread (about 30 ms), so every setting is predicted 2-10 % slow (the view
    9.6 %; the fp16 hook, whose casts are charged there too, 19.7 %). With duration stages (a CPU rank's real
    backward: the hooks' work delays every later gradient) every setting measures 10-20 % slower than predicted:
    the copies (at::mul_out) took 42-51 ms per step in the probe's 4 concurrent processes against the 30 ms of the
    sweep's copy rate (rank 0 alone), and the held gradients' re-faults overran their stages. Named misses, not
    modelled (research/notes/ddp.md, "An uncontended machine")."""
    deadline, recs = _experiment("ddp-1x4-16core", "resnet101-300ms")
    assert all("stages" not in r for r in recs)  # the replay before --stages: deadlines
    assert deadline["25 MiB (default, first 1 MiB), view"].measured_ms < 310
    assert all(2 <= r.error_pct <= (25 if 'fp16' in k else 10) for k, r in deadline.items()), {k: r.error_pct for k, r in deadline.items()}
    durations, recs = _experiment("ddp-1x4-16core", "resnet101-300ms-durations")
    assert all(r["stages"] == "duration" for r in recs)
    assert set(durations) == set(deadline)
    assert all(-20 <= r.error_pct <= -10 for r in durations.values()), {k: r.error_pct for k, r in durations.items()}
    ft = json.loads((RUNS / "ddp-1x4-16core" / "first-touch-x4.json").read_text())
    assert all(40 <= r["copy_in_ms"] <= 55 for r in ft["rows"] if r["mode"] == "dropped")


def test_ddp_suggest_from_the_command_line(tmp_path):
    """Also from another folder: the env's records name their layouts where they keep them (a user's layout is
    copied beside its records), so the band does not depend on the working directory."""
    env = "ddp-2gbit"
    p = run("ddp", "suggest", "--env", env, "--model", "resnet50",
            "--compute-ms", "100", "--json", timeout=120, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["default"]["label"].startswith("25 MiB (default") and d["settings"] > 100
    assert d["recommended"]["code"].startswith("model = DistributedDataParallel(model")
    for bad in (["--env", "nope"], ["--model", "nope"], ["--compute-ms", "-1"]):
        args = {"--env": env, "--model": "resnet50", "--compute-ms": "100"}
        args[bad[0]] = bad[1]
        q = run("ddp", "suggest", *sum(args.items(), ()), timeout=120)
        assert q.returncode == 2 and len(q.stderr.strip().splitlines()) == 1, q.stderr


def test_the_cpu_phase_moves_a_users_script_toward_its_measurements():
    """Held out (research/notes/ddp.md, "Compute beside the collectives"): examples/train_ddp.py's real CPU compute, predicted
    from each env's phases alone with and without the cpu phase's law (``CostModel.collective_cpu``, charged to a
    CPU-profiled layout whose ranks fill the cores). ddp-3gbit and ddp-2x1-2gbit (2 emulated hosts) were each
    measured in one sitting (every phase, the profile, 7 settings x 3; ddp-2x1-2gbit's cpu
    phase with every rank's view); ddp-2gbit's script records are a day older than its cpu phase. With
    the law the mean error is smaller on both, and every setting with collectives during the backward moves toward
    its measurement (an explicit 25 MiB, one bucket after the backward, not at all). Every setting stays too fast
    (ddp-3gbit: -6.7 to -9.3 %, its explicit 25 MiB -14.8 % with trials of 533-631 ms; ddp-2x1-2gbit: -6.7 to
    -12.2 %): the named residual."""
    from dataclasses import replace

    for env, n in (("ddp-3gbit", 7), ("ddp-2x1-2gbit", 7), ("ddp-2gbit", 4)):
        cost = env_cost(RUNS / env)[0]
        assert cost.collective_cpu is not None
        files = [RUNS / env / "ddp-validation" / "train-ddp-script.jsonl"]
        w = {r.label: r for r in rows(RUNS / env, cost, files=files)}
        wo = {r.label: r for r in rows(RUNS / env, replace(cost, collective_cpu=None), files=files)}
        assert len(w) == n and all(r.command and r.trials >= 3 for r in w.values())
        mape = lambda rs: statistics.mean(abs(r.error_pct) for r in rs.values())  # noqa: E731
        assert mape(w) < mape(wo), (env, mape(w), mape(wo))
        for k in w:
            assert w[k].error_pct < 0, (env, k, w[k].error_pct)
            if k == "25 MiB":  # one bucket, launched when the backward has ended: nothing in flight beside it
                assert w[k].predicted_ms == pytest.approx(wo[k].predicted_ms, abs=1e-6)
            else:
                assert w[k].predicted_ms > wo[k].predicted_ms, (env, k)


def test_a_users_script_reads_its_setting_from_the_environment(tmp_path):
    """What ``ddp validate -- python script.py`` sets per trial, and what examples/train_ddp.py makes of it."""
    import os

    from autotuner.errors import ValidationError
    from autotuner.frameworks.ddp.realrun import knob_env, script_of

    e = knob_env(DdpConfig(bucket_cap_mb_list=(1, 4, 25), gradient_as_bucket_view=True, comm_hook="fp16_compress"), 5, 3)
    assert e == {"AUTOTUNER_STEPS": "5", "AUTOTUNER_WARMUP": "3", "AUTOTUNER_DDP_GRADIENT_AS_BUCKET_VIEW": "1",
                 "AUTOTUNER_DDP_COMM_HOOK": "fp16_compress", "AUTOTUNER_DDP_BUCKET_CAP_MB_LIST": "1,4,25"}
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import train_ddp
    finally:
        sys.path.pop(0)
    old = dict(os.environ)
    try:
        os.environ.update(e)
        assert train_ddp.ddp_kwargs() == {"bucket_cap_mb_list": [1, 4, 25], "gradient_as_bucket_view": True}
        os.environ["AUTOTUNER_DDP_GRADIENT_AS_BUCKET_VIEW"] = "yes"
        with pytest.raises(ValueError):
            train_ddp.ddp_kwargs()
    finally:
        os.environ.clear()
        os.environ.update(old)
    script = ROOT / "examples" / "train_ddp.py"
    assert script_of(["python", str(script), "--threads", "1"]) == (str(script), ["--threads", "1"])
    for bad in (["python", "-c", "print(1)"], ["bash", "x.sh"], ["python", str(tmp_path / "gone.py")]):
        with pytest.raises(ValidationError):
            script_of(bad)


def test_ddp_simulate_and_bad_proposals_from_the_command_line(tmp_path):
    env = DDP_ENVS[0]
    p = run("ddp", "simulate", "--env", env, "--model", "resnet18",
            "--compute-ms", "100", "--bucket-cap-mb", "4", "--json", timeout=120)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    L = load_layout("resnet18")
    assert [b["bytes"] for b in d["buckets"]] == _rebuilt(L, DdpConfig(bucket_cap_mb=4))
    assert d["first_step_ms"] > d["step_time_ms"] > 100
    bad = tmp_path / "p.json"
    for text in ('[{"bucket_size": 3}]', '{"x": 1}', "[1]", "not json"):
        bad.write_text(text)
        q = run("ddp", "validate", "--env", env, "--model",
                "resnet18", "--proposals", str(bad), timeout=120)
        assert q.returncode == 2 and len(q.stderr.strip().splitlines()) == 1, (text, q.stderr)


def test_a_users_ddp_script_validated_against_its_profile():
    """``autotuner ddp validate --env ddp-2gbit --model docs/records/train-ddp-2gbit/layout.json --proposals
    docs/records/train-ddp-2gbit/proposals.json --link-gbit 2 --name train-ddp-script -- python
    examples/train_ddp.py``: real CPU compute (the profile's, 2 ranks on 2 cores) beside the collectives. The first
    bucket effect (an explicit 25 MiB slower than DDP's default) and the order default > 4 MiB are reproduced; the
    steps are predicted 5-12 % too fast (the compute and Gloo share the 2 cores: not modelled for DDP, docs/explanation/ddp-simulator.md),
    within 15 %."""
    cost = env_cost(RUNS / "ddp-2gbit")[0]
    rs = {r.label: r for r in rows(RUNS / "ddp-2gbit", cost, files=[RUNS / "ddp-2gbit" / "ddp-validation" /
                                                                    "train-ddp-script.jsonl"])}
    assert all(r.command and r.trials >= 3 for r in rs.values())
    d, e, four = rs["25 MiB (default, first 1 MiB)"], rs["25 MiB"], rs["4 MiB"]
    assert e.measured_ms > d.measured_ms > four.measured_ms and e.predicted_ms > d.predicted_ms > four.predicted_ms
    assert all(-15.0 < r.error_pct < 0 for r in rs.values())


def test_every_committed_ddp_record_has_its_schema_and_a_damaged_one_is_one_line(tmp_path):
    import shutil

    from autotuner.frameworks.ddp.schemas import DdpBurstRecord, DdpCpuRecord, DdpFirstTouchRecord, DdpSweepRecord, DdpTrialRecord

    for env in DDP_ENVS:
        assert len(read_jsonl(RUNS / env / "ddp-sweep.jsonl", DdpSweepRecord)) >= 3
        assert len(read_jsonl(RUNS / env / "ddp-burst.jsonl", DdpBurstRecord)) >= 3
        if (RUNS / env / "ddp-first-touch.jsonl").exists():  # not every env has the phase (ddp-1x4-16core has not)
            assert read_jsonl(RUNS / env / "ddp-first-touch.jsonl", DdpFirstTouchRecord)
        if (RUNS / env / "ddp-cpu.jsonl").exists():  # the cpu phase, where the env has it
            assert read_jsonl(RUNS / env / "ddp-cpu.jsonl", DdpCpuRecord)
        for f in list((RUNS / env / "ddp-validation").glob("*.jsonl")) + list((RUNS / env / "ddp-tune").glob("*.jsonl")):
            assert read_jsonl(f, DdpTrialRecord)
    env = tmp_path / "ddp-2gbit"
    shutil.copytree(RUNS / "ddp-2gbit", env)
    cases = {"ddp-sweep.jsonl": ['{"ranks": 2}', '[1]', '{"ranks": 2, "sizes": [4, 8], "fp32_ms": [[1.0]], '
                                 '"fp16_ms": [[1.0], [1.0]], "setup": {"np": 2}}'],
             "ddp-burst.jsonl": ['{"ranks": 2}', '{"ranks": 2, "sizes": [4], "count": 16, "lone_ms": [[1.0]], '
                                 '"burst_ms": [[-1.0]], "setup": {"np": 2}}'],
             "ddp-first-touch.jsonl": ['{"ranks": 2}', '{"ranks": 2, "model": "resnet50", "bytes": 8, "rows": [{"mode": '
                                       '"held", "write_ms": 1.0, "copy_in_ms": 0.1, "minor_faults": 2, "bytes": 8}], '
                                       '"setup": {"np": 2}}'],
             "ddp-cpu.jsonl": ['{"ranks": 2}', '{"ranks": 2, "cores_per_host": 0, "rows": [{"round": 0, "bytes": 8, '
                               '"count": 3, "unit_ms_alone": 1.0, "units_beside": 0, "allreduce_ms_alone": 1.0, '
                               '"allreduce_ms_beside": 1.0}], "setup": {"np": 2}}'],
             "ddp-validation/resnet18.jsonl": ['{"label": "x"}', '{"label": "x", "ddp": {"bucket_size": 1}, '
                                               '"status": "ok", "measured_step_time_ms": 1.0, "setup": {"np": 2, '
                                               '"model": "resnet18", "compute_ms": 100, "steps": 5, "warmup": 3}}']}
    for rel, lines in cases.items():
        good = (RUNS / "ddp-2gbit" / rel).read_text()
        for line in lines:
            (env / rel).write_text(good + line + "\n")
            p = run("ddp", "suggest", "--env", "ddp-2gbit",
                    "--model", "resnet18", "--runs-dir", str(tmp_path), timeout=120)
            assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, (rel, line, p.stderr)
        (env / rel).write_text(good)


@pytest.mark.real
@pytest.mark.long
def test_held_gradients_re_fault_their_pages_on_this_machine_too():
    """The first-touch phase's timing (:func:`autotuner.frameworks.ddp.firsttouchprobe.time_mode`, what ``ddp
    measure`` runs on every rank) in plain processes on the machine the suite runs on, one at a time (ResNet-101's
    178 MB of gradients, 3 steps, each mode twice, ~8 s): gradients held to the step's end fault in every page again
    each step; dropped after their copy into the bucket (DDP with the view) they fault in none (what that costs is
    the committed records', not timed here)."""
    code = ("import json, sys, torch\n"
            "from autotuner.frameworks.ddp.firsttouchprobe import time_mode\n"
            "from autotuner.readers.layouts import load_layout\n"
            "torch.set_num_threads(1)\n"
            "print(json.dumps(time_mode(torch, load_layout('resnet101').shapes, sys.argv[1], 3)))\n")
    rows = []
    for mode in ("held", "dropped", "held", "dropped"):  # a fresh process each: its allocator starts empty
        p = subprocess.run([sys.executable, "-c", code, mode], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        rows.append(json.loads(p.stdout.strip().splitlines()[-1]))
    held = [r for r in rows if r["mode"] == "held"]
    dropped = [r for r in rows if r["mode"] == "dropped"]
    assert len(held) == len(dropped) == 2 and all(r["bytes"] == load_layout("resnet101").total_bytes for r in rows)
    # every 4 KiB page again here (bytes / 4096); fewer where transparent huge pages serve big tensors, so the
    # check is the ratio, over both rounds: a dropped round now and then faults a few thousand pages (glibc's
    # dynamic thresholds; 2,272 against 39,075 held in one suite run), held ones every page
    assert sum(r["minor_faults"] for r in held) > 10 * max(1, sum(r["minor_faults"] for r in dropped))
