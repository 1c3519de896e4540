"""The typed public API: ``autotuner.suggest`` / ``autotuner.simulate`` return frozen
records, and the command line prints what they return; tables never cut a number."""
from __future__ import annotations

import dataclasses
from dataclasses import replace
import json

import io

import pytest
from rich.console import Console
from rich.table import Table

import autotuner
from autotuner.errors import AutotunerError
from autotuner.frameworks.horovod.knobs import DEFAULTS_0_20, DEFAULTS_0_28, MIB, Config
from autotuner.render import plain_table, render_table

from cli_helpers import assert_one_line_error, run


def test_suggest_returns_a_frozen_typed_result():
    r = autotuner.suggest("vgg16")
    assert isinstance(r, autotuner.SuggestResult)
    assert isinstance(r.best, autotuner.Proposal) and isinstance(r.best.config, Config)
    # the default env, v100-16gbit, ran Horovod 0.20.3 (lab report 000): its defaults are the reference
    # (64 MiB, 5 ms), not 0.28's
    assert r.reference_version == "0.20.3" and r.default.config == DEFAULTS_0_20
    assert r.default.speedup_vs_default == pytest.approx(1.0)
    assert r.strategy == "grid" and r.evaluations > 100_000
    assert r.trust and r.trust.startswith("checked on")
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.env = "x"
    # the knob-only result is always there, and never compressed
    assert r.knob_only.compression == "none"
    assert json.loads(json.dumps(r.to_dict()))["proposals"][0]["config"] == r.best.config.to_dict()


def test_suggest_compares_with_the_envs_own_horovod_release_or_the_one_asked():
    """The reference is the env's own Horovod release's defaults (0.20's on envs whose lab reports ran 0.20.x), or
    the release asked for."""
    asked = autotuner.suggest("vgg16", "v100-5gbit", compression="none", reference_version="0.28.1")
    own = autotuner.suggest("vgg16", "v100-5gbit", compression="none")
    assert own.reference_version == "0.20" and own.default.config == DEFAULTS_0_20
    assert asked.reference_version == "0.28.1" and asked.default.config == DEFAULTS_0_28
    assert own.to_dict()["reference_version"] == "0.20" and own.to_dict()["default"]["config"] == DEFAULTS_0_20.to_dict()
    # the same scenario, another reference: its predicted step differs, the proposals' speed-ups follow it
    assert own.default.step_time_ms != pytest.approx(asked.default.step_time_ms, rel=1e-6)
    fresh = autotuner.suggest("resnet50", "local-gloo-1gbit", compression="none")
    assert fresh.reference_version == "0.28.1" and fresh.default.config == DEFAULTS_0_28
    fixed = autotuner.suggest("vgg16", "v100-5gbit", compression="none", fixed={"cache_capacity": 0})
    assert fixed.default.config == dataclasses.replace(DEFAULTS_0_20, cache_capacity=0)


def test_explores_pick_is_suggests_answer_on_an_env_of_another_release(tmp_path):
    """``explore`` marks "the same answer as autotuner suggest --compression C": with the env's own release."""
    s = autotuner.suggest("vgg16", "v100-16gbit", compression="none")
    ex = autotuner.explore("vgg16", "v100-16gbit", resolution=2, out_dir=tmp_path)
    (pick,) = [m for m in ex.exploration.marks if m.kind == "suggest"]
    assert s.reference_version == "0.20.3" and pick.config == s.best.config


@pytest.mark.parametrize("bad", ["0.29", "1.0", "banana", "", "0.20.3.1", 20])
def test_a_reference_version_that_names_no_release_is_one_line(bad):
    with pytest.raises(AutotunerError) as e:
        autotuner.suggest("vgg16", reference_version=bad)
    assert "not a Horovod release" in str(e.value) and "\n" not in str(e.value)


def test_suggest_fixed_knobs_in_flag_units_are_kept():
    r = autotuner.suggest("resnet50", "local-gloo-1gbit", fixed={"cycle_time_ms": 5, "cache_capacity": 0},
                          compression="none")
    assert all(p.config.cycle_time_ms == 5.0 and p.config.cache_capacity == 0 for p in r.proposals)
    assert r.default.config.cycle_time_ms == 5.0 and dict(r.fixed) == {"cycle_time_ms": 5.0, "cache_capacity": 0}


