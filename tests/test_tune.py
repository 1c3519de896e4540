"""``autotuner tune``'s decision core (pure) and its loop on recorded trials.

The real short tunes (kill/resume, Ctrl-C, a job that prints no step times) are in
``tests/test_tune_real.py``; the committed head-to-head records in ``test_tune_records``.
"""
from __future__ import annotations

import numpy as np
import pytest

from autotuner.frameworks.horovod.predict import make_scenario
from autotuner.frameworks.horovod.knobs import DEFAULTS_0_28
from autotuner.frameworks.horovod.tune_space import (DEFAULT_CANDIDATE, LENGTH_SCALES, baseline_index, candidate_grid,
                                                     features, prior_ms, prior_unchecked, unchecked_share)
from autotuner.search.tune import (MAX_FAILURES_IN_A_ROW, TuneState, belief, decide, group_offset, noise_from_repeats,
                                   refit_bandwidth_scale, should_stop)


@pytest.fixture(scope="module")
def sc():
    return make_scenario(None, "fresh-poll-2gbit", "mobilenet_v2", compute_ms=60)[0]


@pytest.fixture(scope="module")
def grid(sc):
    cands = candidate_grid(("none",))
    return cands, prior_ms(sc, cands)


def test_the_grid_holds_horovods_defaults_and_spells_only_whole_mib():
    cands = candidate_grid(("none", "fp16"))
    assert DEFAULT_CANDIDATE in cands and len(cands) == 9 * 7 * 2 * 2
    assert all(c.config.fusion_threshold_bytes % 2**20 == 0 for c in cands)
    assert len({c.key for c in cands}) == len(cands)
    x = features(cands)
    assert x.shape == (len(cands), 4) and x.min() >= 0 and x.max() <= 1


def test_the_residual_surrogate_starts_at_the_simulators_choice(grid):
    cands, p = grid
    b = belief(p, features(cands), {}, sd=0.03, noise_sd=0.01, length_scales=LENGTH_SCALES)
    assert b.next_index == int(np.argmin(p)) and b.incumbent is None
    # with no trial the posterior is the prior itself
    assert np.allclose(b.mean_ms, p) and np.allclose(b.sd_ms, 0.03 * p)


def test_a_measured_disagreement_moves_the_belief_and_a_repeat_shrinks_it(grid):
    cands, p = grid
    x = features(cands)
    best = int(np.argmin(p))
    b = belief(p, x, {best: [p[best] * 1.10]}, sd=0.03, noise_sd=0.01, length_scales=LENGTH_SCALES)
    # the GP pulls the measured point most of the way to its measurement (sd 3 % vs noise 1 %), and its
    # neighbours partly; a far candidate keeps its prior
    assert 1.07 < b.mean_ms[best] / p[best] < 1.10
    assert b.amplitude > 1  # a 10 % residual against a 3 % prior widens the prior
    b2 = belief(p, x, {best: [p[best] * 1.10] * 3}, sd=0.03, noise_sd=0.01, length_scales=LENGTH_SCALES)
    assert b2.sd_ms[best] < b.sd_ms[best]


def test_the_stop_rule_compares_expected_improvement_with_one_trials_noise(grid):
    cands, p = grid
    x = features(cands)
    measured = {int(np.argmin(p)): [float(p.min())] * 3}
    # a certain prior, a noisy machine: nothing to gain
    quiet = belief(p, x, measured, sd=0.003, noise_sd=0.02, length_scales=LENGTH_SCALES)
    assert should_stop(quiet) and quiet.ei_ms.max() < quiet.noise_ms
    # an uncertain prior, a quiet machine: explore
    loud = belief(p, x, measured, sd=0.10, noise_sd=0.005, length_scales=LENGTH_SCALES)
    assert not should_stop(loud)


def test_the_refit_recovers_a_known_bandwidth_scale(sc, grid):
    cands, _ = grid
    idx = [0, 40, 80, 120]
    truth = prior_ms(sc, cands, 1.3, idx)
    s, before, after = refit_bandwidth_scale({i: [float(t)] for i, t in zip(idx, truth)},
                                             lambda s_, ii: prior_ms(sc, cands, s_, ii))
    assert s == pytest.approx(1.3, abs=0.01) and after < 1e-3 < before


def test_noise_from_repeats_is_the_pooled_log_sd():
    assert noise_from_repeats({}, 0.02) == 0.02
    got = noise_from_repeats({0: [100.0, 110.0], 1: [50.0]}, 0.02)
    assert got == pytest.approx(abs(np.log(110 / 100)) / np.sqrt(2), rel=1e-9)
    assert noise_from_repeats({0: [100.0, 100.0]}, 0.02) == 0.005  # the floor


