"""A user's own HOROVOD_TIMELINE files as an environment source (env.toml ``format = "timelines"``,
:mod:`autotuner.frameworks.horovod.fit.timelines`, docs/how-to/fit-from-timelines.md).

The acceptance check: the six timelines that ``validate --keep-timelines`` kept for the
local-gloo-1gbit fit sweep (``runs/local-gloo-1gbit/validation/timelines/fit-sweep/``), read as a
user's plain timelines, fit the model that the validation-format fit of the same trials gives
(the shipped ``models/local-gloo-1gbit.json``).

Damaged and other-form timelines are made here from those kept files, in ``tmp_path``, not
committed: *plain* = gunzipped; *unclosed* = the records re-written in Horovod <= 0.20.0's form
(``[`` + newline, then every record followed by ``,`` + newline, no closing ``]``); *cut* = the
plain text cut at a fraction of its length (mid-record, as a killed job leaves it); a *cut gzip*
= the .gz file cut in half.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import assert_one_line_error, run
from refit import assert_refit_close

from autotuner.errors import FitError, RunsError
from autotuner.fit.collective import fit_collective_tier
from autotuner.frameworks.horovod.fit.fitters import fit_env, simulate_ms
from autotuner.frameworks.horovod.fit.store import env_from_dict, write_model
from autotuner.frameworks.horovod.fit.timelines import cycle_bound_ms
from autotuner.frameworks.horovod.knobs import Config
from autotuner.paths import shipped_models
from autotuner.readers.layouts import load_data_layout
from autotuner.frameworks.horovod.readers.runs import read_env
from autotuner.readers.timeline import read_timeline

ENV = Path(__file__).resolve().parents[1] / "runs" / "local-gloo-1gbit"
KEPT = ENV / "validation" / "timelines" / "fit-sweep"
TRIALS = [f"proposal-{i}-r0" for i in range(1, 7)]
#: the cluster and software of runs/local-gloo-1gbit/env.toml
HEAD = ('format = "timelines"\nnodes = 1\ngpus_per_node = 2\nlink_gbps = 1.0\nbackend = "gloo"\n'
        'horovod_version = "0.28.1"\n')


def _records(name: str) -> list[dict]:
    return [json.loads(line) for line in (ENV / "validation" / name).read_text().splitlines() if line.strip()]


def _env(root: Path, name: str, files: dict[str, bytes], extra: str = "", source: str = "timelines/*") -> Path:
    d = root / name
    (d / "timelines").mkdir(parents=True)
    for fn, data in files.items():
        (d / "timelines" / fn).write_bytes(data)
    (d / "env.toml").write_text(f'source = "{source}"\n{HEAD}{extra}')
    return d


def _gz(trial: str) -> bytes:
    return (KEPT / f"{trial}.json.gz").read_bytes()


def _plain(trial: str) -> bytes:
    return gzip.decompress(_gz(trial))


def _unclosed(trial: str) -> bytes:
    """The same records in Horovod <= 0.20.0's form (timeline.cc before 0.20.1: ``,`` + newline after
    every record, the array never closed)."""
    recs = json.loads(_plain(trial))
    return ("[\n" + "".join(json.dumps(r) + ",\n" for r in recs)).encode()


def _cut(data: bytes, fraction: float) -> bytes:
    return data[: int(len(data) * fraction)]


@pytest.fixture(scope="module")
def shipped() -> dict:
    return json.loads((shipped_models() / "local-gloo-1gbit.json").read_text())


@pytest.fixture(scope="module")
def user_fit(tmp_path_factory):
    """The six kept fit-sweep timelines as a user's timelines env (gzipped copies, no layout)."""
    d = _env(tmp_path_factory.mktemp("tl"), "user-gloo", {f"{t}.json.gz": _gz(t) for t in TRIALS},
             source="timelines/*.json*")
    env = read_env(d)
    return env, fit_env(env)


# --------------------------------------------------------------------------- the acceptance


