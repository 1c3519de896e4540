"""The file schemas (autotuner/schemas/): every damaged file
gives a one-line error naming the file, the field and the value; ``fit`` exits 2 and writes
nothing for them; data files never import code; a model with a non-finite number is not written;
what the fit drops is named."""
from __future__ import annotations

import gzip
import json
import math
import os
import shutil
import sys
from pathlib import Path

import pytest
from cli_helpers import run

from autotuner.errors import AutotunerError, LayoutError, ModelStoreError, ScenarioError
from autotuner.frameworks.horovod.fit.fitters import FITTERS, fit_env, host_samples_for
from autotuner.frameworks.horovod.fit.store import env_from_dict, load_env, write_model
from autotuner.model.layout import MAX_LAYOUT_BYTES, Layout
from autotuner.readers.layouts import layout_from_dict, load_data_layout, load_layout
from autotuner.frameworks.horovod.readers.runs import parse_records, read_env, read_runs
from autotuner.schemas import Format, find_nonfinite, is_plain_name

ROOT = Path(__file__).resolve().parents[1]
RESPONSES = ROOT / "runs" / "v100-16gbit"
BREAKDOWN = ROOT / "runs" / "v100-5gbit"
LOCAL = ROOT / "runs" / "local-gloo-1gbit"
MODEL = ROOT / "autotuner" / "models"


def cli(*args, cwd=ROOT):
    """``python -m autotuner.cli ARGS`` with a wide terminal (warnings are not wrapped)."""
    return run(*args, cwd=cwd, env=dict(os.environ, COLUMNS="1000"))


def one_line(e: BaseException, *needles: str) -> str:
    msg = str(e)
    assert "\n" not in msg and isinstance(e, AutotunerError), msg
    for n in needles:
        assert n in msg, (n, msg)
    return msg


def files_in(d: Path) -> list[Path]:
    return sorted(p for p in d.rglob("*") if p.is_file()) if d.exists() else []


def env_dir(tmp_path: Path, src: Path, toml: str | None = None, name: str = "e", edit=None) -> Path:
    """A copy of the committed env ``src`` under ``tmp_path/runs/name``; env.toml replaced by
    ``toml`` or edited by ``edit(text) -> text``."""
    d = tmp_path / "runs" / name
    d.mkdir(parents=True)
    meta = (src / "env.toml").read_text()
    for f in src.iterdir():
        if f.is_file() and f.name != "env.toml":
            shutil.copy(f, d / f.name)
    (d / "env.toml").write_text(toml if toml is not None else edit(meta))
    return d


def drop_line(key: str):
    return lambda t: "\n".join(l for l in t.splitlines() if not l.startswith(key)) + "\n"


def sub(old: str, new: str, count: int = 1):
    def f(t: str) -> str:
        assert old in t, old
        return t.replace(old, new, count)
    return f


# --- env.toml -------------------------------------------------------------------------------

ENV_CASES = [
    # (committed env, edit, field path, value shown)
    ("responses", sub('source = "report-000.md"', "source = 1"), "source", "1"),
    ("responses", drop_line("nodes ="), "nodes", "(missing)"),
    ("responses", drop_line("link_gbps ="), "link_gbps", "(missing)"),
    ("responses", drop_line('model = "resnet50"'), "run[0].model", "(missing)"),
    ("responses", sub("[host_backward_ms]\nresnet50 = 41.6\nvgg16 = 8.7", "host_backward_ms = [41.6, 8.7]"),
     "host_backward_ms", "[41.6, 8.7]"),
    ("responses", sub('name = "v100-16gbit"', 'name = "../x"'), "name", "'../x'"),
    ("responses", sub('name = "v100-16gbit"', 'name = "/tmp/x"'), "name", "'/tmp/x'"),
    ("responses", sub('layout = "resnet50"', 'layout = "os:getpid"'), "run[0].layout", "'os:getpid'"),
    ("responses", sub("nodes = 4", "nodes = 0"), "nodes", "0"),
    ("responses", sub("gpus_per_node = 1", "gpus_per_node = 1.5"), "gpus_per_node", "1.5"),
    ("responses", sub("link_gbps = 16.0", "link_gbps = inf"), "link_gbps", "inf"),
    ("responses", sub("link_gbps = 16.0", "link_gbps = nan"), "link_gbps", "nan"),
    ("responses", sub('format = "responses"', 'format = "respones"'), "format", "'respones'"),
    ("responses", sub('horovod_version = "0.20.3"', "horovod_version = 0.20"), "horovod_version", "0.2"),
    ("responses", sub("cycle_time_ms = 5.0", "cycle_time_ms = inf"), "run[0].cycle_time_ms", "inf"),
    ("responses", sub("fusion_threshold_mb = 64", "fusion_threshold_mb = -4"), "run[0].fusion_threshold_mb", "-4"),
    ("responses", sub('id = "03-10-13-resnet50-e20-b20-fusion0_rank_0"', 'id = "03-10-13-resnet50-e20-b20_rank_0"'),
     "run[1].id", "'03-10-13-resnet50-e20-b20_rank_0'"),
    ("responses", sub("nodes = 4", "nodse = 4\nnodes = 4"), "nodse", "4"),
    ("breakdown", sub('key = "1x1"\nnodes = 1\n', 'key = "1x1"\n'), "column[0].nodes", "(missing)"),
    ("breakdown", sub('link_gbps = 5.0', ''), "column[1].link_gbps", "(missing)"),
    ("breakdown", sub('layout = "resnet50"', 'layout = "this:s"'), "model[0].layout", "'this:s'"),
    ("breakdown", sub('layout = "resnet50"', 'layout = "../resnet50.json"'), "model[0].layout", "'../resnet50.json'"),
]


