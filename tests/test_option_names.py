"""One name per concept on the command line: every option of every command (both frameworks, walked from the typer
app) against the concept table the package keeps (``autotuner.cli.common.CONCEPTS``), and the Python API's keyword
names after it.

The walk fails when one concept has two visible names (an old spelling shown, or a name used by several commands that
the table does not hold), when one name means different things in different commands (another type, another default
than the table's, a help that does not begin with the concept's), and when a command has no ``--json``. The checker
is run on the real app (no problem) and on apps with a planted fault (each named).
"""
from __future__ import annotations

import inspect
import warnings
from pathlib import Path
from typing import Optional

import pytest
import typer
from typer.main import get_command

from autotuner.cli import app
from autotuner.cli.common import BY_OPTION, CONCEPTS, REQUIRED, Concept

OLD = {old for c in CONCEPTS.values() for old in c.old} - set(BY_OPTION)


def _commands(cmd, path=()):
    """(command path, click command) of every leaf command under ``cmd``: ``ddp measure``, ``env new``, ``fit``."""
    if hasattr(cmd, "commands"):
        for name, sub in cmd.commands.items():
            yield from _commands(sub, (*path, name))
    else:
        yield " ".join(path), cmd


def _options(cmd):
    return [p for p in cmd.params if p.param_type_name == "option" and p.opts[0] != "--help"]


def _default(p):
    return REQUIRED if p.required else p.default


def _type(p):
    return p.type_descriptor.annotation


def problems(root, concepts: dict[str, Concept] = CONCEPTS) -> list[str]:
    """Every way ``root``'s commands break one name per concept (empty: none)."""
    by_option = {c.option: c for c in concepts.values()}
    old = {o for c in concepts.values() for o in c.old} - set(by_option)
    out, uses = [], {}
    for path, cmd in _commands(root):
        opts = _options(cmd)
        visible = {p.opts[0] for p in opts if not p.hidden}
        json_ = [p for p in opts if p.opts[0] == "--json" and not p.hidden]
        if not json_ or not json_[0].is_flag or json_[0].default is not False:
            out.append(f"{path}: no --json flag")
        for p in opts:
            name = p.opts[0]
            if p.hidden:
                owner = next((c for c in concepts.values() if name in c.old), None)
                if owner is None:
                    out.append(f"{path}: hidden {name} is no concept's old name")
                elif owner.option not in visible:
                    out.append(f"{path}: hidden {name} without {owner.option}, the name it stands for")
                continue
            if name in old:
                out.append(f"{path}: {name} shown: an old name of {next(c.option for c in concepts.values() if name in c.old)}")
            uses.setdefault(name, []).append((path, p))
    for name, used in sorted(uses.items()):
        c = by_option.get(name)
        if c is None:
            if len(used) > 1:
                out.append(f"{name} in {', '.join(u for u, _ in used)}: a name several commands use, not in the "
                           "concept table")
            continue
        types = {}
        for path, p in used:
            types.setdefault(path in c.lists, set()).add(_type(p))
            if path in c.lists and _type(p) is not str:
                out.append(f"{path} {name}: a comma-separated list is a str, got {_type(p)}")
            want = c.default_for(path)
            if _default(p) != want:
                out.append(f"{path} {name}: default {_default(p)!r}, the concept table says {want!r}")
            if c.help is not None and not (p.help or "").startswith(c.help):
                out.append(f"{path} {name}: help {p.help!r} does not begin with the concept's {c.help!r}")
        for is_list, ts in types.items():
            if len(ts) > 1:
                out.append(f"{name}: {'lists of ' if is_list else ''}several types across commands: "
                           f"{sorted(map(str, ts))}")
        listed = set(c.defaults) | set(c.lists)
        for path in sorted(listed - {u for u, _ in used}):
            out.append(f"{name}: the concept table names {path}, which has no such option")
    return out


def test_every_command_keeps_one_name_per_concept():
    assert problems(get_command(app)) == []


def test_the_table_holds_each_name_once():
    names = [c.option for c in CONCEPTS.values()]
    assert len(names) == len(set(names))
    olds = [o for c in CONCEPTS.values() for o in c.old]
    assert len(olds) == len(set(olds))
    # an old name of one concept that is another's visible name is taken by that one (simulate's --timeline was
    # the file, validate's --timeline records the trials' timelines)
    assert set(olds) & set(names) == {"--timeline"}


# --------------------------------------------------------------------------- the checker catches a planted fault

def _json():
    return typer.Option(False, "--json", help="print the result as JSON")


def _noop(as_json: bool = _json()):
    pass


def _app(*commands):
    """A typer app of ``(name, function)`` commands (and one more, so that it is a group), as click sees it."""
    a = typer.Typer()
    for name, fn in commands:
        a.command(name)(fn)
    a.command("noop")(_noop)
    return get_command(a)


def test_a_second_visible_name_for_the_link_rate_fails():
    def sim(link: Optional[float] = typer.Option(None, "--bandwidth-gbps", help="what-if link rate, Gbit/s"),
            as_json: bool = _json()):
        pass
    assert problems(_app(("simulate", sim))) == ["simulate: --bandwidth-gbps shown: an old name of --link-gbit"]


