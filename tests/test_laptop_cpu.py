"""Lab report 003 (laptop i7-9750H, CPU-only MPI ranks) as a fitted environment.

The fit (autotuner.frameworks.horovod.fit.cpu_scaling), the contention form (autotuner.model.contention), the
held-out check (ResNet50 fits the contention, ResNet18 is predicted) and why it cannot pass,
simulate through make_scenario and the CLI, and damaged rows. docs/explanation/laptop-cpu.md.
"""
import math
import shutil
from pathlib import Path

import pytest

from autotuner.frameworks.horovod.environments import fit_runs
from autotuner.frameworks.horovod.predict import make_scenario
from autotuner.errors import CostModelError, FitError, SchemaError
from autotuner.frameworks.horovod.fit.fitters import fit_env
from autotuner.model.contention import Contention
from autotuner.readers.labreport import parse_cpu_scaling
from autotuner.readers.layouts import load_layout
from autotuner.frameworks.horovod.readers.runs import read_env, read_env_meta
from cli_helpers import run
from conftest import ROOT

ENV = ROOT / "runs" / "laptop-cpu"
REPORT = ENV / "report-003.md"
#: the report's step times (s), by model and processes (lines 26-29, 49-52)
STEPS = {"resnet50": {1: 244.66, 2: 143.76, 4: 77.44, 8: 82.46},
         "resnet18": {1: 86.4, 2: 55.6, 4: 37.4, 8: 40.3}}
LINES = {"resnet50": {1: 26, 2: 27, 4: 28, 8: 29}, "resnet18": {1: 49, 2: 50, 4: 51, 8: 52}}


@pytest.fixture(scope="module")
def fitted():
    env = read_env(ENV)
    return env, fit_env(env)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    # only this environment: the others' fits are not this file's to test (tests/test_cli.py fits them all)
    runs = tmp_path_factory.mktemp("runs")
    shutil.copytree(ENV, runs / "laptop-cpu")
    out = tmp_path_factory.mktemp("models")
    fitted, problems = fit_runs(runs, out)
    assert [d["env"] for d, _, _ in fitted] == ["laptop-cpu"] and problems == []
    return out


def _copy_env(tmp_path: Path) -> Path:
    d = tmp_path / "laptop-cpu"
    shutil.copytree(ENV, d)
    return d


def _damage(d: Path, no: int, old: str, new: str) -> None:
    f = d / "report-003.md"
    lines = f.read_text(encoding="utf-8").splitlines(keepends=True)
    assert old in lines[no - 1], (no, lines[no - 1])
    lines[no - 1] = lines[no - 1].replace(old, new, 1)
    f.write_text("".join(lines), encoding="utf-8")


# --- the contention form ----------------------------------------------------------------------

@pytest.mark.parametrize("p", [0.0, 0.1, 0.3222, 0.7, 1.0])
@pytest.mark.parametrize("cores", [1, 4, 5.5, 8])
def test_slowdown_is_one_alone_and_never_falls(p, cores):
    c = Contention(8, cores, p)
    assert c.slowdown(1) == pytest.approx(1.0, abs=1e-12)
    s = [c.slowdown(n) for n in range(1, 33)]
    assert all(b >= a - 1e-12 for a, b in zip(s, s[1:])), s
    assert all(x >= 1.0 - 1e-12 for x in s)


def test_slowdown_limits_and_the_fitted_shape():
    assert [Contention(8, 4, 0.0).slowdown(n) for n in (1, 2, 4, 8)] == [1.0, 1.0, 1.0, 2.0]  # processor sharing
    assert [Contention(8, 4, 1.0).slowdown(n) for n in (1, 2, 4, 8)] == pytest.approx([1, 2, 4, 8])  # all threaded
    c = Contention(8, 4, 0.3)
    alone = 0.7 + 0.3 / 4
    assert c.slowdown(2) == pytest.approx((0.7 + 0.3 * 2 / 4) / alone)
    assert c.slowdown(8) == pytest.approx(2 * c.slowdown(4))  # beyond the cores: time-shared
    assert 1 < c.slowdown(2) < c.slowdown(4)  # fewer cores for each rank's intra-op threads


def test_contention_round_trip_and_bad_values():
    c = Contention(8, 4, 0.25)
    d = c.to_dict()
    assert d["form"] and d["logical_cpus"] == 8
    assert Contention.from_dict(d) == c
    assert Contention.from_dict({"form": "processor-sharing", "logical_cpus": 8, "cores": 3.0}).slowdown(6) == 2.0
    for args in [(0, 1, 0), (8, 0, 0), (8, 9, 0), (8, 4, -0.1), (8, 4, 1.5)]:
        with pytest.raises(CostModelError):
            Contention(*args)
    with pytest.raises(CostModelError):
        c.slowdown(0)


# --- the fit of the committed environment ------------------------------------------------------

