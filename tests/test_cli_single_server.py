"""Single-server what-ifs on the command line: ``--backend`` on simulate, suggest,
explore and scale; ``scale --ranks``; wall times of the whole run where the env has a run shape.

The environments are written by hand into tmp_path from the shipped v100-16gbit model: one
server with 4 GPUs and two fitted backends (mpi fast, gloo slow), resnet50 with a run shape
(MNIST-like: 60000 images, batch 64 per rank, 10 epochs, 20 s start-up), vgg16 without one;
and a CPU host with compute contention (4 effective cores) for ranks 1..8.
"""
import json
import math

import pytest

from autotuner.frameworks.horovod.predict import make_scenario
from autotuner.errors import ExploreError
from autotuner.frameworks.horovod.views.scale import scale
from cli_helpers import ROOT, assert_one_line_error, run

RUN = {"train_images": 60000, "batch_size": 64, "epochs": 10, "startup_s": 20.0}


def _steps_per_rank(ranks: int) -> int:
    return RUN["epochs"] * math.ceil(math.ceil(RUN["train_images"] / ranks) / RUN["batch_size"])


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    base = json.loads((ROOT / "autotuner" / "models" / "v100-16gbit.json").read_text())
    srv = json.loads(json.dumps(base))
    srv["env"], srv["default"] = "srv4", False
    srv["cluster"] |= {"nodes": 1, "gpus_per_node": 4}
    srv["cost_model"]["backends"] = {
        "mpi": {"intra": {"alpha_us": 30.0, "bandwidth_gbps": 20.0}, "ctrl_op_us": 50.0},
        "gloo": {"intra": {"alpha_us": 200.0, "bandwidth_gbps": 2.0}, "ctrl_op_us": 400.0}}
    srv["workloads"]["resnet50"]["run"] = dict(RUN)
    (d / "srv4.json").write_text(json.dumps(srv))
    cpu = json.loads(json.dumps(srv))
    cpu["env"] = "cpu8"
    cpu["cluster"] |= {"nodes": 1, "gpus_per_node": 1}
    cpu["contention"] = {"form": "processor-sharing", "logical_cpus": 8, "cores": 4.0}
    (d / "cpu8.json").write_text(json.dumps(cpu))
    return d


def _json(*args):
    p = run(*args)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


# ------------------------------------------------------------------ --backend
def test_simulate_backend_uses_its_tier(model_dir):
    common = ("simulate", "--model", "resnet50", "--env", "srv4", "--model-dir", str(model_dir), "--json")
    mpi, gloo, own = _json(*common, "--backend", "mpi"), _json(*common, "--backend", "gloo"), _json(*common)
    assert (mpi["backend"], gloo["backend"], own["backend"]) == ("mpi", "gloo", None)
    # gloo's fitted tier is 10x slower: its collectives and step are longer than mpi's
    assert gloo["comm_ms"] > 2 * mpi["comm_ms"] and gloo["step_time_ms"] > mpi["step_time_ms"]
    assert own["step_time_ms"] not in (mpi["step_time_ms"], gloo["step_time_ms"])


def test_backend_in_text_headers(model_dir):
    p = run("simulate", "--model", "resnet50", "--env", "srv4", "--model-dir", str(model_dir), "--backend", "gloo")
    assert p.returncode == 0, p.stderr
    assert "backend gloo" in " ".join(p.stdout.split())
    p = run("simulate", "--model", "resnet50", "--env", "srv4", "--model-dir", str(model_dir))
    assert "backend" not in p.stdout


@pytest.mark.parametrize("cmd", [("simulate",), ("suggest", "--n-calls", "10"),
                                 ("explore", "--no-suggest", "--resolution", "8"), ("scale", "--ranks", "1,2")])
def test_unfitted_backend_is_one_line_exit_2(cmd, model_dir, tmp_path):
    extra = ("--out", str(tmp_path)) if cmd[0] in ("explore", "scale") else ()
    p = run(*cmd, "--model", "resnet50", "--env", "srv4", "--model-dir", str(model_dir), "--backend", "nccl", *extra)
    assert_one_line_error(p, "backend 'nccl'")
    assert "mpi, gloo" in p.stderr
    assert not list(tmp_path.iterdir())  # nothing written


def test_backend_on_env_with_one_backend_and_unknown_name():
    assert_one_line_error(run("simulate", "--model", "resnet50", "--env", "v100-16gbit", "--backend", "mpi"),
                          "was measured with nccl only")
    assert_one_line_error(run("simulate", "--model", "resnet50", "--env", "v100-16gbit", "--backend", "tcp"),
                          "--backend")


