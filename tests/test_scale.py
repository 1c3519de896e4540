"""Scale view: best config and defaults per node count and link rate; CLI end to end and bad input."""
import json
from pathlib import Path

import numpy as np
import pytest

from autotuner.frameworks.horovod.environments import env_batch_size
from autotuner.frameworks.horovod.predict import make_scenario
from autotuner.errors import ExploreError
from autotuner.errors import AutotunerError
from autotuner.options import float_list as parse_float_list
from autotuner.options import int_list as parse_int_list
from autotuner.frameworks.horovod.search.at_size import best_at_size
from autotuner.frameworks.horovod.views.scale import scale, what_if
from autotuner.frameworks.horovod.knobs import DEFAULTS_0_28

from cli_helpers import assert_one_line_error, run  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "autotuner" / "models"


@pytest.fixture(scope="module")
def v100_scaling():
    sc, _ = make_scenario(MODELS, "v100-16gbit", "resnet50")
    return sc, scale(sc, [1, 2, 4, 8, 16], bandwidths_gbps=[4.0, 16.0], batch_per_gpu=32)


def test_table_shape_and_units(v100_scaling):
    sc, res = v100_scaling
    t = res.table
    assert len(t) == 2 * 5 and list(t[t["bandwidth_gbps"] == 16.0]["nodes"]) == [1, 2, 4, 8, 16]
    assert (t["ranks"] == t["nodes"] * t["gpus_per_node"]).all()
    assert np.allclose(t["best_steps_per_s"], 1e3 / t["best_step_time_ms"])
    assert np.allclose(t["best_samples_per_s"], t["best_steps_per_s"] * t["ranks"] * 32)


def test_best_is_a_real_simulation_and_beats_defaults(v100_scaling):
    sc, res = v100_scaling
    t = res.table
    assert (t["best_step_time_ms"] <= t["default_step_time_ms"] + 1e-9).all()
    r = t[(t["bandwidth_gbps"] == 16.0) & (t["nodes"] == 8)].iloc[0]
    s8 = what_if(sc, nodes=8, bandwidth_gbps=16.0)
    assert r["default_step_time_ms"] == pytest.approx(s8.simulate(DEFAULTS_0_28).step_time_ms)
    b = best_at_size(s8)
    assert r["best_step_time_ms"] == pytest.approx(s8.simulate(b.config).step_time_ms)


def test_efficiency_at_most_one_and_falling(v100_scaling):
    _, res = v100_scaling
    for bw, g in res.table.groupby("bandwidth_gbps"):
        for name in ("best", "default"):
            eff = g[f"{name}_efficiency"].to_numpy()
            assert eff[0] == pytest.approx(1.0)
            assert (eff <= 1 + 1e-9).all()
        # the best configuration's efficiency falls with size (the defaults' need not: the cycle
        # grid's phase against backward can make a fixed setting luckier at a larger size)
        eff = g["best_efficiency"].to_numpy()
        assert (np.diff(eff) <= 1e-9).all(), (bw, eff)
        assert g["best_efficiency"].iloc[-1] < 1  # 16 single-GPU nodes do pay for communication


def test_more_bandwidth_never_slower(v100_scaling):
    _, res = v100_scaling
    t = res.table
    slow = t[t["bandwidth_gbps"] == 4.0]["best_step_time_ms"].to_numpy()
    fast = t[t["bandwidth_gbps"] == 16.0]["best_step_time_ms"].to_numpy()
    assert (fast <= slow + 1e-9).all() and fast[-1] < slow[-1]


def test_one_gpu_per_node_hierarchical_never_wins(v100_scaling):
    _, res = v100_scaling
    multi = res.table[res.table["nodes"] > 1]
    assert (multi["hier_gain_percent"] <= 0.5).all()
    assert all("never wins" in f and "1 GPU per node" in f for f in res.findings)


