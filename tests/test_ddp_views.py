"""``ddp explore`` and ``ddp scale``: what-ifs on the Reducer simulator from a committed
DDP env's own sweep, through the public API and the command line."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cli_helpers import run

import autotuner

ENV, MODEL = "ddp-2x1-3gbit", "resnet101"
RUNS = Path(__file__).resolve().parents[1] / "runs"


def test_scale_at_the_envs_own_shape_is_suggests_answer_and_faster_links_never_hurt(tmp_path):
    """On the env's own shape and link the scale row's defaults and recommendation are ``ddp suggest``'s; a faster
    link never makes a step slower; the first node count's efficiency is 1; 1 rank (1 node x 1) has no collective,
    so its step is the compute and copies alone, the same at every link rate."""
    r = autotuner.ddp_scale(MODEL, ENV, nodes=[1, 2, 8], links_gbit=[3.0, 10.0], compute_ms=100, out_dir=tmp_path)
    s = autotuner.ddp_suggest(MODEL, ENV, compute_ms=100).suggestion
    rows = {(x.link_gbps, x.nodes): x for x in r.scaling.rows}
    own = rows[(3.0, 2)]
    assert own.default.step_time_ms == pytest.approx(s.default.step_time_ms, rel=1e-9)
    assert own.best.config == s.recommended.config
    for n in (1, 2, 8):
        assert rows[(10.0, n)].default.step_time_ms <= rows[(3.0, n)].default.step_time_ms + 1e-9
    assert rows[(3.0, 1)].default.step_time_ms == pytest.approx(rows[(10.0, 1)].default.step_time_ms)
    assert rows[(3.0, 1)].default_efficiency == pytest.approx(1.0)
    assert rows[(3.0, 8)].default_efficiency < rows[(3.0, 2)].default_efficiency < 1.0
    assert all(p.endswith((".png", ".svg")) and (tmp_path / p.split("/")[-1]).stat().st_size > 1000 for p in r.files)


def test_explore_puts_the_envs_replays_beside_the_curves(tmp_path):
    """The curves cover 0.25-256 MiB for each hook and view; the measured points are the env's replays of this
    layout (11 settings at the replays' 100 ms, in each of its two record files), each with the prediction
    ``ddp validate``'s rows give it."""
    from autotuner.frameworks.ddp.records import env_cost, rows

    r = autotuner.ddp_explore(MODEL, ENV, out_dir=tmp_path)
    ex = r.exploration
    assert r.compute_ms == 100.0 and set(ex.curves) == {"allreduce", "allreduce, view", "fp16 hook", "fp16 hook, view"}
    assert ex.caps_mib[0] == 0.25 and ex.caps_mib[-1] == 256.0
    # each record file of the layout is its own set of points: the second file's labels name it
    want = {(x.label if x.source == MODEL else f"{x.source}: {x.label}"): x.predicted_ms
            for x in rows(RUNS / ENV, env_cost(RUNS / ENV)[0]) if x.model == MODEL}
    assert len(ex.measured) == len(want) == 22 and {m[0]: m[4] for m in ex.measured} == pytest.approx(want)
    assert sum(m[0].startswith("resnet101-long: ") for m in ex.measured) == 11
    assert ex.default["allreduce"] == pytest.approx(want["25 MiB (default, first 1 MiB)"])


@pytest.mark.parametrize("cmd", [["scale", "--nodes", "1,2", "--link-gbit", "3"], ["explore"]])
def test_from_the_command_line(tmp_path, cmd):
    p = run("ddp", *cmd, "--env", ENV, "--model", MODEL, "--out",
            str(tmp_path), "--json", timeout=120)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["files"] and all((tmp_path / f.split("/")[-1]).exists() for f in d["files"])
    text = run("ddp", *cmd, "--env", ENV, "--model", MODEL,
               "--out", str(tmp_path), timeout=120, env={**os.environ, "COLUMNS": "80"})
    assert text.returncode == 0 and "…" not in text.stdout and "Traceback" not in text.stderr


@pytest.mark.parametrize("cmd", [["scale", "--nodes", "0"], ["scale", "--link-gbit", "-3"], ["scale", "--nodes", "x"],
                                 ["scale", "--batch-size", "0"], ["explore", "--compute-ms", "-1"],
                                 ["explore", "--env", "nope"], ["scale", "--model", "nope"]])
def test_bad_input_is_one_line_and_exit_2(tmp_path, cmd):
    args = {"--env": ENV, "--model": MODEL, "--out": str(tmp_path)}
    sub, rest = cmd[0], cmd[1:]
    args.update(dict(zip(rest[::2], rest[1::2])))
    p = run("ddp", sub, *sum(args.items(), ()), timeout=120)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, (cmd, p.stderr)


def test_ddp_envs_lists_every_committed_env_and_a_damaged_one_as_a_problem(tmp_path):
    """``autotuner ddp envs``: each committed DDP env with its shape, fitted line and queued saving (the burst
    phase); a folder whose sweep is damaged is listed with its one-line problem, never a traceback."""
    rows = {r["env"]: r for r in autotuner.ddp_envs()}
    assert {"ddp-2gbit", "ddp-2x1-3gbit", "ddp-2x2-5gbit"} <= set(rows)
    two = rows["ddp-2x1-3gbit"]
    assert (two["nodes"], two["ranks_per_node"], two["link_gbit"]) == (2, 1, 3.0)
    assert two["queued_saving_us"] == pytest.approx(609, abs=5) and two["fp16"] and "real DDP replays" in two["trust"]
    bad = tmp_path / "ddp-broken"
    bad.mkdir()
    (bad / "ddp-sweep.jsonl").write_text('{"ranks": 2}\n')
    p = run("ddp", "envs", "--runs-dir", str(tmp_path), "--json", timeout=120)
    assert p.returncode == 0, p.stderr
    got = {r["env"]: r for r in json.loads(p.stdout)}
    assert "problem" in got["ddp-broken"] and "\n" not in got["ddp-broken"]["problem"]
    assert "queued_saving_us" in got["ddp-2gbit"]  # the shipped envs follow the given folder



def test_ddp_envs_fits_80_columns_one_line_per_env(tmp_path):
    """``autotuner ddp envs`` piped at 80 columns: one line per env (its trust column took four), the checked figures
    the API gives (``checked``: mean and worst error of the env's real runs, trials, as its trust line says them), an
    unreadable env warned on stderr in one line."""
    import os

    import autotuner

    rows = {r["env"]: r for r in autotuner.ddp_envs()}
    c = rows["ddp-2x1-3gbit"]["checked"]
    assert c["trials"] > 0 and f"mean error {c['mean_error_pct']:.1f} %, worst {c['worst_pct']:+.1f} %" in \
        rows["ddp-2x1-3gbit"]["trust"]
    bad = tmp_path / "ddp-broken"
    bad.mkdir()
    (bad / "ddp-sweep.jsonl").write_text('{"ranks": 2}\n')
    p = run("ddp", "envs", "--runs-dir", str(tmp_path), env={**os.environ, "COLUMNS": "80"}, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    rule = next(i for i, ln in enumerate(lines) if ln.startswith("---"))
    table = lines[rule + 1:next(i for i, ln in enumerate(lines) if ln.startswith("checked:"))]
    assert max(len(ln) for ln in lines) <= 80 and all(ln[:1].strip() for ln in table)  # no continuation line
    assert any(ln.startswith("ddp-2x1-3gbit ") and ln.endswith(f"({c['trials']})") for ln in table)
    assert [ln for ln in p.stderr.splitlines() if ln.startswith("warning: ddp-broken: ")]

def test_ddp_validates_verdict_and_report_from_the_committed_replays(tmp_path):
    """``ddp validate`` ends with one verdict line and a Markdown report beside its records: the fastest measured
    setting against DDP's defaults, whether the simulator ranks it first, the errors; one table row per setting."""
    from autotuner.frameworks.ddp.api import report_markdown, verdict
    from autotuner.frameworks.ddp.records import env_cost, rows

    rs = [r for r in rows(RUNS / ENV, env_cost(RUNS / ENV)[0]) if r.model == "resnet50"]
    v = verdict(rs)
    best = min(rs, key=lambda r: r.measured_ms)
    assert v.startswith(f"fastest measured: {best.label}, {best.measured_ms:.1f} ms against DDP's defaults'")
    assert "the simulator ranks it first too" in v and "worst" in v
    md = report_markdown(ENV, "resnet50", rs, v, RUNS / ENV / "ddp-validation" / "resnet50.jsonl")
    assert md.count("\n| ") == len(rs) + 1 and f"**Verdict:** {v}" in md
    assert verdict([]) == "no setting measured"


def test_explore_plots_keep_an_env_name_with_a_dot(tmp_path):
    """``ddp explore --env ddp-2x1-1.5gbit`` wrote ``ddp-explore-ddp-2x1-1.png``: the figure writer replaced the text
    after the name's dot as if it were a suffix (two envs, 1.5 and 1.25 Gbit/s, would overwrite each other's plot).
    The writer appends ``.png`` and ``.svg`` to the whole stem."""
    r = autotuner.ddp_explore(MODEL, "ddp-2x1-1.5gbit", out_dir=tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["ddp-explore-ddp-2x1-1.5gbit-resnet101.png", "ddp-explore-ddp-2x1-1.5gbit-resnet101.svg"], names
    assert sorted(Path(f).name for f in r.files) == names