def test_tier_agrees_with_the_validation_fit(user_fit, shipped):
    """Both fits see the same (bytes, count) samples; only the mean durations differ, by the
    validation summary's rounding to 0.1 µs (``summarize_timeline``: at most 0.05 µs per sample).
    The smallest mean is 924.6 µs, so no sample moves by more than 0.05 / 924.6 = 5.4e-5 of itself,
    and neither can a fit on relative residuals: alpha and the bandwidths agree within 1e-4
    (measured: 9.5e-7, 1.6e-7 and 5.9e-9). The large-response latency is ~0.02 µs, zero within
    that resolution: compared in absolute terms (measured difference 1.3e-7 µs)."""
    _, m = user_fit
    summary = [s for r in _records("fit-sweep.jsonl") for s in r["timeline"]["samples"] if s[-1] > 0]
    mine = m["fit"]["samples"]
    assert [(s["bytes"], s["count"]) for s in mine] == [(float(s[0]), s[1]) for s in summary]
    diffs = [abs(s["time_ms"] * 1e3 - v[-1]) for s, v in zip(mine, summary)]
    assert max(diffs) <= 0.05 + 1e-6
    assert min(v[-1] for v in summary) == pytest.approx(924.6)

    a, b = shipped["cost_model"]["inter"], m["cost_model"]["inter"]
    assert b["large_from_bytes"] == a["large_from_bytes"] == 4 * 2**20
    for k in ("alpha_us", "bandwidth_gbps", "large_bandwidth_gbps"):
        assert b[k] == pytest.approx(a[k], rel=1e-4), k
    assert b["large_alpha_us"] == pytest.approx(a["large_alpha_us"], abs=0.05)
    assert m["fit"]["n_samples"] == shipped["fit"]["n_samples"] == 95
    assert m["fit"]["piecewise"]["knee_bytes"] == shipped["fit"]["piecewise"]["knee_bytes"]


def test_rounding_is_the_whole_difference(shipped):
    """The summaries' rounded samples, through the same tier fit, give the shipped tier exactly:
    the shipped model is today's validation fit, and the fit itself is shared."""
    rows = np.array([[s[0], s[1], s[-1]] for r in _records("fit-sweep.jsonl") for s in r["timeline"]["samples"]
                     if s[-1] > 0], dtype=float)
    tier, *_ = fit_collective_tier(rows[:, 0], rows[:, 1], rows[:, 2] * 1e-6, 2)
    assert_refit_close(tier.to_dict(), shipped["cost_model"]["inter"])  # tests/refit.py: 1e-4, BLAS-independent


def test_memcpy_host_passes_and_negotiation_agree_exactly(user_fit, shipped):
    """Same fused responses, same host samples (the cycle bound of the marks keeps exactly the
    pairs the trials' recorded cycle times keep), same least squares: equal within the refit tolerance (tests/refit.py; to the last bit on one machine)."""
    env, m = user_fit
    a, b = shipped["cost_model"], m["cost_model"]
    # the same least squares on the same samples; "the last bit" holds on one machine only (tests/refit.py)
    assert_refit_close(b["memcpy_gbytes_per_s"], a["memcpy_gbytes_per_s"])
    assert_refit_close(b["host_passes"], a["host_passes"])
    assert_refit_close(b["negotiation"], a["negotiation"])
    assert b["link_gbps"] == a["link_gbps"] and b["intra"] is None
    for k in ("n_memcpy", "n_gaps", "n_gaps_new_cycle"):
        assert m["fit"]["host_passes"][k] == shipped["fit"]["host_passes"][k], k
    assert m["measured_config"] == shipped["measured_config"]  # files disagree on the cycle: the default
    assert m["workloads"] == {}
    # named, not silent: the in-flight tensor of proposal-1 and the files' different cycle times
    assert any("proposal-1-r0.json.gz" in p and "still in flight" in p for p in env.problems)
    assert any("cycle marks disagree" in p for p in env.problems)


def test_simulated_step_times_agree_at_the_holdout_configs(user_fit, shipped):
    """resnet50 with the replay's 300 ms compute at every holdout configuration: each collective
    moves by at most the tier's 1e-4, so does the step (measured: 1.9e-7)."""
    _, m = user_fit
    a, b = env_from_dict(shipped), env_from_dict(m)
    layout = load_data_layout("resnet50", ENV, "test")
    wl = a.workloads["resnet50"][1]
    cfgs = list(dict.fromkeys(Config.from_dict(r["config"]) for r in _records("holdout-sweep.jsonl")))
    assert len(cfgs) >= 5
    for cfg in cfgs:
        sa = simulate_ms(layout, wl, cfg, a.cost, a.cluster)
        sb = simulate_ms(layout, wl, cfg, b.cost, b.cluster)
        assert sb == pytest.approx(sa, rel=1e-4), cfg