def test_fp16_candidates_carry_the_unchecked_share_of_their_prediction(sc):
    cands = candidate_grid(("none", "fp16"))
    with_term = prior_ms(sc, cands)
    u = unchecked_share(cands, with_term, with_term * 0.9, with_term * 1.2)
    none = [i for i, c in enumerate(cands) if c.compression == "none"]
    half = [i for i, c in enumerate(cands) if c.compression == "fp16"]
    assert (u[none] == 0).all() and np.allclose(u[half], 0.1 + 0.3)
    # one fp16 trial calibrates every fp16 candidate: the shared offset is the precision-weighted residual
    group = u > 0
    i = half[0]
    off, var = group_offset(with_term, {i: [with_term[i] * 1.2]}, group, 0.4, np.full(len(cands), 0.03), 0.01)
    w = 1 / (0.03 ** 2 + 0.01 ** 2)
    assert off == pytest.approx(w * 0.2 / (1 / 0.16 + w)) and var == pytest.approx(1 / (1 / 0.16 + w))
    b = belief(with_term, features(cands), {i: [with_term[i] * 1.2]}, sd=0.03, noise_sd=0.01,
               length_scales=LENGTH_SCALES, group=group,
               group_sd=0.4)
    far = half[-1]  # another fp16 candidate, far in knob space: it moved by the offset too
    assert b.mean_ms[far] / with_term[far] == pytest.approx(1 + off, rel=0.02)
    assert b.sd_ms[far] / with_term[far] < 0.06  # back near the band (3 % + the offset's 3.2 %), not 40 %


#: every compression set ``tune --compression`` accepts
COMPRESSION_SETS = [("none",), ("fp16",), ("none", "fp16")]


@pytest.fixture(scope="module")
def priors(sc):
    """Per compression set: the candidates, the simulator's step times (ms) and the fp16 offset's shares."""
    out = {}
    for comps in COMPRESSION_SETS:
        cands = candidate_grid(comps)
        p = prior_ms(sc, cands)
        out[comps] = cands, p, prior_unchecked(sc, cands, p)
    return out


def _drive(sc, cands, p, u, truth, *, budget=240, per=8, fail=frozenset(), limit=40):
    """Run :func:`decide` as the loop does, with fake trials: ``truth(i, k)`` the k-th trial's step time (ms) of
    candidate i; indices in ``fail`` fail. Returns (the trials' (index, reason), the stopping decision)."""
    st, seq = TuneState(list(cands)), []
    for k in range(limit):
        d = decide(cands, st, lambda s, idx=None: prior_ms(sc, cands, s, idx), x=features(cands),
                   length_scales=LENGTH_SCALES, base=baseline_index(cands), baseline_name="Horovod's defaults",
                   sd=0.03, noise_fallback=0.02, budget_steps=budget, steps_per_trial=per, base_prior=p, unchecked=u)
        if d.index is None:
            return seq, d
        seq.append((d.index, d.reason))
        st.steps += per
        if d.index in fail:
            st.failed.add(d.index)
            st.fails_in_a_row += 1
            st.last_error = "exit 1"
        else:
            st.measured.setdefault(d.index, []).append(truth(d.index, k))
            st.fails_in_a_row = 0
    raise AssertionError(f"no stop after {limit} trials: {seq}")


@pytest.mark.parametrize("comps", COMPRESSION_SETS, ids=",".join)
def test_the_baseline_is_horovods_default_knobs_in_every_compression_set(comps):
    cands = candidate_grid(comps)
    b = baseline_index(cands)
    assert b is not None and cands[b].config == DEFAULTS_0_28
    # uncompressed where none is searched; --compression fp16 alone: the default knobs with fp16
    assert cands[b].compression == ("none" if "none" in comps else "fp16")
    assert baseline_index([c for c in cands if c.config != DEFAULTS_0_28]) is None