def test_suggest_takes_a_strategy_object_and_pools_it_with_the_grid():
    grid = autotuner.suggest("resnet50", "local-gloo-1gbit", compression="none")
    bayes = autotuner.suggest("resnet50", "local-gloo-1gbit", compression="none",
                              strategy=autotuner.BayesStrategy(n_calls=4, seed=0))
    assert bayes.strategy == "BayesStrategy" and bayes.evaluations > grid.evaluations
    assert bayes.choice.best_step_time_ms <= grid.choice.best_step_time_ms + 1e-9


@pytest.mark.parametrize("kw, msg", [
    ({"fixed": {"fusion_mb": 3}}, "unknown knob 'fusion_mb'"),
    ({"fixed": {"cycle_time_ms": -1}}, "cycle"),
    ({"compression": "int8"}, "lossy"),
    ({"top": 0}, "top must be"),
    ({"strategy": "bayes"}, "not a search strategy"),
])
def test_suggest_bad_arguments_raise_one_line_errors(kw, msg):
    with pytest.raises(AutotunerError) as e:
        autotuner.suggest("resnet50", "local-gloo-1gbit", **kw)
    assert msg in str(e.value) and "\n" not in str(e.value)


def test_simulate_returns_a_typed_result_equal_to_the_cli_json():
    r = autotuner.simulate("resnet50", "local-gloo-1gbit", config={"fusion_threshold_mb": 8})
    assert isinstance(r, autotuner.SimulateResult) and r.config.fusion_threshold_bytes == 8 * MIB
    assert sum(x.tensors for x in r.responses) == r.n_tensors
    p = run("simulate", "--model", "resnet50", "--env", "local-gloo-1gbit", "--fusion-threshold-mb", "8", "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["step_time_ms"] == pytest.approx(r.step_time_ms)


def test_simulate_fills_unset_knobs_from_the_env_s_own_horovod_release():
    """``simulate`` on v100-5gbit (Horovod 0.20, lab report 001) fills the knobs left unset with the env's own
    release's defaults (64 MiB / 5 ms, not 0.28's 128 MiB / 1 ms: another job), or those of
    ``--reference-version``; the text names the knobs and the release; a knob set keeps its value."""
    own = autotuner.simulate("vgg16", "v100-5gbit")
    assert own.reference_version == "0.20" and own.config == DEFAULTS_0_20
    asked = autotuner.simulate("vgg16", "v100-5gbit", reference_version="0.28.1", config={"cycle_time_ms": 2})
    assert asked.reference_version == "0.28.1" and asked.config == replace(DEFAULTS_0_28, cycle_time_ms=2.0)
    assert autotuner.simulate("vgg16", "v100-5gbit", config=DEFAULTS_0_28).config == DEFAULTS_0_28
    assert own.step_time_ms != pytest.approx(autotuner.simulate("vgg16", "v100-5gbit", config=DEFAULTS_0_28).step_time_ms,
                                             rel=1e-6)
    p = run("simulate", "--model", "vgg16", "--env", "v100-5gbit")
    assert p.returncode == 0, p.stderr
    assert "knobs: 64 MiB, 5 ms, cache 1024 (unset knobs: Horovod 0.20's defaults)" in p.stdout
    d = json.loads(run("simulate", "--model", "vgg16", "--env", "v100-5gbit", "--reference-version", "0.28.1",
                       "--json").stdout)
    assert d["reference_version"] == "0.28.1" and d["config"] == DEFAULTS_0_28.to_dict()
    assert_one_line_error(run("simulate", "--model", "vgg16", "--reference-version", "1.3"),
                          "--reference-version '1.3': not a Horovod release")
    with pytest.raises(autotuner.AutotunerError, match="not a Horovod release"):
        autotuner.simulate("vgg16", reference_version="0.29")


def test_suggest_cli_prints_the_api_result():
    r = autotuner.suggest("vgg16")
    p = run(*["suggest", "--model", "vgg16", "--json"])
    d = json.loads(p.stdout)
    assert d["proposals"][0]["config"] == r.best.config.to_dict() and d["keep_defaults"] == r.keep_defaults


def test_suggest_table_names_the_horovod_release_it_compares_with():
    """The defaults' row names the release whose defaults it holds, not "default (0.28)" on every env."""
    from cli_helpers import assert_one_line_error

    def ref_row(*extra):
        p = run("suggest", "--model", "vgg16", "--env", "v100-5gbit", "--compression", "none", *extra)
        assert p.returncode == 0, p.stderr
        return next(ln.strip() for ln in p.stdout.splitlines() if ln.strip().startswith(("default (", "reference (")))

    row = ref_row()
    assert row.startswith("default (Horovod 0.20)") and row.split()[3:5] == ["64", "5.00"]
    row = ref_row("--reference-version", "0.28.1")
    assert row.startswith("default (Horovod 0.28.1)") and row.split()[3:5] == ["128", "1.00"]
    row = ref_row("--cache-capacity", "0")
    assert row.startswith("reference (Horovod 0.20 + fixed)") and row.split()[5:8] == ["64", "5.00", "off"]
    assert_one_line_error(run("suggest", "--model", "vgg16", "--reference-version", "0.29"),
                          "--reference-version '0.29': not a Horovod release")


def _table():
    t = Table(title="t")
    for col in ("", "fusion MiB", "hier. allreduce", "speed-up", "score B/µs"):
        t.add_column(col, justify="right")
    t.add_row("default (0.28)", "128", "no", "1.000x", "704.1")
    t.add_row("#1", "123.456", "yes", "1.739x", "612.3")
    return t


def test_piped_tables_are_plain_full_width_text():
    text = plain_table(_table())
    lines = text.splitlines()
    assert lines[0] == "t" and "hier. allreduce" in lines[1] and set(lines[2]) <= {"-", " "}
    assert "123.456" in lines[4] and "1.739x" in lines[4] and "…" not in text


@pytest.mark.parametrize("width", [30, 40, 60, 80])
def test_piped_tables_fit_the_width_the_environment_names(width):
    """``COLUMNS=80 autotuner ... | cat``: headers and text cells wrap between words so every line fits where the
    longest words allow (here: 30 does not), numbers are never split, and each row's cells stay in their columns."""
    t = _table()
    t.add_row("a long label of several words", "7", "no", "0.990x", "1.5")
    text = plain_table(t, width)
    lines = text.splitlines()
    fits = max(len(ln) for ln in lines) <= width
    assert fits == (width >= 44), text  # the longest words: 7 + 7 + 9 + 8 + 5, and 4 gaps of 2
    for number in ("123.456", "1.739x", "704.1", "1.000x", "0.990x"):
        assert sum(number in ln for ln in lines) == 1, (number, text)
    assert "…" not in text and "several" in text and "words" in text
    assert plain_table(t, None) == plain_table(t)  # no width: every row on one line
    assert len(plain_table(t).splitlines()) == 6


def test_piped_tables_break_a_text_columns_path_after_a_slash_and_never_a_number():
    """A left-justified column's path wraps after a ``/`` (never inside a segment); a right-justified column's
    cell with a ``/`` (``1013.9 / 897.5``) breaks only at its spaces."""
    t = Table(title=None)
    t.add_column("source")
    t.add_column("first: measured / predicted", justify="right")
    t.add_row("fresh-poll-2gbit/validation/fp16-mobilenet_v2-gradients-3.jsonl (3 trials)", "1013.9/897.5")
    text = plain_table(t, 50)
    lines = text.splitlines()
    assert max(len(ln) for ln in lines) <= 50, text
    assert any(ln.startswith("fresh-poll-2gbit/validation/  ") for ln in lines), text  # broken after the "/"
    assert any(ln.startswith("fp16-mobilenet_v2-gradients-3.jsonl") for ln in lines), text
    assert sum("1013.9/897.5" in ln for ln in lines) == 1 and "(3 trials)" in text
    assert "fresh-poll-2gbit/validation/fp16-mobilenet_v2" in plain_table(t, None)  # no width: one line

@pytest.mark.parametrize("width", [None, 40, 80])
def test_piped_tables_break_a_cell_at_its_own_newlines(width):
    """A cell's newline is a line break piped as on a terminal (rich honours it): ``accuracy``'s prediction with
    its range below (``906.44\\n839-906``) printed as "906.44 839-906" on one line once its column was wide enough,
    read as one number beside another; the column is as wide as the cell's longest line, not the whole cell."""
    t = Table(title=None)
    t.add_column("quantity")
    t.add_column("predicted", justify="right")
    t.add_row("distilbert proposal-1 (0 MiB, 1 ms) on 2x1: step time (ms)", "906.44\n839-906")
    lines = plain_table(t, width).splitlines()
    assert not any("906.44 839-906" in ln for ln in lines)
    row = next(i for i, ln in enumerate(lines) if ln.rstrip().endswith("906.44"))
    assert lines[row + 1].rstrip().endswith("839-906")
    assert lines[row].index("906.44") + len("906.44") == lines[row + 1].index("839-906") + len("839-906")
    assert max(len(ln) for ln in lines) <= (width or 80)



@pytest.mark.parametrize("width", [30, 40, 52, 80])
def test_piped_tables_never_part_a_number_from_its_unit(width):
    """``autotuner ddp envs | cat`` at 80 columns printed "mean error 1.2" and "%" on two lines: a number and its
    unit (%, ms, s, MiB, ...) now wrap as one word; the output has plain spaces, never a no-break space."""
    t = Table(title=None)
    t.add_column("env")
    t.add_column("trust")
    cell = "checked on 99 real DDP replays (33 settings, 3 layouts): mean error 1.2 %, worst -3.0 %, 4 MiB, 512.3 ms"
    t.add_row("ddp-1.5gbit", cell)
    text = plain_table(t, width)
    assert "\u00a0" not in text and max(len(ln) for ln in text.splitlines()) <= width, text
    joined = " ".join(ln[len("ddp-1.5gbit  "):].strip() for ln in text.splitlines()[2:])
    assert joined == cell, text
    for unit in ("1.2 %", "-3.0 %", "4 MiB", "512.3 ms"):
        assert any(unit in ln for ln in text.splitlines()), (unit, text)
    assert not any(ln.strip().startswith(("%", "MiB", "ms")) for ln in text.splitlines()), text


def test_piped_tables_read_columns_from_the_environment(monkeypatch):
    t = _table()
    t.add_row("a long label of several words", "7", "no", "0.990x", "1.5")
    for columns, widest in (("40", 40), ("", None), ("abc", None), ("-3", None)):
        monkeypatch.setenv("COLUMNS", columns)
        con = Console(file=io.StringIO(), force_terminal=False, width=200)
        render_table(con, t)
        out = con.file.getvalue()
        assert out.rstrip("\n") == plain_table(t, widest), columns


@pytest.mark.parametrize("width", [40, 60, 80, 120])
def test_terminal_tables_never_cut_a_number(width):
    con = Console(width=width, force_terminal=True, record=True, color_system=None)
    render_table(con, _table())
    text = con.export_text()
    assert "…" not in text
    for number in ("123.456", "1.739x", "704.1", "1.000x"):
        assert number in text


def test_terminal_tables_too_wide_take_the_piped_widths_where_they_fit():
    """On a terminal a table too wide for it took each column as narrow as its longest word, all of them: at 80
    columns ``accuracy``'s quantity shrank to "proposal-1" and a row ran over six lines while the numbers kept room to
    spare. It now takes the piped table's widths (headers wrap first, then text) where those fit, as piped."""
    t = Table(title="validation/x.jsonl")
    for col in ("quantity", "measured", "predicted", "error", "from"):
        t.add_column(col, justify="left" if col == "quantity" else "right")
    t.add_row("vit_s16 proposal-1 (0 MiB, 1 ms) on 2x1: step time (ms)", "478.57", "543.36\n443-543", "+13.5%",
              "5 trials")
    con = Console(width=80, force_terminal=True, record=True, color_system=None)
    render_table(con, t)
    lines = [ln.rstrip() for ln in con.export_text().splitlines()]
    assert max(len(ln) for ln in lines) <= 80
    row = next(i for i, ln in enumerate(lines) if ln.startswith("vit_s16"))
    assert lines[row].startswith("vit_s16 proposal-1 (0 MiB, 1 ms) on 2x1:") and lines[row].endswith("5 trials")
    assert lines[row + 1].startswith("step time (ms)") and lines[row + 1].endswith("443-543")
    assert len(lines) == row + 2
