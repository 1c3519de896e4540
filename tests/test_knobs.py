"""The knob table (autotuner/frameworks/horovod/knobs.py) is the one source: round trips, bounds, docs, spellings."""
from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path

import pytest

from autotuner.errors import KnobError
from autotuner.frameworks.horovod.knobs import (DEFAULTS_0_20, DEFAULTS_0_28, KNOBS, MIB, Config, config_from_env, config_from_flags,
                             check_horovod_version, config_from_values, defaults_for, defaults_key, horovod_env,
                             horovodrun_flags, markdown_table)

ROOT = Path(__file__).resolve().parents[1]
#: a non-default value per knob, in internal units, that its flag can spell
SAMPLE = {"fusion_threshold_bytes": 24 * MIB, "cycle_time_ms": 7.5, "cache_capacity": 0,
          "hierarchical_allreduce": True, "hierarchical_allgather": True}


@pytest.mark.parametrize("knob", KNOBS, ids=lambda k: k.field)
def test_round_trip_flag_config_env_config(knob):
    """flag -> Config -> env var -> Config, one knob at a time."""
    value = SAMPLE[knob.field]
    flags = knob.to_flag(value)
    assert flags and flags[0] == knob.flag
    cfg = config_from_flags(["python", "train.py", *flags])
    assert getattr(cfg, knob.field) == value
    env = horovod_env(cfg)
    assert env[knob.env] == knob.to_env(value)
    back = config_from_env(env)
    assert back == cfg
    assert config_from_flags(horovodrun_flags(back)) == back


def test_every_knob_is_in_the_table_once_and_config_has_exactly_its_fields():
    assert [f for f in Config.__dataclass_fields__] == [k.field for k in KNOBS]
    for attr in ("field", "flag", "env", "param"):
        vals = [getattr(k, attr) for k in KNOBS]
        assert len(set(vals)) == len(vals)
    assert DEFAULTS_0_28 == Config() and DEFAULTS_0_28.fusion_threshold_bytes == 128 * MIB
    assert (DEFAULTS_0_20.fusion_threshold_bytes, DEFAULTS_0_20.cycle_time_ms) == (64 * MIB, 5.0)
    assert defaults_for("0.20.3") == DEFAULTS_0_20 and defaults_for(None) == DEFAULTS_0_28


@pytest.mark.parametrize("version, defaults", [
    ("0.20.3", "0.20"), ("0.20", "0.20"), ("0.19.4", "0.20"),  # 64 MiB / 5 ms until 0.21.0 (Horovod PR #2468)
    ("0.21.0", "0.28"), ("0.23", "0.28"), ("0.28.1", "0.28"), (None, "0.28"), ("not-a-version", "0.28")])
def test_defaults_follow_the_release_that_changed_them(version, defaults):
    """Every release before 0.21.0 has 0.20's defaults (0.19.4, runs/laptop-cpu, too), later ones 0.28's."""
    assert defaults_key(version) == defaults
    assert defaults_for(version) == (DEFAULTS_0_20 if defaults == "0.20" else DEFAULTS_0_28)


@pytest.mark.parametrize("bad", ["0.29", "1.2", "0.20.3.1", "x", "", "0.2a", None, 0.2])
def test_a_string_that_names_no_horovod_release_is_refused_in_one_line(bad):
    with pytest.raises(KnobError) as e:
        check_horovod_version(bad)
    assert "not a Horovod release" in str(e.value) and "\n" not in str(e.value)
    assert check_horovod_version(" 0.20.3 ") == "0.20.3"


@pytest.mark.parametrize("kw", [
    {"cycle_time_ms": 1000}, {"cache_capacity": 10**9}, {"cycle_time_ms": 0.0}, {"cycle_time_ms": math.nan},
    {"cycle_time_ms": math.inf}, {"fusion_threshold_bytes": -1}, {"fusion_threshold_bytes": 1e300},
    {"fusion_threshold_bytes": 1.5}, {"cache_capacity": "1024"}, {"hierarchical_allreduce": 2},
    {"hierarchical_allreduce": "yes"}])
def test_config_rejects_values_outside_the_table(kw):
    with pytest.raises(KnobError) as e:
        Config(**kw)
    assert "\n" not in str(e.value) and next(iter(kw)) in str(e.value)


def test_an_out_of_range_cycle_time_and_cache_capacity_do_not_validate():
    with pytest.raises(KnobError):
        Config(cycle_time_ms=1000, cache_capacity=10**9).validate()


def test_flag_units_convert_once_and_round_to_the_nearest_byte():
    assert config_from_values({"fusion_threshold_mb": 0.5}).fusion_threshold_bytes == MIB // 2
    assert config_from_values({"fusion_threshold_mb": 1 / 3}).fusion_threshold_bytes == round(MIB / 3)
    # a threshold that is not a whole MiB has no horovodrun flag: it goes through the env var
    cfg = replace(DEFAULTS_0_28, fusion_threshold_bytes=MIB // 2)
    assert "--fusion-threshold-mb" not in horovodrun_flags(cfg)
    assert config_from_env(horovod_env(cfg)) == cfg
    with pytest.raises(KnobError, match="--cycle-time-ms"):
        config_from_values({"cycle_time_ms": math.nan})
    with pytest.raises(KnobError, match="--fusion-threshold-mb"):
        config_from_flags(["--fusion-threshold-mb", "inf"])


def test_docs_knob_table_is_current():
    """docs/reference/knobs.md is generated: run `python scripts/gen_knob_table.py` after changing the table."""
    assert (ROOT / "docs" / "reference" / "knobs.md").read_text() == markdown_table()


def test_each_flag_and_env_name_is_spelled_once_in_the_package():
    """A grep for a knob's horovodrun flag or HOROVOD_* name finds it once in autotuner/."""
    text = {p: p.read_text() for p in (ROOT / "autotuner").rglob("*.py")}
    for k in KNOBS:
        for name in (k.flag, k.env):
            hits = [(p.name, n) for p, t in text.items() for n, line in enumerate(t.splitlines(), 1)
                    if re.search(re.escape(name) + r"(?![\w-])", line)]
            assert len(hits) == 1, (name, hits)


def test_cli_options_are_generated_from_the_table():
    from autotuner.cli import app
    from typer.main import get_command

    cmd = get_command(app)
    for name in ("simulate", "suggest", "explore"):
        opts = {o for p in cmd.commands[name].params for o in (*p.opts, *p.secondary_opts)}
        for k in KNOBS:
            assert k.flag in opts, (name, k.flag)
