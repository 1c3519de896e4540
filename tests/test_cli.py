"""CLI end to end on the committed models, and bad input -> one line, exit 2."""
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from cli_helpers import assert_one_line_error, run  # noqa: E402
from refit import assert_refit_close, refit_mismatches  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_simulate_json_defaults():
    """Unset knobs take the defaults of the env's own Horovod release: the default env (v100-16gbit, lab report 001)
    ran 0.20.3, whose defaults are 64 MiB / 5 ms; a fresh env ran 0.28.1 (128 MiB / 1 ms)."""
    p = run("simulate", "--model", "resnet50", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["config"]["fusion_threshold_mb"] == 64 and d["config"]["cycle_time_ms"] == 5.0
    assert d["reference_version"] == "0.20.3"
    assert d["step_time_ms"] > 0 and d["score_bytes_per_us"] > 0
    d = json.loads(run("simulate", "--model", "resnet50", "--env", "fresh-poll-2gbit", "--compute-ms", "100",
                       "--json").stdout)
    assert d["config"]["fusion_threshold_mb"] == 128 and d["config"]["cycle_time_ms"] == 1.0
    assert d["reference_version"] == "0.28.1"


def test_simulate_what_ifs_move_the_prediction():
    base = json.loads(run("simulate", "--model", "vgg16", "--json").stdout)["step_time_ms"]
    slow = json.loads(run("simulate", "--model", "vgg16", "--link-gbit", "8", "--json").stdout)["step_time_ms"]
    fp16 = json.loads(run("simulate", "--model", "vgg16", "--compression", "fp16", "--json").stdout)["step_time_ms"]
    assert slow > base > fp16


def test_suggest_json_shape_and_controls():
    p = run("suggest", "--model", "resnet50", "--json", "--n-calls", "8")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert set(d) >= {"env", "model", "default", "proposals"}
    best = d["proposals"][0]
    assert set(best) >= {"config", "step_time_ms", "speedup_vs_default", "score_bytes_per_us", "horovodrun_flags"}
    # the defaults are evaluated as a control, so the best proposal is never predicted slower
    assert best["step_time_ms"] <= d["default"]["step_time_ms"] + 1e-9
    assert "--fusion-threshold-mb" in best["horovodrun_flags"]


def test_fit_writes_models(refit_all):
    p, out = refit_all
    assert p.returncode == 0, p.stderr
    assert (out / "v100-16gbit.json").exists() and (out / "v100-16gbit-bandwidth.png").exists()
    committed = json.loads((ROOT / "autotuner" / "models" / "v100-16gbit.json").read_text())
    fresh = json.loads((out / "v100-16gbit.json").read_text())
    # fitting again reproduces the committed model
    # (tests/refit.py: a refit is compared with a stated tolerance, 1e-4 relative, never ==)
    assert_refit_close(fresh["cost_model"]["inter"], committed["cost_model"]["inter"])
    assert_refit_close(fresh["workloads"]["resnet50"]["forward_ms"], committed["workloads"]["resnet50"]["forward_ms"])
    # the environment measured here is fitted from its trials' timelines, and reproduced too
    local = json.loads((out / "local-gloo-1gbit.json").read_text())
    committed_local = json.loads((ROOT / "autotuner" / "models" / "local-gloo-1gbit.json").read_text())["cost_model"]
    assert_refit_close(local["cost_model"]["inter"], committed_local["inter"])
    assert_refit_close(local["cost_model"]["memcpy_gbytes_per_s"], committed_local["memcpy_gbytes_per_s"])
    assert local["fit"]["n_trials"] == 6 and local["fit"]["r2"] > 0.99
    # size-dependent latency and host passes come from the kept timelines of the fit sweep
    assert_refit_close(local["cost_model"]["host_passes"], committed_local["host_passes"])
    assert local["fit"]["piecewise"]["knee_bytes"] > 0 and len(local["fit"]["host_passes"]["timelines"]) == 6


def test_a_refit_of_the_committed_runs_gives_every_shipped_cost_model(refit_all):
    """Every model file ``fit runs/`` writes charges what the shipped one does (its ``cost_model``) and carries its
    ``trust`` (the real trials it was checked on: the band ``suggest`` holds gains against and the trust line of
    every prediction), within the stated refit tolerance (tests/refit.py): a change to the fit that moves a charged
    term, or validation records added under an env, show here until the shipped models are refitted
    (fresh-poll-2x1-2.5gbit's said "never checked against a real run" beside 50 committed trials)."""
    p, out = refit_all
    assert p.returncode == 0, p.stderr
    written = sorted(f.name for f in out.glob("*.json"))
    assert len(written) >= 18, written
    for name in written:
        shipped = ROOT / "autotuner" / "models" / name
        assert shipped.is_file(), f"{name}: fitted from runs/ but not shipped"
        got, want = json.loads((out / name).read_text()), json.loads(shipped.read_text())
        bad = (refit_mismatches(got.get("cost_model"), want.get("cost_model"), path="cost_model")
               + refit_mismatches(got.get("trust"), want.get("trust"), path="trust"))
        assert not bad, (name, bad[:10])


def test_the_fit_table_gives_each_env_its_large_message_busbw(refit_all):
    """The summary table's busbw is the large-message plateau (nccl-tests' sense): a sweep tier's segment from its
    knee where it has one, never the slope below the knee, which is ~0 where small spans are all fixed cost (it printed
    51897.31 Gbit/s for fresh-poll-2.75gbit's 2.75 Gbit/s link, 610132.36 for fresh-poll-2gbit's)."""
    p, out = refit_all
    rows = {ln.split()[0]: ln.split() for ln in p.stdout.splitlines() if ln.startswith(("fresh-", "v100-", "local-"))
            and len(ln.split()) > 1 and ln.split()[1] in ("sweep", "steps", "alpha-beta")}  # the table's rows
    for env in ("fresh-poll-2.75gbit", "fresh-poll-2gbit", "v100-16gbit"):
        inter = json.loads((out / f"{env}.json").read_text())["cost_model"]["inter"]
        want = inter.get("large_bandwidth_gbps", inter["bandwidth_gbps"])
        cells = rows[env]
        assert f"{want:.2f}" in cells, (env, cells)
        assert float(cells[cells.index(f"{want:.2f}")]) < 100, (env, cells)


def test_missing_runs_dir(tmp_path):
    assert_one_line_error(run("fit", str(tmp_path / "nope"), "--out", str(tmp_path)), "runs directory not found")


def test_empty_runs_dir(tmp_path):
    (tmp_path / "runs").mkdir()
    assert_one_line_error(run("fit", str(tmp_path / "runs"), "--out", str(tmp_path)), "no environment")


def test_fit_takes_an_environment_s_own_folder_and_wraps_its_regime_lines_at_80_columns(tmp_path):
    """``autotuner fit runs/mycluster`` (the folder ``measure --env mycluster`` wrote, env.toml inside) fits that
    environment, as ``fit runs/`` does (it said "no environment (folder with env.toml) found" of a folder holding
    one); piped at 80 columns, every line of "where each figure comes from" fits in 80 columns, each figure's
    continuation indented under it."""
    import os

    p = run("fit", str(ROOT / "runs" / "fresh-poll-2x1-2.5gbit"), "--out", str(tmp_path),
            env={**os.environ, "COLUMNS": "80"})
    assert p.returncode == 0, p.stderr
    # checked against the same real trials as ``fit runs/`` checks it (it counted 10 trials of 50, no repeat spread)
    got = json.loads((tmp_path / "fresh-poll-2x1-2.5gbit.json").read_text())["trust"]
    want = json.loads((ROOT / "autotuner" / "models" / "fresh-poll-2x1-2.5gbit.json").read_text())["trust"]
    assert got["trials"] == 50 and not refit_mismatches(got, want)
    lines = p.stdout.splitlines()
    at = lines.index("fresh-poll-2x1-2.5gbit: where each figure comes from")
    regime = lines[at + 1:next(i for i, ln in enumerate(lines) if ln.startswith("wrote "))]
    assert len(regime) > 12 and all(len(ln) <= 80 for ln in regime), max(regime, key=len)
    assert all(ln.startswith("  ") for ln in regime)
    assert sum(ln.startswith("    ") for ln in regime) > sum(not ln.startswith("    ") for ln in regime) > 8



def test_fit_s_table_keeps_one_line_per_env_at_80_columns(tmp_path):
    """Piped at 80 columns, ``fit``'s table gives each env one line when no cell needs more (its "form" cell took five
    lines per env and its header broke "Gbit/s" in two), drops the "models" column when no env has a fitted model,
    and says once under the table what each form means; an env with fitted models gets them, with their compute and
    comm scale, on lines of their own."""
    import os

    runs = tmp_path / "runs"
    for env in ("fresh-poll-2x1-2.5gbit", "fresh-poll-2.5gbit"):
        shutil.copytree(ROOT / "runs" / env, runs / env)
    p = run("fit", str(runs), "--out", str(tmp_path / "m"), env={**os.environ, "COLUMNS": "80"})
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    head = lines.index("fitted environments")
    rule = next(i for i in range(head, len(lines)) if lines[i].startswith("---"))
    header = " ".join(lines[head + 1:rule])
    assert "Gbit/s" in header.split() and "models" not in header
    assert [ln.split()[:2] for ln in lines[rule + 1:rule + 3]] == [["fresh-poll-2.5gbit", "sweep"],
                                                                  ["fresh-poll-2x1-2.5gbit", "sweep"]]
    assert not lines[rule + 3].startswith(" ")  # no continuation line
    assert "form sweep: alpha-beta (ring), from an allreduce sweep" in lines
    shutil.copytree(ROOT / "runs" / "v100-16gbit", runs / "v100-16gbit")
    p = run("fit", str(runs), "--out", str(tmp_path / "m2"), env={**os.environ, "COLUMNS": "80"})
    assert p.returncode == 0, p.stderr
    assert "models" in p.stdout.splitlines()[1]
    assert any(ln.startswith("v100-16gbit: models (compute ms, comm scale): resnet50 (") for ln in p.stdout.splitlines())
    assert all(len(ln) <= 80 for ln in p.stdout.splitlines()[:12])


def test_envs_fits_80_columns_with_each_env_s_frameworks_and_checked_figures():
    """``autotuner envs`` piped at 80 columns: no line wider (its trust column's words made lines of 90), every env
    of both frameworks on at most two lines (it took nine), the frameworks that answer for it, and its checked
    figures as the API gives them (``checked``: mean and worst error, trials; fresh-poll-2x1-2.5gbit's 6.3 % and
    +20.8 % over 50 trials), ``never`` where not checked. ``--framework ddp``: the DDP envs alone."""
    import os

    import autotuner

    rows = {r["env"]: r for r in autotuner.envs()}
    assert rows["fresh-poll-2x1-2.5gbit"]["horovod"]["checked"]["trials"] == 50
    assert rows["v100-5gbit"]["horovod"]["checked"] is None
    assert rows["ddp-2x1-3gbit"]["frameworks"] == ["ddp"] and rows["v100-5gbit"]["frameworks"] == ["horovod"]
    p = run("envs", env={**os.environ, "COLUMNS": "80"})
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert max(len(ln) for ln in lines) <= 80
    rule = next(i for i, ln in enumerate(lines) if ln.startswith("---"))
    starts = [i for i in range(rule + 1, len(lines)) if lines[i][:1].strip()]  # an env's first line
    table_end = next(i for i in starts if lines[i].startswith(("models calibrated", "answers:")))
    firsts = [i for i in starts if i < table_end]
    assert len(firsts) == len(rows)
    for a, b in zip(firsts, firsts[1:] + [table_end]):  # two lines; a third for an untrusted env's mark
        assert b - a <= 2 or (b - a == 3 and lines[a + 2].strip() == "untrusted"), lines[a:b]
    first = {lines[i].split()[0]: lines[i] for i in firsts}
    assert first["fresh-poll-2x1-2.5gbit"].endswith("6.3/+20.8") and first["v100-5gbit"].endswith("never")
    assert first["ddp-2x1-3gbit"].split()[1] == "ddp" and first["v100-5gbit"].split()[1] == "horovod"
    p = run("envs", "--framework", "ddp", "--json")
    assert p.returncode == 0 and {r["env"] for r in json.loads(p.stdout)} == {
        e for e, r in rows.items() if "ddp" in r["frameworks"]}
    assert_one_line_error(run("envs", "--framework", "jax"), "--framework")

def test_accuracy_names_each_env_once_and_fits_80_columns():
    """``autotuner accuracy`` piped at 80 columns: per env a heading, then one table per source file named in its
    title, neither repeated on every row (an env column took 24 of the 80 and wrapped each quantity over six lines; a
    source column, 30 more, still wrapped a quantity over five), the row's trials or report line in a narrow "from"
    column, a row the fit read marked in its quantity (a legend says what the mark means); every table line within
    80, a replay's quantity on at most two lines. ``--env E``: E's tables alone."""
    import os

    legend = "(used by the fit): the fit read this number"
    p = run("accuracy", env={**os.environ, "COLUMNS": "80"})
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    first, end = lines.index("predicted vs measured: fresh-0.5gbit"), next(
        i for i, ln in enumerate(lines) if ln.startswith(legend))
    assert max(len(ln) for ln in lines[first:end]) <= 80
    titles = [ln for ln in lines if ln.startswith("predicted vs measured: ")]
    assert len(titles) == len(set(titles)) >= 30 and "predicted vs measured: v100-16gbit" in titles
    assert any(ln.endswith("(used by the fit)") or " (used by the fit) " in ln for ln in lines[first:end])
    p = run("accuracy", "--env", "fresh-poll-2x1-2.5gbit", env={**os.environ, "COLUMNS": "80"})
    lines = p.stdout.splitlines()
    title = lines.index("predicted vs measured: fresh-poll-2x1-2.5gbit")
    table = lines[title + 1:next(i for i, ln in enumerate(lines) if ln.startswith(legend))]
    assert max(len(ln) for ln in table) <= 80
    files = [i for i, ln in enumerate(table) if ln.startswith("validation/")]
    assert [table[i] for i in files] == ["validation/small-distilbert-nt.jsonl", "validation/small-vit_s16-nt.jsonl"]
    assert all(table[i + 1].split() == ["quantity", "measured", "predicted", "error", "from"] for i in files)
    assert not any("fresh-poll-2x1-2.5gbit/" in ln for ln in table) and "(used by the fit)" not in "".join(table)
    rows = [i for i, ln in enumerate(table) if ln.startswith(("distilbert", "vit_s16"))]
    assert len(rows) == 10 and all(table[i].endswith("5 trials") for i in rows)
    # each row ends where the next row, the next file or the end begins: its quantity wrapped over two lines at most
    ends = sorted(rows[1:] + files[1:] + [len(table)])
    assert all(min(e for e in ends if e > i) - i <= 2 for i in rows)


def test_broken_row_is_reported_and_rest_fits(tmp_path):
    shutil.copytree(ROOT / "runs" / "v100-16gbit", tmp_path / "runs" / "v100-16gbit")
    rep = tmp_path / "runs" / "v100-16gbit" / "report-000.md"
    rep.write_text(rep.read_text().replace("|(10MB, 20MB]|364|16.14|", "|(10MB, 20MB]|36x4|16.14|"))
    p = run("fit", str(tmp_path / "runs"), "--out", str(tmp_path / "model"))
    assert p.returncode == 0, p.stderr
    assert "report-000.md:41: skipped broken row" in p.stderr
    assert (tmp_path / "model" / "v100-16gbit.json").exists()


def test_unknown_model():
    assert_one_line_error(run("suggest", "--model", "alexnet9000"), "unknown model 'alexnet9000'")


def test_negative_threshold():
    assert_one_line_error(run("simulate", "--model", "resnet50", "--fusion-threshold-mb", "-1"), "--fusion-threshold-mb must be in 0..512 MiB")


def test_unknown_env():
    assert_one_line_error(run("simulate", "--model", "resnet50", "--env", "nope"), "unknown env 'nope'")


def test_layout_json_path(tmp_path):
    f = tmp_path / "tiny.json"
    f.write_text(json.dumps({"name": "tiny", "tensors": [{"name": "w", "shape": [1024, 1024], "compute_share": 1.0}]}))
    p = run("simulate", "--model", str(f), "--compute-ms", "50", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["bytes_per_step"] == 4 * 1024 * 1024


def test_inspect_explains_the_real_autotune_log():
    log = ROOT / "runs" / "local-gloo-1gbit" / "fixtures" / "autotune-log-hvd0.28.1-gloo-2ranks.csv"
    p = run("inspect", str(log), "--model", "resnet50")
    assert p.returncode == 0, p.stderr
    assert "24 scored trial" in p.stdout and "Tuning finished" in p.stdout
    assert "fusion threshold 8 MiB, cycle time 10 ms" in p.stdout
    # 102,228,128 bytes per step / 53.3424 bytes/us = 1916 ms per step
    assert "1916 ms" in p.stdout


@pytest.mark.parametrize("args,needle", [
    (["inspect", "no/such.csv"], "no/such.csv"),
    (["validate", "--env", "x", "--model", "nosuchmodel", "--no-autotune"], "nosuchmodel"),
    (["validate", "--env", "x", "--model", "resnet50", "--link-gbit", "-1"], "--link-gbit"),
    (["validate", "--env", "x", "--model", "resnet50", "--proposals", "no/such.json"], "no/such.json"),
])
def test_validate_and_inspect_bad_input(args, needle, tmp_path):
    assert_one_line_error(run(*args, "--runs-dir", str(tmp_path)) if args[0] == "validate" else run(*args), needle)


def test_validate_proposals_file_with_a_bad_config(tmp_path):
    f = tmp_path / "p.json"
    f.write_text('[{"fusion_threshold_mb": -4, "cycle_time_ms": 1}]')
    p = run("validate", "--env", "x", "--model", "resnet50", "--proposals", str(f), "--runs-dir", str(tmp_path))
    assert_one_line_error(p, "proposal 1")


# --------------------------------------------------------------------------- old option names still work

def test_old_what_if_spellings_still_work_and_say_so(tmp_path):
    """``--bandwidth-gbps`` (now ``--link-gbit``), simulate's ``--timeline`` (``--timeline-filename``), explore's
    ``--pick`` (``--proposals``) and env new's ``--inter-gbit`` (``--link-gbit``): the same answer, and one line on
    stderr naming the new spelling."""
    new = run("simulate", "--model", "vgg16", "--link-gbit", "8", "--timeline-filename", str(tmp_path / "a.json"),
              "--json")
    old = run("simulate", "--model", "vgg16", "--bandwidth-gbps", "8", "--timeline", str(tmp_path / "b.json"), "--json")
    assert new.returncode == old.returncode == 0, old.stderr
    assert json.loads(old.stdout)["step_time_ms"] == json.loads(new.stdout)["step_time_ms"]
    assert old.stderr.splitlines() == ["warning: --bandwidth-gbps is deprecated; use --link-gbit",
                                       "warning: --timeline is deprecated; use --timeline-filename"]
    assert (tmp_path / "a.json").read_text() == (tmp_path / "b.json").read_text()
    assert_one_line_error(run("simulate", "--model", "vgg16", "--bandwidth-gbps", "8", "--link-gbit", "9"),
                          "--link-gbit and --bandwidth-gbps (its old name): give one")

    scale = [run("scale", "--model", "vgg16", "--env", "v100-16gbit", "--nodes", "1,2", opt, "4,16", "--json", "--out",
                 str(tmp_path / opt)) for opt in ("--link-gbit", "--bandwidth-gbps")]
    assert json.loads(scale[0].stdout)["rows"] == json.loads(scale[1].stdout)["rows"]
    assert scale[1].stderr.splitlines() == ["warning: --bandwidth-gbps is deprecated; use --link-gbit"]

    pick = tmp_path / "pick.json"
    pick.write_text(run("suggest", "--model", "resnet50", "--env", "local-gloo-1gbit", "--json").stdout)
    ex = [run("explore", "--model", "resnet50", "--env", "local-gloo-1gbit", "--resolution", "3", opt, str(pick),
              "--out", str(tmp_path / opt), "--json") for opt in ("--proposals", "--pick")]
    assert json.loads(ex[0].stdout)["marks"] == json.loads(ex[1].stdout)["marks"]
    assert ex[1].stderr.splitlines() == ["warning: --pick is deprecated; use --proposals"]

    p = run("env", "new", "x8", "--nodes", "2", "--gpus-per-node", "1", "--inter-gbit", "10", "--out", str(tmp_path))
    assert p.returncode == 0 and "10 Gbit/s between nodes" in p.stdout
    assert p.stderr.splitlines() == ["warning: --inter-gbit is deprecated; use --link-gbit"]


def _invoke(monkeypatch, api: str, result, argv: list[str]):
    """``autotuner ARGV`` in this process with ``autotuner.<api>`` replaced by a recorder returning ``result``: what
    the command line passes the real-run API (these commands start real jobs). Returns (exit code, stderr lines,
    the keywords passed)."""
    from typer.testing import CliRunner

    import autotuner
    from autotuner.cli import app

    got = {}

    def fake(*a, **kw):
        got.update(kw)
        if kw.get("on_event"):
            kw["on_event"]("trial 1 of 1: done")  # the line a real run's API emits per trial
        return result
    monkeypatch.setattr(autotuner, api, fake)
    r = CliRunner().invoke(app, argv)
    if "--json" in argv and r.exit_code == 0:
        json.loads(r.stdout)  # the result alone on stdout
    return r.exit_code, r.stderr.splitlines(), got


@pytest.mark.parametrize("argv, want, line", [
    (["--replay-wait", "sleep"], {"wait": "sleep"}, "--replay-wait is deprecated; use --wait"),
    (["--bandwidth-gbit", "2"], {"link_gbit": 2.0, "loopback_gbit": None}, "--bandwidth-gbit is deprecated; use "
                                                                           "--link-gbit"),
    (["--testbed-hosts", "2", "--ranks-per-host", "1", "--link-gbit", "3", "--bandwidth-gbit", "10"],
     {"link_gbit": 3.0, "loopback_gbit": 10.0}, "--bandwidth-gbit is deprecated; use --loopback-gbit"),
])
def test_old_real_run_spellings_reach_the_api_under_the_new_names(monkeypatch, argv, want, line):
    rc, err, got = _invoke(monkeypatch, "validate", SimpleNamespace(records=(), report="r.md", verdict="v"),
                           ["validate", "--env", "e", "--model", "resnet50", *argv])
    assert rc == 0 and err == [f"warning: {line}", "trial 1 of 1: done"], err
    assert {k: got[k] for k in want} == want
    tune = SimpleNamespace(final=None, steps=0, trials=0, wall_s=0, stop="s", refits=(), defaults_ms=(), report="r",
                           trust="t", head_to_head=None)
    rc, err, got = _invoke(monkeypatch, "tune", tune, ["tune", "--env", "e", "--model", "resnet50", "--json", *argv])
    assert rc == 0 and err == [f"warning: {line}"] and {k: got[k] for k in want} == want


def test_old_phase_count_spellings_reach_the_api_as_rounds(monkeypatch):
    phases = ("cpu", "trickle", "idle", "burst", "mid", "step", "fused", "fp16")
    summary = {"largest_allreduce": None, "items_new": 0, "items_recorded": 0, "items_total": 0, "records": "r",
               "wall_s": 0, "network": "n", "runs_dir": "x"}
    rc, err, got = _invoke(monkeypatch, "measure", summary, [
        "measure", "--env", "e", "--json", *(a for i, p in enumerate(phases) for a in (f"--{p}-repeats", str(i)))])
    assert rc == 0 and err == [f"warning: --{p}-repeats is deprecated; use --{p}-rounds" for p in phases]
    assert {p: got[f"{p}_rounds"] for p in phases} == {p: i for i, p in enumerate(phases)}
    old = {"--jobs": "sweep_rounds", "--burst-jobs": "burst_rounds", "--first-touch-jobs": "first_touch_rounds",
           "--cpu-jobs": "cpu_rounds"}
    rc, err, got = _invoke(monkeypatch, "ddp_measure", Path("x/ddp-sweep.jsonl"), [
        "ddp", "measure", "--env", "e", "--json", "--bandwidth-gbit", "2",
        *(a for i, o in enumerate(old) for a in (o, str(i + 1)))])
    assert rc == 0 and err == [f"warning: {o} is deprecated; use --{k.replace('_', '-')}" for o, k in old.items()] + [
        "warning: --bandwidth-gbit is deprecated; use --link-gbit"]
    assert {k: got[k] for k in old.values()} == {k: i + 1 for i, k in enumerate(old.values())}
    assert got["link_gbit"] == 2.0 and got["loopback_gbit"] is None


def test_fit_inspect_and_env_new_print_json(tmp_path):
    """``--json`` on the commands that had none: the result alone on stdout, as the table shows it."""
    p = run("fit", str(ROOT / "runs" / "fresh-poll-2.5gbit"), "--out", str(tmp_path), "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    (row,) = d["fitted"]
    assert row["env"] == "fresh-poll-2.5gbit" and Path(row["model_file"]).is_file() and row["form"].startswith("alpha")
    assert 0 < row["busbw_gbps"] < 10 and d["model_dir"] == str(tmp_path)
    log = ROOT / "runs" / "local-gloo-1gbit" / "fixtures" / "autotune-log-hvd0.28.1-gloo-2ranks.csv"
    d = json.loads(run("inspect", str(log), "--model", "resnet50", "--json").stdout)
    assert any("1916 ms" in ln for ln in d["lines"]) and d["model"] == "resnet50"
    p = run("env", "new", "x8", "--nodes", "2", "--gpus-per-node", "8", "--intra", "nvlink3", "--link-gbit", "100",
            "--out", str(tmp_path), "--json")
    d = json.loads(p.stdout)
    assert d["link_gbit"] == 100 and d["source"] == "specs" and Path(d["path"]).is_file() and not p.stderr


def test_validate_and_ddp_measure_print_json(monkeypatch):
    """``--json``: the result alone on stdout and the real run's trial lines kept off stderr; without it those lines
    are the run's log on stderr."""
    res = SimpleNamespace(records=({"trial": 1},), report="r.md", verdict="v")
    rc, err, got = _invoke(monkeypatch, "validate", res, ["validate", "--env", "e", "--model", "resnet50", "--json"])
    assert rc == 0 and not err
    rc, err, got = _invoke(monkeypatch, "validate", res, ["validate", "--env", "e", "--model", "resnet50"])
    assert rc == 0 and err == ["trial 1 of 1: done"]
    for argv, want in ((["--json"], []), ([], ["trial 1 of 1: done"])):
        rc, err, got = _invoke(monkeypatch, "ddp_measure", Path("runs/e/ddp-sweep.jsonl"),
                               ["ddp", "measure", "--env", "e", *argv])
        assert rc == 0 and err == want


# --------------------------------------------------------------------------- progress

#: what a progress display leaves in a stream: cursor and colour escapes, carriage returns, the spinner's frames
ARTEFACTS = ("\x1b", "\r", "⠋", "⠙", "⠹", "━")


def _pty_run(argv: list[str], timeout: float = 300) -> str:
    """``python -m autotuner.cli ARGV`` with stdout and stderr on a pseudo-terminal, as a user's shell runs it;
    returns everything it wrote there."""
    import os
    import pty
    import subprocess
    import sys
    import time

    master, slave = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120"}
    p = subprocess.Popen([sys.executable, "-m", "autotuner.cli", *argv], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                         stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    chunks, t0 = [], time.monotonic()
    try:
        while time.monotonic() - t0 < timeout:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
        p.wait(timeout=60)
    assert p.returncode == 0, b"".join(chunks)[-2000:]
    return b"".join(chunks).decode(errors="replace")


def test_long_commands_show_progress_on_a_terminal_only(tmp_path):
    """``fit``, ``explore``, ``scale`` and DDP's ``ddp explore``, ``ddp scale``, ``ddp envs`` run for seconds: on a
    terminal a progress display names the stage the API reports (``explore: the grid``); piped (a file, CI) or with
    ``--json`` nothing of it reaches either stream, whose bytes are the command's alone."""
    explore = ["explore", "--model", "resnet50", "--env", "local-gloo-1gbit", "--resolution", "48", "--out",
               str(tmp_path / "e")]
    shown = _pty_run(explore)
    assert "explore: " in shown and "\x1b[" in shown, shown[-1500:]
    assert "explore: the grid" in shown or "explore: the plots" in shown, shown[-1500:]
    as_json = _pty_run([*explore, "--json"])
    assert not any(a in as_json.replace("\r\n", "\n") for a in ARTEFACTS if a != "\x1b"), as_json[:500]
    assert "explore: " not in as_json
    for argv in (explore, ["scale", "--model", "vgg16", "--env", "v100-16gbit", "--nodes", "1,2,4", "--out",
                           str(tmp_path / "s")],
                 ["fit", str(ROOT / "runs" / "fresh-poll-2.5gbit"), "--out", str(tmp_path / "m")],
                 ["ddp", "explore", "--env", "ddp-2x1-3gbit", "--model", "resnet101", "--out", str(tmp_path / "d")],
                 ["ddp", "scale", "--env", "ddp-2x1-3gbit", "--model", "resnet101", "--nodes", "1,2",
                  "--out", str(tmp_path / "d")],
                 ["ddp", "envs"]):
        p = run(*argv)
        assert p.returncode == 0, p.stderr
        for stream in (p.stdout, p.stderr):
            assert not any(a in stream for a in ARTEFACTS), (argv, stream[-500:])
        assert not any(ln.startswith(("fit:", "explore:", "scale:", "ddp ")) for ln in p.stderr.splitlines()), argv