def test_suggest_and_explore_with_backend(model_dir, tmp_path):
    d = _json("suggest", "--model", "resnet50", "--env", "srv4", "--model-dir", str(model_dir), "--backend", "mpi",
              "--n-calls", "10", "--json")
    assert d["backend"] == "mpi"
    common = ("explore", "--model", "resnet50", "--env", "srv4", "--model-dir", str(model_dir), "--no-suggest",
              "--resolution", "8", "--out", str(tmp_path), "--json")
    mpi, gloo = _json(*common, "--backend", "mpi"), _json(*common, "--backend", "gloo")
    assert mpi["scenario"]["backend"] == "mpi" and gloo["scenario"]["backend"] == "gloo"
    assert gloo["best"]["step_time_ms"] > mpi["best"]["step_time_ms"]


# ------------------------------------------------------------------ scale --ranks
def test_scale_ranks_json(model_dir, tmp_path):
    d = _json("scale", "--model", "resnet50", "--env", "srv4", "--model-dir", str(model_dir), "--ranks", "4,1,2",
              "--backend", "mpi", "--out", str(tmp_path), "--json")
    rows = d["rows"]
    assert d["axis"] == "ranks" and d["scenario"]["backend"] == "mpi"
    assert [r["ranks"] for r in rows] == [1, 2, 4]
    assert all(r["nodes"] == 1 and r["gpus_per_node"] == r["ranks"] for r in rows)
    one = rows[0]  # one rank: no Horovod work, the step is the compute
    assert one["best_step_time_ms"] == pytest.approx(one["compute_ms"]) == pytest.approx(one["default_step_time_ms"])
    assert rows[2]["best_step_time_ms"] > one["best_step_time_ms"]
    assert one["best_efficiency"] == 1.0 and all(r["best_efficiency"] <= 1 + 1e-9 for r in rows)
    assert all(r["hier_step_time_ms"] is None for r in rows)  # one node: no hierarchical allreduce
    # wall time: the point's own steps per rank (the sampler splits the images over the ranks)
    for r in rows:
        assert r["steps_per_rank"] == _steps_per_rank(r["ranks"])
        for k in ("best", "default"):
            assert r[f"{k}_wall_time_s"] == pytest.approx(
                RUN["startup_s"] + r["steps_per_rank"] * r[f"{k}_step_time_ms"] / 1e3)
    assert rows[2]["best_wall_time_s"] < rows[0]["best_wall_time_s"]
    assert d["batch_per_gpu"] == RUN["batch_size"]  # the run's batch when no env.toml gives one
    assert all(__import__("pathlib").Path(f).stat().st_size > 1000 for f in d["files"])


def test_scale_ranks_backend_changes_the_points(model_dir, tmp_path):
    common = ("scale", "--model", "resnet50", "--env", "srv4", "--model-dir", str(model_dir), "--ranks", "4",
              "--out", str(tmp_path), "--json")
    mpi, gloo = _json(*common, "--backend", "mpi")["rows"][0], _json(*common, "--backend", "gloo")["rows"][0]
    assert gloo["default_step_time_ms"] > mpi["default_step_time_ms"]


def test_scale_ranks_text(model_dir, tmp_path):
    p = run("scale", "--model", "resnet50", "--env", "srv4", "--model-dir", str(model_dir), "--ranks", "1,2,4",
            "--backend", "gloo", "--out", str(tmp_path))
    assert p.returncode == 0, p.stderr
    text = " ".join(p.stdout.split())
    assert "over ranks on one node, backend gloo" in text
    assert "ranks" in p.stdout and "best wall s" in text and "default wall s" in text
    assert "hier." not in p.stdout and "N = ranks" in text and "20 s start-up" in text


def test_scale_ranks_follow_rank_workload(model_dir, tmp_path):
    """CPU ranks sharing 4 effective cores: compute doubles from 4 to 8 ranks (Scenario.rank_workload)."""
    d = _json("scale", "--model", "resnet50", "--env", "cpu8", "--model-dir", str(model_dir), "--ranks", "1,2,4,8",
              "--out", str(tmp_path), "--json")
    c = {r["ranks"]: r["compute_ms"] for r in d["rows"]}
    assert c[1] == c[2] == c[4] and c[8] == pytest.approx(2 * c[1])
    assert d["rows"][-1]["best_step_time_ms"] >= c[8]
    p = run("scale", "--model", "resnet50", "--env", "cpu8", "--model-dir", str(model_dir), "--ranks", "1,8",
            "--out", str(tmp_path))
    assert p.returncode == 0 and "compute ms" in p.stdout and "per-rank compute" in " ".join(p.stdout.split())