@pytest.mark.parametrize("fmt,edit,field,value", ENV_CASES, ids=[f"{c[0]}-{c[2]}-{c[3]}" for c in ENV_CASES])
def test_env_toml_reproducers_are_one_line_errors(tmp_path, fmt, edit, field, value):
    d = env_dir(tmp_path, RESPONSES if fmt == "responses" else BREAKDOWN, edit=edit)
    with pytest.raises(AutotunerError) as e:
        read_env(d)
    one_line(e.value, str(d / "env.toml"), f": {field}: {value}: ")


def test_committed_env_tomls_validate_and_keep_their_dicts():
    envs, problems = read_runs(ROOT / "runs")
    assert [e.name for e in envs] == ["fresh-0.5gbit", "fresh-1.5gbit", "fresh-2x1-5gbit", "fresh-3gbit", "fresh-poll-0.75gbit", "fresh-poll-1.1gbit",
                                      "fresh-poll-1.25gbit", "fresh-poll-1.5gbit", "fresh-poll-1.75gbit", "fresh-poll-1gbit", "fresh-poll-2.25gbit", "fresh-poll-2.2gbit", "fresh-poll-2.5gbit", "fresh-poll-2.75gbit", "fresh-poll-2gbit", "fresh-poll-2x1-2.5gbit", "fresh-poll-2x1-2gbit", "fresh-poll-2x1-3.5gbit", "fresh-poll-2x1-3gbit", "fresh-poll-2x1-4.5gbit", "fresh-poll-2x1-4gbit", "fresh-poll-3.5gbit", "fresh-poll-3gbit", "fresh-poll-4gbit", "laptop-cpu", "local-gloo-1gbit", "local-gloo-1gbit-sweep", "local-gloo-2x2", "local-gloo-2x2-poll", "nccl-a100-2x8",
                                      "nccl-h100-2x8", "t4x4-compression", "t4x4-pcie", "v100-16gbit", "v100-5gbit"]
    assert problems == []
    import tomllib
    for e in envs:
        assert e.meta == tomllib.loads((e.path / "env.toml").read_text())  # handed on unchanged


@pytest.mark.parametrize("edit,needle", [
    (sub('source = "report-000.md"', "source = 1"), "source: 1: "),
    (drop_line("nodes ="), "nodes: (missing)"),
    (drop_line('model = "resnet50"'), "run[0].model: (missing)"),
    (sub('name = "v100-16gbit"', 'name = "../x"'), "name: '../x'"),
])
def test_fit_exits_2_and_writes_nothing(tmp_path, edit, needle):
    d = env_dir(tmp_path, RESPONSES, edit=edit)
    out = tmp_path / "out"
    p = cli("fit", str(d.parent), "--out", str(out))
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in p.stderr, p.stderr
    assert files_in(out) == []
    assert not (tmp_path / "x.json").exists() and not (tmp_path / "runs" / "x.json").exists()


