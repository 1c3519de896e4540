"""DDP's predicting commands answer for environments without a DDP sweep: a model file built from published specs
(``autotuner env new``) and those fitted from real nccl-tests ``all_reduce_perf`` runs (runs/nccl-a100-2x8 and
runs/nccl-h100-2x8, each transcribed from a public source, SOURCE.md beside it; fitted here into a temporary
folder), through the public API and the command line, each saying where its figures come from; a measured DDP sweep
of the same name always wins."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_helpers import assert_one_line_error, run

import autotuner
from autotuner.frameworks.ddp.api import DEFAULT_BAND
from autotuner.frameworks.ddp.model_env import resolve_gpu
from autotuner.model.costmodel import GBIT, Tier
from autotuner.specs import GPUS, NEVER_MEASURED

ROOT = Path(__file__).resolve().parents[1]
#: real nccl-tests runs (2 nodes x 8 A100-SXM4-40GB; 2 nodes x 8 "H100 80GB HBM3"), each with the GPU table's
#: row its GPU is read as
NCCL_ENVS = {"nccl-a100-2x8": "A100-40GB", "nccl-h100-2x8": "H100-SXM"}
NCCL_TRUST = ("from nccl-tests all_reduce_perf (nccl-a100-2x8/all_reduce_perf-2x8.txt (2x8 ranks)), never checked "
              "against a DDP step")
#: a layout profiled on an H100 (runs/gpu-profiles/README.md)
LAYOUT = ROOT / "runs" / "gpu-profiles" / "h100-torch2.11" / "layouts" / "resnet50-fp32-b64.json"
SPEC = "gpu4x8-h100"


@pytest.fixture(scope="module")
def specs_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("specs-models")
    autotuner.env_new(SPEC, nodes=4, gpus_per_node=8, intra="nvlink4", link_gbit=400, gpu="H100-SXM", out=d)
    return d


@pytest.fixture(scope="module")
def nccl_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("nccl-models")
    for env in NCCL_ENVS:
        autotuner.fit_environments(ROOT / "runs" / env, out=d)
        assert (d / f"{env}.json").is_file()
    return d


@pytest.fixture(scope="module")
def layout(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("layouts")
    shutil.copy(LAYOUT, d / LAYOUT.name)
    return d / LAYOUT.name


def _simulate(model, env, model_dir, compute_ms=100, **knobs):
    return autotuner.ddp_simulate(str(model), env, autotuner.DdpConfig(**knobs), compute_ms=compute_ms,
                                  model_dir=model_dir)


@pytest.mark.parametrize("which", ["resnet50", "layout"])
def test_a_specs_env_answers_ddp_suggest_saying_it_was_never_measured(specs_dir, layout, which):
    model = "resnet50" if which == "resnet50" else str(layout)
    a = autotuner.ddp_suggest(model, SPEC, compute_ms=100, model_dir=specs_dir)
    assert a.trust.startswith(NEVER_MEASURED) and "never checked against a DDP step" in a.trust
    assert "Gloo" not in a.fit and "NCCL allreduce from specs" in a.fit and "4x8 H100-SXM" in a.fit
    # no DDP run checked it: the band of every unchecked DDP env, and the source says why
    assert a.band == DEFAULT_BAND and "no DDP run on this env" in a.suggestion.band_source
    assert any(n.startswith("assumed: ") and "datasheet peak" in n for n in a.suggestion.notes)
    # the H100's datasheet gives fp16's casts: the hook is searched
    assert a.suggestion.fp16 is not None
    assert a.baseline.step_time_ms > 100
    p = run("ddp", "suggest", "--env", SPEC, "--model", model, "--compute-ms", "100", "--model-dir", specs_dir)
    assert p.returncode == 0, p.stderr
    assert f"trust: {a.trust}" in p.stdout and a.fit in p.stdout
    d = json.loads(run("ddp", "suggest", "--env", SPEC, "--model", model, "--compute-ms", "100", "--model-dir",
                       specs_dir, "--json").stdout)
    assert d["trust"] == a.trust and d["default"]["step_time_ms"] == pytest.approx(a.baseline.step_time_ms)


def test_a_specs_env_prices_the_allreduce_over_every_rank_and_the_copies_at_the_gpus_memory_rate(specs_dir):
    """Each bucket's allreduce is NCCL's ring over all 4 x 8 ranks on the 400 Gbit/s node link (alpha 9.6 µs per
    step, tuning.cc), no queued saving; each copy into and out of the buckets reads and writes its bytes at the
    H100 SXM's 3350 GB/s."""
    r = _simulate("resnet50", SPEC, specs_dir, compute_ms=1)
    link = Tier(9.6e-6, 400 * GBIT)
    for b in r.step.buckets:
        assert b.end_s - b.start_s == pytest.approx(link.allreduce_s(b.nbytes, 32), rel=1e-9)
    total = sum(b.nbytes for b in r.step.buckets)
    assert r.step.copy_s == pytest.approx(2 * 2 * total / (GPUS["H100-SXM"].gbytes_per_s * 1e9), rel=1e-9)
    # the gradient view drops the copies back: half of them
    v = _simulate("resnet50", SPEC, specs_dir, compute_ms=1, gradient_as_bucket_view=True)
    assert v.step.copy_s == pytest.approx(r.step.copy_s / 2, rel=1e-9)