@pytest.mark.parametrize("args,needle", [
    (["--ranks", "1,2", "--nodes", "1,2"], "--ranks and --nodes"),
    (["--ranks", "1,2", "--gpus-per-node", "2"], "--ranks and --gpus-per-node"),
    (["--ranks", "0,1"], ">= 1"),
    (["--ranks", ""], "--ranks"),
    (["--ranks", "1,x"], "not an integer"),
])
def test_scale_ranks_bad_input(args, needle, model_dir, tmp_path):
    assert_one_line_error(run("scale", "--model", "resnet50", "--env", "srv4", "--model-dir", str(model_dir), *args,
                              "--out", str(tmp_path)), needle)


def test_scale_view_ranks_arguments(model_dir):
    sc, _ = make_scenario(model_dir, "srv4", "resnet50")
    res = scale(sc, None, ranks=[2, 1])
    assert res.axis == "ranks" and list(res.table["ranks"]) == [1, 2]
    for kw in ({"ranks": [1], "gpus_per_node": 2}, {"ranks": []}):
        with pytest.raises(ExploreError):
            scale(sc, None, **kw)
    with pytest.raises(ExploreError):
        scale(sc, [1, 2], ranks=[1])
    assert scale(sc, [1, 2]).axis == "nodes"


# ------------------------------------------------------------------ wall times
def test_wall_time_exactly_with_a_run_shape(model_dir, tmp_path):
    common = ("--env", "srv4", "--model-dir", str(model_dir))
    with_run = _json("simulate", "--model", "resnet50", *common, "--json")
    assert with_run["steps_per_rank"] == _steps_per_rank(4)
    assert with_run["wall_time_s"] == pytest.approx(RUN["startup_s"] + _steps_per_rank(4) * with_run["step_time_ms"] / 1e3)
    no_run = _json("simulate", "--model", "vgg16", *common, "--json")
    assert "wall_time_s" not in no_run and "steps_per_rank" not in no_run
    assert "wall time" in run("simulate", "--model", "resnet50", *common).stdout
    assert "wall time" not in run("simulate", "--model", "vgg16", *common).stdout
    # an uncalibrated model (--compute-ms) has no run shape either
    assert "wall_time_s" not in _json("simulate", "--model", "resnet50", "--compute-ms", "100", *common, "--json")
    rows = _json("scale", "--model", "vgg16", *common, "--ranks", "1,2", "--out", str(tmp_path), "--json")["rows"]
    assert not any("best_wall_time_s" in r or "steps_per_rank" in r for r in rows)
    p = run("scale", "--model", "vgg16", *common, "--ranks", "1,2", "--out", str(tmp_path))
    assert p.returncode == 0 and "wall s" not in p.stdout and "wall time" not in p.stdout


def test_scale_nodes_unchanged_and_default_nodes(tmp_path):
    d = _json("scale", "--model", "vgg16", "--env", "v100-16gbit", "--out", str(tmp_path), "--json")
    assert d["axis"] == "nodes" and [r["nodes"] for r in d["rows"]] == [1, 2, 4, 8, 16, 32, 64]
    assert not any("best_wall_time_s" in r for r in d["rows"])


def test_scale_tables_fit_80_columns(tmp_path):
    """Found as a new user would meet it: ``COLUMNS=80 autotuner scale --model vgg16 --env v100-5gbit | cat``
    printed one table 113 columns wide (step times and the best knobs side by side), so an 80-column terminal wrapped
    each row. Now two tables per link rate, each keyed by nodes and GPUs, every line of them within 80."""
    import itertools
    import os

    p = run("scale", "--model", "vgg16", "--env", "v100-5gbit", "--link-gbit", "5,25", "--out", str(tmp_path),
            env={**os.environ, "COLUMNS": "80"})
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    titles = [i for i, ln in enumerate(lines) if ln.endswith(("Horovod's defaults", "the best knobs"))]
    assert [lines[i] for i in titles] == [f"{bw} Gbit/s inter-node link: {what}" for bw in (5, 25) for what in
                                          ("step time, best and Horovod's defaults", "the best knobs")]
    for i in titles:
        block = list(itertools.takewhile(lambda ln: ln.startswith(("nodes", "-----", " ")), lines[i + 1:]))
        assert block and all(len(ln) <= 80 for ln in block), block
        assert block[0].split()[:2] == ["nodes", "GPUs"] and len([ln for ln in block if ln.strip()[:1].isdigit()]) == 7