@pytest.mark.parametrize("comps", COMPRESSION_SETS, ids=",".join)
def test_the_decision_runs_the_same_order_for_every_compression_set(sc, priors, comps):
    """The simulator's best, the defaults, the incumbent again, then EI until a stop; no set crashes
    (``--compression fp16`` alone looks the defaults' index up in a grid that holds them)."""
    cands, p, u = priors[comps]
    seq, stop = _drive(sc, cands, p, u, lambda i, k: float(p[i]) * 1.03 * (1 + 0.01 * (k % 3 - 1)))
    first, base = int(np.argmin(p)), baseline_index(cands)
    assert seq[0] == (first, "the simulator's best (no trial yet: the prior decides)")
    assert seq[1][0] == base and seq[1][1].startswith("Horovod's defaults: the baseline")
    assert ("fp16" in seq[1][1]) == (comps == ("fp16",))
    assert seq[2][1].startswith("measure the noise") and seq[2][0] in (first, base)
    assert all(cands[i].compression in comps for i, _ in seq)
    assert stop.stop.startswith(("no candidate's expected improvement beats the noise", "step budget"))
    assert stop.incumbent is not None and stop.incumbent in {i for i, _ in seq}


@pytest.mark.parametrize("comps", COMPRESSION_SETS, ids=",".join)
def test_the_decision_stops_on_the_budget_and_on_failures(sc, priors, comps):
    cands, p, u = priors[comps]
    truth = lambda i, k: float(p[i]) * (1 + 0.3 * ((i * 7919) % 13) / 13)  # noqa: E731  (a wide, rough landscape)
    seq, stop = _drive(sc, cands, p, u, truth, budget=16, per=8)
    assert len(seq) == 2 and stop.stop == "step budget: 16 of 16 steps spent, a trial takes 8"
    # a failed configuration is not proposed again; three failures in a row stop the tune
    seq, stop = _drive(sc, cands, p, u, truth, fail=frozenset(range(len(cands))))
    assert len(seq) == MAX_FAILURES_IN_A_ROW == len({i for i, _ in seq})
    assert stop.stop == "3 trials failed in a row (last: exit 1)" and stop.incumbent is None


def test_tune_with_fp16_alone_runs_its_trials_without_a_traceback(tmp_path, sc):
    """The loop itself (``autotuner.frameworks.horovod.tune.run_tune``) on fake trials, ``--compression fp16`` alone: the
    defaults with fp16 are its baseline, and it runs past the first trial."""
    from autotuner.frameworks.horovod.tune import run_tune
    from autotuner.frameworks.horovod.validation import Outcome, Setup, TrialStore

    setup = Setup(env="fresh-poll-2gbit", model="mobilenet_v2", compute_ms=60.0)
    ran = []

    def trial(spec):
        ran.append((spec.label, spec.compression))
        return Outcome("ok", step_times_ms=[150.0 - len(ran), 151.0 - len(ran)])

    ans, recs = run_tune(setup, sc, TrialStore(tmp_path / "t.jsonl"), trial, compressions=("fp16",),
                         budget_steps=40, prior_sd_band=0.03, noise_fallback=0.02, testbed_note="plain")
    assert len(ran) >= 3 and all(c == "fp16" for _, c in ran)
    assert ran[1] == ("f128-c1-cacheon-fp16", "fp16") and ans.candidate is not None and ans.stop
    assert [r["tune"]["candidate"] for r in recs] == [k for k, _ in ran]


def test_bad_fp16_phase_records_are_named_and_skipped():
    from autotuner.frameworks.horovod.readers.sweep import parse_fp16_records

    good = {"phase": "fp16", "tier": "single", "repeat": 0, "sizes": [1024, 2048], "fp32_ms": [1.0, 2.0],
            "fp16_ms": [1.5, 2.5], "casts": [[4, 10, 0.1, 0.1], [2, 20, 0.1, 0.1]], "ranks": 2}
    import json as _json

    bad = dict(good, fp16_ms=[1.5])  # one size short
    recs, problems = parse_fp16_records("\n".join(_json.dumps(d) for d in (good, bad)), "fp16.jsonl")
    assert len(recs) == 1 and len(problems) == 1 and "fp16.jsonl:2" in problems[0] and "\n" not in problems[0]


def test_the_head_to_head_reads_autotunes_steps_from_horovodruns_prefixed_lines():
    from autotuner.frameworks.horovod.tune import _STEP_LINE, expected_default_autotune_steps

    out = b"[0]<stdout>:step 0 time_ms 40.1\n[0]<stdout>:step 1 time_ms 35.2 (warmup)\nstep 2 time_ms 33.0\n"
    assert [(int(n), float(t)) for n, t in _STEP_LINE.findall(out)] == [(0, 40.1), (1, 35.2), (2, 33.0)]
    # Horovod 0.28.1 on a Gloo build: hierarchical allgather x cache = 4 combinations, 21 rows each, 3 warm-ups,
    # 50 steps a row; the real 0.28.1 log in shared/examples has 24 rows at --autotune-bayes-opt-max-samples 5
    assert expected_default_autotune_steps(4) == 4350
