"""Both frameworks answer each verb in one shape (autotuner/results.py): the same attribute names, types and
meaning, on the shipped environments."""
import pytest

import autotuner
from autotuner.results import Pick, SimulateAnswer, SuggestAnswer, ValidateAnswer


@pytest.fixture(scope="module")
def answers():
    hvd = autotuner.suggest(model="resnet50", env="v100-16gbit")
    ddp = autotuner.ddp_suggest("resnet50", "ddp-2x1-3gbit")
    return {"horovod": hvd, "ddp": ddp}


@pytest.mark.parametrize("framework", ["horovod", "ddp"])
def test_suggest_answers_share_one_shape(answers, framework):
    a = answers[framework]
    assert isinstance(a, SuggestAnswer)
    config_type = {"horovod": autotuner.Config, "ddp": autotuner.DdpConfig}[framework]
    for p in (a.best, a.baseline, *a.alternatives):
        assert isinstance(p, Pick) and isinstance(p.config, config_type)
        assert p.step_time_ms > 0
        # every speed-up is over the baseline's predicted step
        assert p.speedup_vs_default == pytest.approx(a.baseline.step_time_ms / p.step_time_ms, rel=1e-6)
    assert a.baseline.speedup_vs_default == pytest.approx(1.0)
    assert 0 < a.band < 1 and isinstance(a.keep_defaults, bool) and a.trust
    assert (a.best.config == a.baseline.config) == a.keep_defaults or a.best.step_time_ms <= a.baseline.step_time_ms
    assert a.best.config not in [p.config for p in a.alternatives]
    assert a.env in a.to_dict().values() and a.model in a.to_dict().values()


def test_the_recommendation_beats_the_baseline_by_more_than_the_band_or_is_the_baseline(answers):
    for a in answers.values():
        gain = a.baseline.step_time_ms / a.best.step_time_ms - 1
        assert a.keep_defaults == (a.best.config == a.baseline.config)
        assert a.keep_defaults or gain > a.band


def test_simulate_answers_share_one_shape():
    hvd = autotuner.simulate(model="resnet50", env="v100-16gbit")
    ddp = autotuner.ddp_simulate("resnet50", "ddp-2x1-3gbit", autotuner.DdpConfig())
    for a, config_type in ((hvd, autotuner.Config), (ddp, autotuner.DdpConfig)):
        assert isinstance(a, SimulateAnswer) and isinstance(a.config, config_type)
        assert a.step_time_ms > 0 and a.trust


def test_validate_answers_share_one_shape():
    import dataclasses

    from autotuner.frameworks.ddp.api import DdpValidateResult

    # the fields every validate answer carries, named as the protocol names them
    wanted = {n for n in ValidateAnswer.__dict__ if not n.startswith("_")}
    assert wanted == {"verdict", "report"}
    for cls in (autotuner.ValidateResult, DdpValidateResult):
        assert wanted <= {f.name for f in dataclasses.fields(cls)}, cls


def test_one_envs_lists_every_environment_with_the_frameworks_that_answer_for_it():
    from autotuner.frameworks.horovod.environments import envs as horovod_envs

    rows = {r["env"]: r for r in autotuner.envs()}
    hvd = {r["env"] for r in horovod_envs()}
    ddp = {r["env"] for r in autotuner.ddp_envs()}
    assert set(rows) == hvd | ddp
    for name, r in rows.items():
        assert r["frameworks"] == [f for f, names in (("horovod", hvd), ("ddp", ddp)) if name in names]
        assert set(r["trust"]) == set(r["frameworks"]) and all(r["trust"].values())
    assert rows["v100-16gbit"]["frameworks"] == ["horovod"] and rows["ddp-2x1-3gbit"]["frameworks"] == ["ddp"]
    assert rows["ddp-2x1-3gbit"]["ranks_per_node"] == 1 and rows["ddp-2x1-3gbit"]["nodes"] == 2