def test_fit_from_committed_runs(fitted):
    env, d = fitted
    assert env.problems == []
    assert d["env"] == "laptop-cpu" and d["cluster"]["nodes"] == 1 and d["cluster"]["gpus_per_node"] == 4
    assert d["contention"]["form"] == "intra-op-sharing" and d["contention"]["logical_cpus"] == 8
    assert d["contention"]["cores"] == 4
    p = d["contention"]["parallel_fraction"]
    assert 0.2 < p < 0.45, p
    for m in ("resnet50", "resnet18"):
        w = d["workloads"][m]
        assert w["work_per_step"] == "global"
        # the one per-model constant: the model's own 1-process step (s -> ms), no communication at 1 rank
        assert w["forward_ms"] + w["backward_ms"] == pytest.approx(STEPS[m][1] * 1e3, rel=1e-6)
        assert f"report-003.md:{LINES[m][1]} " in w["calibrated_on"]
    fit = d["fit"]
    assert fit["fitted_on"] == "resnet50"
    lines = [(n, f"laptop-cpu/report-003.md:{LINES['resnet50'][n]}") for n in (2, 4, 8)]
    assert [(r["ranks"], r["line"]) for r in fit["fit_rows"]] == lines
    assert all(abs(r["error_percent"]) < 7 for r in fit["fit_rows"]), fit["fit_rows"]
    assert [r["ranks"] for r in fit["held_out"]] == [2, 4, 8] and {r["model"] for r in fit["held_out"]} == {"resnet18"}
    for r in fit["held_out"] + fit["fit_rows"]:
        assert r["measured_s"] == STEPS[r["model"]][r["ranks"]]
        assert r["error_percent"] == pytest.approx((r["predicted_s"] / r["measured_s"] - 1) * 100)
    assert fit["assumed"]["shared_memory_tier"]["bandwidth_gbps"] == 40.0
    assert d["cost_model"]["inter"]["alpha_us"] == pytest.approx(2.0)


def test_row_checks_flag_the_inconsistent_columns(fitted):
    rc = {(r["model"], r["processes"]): r for r in fitted[1]["fit"]["row_checks"]}
    bad_total = {k for k, r in rc.items() if not r["total_consistent"]}
    # research/notes/lab-reports-002-004-arithmetic.md: total = N x per process fails at R50 N=8, R18 N=1, 4, 8
    assert bad_total == {("resnet50", 8), ("resnet18", 1), ("resnet18", 4), ("resnet18", 8)}
    assert rc[("resnet50", 8)]["speedup_minus_ratio_percent"] == pytest.approx((3.04 / (244.66 / 82.46) - 1) * 100)
    assert all(abs(r["speedup_minus_ratio_percent"]) < 3 for r in rc.values())


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="report 003's own numbers: no contention shared by ResNet50 and ResNet18 "
                   "fits both within 10% (test_held_out_bound_from_the_report, docs/explanation/laptop-cpu.md)")
def test_held_out_resnet18_within_10_percent(fitted):
    held = fitted[1]["fit"]["held_out"]
    assert [(r["ranks"], round(r["error_percent"], 1)) for r in held if abs(r["error_percent"]) > 10] == []


def test_held_out_resnet18_is_predicted_too_fast_at_every_rank_count(fitted):
    """What the xfail above fails on: the fit's held-out ResNet18 predicted 11-17 % too fast at 2 ranks, 20-27 % at
    4 and 25-33 % at 8, and the fit says it is not within its tolerance."""
    held = {r["ranks"]: r["error_percent"] for r in fitted[1]["fit"]["held_out"]}
    assert -17 < held[2] < -11 and -27 < held[4] < -20 and -33 < held[8] < -25, held
    assert fitted[1]["fit"]["held_out_within_tolerance"] is False


def test_held_out_bound_from_the_report():
    """The proof behind the xfail, on the report's numbers (docs/explanation/laptop-cpu.md, "Why 10% is impossible").

    Model class: T_m(N) = C_m·h(N)/N + c_m(N), h shared, h(1) = 1, C_m = T_m(1).
    (1) Communication negligible (c << T): T18(N)/T50(N) = C18/C50 for every N and every h. If both
        were within ±10%, the measured ratio could differ from that by at most 1.1/0.9.
    (2) Communication proportional to gradient bytes (c50 = k·c18, k = bytes ratio) added to the
        step: both within 10% at N=4 needs h(4) <= 4·(1.1·T50 - 0.9·k·T18)/(C50 - k·C18) < 1,
        i.e. a rank among 4 faster than alone.
    """
    rows, problems = parse_cpu_scaling(REPORT.read_text(encoding="utf-8"), ["resnet50", "resnet18"], "r.md")
    assert problems == []
    T = {m: {r.processes: r.step_time for r in rows if r.model == m} for m in ("resnet50", "resnet18")}
    T50, T18 = T["resnet50"], T["resnet18"]
    base = T18[1] / T50[1]
    for n in (4, 8):
        assert (T18[n] / T50[n]) / base > 1.1 / 0.9 + 0.1, n  # 1.37 and 1.38 vs 1.22
    k = load_layout("resnet50").sizes_bytes.sum() / load_layout("resnet18").sizes_bytes.sum()
    assert 2.1 < k < 2.3
    h4_max = 4 * (1.1 * T50[4] - 0.9 * k * T18[4]) / (T50[1] - k * T18[1])
    assert T50[1] - k * T18[1] > 0 and h4_max < 1.0, h4_max