def test_hierarchical_wins_somewhere_with_8_gpus_per_node():
    # v100-5gbit has a fitted intra-node tier (1x4 column, ~45 Gbit/s): with 8 GPUs per node the
    # flat ring pays 2(8N-1) latency steps on the slow tier, hierarchical only 2(N-1)
    sc, _ = make_scenario(MODELS, "v100-5gbit", "resnet50")
    res = scale(sc, [2, 8, 32], gpus_per_node=8)
    assert (res.table["hier_gain_percent"] > 0.5).any(), res.table[["nodes", "flat_step_time_ms", "hier_step_time_ms"]]
    assert "wins from" in res.findings[0]


def test_parsers_and_bad_arguments():
    assert parse_int_list("8, 1,2,2", "--nodes") == [1, 2, 8]
    assert parse_float_list("10,1.5", "--link-gbit") == [1.5, 10.0]
    for bad in ("", "1,,2", "1,x", "0,1", "-2", "1.5"):
        with pytest.raises(AutotunerError):
            parse_int_list(bad, "--nodes")
    for bad in ("", "0", "-1", "nan", "inf", "a"):
        with pytest.raises(AutotunerError):
            parse_float_list(bad, "--link-gbit")
    sc, _ = make_scenario(MODELS, "v100-16gbit", "resnet50")
    with pytest.raises(ExploreError):
        scale(sc, [])
    with pytest.raises(ExploreError):
        scale(sc, [1, 2], bandwidths_gbps=[0.0])
    with pytest.raises(ExploreError):
        scale(sc, [1, 2], gpus_per_node=0)


def test_batch_size_from_env_toml():
    assert env_batch_size(ROOT / "runs", "v100-16gbit") == 32
    assert env_batch_size(ROOT / "runs", "local-gloo-1gbit") is None
    assert env_batch_size(ROOT / "runs", "nope") is None


def test_cli_scale_json_and_plot(tmp_path):
    p = run("scale", "--model", "vgg16", "--env", "v100-16gbit", "--nodes", "1,2,4", "--link-gbit", "1,10",
            "--json", "--out", str(tmp_path))
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert set(d) >= {"scenario", "rows", "findings", "batch_per_gpu", "files"}
    assert d["batch_per_gpu"] == 32 and len(d["rows"]) == 6 and len(d["findings"]) == 2
    assert set(d["rows"][0]) >= {"nodes", "bandwidth_gbps", "best_step_time_ms", "best_samples_per_s",
                                 "best_efficiency", "default_efficiency", "best_fusion_threshold_mb",
                                 "best_hierarchical_allreduce", "hier_step_time_ms"}
    assert d["rows"][0]["hier_step_time_ms"] is None  # one node: no hierarchical
    for f in d["files"]:
        assert Path(f).exists() and Path(f).stat().st_size > 1000


