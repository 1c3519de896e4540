"""Environments from published link figures: `autotuner env new`, `autotuner envs`."""
from __future__ import annotations

import json

import pytest

import autotuner
from autotuner.errors import ScenarioError
from autotuner.model.costmodel import GBIT, CostModel
from autotuner.frameworks.horovod.fit.from_specs import spec_model
from autotuner.specs import INTRA_LINKS, NET_ALPHA_US

from cli_helpers import assert_one_line_error, run


def test_spec_tiers_are_the_published_figures():
    d = spec_model("dgx", nodes=8, gpus_per_node=8, intra="nvlink3", inter_gbit=100)
    cost = CostModel.from_dict(d["cost_model"])
    assert cost.intra.bandwidth_Bps == pytest.approx(300e9) and cost.intra.alpha_s == pytest.approx(3.4e-6)
    assert cost.inter.bandwidth_Bps == pytest.approx(100 * GBIT) and cost.inter.alpha_s == pytest.approx(NET_ALPHA_US * 1e-6)
    # a 1 GiB ring allreduce over 8 nodes at 100 Gbit/s: 2(N-1)/N x n / B + 2(N-1) alpha (flat ring of 64
    # ranks crosses the node links: the inter tier bounds it)
    n, p = 2 ** 30, 64
    expect = 2 * (p - 1) * NET_ALPHA_US * 1e-6 + 2 * (p - 1) / p * n / (100 * GBIT)
    from autotuner.model.costmodel import Cluster
    assert cost.allreduce_s(n, Cluster(8, 8), False) == pytest.approx(expect)
    assert all(l.source for l in INTRA_LINKS.values())
    assert "never measured" in d["fit"]["form"] and d["fit"]["figures"] and d["fit"]["assumed"]


@pytest.mark.parametrize("kw, msg", [
    (dict(nodes=2, gpus_per_node=8, intra=None, inter_gbit=100), "need --intra"),
    (dict(nodes=2, gpus_per_node=8, intra="nvlink9", inter_gbit=100), "--intra 'nvlink9'"),
    (dict(nodes=2, gpus_per_node=1, intra=None, inter_gbit=None), "need --link-gbit"),
    (dict(nodes=2, gpus_per_node=1, intra=None, inter_gbit=-1), "between 0.01 and 10000"),
    (dict(nodes=1, gpus_per_node=1, intra=None, inter_gbit=None), "one GPU has no allreduce"),
])
def test_spec_model_bad_figures(kw, msg):
    with pytest.raises(ScenarioError, match=msg.replace("(", r"\(")):
        spec_model("x", **kw)


def test_env_new_then_suggest_says_from_specs(tmp_path):
    p = run("env", "new", "dgx8", "--nodes", "8", "--gpus-per-node", "8", "--intra", "nvlink3", "--link-gbit", "100",
            "--gpu", "A100", "--out", str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "dgx8.json").is_file() and "never measured" in p.stdout
    r = autotuner.suggest("resnet50", "dgx8", compute_ms=300, model_dir=tmp_path, compression="none")
    assert r.trust.startswith("from specs, never measured") and r.nodes == 8 and r.gpus_per_node == 8
    listed = json.loads(run("envs", "--model-dir", str(tmp_path), "--json").stdout)
    row = next(e for e in listed if e["env"] == "dgx8")
    # both frameworks answer for it, each saying it was never measured
    assert row["frameworks"] == ["horovod", "ddp"] and row["trust"]["horovod"].startswith("from specs")
    assert row["trust"]["ddp"].startswith("from specs, never measured") and row["ddp"]["source"] == "specs"
    assert row["horovod"]["source"] == "specs"
    hvd = [e["horovod"] for e in listed if e["horovod"]]
    assert any(e["source"] == "measured" for e in hvd) and any(e["source"] == "lab report" for e in hvd)


def test_env_new_refuses_a_measured_name_and_bad_input(tmp_path):
    assert_one_line_error(run("env", "new", "local-gloo-1gbit", "--nodes", "1", "--gpus-per-node", "2", "--intra",
                              "pcie4", "--out", str(tmp_path)), "measured environment always wins")
    assert not (tmp_path / "local-gloo-1gbit.json").exists()
    assert_one_line_error(run("env", "new", "x", "--nodes", "0", "--gpus-per-node", "2", "--out", str(tmp_path)),
                          "--nodes")
    assert_one_line_error(run("env", "new", "x", "--nodes", "2", "--gpus-per-node", "1", "--link-gbit", "10",
                              "--backend", "rdma", "--out", str(tmp_path)), "--backend")


def test_backend_what_if_names_the_measured_backend():
    assert_one_line_error(run("simulate", "--model", "resnet50", "--env", "local-gloo-1gbit", "--backend", "nccl"),
                          "was measured with gloo only")