@pytest.mark.parametrize("env", NCCL_ENVS)
@pytest.mark.parametrize("which", ["resnet50", "layout"])
def test_an_nccl_tests_env_answers_ddp_suggest_naming_its_files(nccl_dir, layout, which, env):
    model = "resnet50" if which == "resnet50" else str(layout)
    a = autotuner.ddp_suggest(model, env, compute_ms=100, model_dir=nccl_dir)
    assert a.trust == NCCL_TRUST.replace("nccl-a100-2x8", env)
    assert "Gloo" not in a.fit and "fitted from nccl-tests all_reduce_perf" in a.fit and NCCL_ENVS[env] in a.fit
    assert a.band == DEFAULT_BAND and a.suggestion.fp16 is not None  # fp16 from the GPU's datasheet
    p = run("ddp", "suggest", "--env", env, "--model", model, "--compute-ms", "100", "--model-dir", nccl_dir)
    assert p.returncode == 0, p.stderr
    assert f"trust: {a.trust}" in p.stdout and "Gloo" not in p.stdout


@pytest.mark.parametrize("env", NCCL_ENVS)
def test_an_nccl_tests_env_prices_the_allreduce_with_its_fitted_tier(nccl_dir, env):
    """The ring over all 16 ranks is the tier fitted from the 2 x 8 run (its model file's inter tier); the copies
    run at the memory rate of the GPU the env names."""
    m = json.loads((nccl_dir / f"{env}.json").read_text())
    tier = Tier.from_dict(m["cost_model"]["inter"])
    r = _simulate("resnet50", env, nccl_dir, compute_ms=1)
    for b in r.step.buckets:
        assert b.end_s - b.start_s == pytest.approx(tier.allreduce_s(b.nbytes, 16), rel=1e-9)
    total = sum(b.nbytes for b in r.step.buckets)
    assert r.step.copy_s == pytest.approx(2 * 2 * total / (GPUS[NCCL_ENVS[env]].gbytes_per_s * 1e9), rel=1e-9)


@pytest.mark.parametrize("cmd", ["simulate", "explore", "scale"])
def test_simulate_explore_and_scale_answer_for_both_kinds(specs_dir, nccl_dir, tmp_path, cmd):
    for env, d, trust in ((SPEC, specs_dir, NEVER_MEASURED), ("nccl-a100-2x8", nccl_dir, NCCL_TRUST)):
        extra = {"simulate": ["--comm-hook", "fp16_compress"], "explore": ["--out", tmp_path / env],
                 "scale": ["--out", tmp_path / env, "--nodes", "1,2,4", "--link-gbit", "100,400"]}[cmd]
        p = run("ddp", cmd, "--env", env, "--model", "resnet50", "--compute-ms", "100", "--model-dir", d, *extra,
                "--json")
        assert p.returncode == 0, p.stderr
        out = json.loads(p.stdout)
        assert trust in out["trust"] and "Gloo" not in out["fit"] and "NCCL" in out["fit"]
        if cmd == "simulate":
            assert out["step_time_ms"] > 100 and out["cast_ms"] > 0
        if cmd == "scale":
            assert {r["nodes"] for r in out["rows"]} == {1, 2, 4}


def test_a_measured_ddp_sweep_wins_over_a_model_file_of_the_same_name(tmp_path):
    env = "ddp-2x1-3gbit"  # a committed DDP env: runs/ddp-2x1-3gbit/ddp-sweep.jsonl
    autotuner.env_new(env, nodes=2, gpus_per_node=1, link_gbit=3, out=tmp_path)
    measured = autotuner.ddp_suggest("resnet50", env, compute_ms=100)
    both = autotuner.ddp_suggest("resnet50", env, compute_ms=100, model_dir=tmp_path)
    assert both.to_dict() == measured.to_dict() and "Gloo" in both.fit and NEVER_MEASURED not in both.trust
    rows = [r for r in autotuner.ddp_envs(model_dir=tmp_path) if r["env"] == env]
    assert len(rows) == 1 and rows[0]["source"] == "measured"