def test_communication_is_negligible_at_the_assumed_tier(fitted):
    # (1) above applies: the simulated allreduces are < 0.2% of every step
    for r in fitted[1]["fit"]["fit_rows"] + fitted[1]["fit"]["held_out"]:
        assert 0 < r["comm_s"] < 0.002 * r["measured_s"], r


# --- simulate ----------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_make_scenario_matches_the_fit(model_dir, fitted, n):
    sc, fenv = make_scenario(model_dir, "laptop-cpu", "resnet18", gpus_per_node=n)
    assert sc.contention is not None and sc.global_work
    r = sc.simulate(fenv.measured_config)
    wl = sc.rank_workload
    assert wl.forward_s + wl.backward_s == pytest.approx(86.4 * sc.contention.slowdown(n) / n, rel=1e-9)
    if n == 1:
        assert r.step_time_s == pytest.approx(86.4, rel=1e-9) and r.comm_s == 0.0
    else:
        rec = next(x for x in fitted[1]["fit"]["held_out"] if x["ranks"] == n)
        assert r.step_time_s == pytest.approx(rec["predicted_s"], rel=1e-9)


def test_make_scenario_default_ranks_and_knee(model_dir):
    sc, fenv = make_scenario(model_dir, "laptop-cpu", "resnet50")
    assert sc.cluster.size == 4
    t = {n: make_scenario(model_dir, "laptop-cpu", "resnet50", gpus_per_node=n)[0].simulate(fenv.measured_config)
         .step_time_s for n in (1, 2, 4, 8, 16)}
    # beyond the 4 cores the ranks time-share them: a global step's compute no longer shrinks
    assert t[1] > t[2] > t[4] and t[4] <= t[8] < t[4] * 1.001 and t[8] <= t[16] < t[8] * 1.001, t


def test_cli_fit_then_simulate(refit_all):
    p, out = refit_all
    assert p.returncode == 0, p.stderr
    assert (out / "laptop-cpu.json").is_file()
    p = run("simulate", "--env", "laptop-cpu", "--model", "resnet18", "--gpus-per-node", "8",
            "--model-dir", str(out), "--json")
    assert p.returncode == 0, p.stderr
    import json
    d = json.loads(p.stdout)
    assert d["gpus_per_node"] == 8 and 20_000 < d["step_time_ms"] < 40_000, d["step_time_ms"]


# --- damaged input ----------------------------------------------------------------------------

def test_bad_rows_are_named_and_skipped(tmp_path):
    d = _copy_env(tmp_path)
    _damage(d, 51, "<center> 37.4", "<center> n/a")                # ResNet18, 4 processes: text in step time
    _damage(d, 29, "| <center>5.4  ", "")                           # ResNet50, 8 processes: a column missing
    env = read_env(d)
    m = fit_env(env)
    assert any(":51:" in p and "resnet18" in p for p in env.problems), env.problems
    assert any(":29:" in p and "resnet50" in p for p in env.problems), env.problems
    assert [r["ranks"] for r in m["fit"]["fit_rows"]] == [2, 4]
    assert [r["ranks"] for r in m["fit"]["held_out"]] == [2, 8]
    assert 0 < m["contention"]["parallel_fraction"] < 1 and set(m["workloads"]) == {"resnet50", "resnet18"}


def test_held_out_model_without_one_process_row_is_dropped(tmp_path):
    d = _copy_env(tmp_path)
    _damage(d, 49, "<center> 86.4", "<center> ?")
    env = read_env(d)
    m = fit_env(env)
    assert set(m["workloads"]) == {"resnet50"} and m["fit"]["held_out"] == []
    assert any("'resnet18'" in p and "1-process" in p for p in env.problems), env.problems


def test_fit_model_without_one_process_row_is_one_line_fit_error(tmp_path):
    d = _copy_env(tmp_path)
    _damage(d, 26, "<center> 244.66", "<center> x")
    with pytest.raises(FitError, match="resnet50.*1-process") as e:
        fit_env(read_env(d))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("old, new, field", [('fit_model = "resnet50"', 'fit_model = "vgg16"', "fit_model"),
                                             ("cores = 4", "cores = 12", "cores"),
                                             ("nodes = 1", "nodes = 2", "nodes"),
                                             ('step_unit = "s"', 'step_unit = "min"', "step_unit")])
def test_env_toml_schema(tmp_path, old, new, field):
    d = _copy_env(tmp_path)
    t = (d / "env.toml").read_text(encoding="utf-8")
    assert old in t
    (d / "env.toml").write_text(t.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(SchemaError, match=field):
        read_env_meta(d)


def test_step_unit_ms_scales_compute(tmp_path):
    d = _copy_env(tmp_path)
    t = (d / "env.toml").read_text(encoding="utf-8")
    (d / "env.toml").write_text(t.replace('step_unit = "s"', 'step_unit = "ms"', 1), encoding="utf-8")
    m = fit_env(read_env(d))
    w = m["workloads"]["resnet50"]
    assert math.isclose(w["forward_ms"] + w["backward_ms"], 244.66, rel_tol=1e-6)