def test_cli_scale_text(tmp_path):
    p = run("scale", "--model", "resnet50", "--env", "v100-5gbit", "--nodes", "1,4", "--gpus-per-node", "4",
            "--out", str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert "hierarchical allreduce" in p.stdout and "efficiency" in p.stdout and "samples/s" in p.stdout


@pytest.mark.parametrize("args,needle", [
    (["--nodes", ""], "--nodes"),
    (["--nodes", "1,two"], "not an integer"),
    (["--nodes", "0,1"], ">= 1"),
    (["--link-gbit", "0"], "> 0"),
    (["--link-gbit", "-5,10"], "> 0"),
    (["--gpus-per-node", "0"], "--gpus-per-node"),
    (["--env", "nope"], "unknown env"),
])
def test_cli_scale_bad_input(args, needle, tmp_path):
    assert_one_line_error(run("scale", "--model", "resnet50", *args, "--out", str(tmp_path)), needle)


def test_cli_scale_unknown_model(tmp_path):
    assert_one_line_error(run("scale", "--model", "nomodel", "--out", str(tmp_path)), "unknown model")


@pytest.mark.parametrize("env, model", [("local-gloo-1gbit", "resnet50"),
                                        ("fresh-poll-2gbit", "examples/layouts/tiny_transformer_c2.json")])
def test_cli_scale_on_a_gloo_env_plots(tmp_path, env, model):
    """Gloo has no hierarchical allreduce: the hierarchical-gain panel is empty and says so (it used to
    end in matplotlib's "Data cannot be log-scaled" traceback), and no legend warning reaches stderr."""
    p = run("scale", "--model", model, "--env", env, "--out", str(tmp_path))
    assert p.returncode == 0 and "Traceback" not in p.stderr and "UserWarning" not in p.stderr, p.stderr[-2000:]
    assert list(tmp_path.glob("scale-*.png"))


def _every_shipped_env():
    """One shipped env of each kind: its fit's form, one host or several, a measured workload or none (8 kinds of
    the 31 envs; each env's two commands render four figures, 10-12 s on the CI machines' kind)."""
    out, kinds = [], set()
    for f in sorted(MODELS.glob("*.json")):
        d = json.loads(f.read_text())
        models = sorted(d.get("workloads") or {})
        kind = (d["fit"]["form"], (d.get("cluster") or {}).get("nodes", 1) > 1, bool(models))
        if kind not in kinds:
            kinds.add(kind)
            out.append((d["env"], models[0] if models else "resnet50", [] if models else ["--compute-ms", "300"]))
    return out


@pytest.mark.parametrize("env, model, extra", _every_shipped_env(), ids=lambda v: v if isinstance(v, str) else None)
def test_scale_and_explore_work_on_one_shipped_env_of_each_kind(tmp_path, env, model, extra):
    """`scale` and `explore` draw on every Gloo env without a matplotlib traceback: both commands, --json and
    their PNGs, on one shipped env of each kind (``_every_shipped_env``)."""
    p = run("scale", "--model", model, "--env", env, *extra, "--nodes", "1,2,4", "--out", str(tmp_path / "s"), "--json")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
    d = json.loads(p.stdout)
    assert d["rows"] and all(r["best_step_time_ms"] > 0 for r in d["rows"])
    assert list((tmp_path / "s").glob("*.png"))
    p = run("explore", "--model", model, "--env", env, *extra, "--resolution", "8", "--out", str(tmp_path / "e"),
            "--json")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert json.loads(p.stdout)["files"] and len(list((tmp_path / "e").glob("*.png"))) == 2


def test_scale_and_explore_compare_with_the_env_s_own_horovod_defaults(tmp_path):
    """On v100-16gbit (its reports ran Horovod 0.20.3: 64 MiB, 5 ms) ``scale``'s default columns and ``explore``'s
    defaults mark are 0.20.3's, as ``suggest``'s reference row is (both were Horovod 0.28's whatever the env);
    ``--reference-version 0.28.1`` names another, and the printed line says which."""
    import autotuner
    from autotuner.frameworks.horovod.knobs import DEFAULTS_0_20
    from autotuner.frameworks.horovod.views.scale import what_if as _w
    from autotuner.frameworks.horovod.search.at_size import step_times_ms

    r = autotuner.scale("vgg16", "v100-16gbit", nodes=[4], out_dir=tmp_path / "s")
    assert r.scaling.reference_version == "0.20.3" and r.scaling.reference == DEFAULTS_0_20
    sc, _ = make_scenario(MODELS, "v100-16gbit", "vgg16")
    want = float(step_times_ms(_w(sc, nodes=4), [DEFAULTS_0_20])[0])
    assert r.scaling.table["default_step_time_ms"].iloc[0] == pytest.approx(want, rel=1e-9)
    s = autotuner.suggest("vgg16", "v100-16gbit", compression="none")
    assert s.default.step_time_ms == pytest.approx(want, rel=1e-6)
    p = run("scale", "--model", "vgg16", "--env", "v100-16gbit", "--nodes", "4", "--out", str(tmp_path / "c"),
            "--reference-version", "0.28.1")
    assert p.returncode == 0, p.stderr
    assert "defaults = Horovod 0.28.1's (128 MiB, 1 ms, cache on, flat)" in p.stdout
    e = autotuner.explore("vgg16", "v100-16gbit", resolution=4, suggest_pick=False, out_dir=tmp_path / "e")
    mark = next(m for m in e.exploration.marks if m.kind == "default")
    assert mark.name == "Horovod 0.20.3 defaults" and mark.config == DEFAULTS_0_20
    assert_one_line_error(run("scale", "--model", "vgg16", "--out", str(tmp_path / "d"), "--reference-version", "9.9"),
                          "not a Horovod release")