def test_one_name_with_two_defaults_fails():
    def a(compute_ms: Optional[float] = typer.Option(None, "--compute-ms", help=CONCEPTS["compute"].help),
          as_json: bool = _json()):
        pass

    def b(compute_ms: float = typer.Option(100.0, "--compute-ms", help=CONCEPTS["compute"].help),
          as_json: bool = _json()):
        pass
    assert problems(_app(("simulate", a), ("tune", b))) == [
        "tune --compute-ms: default 100.0, the concept table says None"]


def test_one_name_with_two_types_or_another_meaning_fails():
    def a(t: Optional[Path] = typer.Option(None, "--timeline-filename"), as_json: bool = _json()):
        pass

    def b(t: bool = typer.Option(None, "--timeline-filename", help="x"), as_json: bool = _json()):
        pass
    got = problems(_app(("simulate", a), ("validate", b)))
    assert len(got) == 1 and got[0].startswith("--timeline-filename: several types across commands")

    def c(wait: str = typer.Option("spin", "--wait", help="spin or sleep"), as_json: bool = _json()):
        pass
    got = problems(_app(("measure", c)))
    assert len(got) == 1 and "does not begin with the concept's" in got[0]


def test_a_shared_name_outside_the_table_and_a_missing_json_fail():
    def a(x: int = typer.Option(1, "--frobs")):
        pass

    def b(x: int = typer.Option(1, "--frobs"), as_json: bool = _json()):
        pass
    assert problems(_app(("one", a), ("two", b))) == [
        "one: no --json flag",
        "--frobs in one, two: a name several commands use, not in the concept table"]


# --------------------------------------------------------------------------- the Python API's keyword names

API_RENAMES = {  # public function -> {old keyword: new}, the command line's names
    "make_scenario": {"bandwidth_gbps": "link_gbit"},
    "simulate": {"bandwidth_gbps": "link_gbit", "timeline": "timeline_filename"},
    "suggest": {"bandwidth_gbps": "link_gbit"},
    "explore": {"bandwidth_gbps": "link_gbit", "pick_file": "proposals"},
    "scale": {"bandwidths_gbps": "links_gbit"},
    "env_new": {"inter_gbit": "link_gbit"},
    "validate": {"replay_wait": "wait", "proposals_file": "proposals"},
    "tune": {"replay_wait": "wait"},
    "measure": {f"{p}_repeats": f"{p}_rounds" for p in ("cpu", "trickle", "idle", "fp16", "burst", "step", "mid",
                                                          "fused")},
    "ddp_measure": {"jobs": "sweep_rounds", "burst_jobs": "burst_rounds", "first_touch_jobs": "first_touch_rounds",
                    "cpu_jobs": "cpu_rounds", "say": "on_event"},
    "ddp_validate": {"say": "on_event"},
    "ddp_tune": {"say": "on_event"},
}


@pytest.mark.parametrize("name", sorted(API_RENAMES))
def test_the_api_takes_the_command_line_s_names_and_still_the_old_ones(name):
    import autotuner

    fn = getattr(autotuner, name)
    params = inspect.signature(fn).parameters
    assert fn.renamed_keywords == API_RENAMES[name]
    for old, new in API_RENAMES[name].items():
        assert new in params and old not in params, (name, old, new)
    # one callback name across frameworks, the real runs' network under the command line's names
    if name in ("validate", "tune", "measure", "ddp_measure", "ddp_validate", "ddp_tune"):
        assert {"on_event", "link_gbit", "loopback_gbit", "bandwidth_gbit"} <= set(params), name


def test_an_old_api_keyword_warns_and_gives_the_same_answer():
    import autotuner

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = autotuner.simulate("vgg16", link_gbit=8.0)
    with pytest.warns(DeprecationWarning, match="'bandwidth_gbps' is deprecated; use 'link_gbit'"):
        old = autotuner.simulate("vgg16", bandwidth_gbps=8.0)
    assert old.step_time_ms == new.step_time_ms and old.link_gbps == 8.0
    with pytest.raises(TypeError, match="both"):
        autotuner.simulate("vgg16", bandwidth_gbps=8.0, link_gbit=8.0)


def test_the_old_bandwidth_gbit_meant_the_loopback():
    """The real runs' old ``bandwidth_gbit`` shaped the loopback: on one host the link between the ranks
    (``link_gbit``), on an emulated cluster each host's loopback (``loopback_gbit``)."""
    from autotuner._deprecated import link_rates
    from autotuner.errors import ValidationError

    assert link_rates(2.0, None, None, False) == (2.0, None)  # (loopback shaped, host link)
    assert link_rates(3.0, 10.0, None, True) == (10.0, 3.0)
    with pytest.warns(DeprecationWarning):
        assert link_rates(None, None, 2.0, False) == (2.0, None)
    with pytest.warns(DeprecationWarning):
        assert link_rates(3.0, None, 10.0, True) == (10.0, 3.0)
    with pytest.raises(ValidationError, match="--loopback-gbit needs --testbed-hosts"):
        link_rates(None, 1.0, None, False)
    with pytest.raises(ValidationError, match="give one"), pytest.warns(DeprecationWarning):
        link_rates(2.0, None, 2.0, False)