def test_fit_never_writes_outside_out_and_fits_the_others(tmp_path):
    env_dir(tmp_path, RESPONSES, edit=sub('name = "v100-16gbit"', 'name = "../../escaped"'), name="bad")
    env_dir(tmp_path, RESPONSES, edit=lambda t: t.replace("default = true", ""), name="good")
    out = tmp_path / "a" / "out"
    p = cli("fit", str(tmp_path / "runs"), "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert "skipped environment bad" in p.stderr and "name: '../../escaped'" in p.stderr
    assert [f.name for f in files_in(tmp_path) if "runs" not in f.parts] == ["v100-16gbit-bandwidth.png",
                                                                             "v100-16gbit.json"]
    assert files_in(out)[0].parent == out


def test_layout_named_in_env_toml_is_never_imported(tmp_path, monkeypatch):
    (tmp_path / "marker_mod.py").write_text("import pathlib\ndef boom():\n"
                                            f"    pathlib.Path({str(tmp_path / 'called')!r}).write_text('x')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    d = env_dir(tmp_path, RESPONSES, edit=sub('layout = "resnet50"', 'layout = "marker_mod:boom"', 4))
    with pytest.raises(AutotunerError) as e:
        read_env(d)
    one_line(e.value, "run[0].layout: 'marker_mod:boom'", "not module:factory")
    # even past the schema (a fitter handed such a name), the data-file resolver refuses it
    with pytest.raises(LayoutError):
        load_data_layout("marker_mod:boom", d, "env.toml: layout")
    assert "marker_mod" not in sys.modules and not (tmp_path / "called").exists()


def test_layouts_named_in_data_files_resolve_under_their_folder(tmp_path):
    d = tmp_path / "env"
    (d / "layouts").mkdir(parents=True)
    shutil.copy(LOCAL / "layouts" / "resnet50-as-recorded.json", d / "layouts" / "r.json")
    assert load_data_layout("layouts/r.json", d, "w").n_tensors == 161
    assert load_data_layout("vgg16", d, "w").n_tensors == 32
    (d / "out.json").symlink_to(LOCAL / "layouts" / "resnet50-as-recorded.json")
    for bad, needle in [("out.json", "outside"), ("/etc/passwd.json", "relative path"), ("../r.json", "relative path"),
                        ("nosuch", "unknown layout"), ("layouts/none.json", "not found")]:
        with pytest.raises(LayoutError) as e:
            load_data_layout(bad, d, "w: layout")
        one_line(e.value, needle)


def test_dropped_runs_are_named(tmp_path):
    """Report 000 with ``fusion0_rank_0`` typed ``fusionO_rank_0``: the runs it no longer matches
    are named (they used to vanish: 26 -> 17 samples, no warning)."""
    d = env_dir(tmp_path, RESPONSES, edit=lambda t: t)
    rep = d / "report-000.md"
    rep.write_text(rep.read_text().replace("fusion0_rank_0", "fusionO_rank_0"))
    env = read_env(d)
    fit_env(env)
    text = "\n".join(env.problems)
    assert "'03-10-13-resnet50-e20-b20-fusionO_rank_0' is not a [[run]]" in text
    assert "run '03-10-13-vgg16-e20-b20-fusion0_rank_0': not in e/report-000.md" in text


def test_env_batch_size_checks_the_file(tmp_path):
    d = env_dir(tmp_path, RESPONSES, edit=sub("batch_size = 32", "batch_size = -1"))
    with pytest.raises(AutotunerError) as e:
        from autotuner.frameworks.horovod.environments import env_batch_size
        env_batch_size(d.parent, "e")
    one_line(e.value, "batch_size: -1")
    assert env_batch_size(d.parent, "none") is None and env_batch_size(d.parent, "../e") is None


def test_one_fitter_per_format():
    assert set(FITTERS) == set(Format)


# --- validation records -----------------------------------------------------------------------

def _record(**kw):
    rec = json.loads((LOCAL / "validation" / "fit-sweep.jsonl").read_text().splitlines()[0])
    rec.update(kw)
    return rec


@pytest.mark.parametrize("change,needle", [
    (lambda r: r.pop("setup"), "f.jsonl:2: setup: (missing): field required"),
    (lambda r: r["timeline"]["samples"][0].__setitem__(0, "256"), "f.jsonl:2: timeline.samples[0][0]: '256'"),
    (lambda r: r["timeline"].__setitem__("samples", [[1, 2, 3]]), "f.jsonl:2: timeline.samples[0]: [1, 2, 3]"),
    (lambda r: r.__setitem__("measured_step_time_ms", -1.0), "f.jsonl:2: measured_step_time_ms: -1.0"),
    (lambda r: r["config"].__setitem__("cycle_time_ms", 1e9), "f.jsonl:2: config.cycle_time_ms: 1000000000.0"),
    (lambda r: r["config"].__setitem__("cycle_tme_ms", 1.0), "f.jsonl:2: config.cycle_tme_ms: 1.0"),
    (lambda r: r.pop("trial"), "f.jsonl:2: trial: (missing)"),
])
def test_bad_records_are_skipped_and_named(change, needle):
    bad = _record()
    change(bad)
    text = json.dumps(_record()) + "\n" + json.dumps(bad) + "\n"
    recs, problems = parse_records(text, "f.jsonl")
    assert len(recs) == 1 and len(problems) == 1, problems
    assert needle in problems[0] and "\n" not in problems[0], problems


def test_committed_records_all_validate():
    from autotuner.frameworks.horovod.readers.sweep import (parse_burst_records, parse_cpu_records, parse_fp16_records,
                                         parse_fused_records, parse_idle_records, parse_step_records,
                                         parse_sweep_records, parse_trickle_records)

    files = sorted((ROOT / "runs").rglob("*.jsonl"))
    assert len(files) >= 6
    for f in files:  # validate's trial records, or a measure sweep's records
        if f.parent.name == "experiments":  # an experiment's own JSON lines
            assert all(isinstance(json.loads(line), dict) for line in f.read_text().splitlines()), f
            continue
        if f.name in ("ddp-sweep.jsonl", "ddp-burst.jsonl", "ddp-first-touch.jsonl", "ddp-cpu.jsonl", "ddp-host.jsonl") \
                or f.parent.name in ("ddp-validation", "ddp-tune", "ddp-experiments"):
            from autotuner.frameworks.ddp.records import read_jsonl  # DDP's
            from autotuner.frameworks.ddp.schemas import (DdpBurstRecord, DdpCpuRecord, DdpFirstTouchRecord, DdpHostRecord,
                                                          DdpSweepRecord, DdpTrialRecord)

            schema = {"ddp-sweep.jsonl": DdpSweepRecord, "ddp-burst.jsonl": DdpBurstRecord,
                      "ddp-first-touch.jsonl": DdpFirstTouchRecord, "ddp-cpu.jsonl": DdpCpuRecord,
                      "ddp-host.jsonl": DdpHostRecord}.get(f.name,
                                                                                                      DdpTrialRecord)
            assert read_jsonl(f, schema), f
            continue
        parse = {"sweep.jsonl": parse_sweep_records, "cpu.jsonl": parse_cpu_records,
                 "trickle.jsonl": parse_trickle_records, "idle.jsonl": parse_idle_records,
                 "fp16.jsonl": parse_fp16_records, "burst.jsonl": parse_burst_records,
                 "step.jsonl": parse_step_records, "burst-mid.jsonl": parse_burst_records,
                 "fused.jsonl": parse_fused_records}.get(f.name, parse_records)
        # (a measure sitting set aside, runs/<env>/experiments/<sitting>/, is read by the same names)
        if f.parent.parent.name == "runs" and f.name.startswith(("fp16-", "burst-")):  # a phase's kept records
            parse = parse_fp16_records if f.name.startswith("fp16-") else parse_burst_records
        recs, problems = parse(f.read_text(), f.name)
        assert problems == [] and recs, f


def test_bad_cpu_phase_records_are_named_and_skipped():
    from autotuner.frameworks.horovod.readers.sweep import parse_cpu_records

    good = {"phase": "cpu", "tier": "single", "cycle_time_ms": 1.0, "repeat": 0, "unit_ms": 4.9, "unit_ms_max": 5.3,
            "cpu_share": 0.93, "units": 400, "ranks": 2}
    text = "\n".join(json.dumps(r) for r in (good, {**good, "unit_ms": -1.0}, {**good, "cycle_time_ms": 0}))
    recs, problems = parse_cpu_records(text, "cpu.jsonl")
    assert len(recs) == 1 and len(problems) == 2
    assert problems[0].startswith("cpu.jsonl:2: unit_ms") and problems[1].startswith("cpu.jsonl:3: cycle_time_ms")


def test_fit_on_records_without_setup_is_one_line_and_writes_nothing(tmp_path):
    d = tmp_path / "runs" / "v"
    (d / "validation").mkdir(parents=True)
    (d / "env.toml").write_text('source = "validation/x.jsonl"\nformat = "validation"\nnodes = 1\n'
                                'gpus_per_node = 2\nlink_gbps = 1.0\n')
    recs = [json.loads(l) for l in (LOCAL / "validation" / "fit-sweep.jsonl").read_text().splitlines()]
    for r in recs:
        del r["setup"]
    (d / "validation" / "x.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(AutotunerError) as e:
        read_env(d)
    one_line(e.value, "v/validation/x.jsonl:1: setup: (missing): field required (and 5 more bad record(s))")
    out = tmp_path / "out"
    p = cli("fit", str(d.parent), "--out", str(out))
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "v/validation/x.jsonl:1: setup: (missing)" in lines[0], p.stderr
    assert files_in(out) == []


def test_cut_kept_timeline_is_named(tmp_path):
    d = tmp_path / "env"
    shutil.copytree(LOCAL, d, ignore=shutil.ignore_patterns("archive", "*.png", "fixtures"))
    env = read_env(d)
    tl = d / "validation" / "timelines" / "fit-sweep" / "proposal-2-r0.json.gz"
    raw = tl.read_bytes()
    tl.write_bytes(raw[: len(raw) // 2])
    recs = [r for r in env.records if r["status"] == "ok"]
    mem, gaps, used = host_samples_for(env, recs)
    assert len(used) == 5
    named = [p for p in env.problems if "proposal-2-r0.json.gz" in p]
    assert len(named) == 1 and "dropped from the host-pass fit" in named[0] and "\n" not in named[0]


# --- model JSON -------------------------------------------------------------------------------

def _model_dir(tmp_path: Path, content: bytes | str | dict | list) -> Path:
    d = tmp_path / "m"
    d.mkdir()
    f = d / "v100-16gbit.json"
    if isinstance(content, (dict, list)):
        content = json.dumps(content)
    f.write_bytes(content.encode() if isinstance(content, str) else content)
    return d


def _committed() -> dict:
    return json.loads((MODEL / "v100-16gbit.json").read_text())


def _with(path: str, value):
    d = _committed()
    keys = path.split(".")
    tgt = d
    for k in keys[:-1]:
        tgt = tgt[k]
    tgt[keys[-1]] = value
    return d


@pytest.mark.parametrize("content,needles", [
    ([1, 2], ["schema: 'a JSON list'"]),
    (b'{"schema": "autotuner.model/1", "env": "\xff\xfe"}', ["not UTF-8"]),
    (_with("workloads", [1]), ["workloads: [1]: input should be a valid dictionary"]),
    ((MODEL / "v100-16gbit.json").read_text()[:3000], ["not JSON"]),
    (_with("cost_model.link_gbps", float("nan")), ["cost_model.link_gbps: nan"]),
    (_with("cost_model.inter.bandwidth_gbps", -1.0), ["cost_model.inter.bandwidth_gbps: -1.0"]),
    (_with("workloads.resnet50.layout", "os:getpid"), ["workloads.resnet50.layout: 'os:getpid'"]),
    (_with("workloads.resnet50.comm_scale", float("inf")), ["workloads.resnet50.comm_scale: inf"]),
    (_with("cluster.nodes", 0), ["cluster.nodes: 0"]),
    (_with("measured_config.cycle_time_ms", "5"), ["measured_config.cycle_time_ms: '5'"]),
    (_with("fit.r2", float("nan")), ["fit.r2: nan"]),
    (_with("env", "../x"), ["env: '../x'"]),
])
def test_bad_model_files_are_one_line_errors(tmp_path, content, needles):
    d = _model_dir(tmp_path, content)
    with pytest.raises(ModelStoreError) as e:
        load_env(d, "v100-16gbit")
    one_line(e.value, str(d / "v100-16gbit.json"), *needles)


def test_committed_models_validate():
    for f in sorted(MODEL.glob("*.json")):
        fenv = load_env(MODEL, f.stem)
        for m in fenv.workloads:
            assert fenv.layout_for(m).n_tensors > 0


@pytest.mark.parametrize("content", [[1, 2], b"\xff{", _with("workloads", [1])])
def test_simulate_on_a_bad_model_file_exits_2(tmp_path, content):
    d = _model_dir(tmp_path, content)
    p = cli("simulate", "--model", "resnet50", "--model-dir", str(d))
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "v100-16gbit.json" in p.stderr


def test_write_model_refuses_non_finite_numbers_and_bad_names(tmp_path):
    d = _with("workloads.vgg16.comm_scale", float("nan"))
    with pytest.raises(ModelStoreError) as e:
        write_model(tmp_path, d)
    one_line(e.value, "v100-16gbit", "workloads.vgg16.comm_scale", "nan", "not written")
    for name in ("../x", "/tmp/x", "a/b", "", ".hidden"):
        with pytest.raises(ModelStoreError) as e:
            write_model(tmp_path / "out", _with("env", name))
        one_line(e.value, repr(name))
    assert files_in(tmp_path) == []
    assert find_nonfinite({"a": [1.0, {"b": float("-inf")}]}) == (("a", 1, "b"), float("-inf"))


def test_fit_reports_a_nan_model_as_not_fitted_and_fits_the_others(tmp_path, monkeypatch):
    import autotuner.frameworks.horovod.environments as api
    import autotuner.frameworks.horovod.fit.fitters as fitters

    env_dir(tmp_path, RESPONSES, edit=lambda t: t.replace('name = "v100-16gbit"', 'name = "a"'), name="a")
    env_dir(tmp_path, RESPONSES, edit=lambda t: t.replace('name = "v100-16gbit"', 'name = "b"'), name="b")
    real = fitters.fit_env

    def nan_for_a(env):
        d = real(env)
        if env.name == "a":
            d["workloads"]["resnet50"]["comm_scale"] = float("nan")
        return d
    monkeypatch.setattr(fitters, "fit_env", nan_for_a)
    fitted, problems = api.fit_runs(tmp_path / "runs", tmp_path / "out")
    assert [d["env"] for d, _, _ in fitted] == ["b"]
    assert any(p.startswith("a: not fitted (a: workloads.resnet50.comm_scale: nan") for p in problems), problems
    assert sorted(f.name for f in files_in(tmp_path / "out")) == ["b-bandwidth.png", "b.json"]


def test_env_from_dict_checks_the_schema():
    with pytest.raises(ModelStoreError):
        env_from_dict({"schema": "autotuner.model/1"}, "x.json")
    assert env_from_dict(_committed(), "x.json").name == "v100-16gbit"


# --- layout JSON ------------------------------------------------------------------------------

def _layout(**tensor) -> dict:
    t = {"name": "w", "shape": [1024, 1024], "compute_share": 1.0}
    t.update(tensor)
    return {"name": "tiny", "tensors": [t, {"name": "b", "shape": [1024], "compute_share": 0.0}]}


@pytest.mark.parametrize("tensor,needle", [
    ({"shape": [-4]}, "tensors[0].shape[0]: -4"),
    ({"shape": [0, 3]}, "tensors[0].shape[0]: 0"),
    ({"shape": [10**30]}, "tensors[0].shape[0]: 1000000000000000000000000000000"),
    ({"shape": [2**40, 2**40]}, "tensors[0].shape: [1099511627776, 1099511627776]"),
    ({"shape": [1.7, 2.9]}, "tensors[0].shape[0]: 1.7"),
    ({"shape": [True]}, "tensors[0].shape[0]: True"),
    ({"compute_share": float("nan")}, "tensors[0].compute_share: nan"),
    ({"compute_share": float("inf")}, "tensors[0].compute_share: inf"),
    ({"compute_share": -0.5}, "tensors[0].compute_share: -0.5"),
    ({"dtype": "float8"}, "tensors[0].dtype: 'float8'"),
    ({"name": "b"}, "tensors[1].name: 'b'"),
    ({"shapes": [3]}, "tensors[0].shapes: [3]"),
])
def test_bad_layouts_are_one_line_errors(tmp_path, tensor, needle):
    f = tmp_path / "L.json"
    f.write_text(json.dumps(_layout(**tensor)))
    with pytest.raises(LayoutError) as e:
        load_layout(str(f))
    one_line(e.value, str(f), needle)


@pytest.mark.parametrize("doc,needle", [
    ({"tensors": []}, "tensors: []"),
    ({"tensors": [{"name": "w", "shape": [3], "compute_share": 0.0}]}, "finite, positive sum"),
    ({"schema": "autotuner.model.layout/1", "tensors": [{"name": "w", "shape": [3], "compute_share": 1.0}]},
     "schema: 'autotuner.model.layout/1'"),
    ([1], "(top level): [1]"),
])
def test_bad_layout_documents(doc, needle):
    with pytest.raises(LayoutError) as e:
        layout_from_dict(doc, "L.json")
    one_line(e.value, "L.json", needle)


def test_layout_dataclass_checks_shapes_and_shares():
    ok = dict(name="x", names=("a",), shapes=((3, 4),), dtypes=("float32",), compute_share=(1.0,))
    assert Layout(**ok).total_bytes == 48
    for bad in [dict(shapes=((-4,),)), dict(shapes=((1.7,),)), dict(shapes=((2**60,),)),
                dict(compute_share=(math.nan,)), dict(compute_share=(math.inf,))]:
        with pytest.raises(LayoutError) as e:
            Layout(**{**ok, **bad})
        one_line(e.value, "layout 'x'")
    assert MAX_LAYOUT_BYTES == 2**53


@pytest.mark.parametrize("spec", [":", ":x", ".rel:x", "os:", "a b:c"])
def test_malformed_factory_specs_are_one_line_errors(spec):
    with pytest.raises(LayoutError) as e:
        load_layout(spec)
    one_line(e.value, repr(spec))


def test_simulate_with_a_nan_share_layout_fails_fast(tmp_path):
    f = tmp_path / "L.json"
    f.write_text(json.dumps(_layout(compute_share=float("nan"))))
    p = cli("simulate", "--model", str(f), "--compute-ms", "50")
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert "tensors[0].compute_share: nan" in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_committed_layouts_validate():
    for f in [*sorted((ROOT / "autotuner" / "layouts").glob("*.json")), *sorted((ROOT / "runs").rglob("layouts/*.json"))]:
        assert load_layout(str(f)).n_tensors > 0, f


# --- proposals and names ----------------------------------------------------------------------

@pytest.mark.parametrize("doc,needle", [
    ([{"cycle_tme_ms": 3}], "proposal 1: cycle_tme_ms: 3: extra inputs are not permitted"),
    ([{"cycle_time_ms": "3"}], "proposal 1: cycle_time_ms: '3'"),
    ({"proposals": [{"config": {"cycle_time_ms": float("nan")}}]}, "proposal 1: config.cycle_time_ms: nan"),
    ({"proposals": []}, "proposals: []"),
    ({"nope": 1}, "proposals: (missing)"),
    (3, "got a JSON int"),
])
def test_bad_proposals_are_one_line_errors(tmp_path, doc, needle):
    from autotuner.frameworks.horovod.predict import load_proposals

    f = tmp_path / "p.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(ScenarioError) as e:
        load_proposals(f)
    one_line(e.value, str(f), needle)


def test_proposals_from_suggest_json_and_lists(tmp_path):
    from autotuner.frameworks.horovod.predict import load_proposals

    f = tmp_path / "p.json"
    f.write_text(json.dumps({"env": "x", "proposals": [{"config": {"fusion_threshold_mb": 3, "cycle_time_ms": 7.0},
                                                        "step_time_ms": 1.0}]}))
    assert load_proposals(f)[0].cycle_time_ms == 7.0
    f.write_text(json.dumps([{"fusion_threshold_bytes": 2**20, "cache_capacity": 0}]))
    assert load_proposals(f)[0].cache_capacity == 0


@pytest.mark.parametrize("name,ok", [("v100-16gbit", True), ("a_b.c", True), ("../x", False), ("/x", False),
                                     ("a/b", False), (".x", False), ("", False), ("a\\b", False), ("x" * 101, False)])
def test_plain_names(name, ok):
    assert is_plain_name(name) is ok


def test_gzip_timelines_helper_is_real():
    # the cut-timeline test above relies on kept timelines being gzip files
    assert gzip.decompress((LOCAL / "validation" / "timelines" / "fit-sweep" / "proposal-1-r0.json.gz").read_bytes())