def test_ddp_envs_and_envs_list_the_model_file_envs(specs_dir, nccl_dir):
    rows = {r["env"]: r for r in autotuner.ddp_envs(model_dir=[specs_dir, nccl_dir])}
    spec, nccl, measured = rows[SPEC], rows["nccl-a100-2x8"], rows["ddp-2x1-3gbit"]
    assert set(spec) == set(nccl) == set(measured)  # one set of keys
    assert (spec["source"], spec["nodes"], spec["ranks_per_node"], spec["link_gbit"]) == ("specs", 4, 8, 400)
    assert spec["trust"].startswith(NEVER_MEASURED) and spec["checked"] is None and spec["sweep_jobs"] == 0
    assert nccl["source"] == "nccl-tests" and nccl["trust"] == NCCL_TRUST
    every = {r["env"]: r for r in autotuner.envs(model_dir=[specs_dir, nccl_dir])}
    assert every[SPEC]["frameworks"] == ["horovod", "ddp"] and every[SPEC]["trust"]["ddp"].startswith(NEVER_MEASURED)
    assert every["nccl-a100-2x8"]["trust"]["ddp"] == NCCL_TRUST
    p = run("envs", "--framework", "ddp", "--model-dir", specs_dir, "--json")
    assert p.returncode == 0, p.stderr
    assert SPEC in {r["env"] for r in json.loads(p.stdout)}
    p = run("ddp", "envs", "--model-dir", specs_dir)
    assert p.returncode == 0 and SPEC in p.stdout and "specs" in p.stdout


def test_a_model_file_of_measured_horovod_runs_is_not_a_ddp_env():
    """v100-16gbit's tiers were fitted from Horovod's own step times: DDP refuses it, in one line."""
    assert_one_line_error(run("ddp", "suggest", "--env", "v100-16gbit", "--model", "resnet50"),
                          "neither from specs nor from nccl-tests")
    assert_one_line_error(run("ddp", "suggest", "--env", "no-such-env", "--model", "resnet50"),
                          "nor a model file no-such-env.json")


@pytest.mark.parametrize("name, row, how", [
    ("H100-SXM", "H100-SXM", ""), ("A100-SXM4-40GB", "A100-40GB", ""),
    ("H100 SXM 80GB", "H100-SXM", "read as"), ("NVIDIA H100-SXM5 80GB", "H100-SXM", "read as"),
    ("NVIDIA H100 80GB HBM3", "H100-SXM", "read as"), ("NVIDIA A100-SXM4-40GB", "A100-40GB", "read as"),
    ("H100 80GB HBM2e", None, ""),
    ("A100 80GB PCIe", None, ""), ("MI300X", None, ""), (None, None, "")])
def test_an_envs_gpu_name_is_read_as_a_row_of_the_gpu_table_only_where_nothing_but_a_memory_size_follows(
        name, row, how):
    g, said = resolve_gpu(name)
    assert (None if g is None else g.name) == row and how in said


def _one_rank_env(runs: Path, name: str) -> None:
    """A one-rank DDP env folder (what ``ddp measure --device cuda --np 1`` writes: a sweep of 1 rank, a host phase)
    made of ddp-1.75gbit's real records with the sweep's rank count set to 1: a test of where DDP's answers take
    each figure from, not a measurement of a GPU."""
    d = runs / name
    d.mkdir(parents=True)
    with (d / "ddp-sweep.jsonl").open("w") as f:
        for line in (ROOT / "runs" / "ddp-1.75gbit" / "ddp-sweep.jsonl").read_text().splitlines():
            r = json.loads(line)
            r["ranks"], r["device"], r["setup"] = 1, "cuda", {**r["setup"], "np": 1, "device": "cuda"}
            f.write(json.dumps(r) + "\n")
    shutil.copy(ROOT / "runs" / "ddp-1.75gbit" / "ddp-host.jsonl", d)


def test_a_one_gpu_env_gives_its_host_phase_to_the_model_file_of_the_same_name(specs_dir, tmp_path):
    """A one-rank env has no wire to fit: alone it is refused in one line; beside a model file of the same name its
    host phase replaces the GPU prior there (the note names it), the wire still the model file's."""
    runs = tmp_path / "runs"
    _one_rank_env(runs, SPEC)
    p = run("ddp", "suggest", "--env", SPEC, "--model", "resnet50", "--compute-ms", "100",
            "--runs-dir", str(runs))
    assert_one_line_error(p, "was measured on one GPU")
    a = autotuner.ddp_simulate("resnet50", SPEC, autotuner.DdpConfig(), compute_ms=100, runs_dir=runs,
                               model_dir=specs_dir)
    prior = autotuner.ddp_simulate("resnet50", SPEC, autotuner.DdpConfig(), compute_ms=100,
                                   model_dir=specs_dir)
    assert "one-GPU host phase" in a.host.source and a.host.source != prior.host.source
    assert a.trust == prior.trust and NEVER_MEASURED in a.trust
    assert [b.end_s - b.start_s for b in a.step.buckets] == pytest.approx([b.end_s - b.start_s for b in prior.step.buckets])