def test_cycle_bound_is_just_above_each_trials_cycle_time():
    for r in _records("fit-sweep.jsonl"):
        bound = cycle_bound_ms(read_timeline(KEPT / f"{r['trial'].replace('/', '-')}.json.gz"))
        assert r["config"]["cycle_time_ms"] <= bound <= r["config"]["cycle_time_ms"] + 0.1, r["trial"]


# --------------------------------------------------------------------------- forms and damage


def test_plain_and_unclosed_files_fit_as_the_gzipped_ones(tmp_path, user_fit):
    files = {f"{t}.json.gz": _gz(t) for t in TRIALS}
    del files["proposal-2-r0.json.gz"], files["proposal-3-r0.json.gz"]
    files["proposal-2-r0.json"] = _plain("proposal-2-r0")
    files["proposal-3-r0.trace"] = _unclosed("proposal-3-r0")
    d = _env(tmp_path, "mixed", files)
    assert read_timeline(d / "timelines" / "proposal-3-r0.trace").horovod_form == "unclosed"
    m = fit_env(read_env(d))
    assert_refit_close(m["cost_model"], user_fit[1]["cost_model"])


def test_a_cut_file_still_fits_and_is_named(tmp_path):
    files = {f"{t}.json.gz": _gz(t) for t in TRIALS[3:]}
    files["proposal-2-r0.json"] = _cut(_plain("proposal-2-r0"), 0.7)    # killed mid-write
    files["proposal-3-r0.json"] = _cut(_unclosed("proposal-3-r0"), 0.8)  # old writer, killed mid-write
    d = _env(tmp_path, "cut", files)
    env = read_env(d)
    m = fit_env(env)
    assert "timelines/proposal-2-r0.json" in m["fit"]["timelines"]
    assert "timelines/proposal-3-r0.json" in m["fit"]["timelines"]
    for fn in ("proposal-2-r0.json", "proposal-3-r0.json"):
        assert any(p.startswith(f"cut/timelines/{fn}: ") and "cut short" in p for p in env.problems), env.problems
    assert 0.4 < m["cost_model"]["inter"]["bandwidth_gbps"] < 0.7
    assert m["cost_model"]["host_passes"] is not None


def test_an_unreadable_file_is_skipped_and_named(tmp_path, user_fit):
    files = {f"{t}.json.gz": _gz(t) for t in TRIALS}
    g = _gz("proposal-2-r0")
    files["broken.json.gz"] = g[: len(g) // 2]  # a gzip cut in half: not readable at all
    files["notes.json"] = b"these are not the timelines you are looking for\n"
    env = read_env(_env(tmp_path, "some-bad", files))
    m = fit_env(env)
    assert_refit_close(m["cost_model"], user_fit[1]["cost_model"])
    assert any(p.startswith("some-bad/timelines/broken.json.gz: cannot read (corrupt gzip") and "skipped" in p
               for p in env.problems), env.problems
    assert any(p.startswith("some-bad/timelines/notes.json: not a Horovod timeline") for p in env.problems)


def test_a_glob_matching_nothing_is_one_line_runs_error(tmp_path):
    d = _env(tmp_path / "runs", "empty", {}, source="timelines/*.json")
    with pytest.raises(RunsError, match=r"source: 'timelines/\*\.json': no file matches") as e:
        read_env(d)
    assert "\n" not in str(e.value)
    assert_one_line_error(run("fit", str(tmp_path / "runs"), "--out", str(tmp_path / "m")), "no file matches")


def test_a_directory_of_garbage_is_one_line_cli_error(tmp_path):
    junk = {"a.json": b"\x00\x01\x02garbage", "b.json": b'{"not": "an array"}', "c.json": b"",
            "d.json.gz": gzip.compress(b"[1, 2, 3]"), "e.json": b'[{"ph": "X"'}
    _env(tmp_path / "runs", "junk", junk)
    p = run("fit", str(tmp_path / "runs"), "--out", str(tmp_path / "m"))
    assert_one_line_error(p, "no environment could be fitted")
    assert "junk: no usable timeline among the files matching 'timelines/*'" in p.stderr
    for fn in "abcde":  # each file named with why
        assert f"junk/timelines/{fn}.json" in p.stderr
    assert not (tmp_path / "m" / "junk.json").exists()


# --------------------------------------------------------------------------- layout and the CLI


def test_without_a_layout_simulate_takes_compute_ms(tmp_path, shipped):
    _env(tmp_path / "runs", "user-gloo", {f"{t}.json.gz": _gz(t) for t in TRIALS})
    out = tmp_path / "m"
    p = run("fit", str(tmp_path / "runs"), "--out", str(out))
    assert p.returncode == 0, p.stderr
    args = ("simulate", "--model", "resnet50", "--env", "user-gloo", "--model-dir", str(out))
    p = run(*args, "--compute-ms", "300", "--json")
    assert p.returncode == 0, p.stderr
    a = env_from_dict(shipped)
    want = simulate_ms(load_data_layout("resnet50", ENV, "test"), a.workloads["resnet50"][1], a.measured_config,
                       a.cost, a.cluster)
    assert json.loads(p.stdout)["step_time_ms"] == pytest.approx(want, rel=1e-4)
    assert_one_line_error(run(*args), "--compute-ms")


def test_a_layout_calibrates_one_compute_time(tmp_path):
    """proposal-6's timeline alone (12 MiB fusion, given in env.toml; the 20 ms cycle read off the
    marks) with the resnet50 layout: the calibrated compute lands within 1% of the replay
    workload's emulated 300 ms (measured 300.6 ms), and the step time read off the timeline within
    1% of the one the trial measured (1819.5 vs 1824.7 ms)."""
    rec = next(r for r in _records("fit-sweep.jsonl") if r["trial"] == "proposal-6/r0")
    d = _env(tmp_path / "runs", "p6", {"p6.json.gz": _gz("proposal-6-r0")},
             extra='layout = "resnet50"\nfusion_threshold_mb = 12.0\n')
    env = read_env(d)
    m = fit_env(env)
    w = m["workloads"]["resnet50"]
    assert w["forward_ms"] + w["backward_ms"] == pytest.approx(rec["setup"]["compute_ms"], rel=0.01)
    assert w["layout"] == "resnet50" and "timelines/p6.json.gz" in w["calibrated_on"]
    assert m["fit"]["step_time_ms"] == pytest.approx(rec["measured_step_time_ms"], rel=0.01)
    assert m["measured_config"]["cycle_time_ms"] == pytest.approx(rec["config"]["cycle_time_ms"], abs=0.1)
    assert m["measured_config"]["fusion_threshold_mb"] == 12.0
    assert env.problems == []
    write_model(tmp_path, m)
    p = run("simulate", "--model", "resnet50", "--env", "p6", "--model-dir", str(tmp_path), "--json",
            "--fusion-threshold-mb", "12", "--cycle-time-ms", "20")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["step_time_ms"] == pytest.approx(rec["measured_step_time_ms"], rel=0.01)


def test_a_fusion_threshold_below_the_fused_responses_is_named(tmp_path):
    d = _env(tmp_path, "p6", {"p6.json.gz": _gz("proposal-6-r0")},
             extra='layout = "resnet50"\nfusion_threshold_mb = 2.0\n')
    env = read_env(d)
    fit_env(env)
    assert any("over the fusion threshold 2 MiB" in p for p in env.problems), env.problems


def test_no_readable_file_is_one_line_fit_error(tmp_path):
    env = read_env(_env(tmp_path, "bad", {"x.json": b"{}", "y.json.gz": _gz("proposal-1-r0")[:100]}))
    with pytest.raises(FitError, match=r"bad: no usable timeline .*none of the 2 is a readable Horovod timeline "
                                       r"\(first: bad/timelines/x\.json: not a Horovod timeline") as e:
        fit_env(env)
    assert "\n" not in str(e.value)
    assert len(env.problems) == 2
