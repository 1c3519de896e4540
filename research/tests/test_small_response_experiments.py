"""What the small-response experiments found, read from their own records under ``runs/*/experiments/``: the
paired replays of real and synthetic layouts in one sitting (``research/scripts/step_layout_neighbours.py``), the
fused phase's pair taken apart (``fused_large.py``, ``fused_variants.py``), the completion times of a real step's
responses (``completion_times.py``) and which missed rows any prediction could still meet (``sitting_spread.py``).

Not part of the product's suite (``testpaths = ["tests"]``); run from the repository root with
``python -m pytest research/tests``."""
from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "runs"
MODELS = ROOT / "autotuner" / "models"
SCRIPTS = ROOT / "research" / "scripts"


@lru_cache(maxsize=None)
def _script(name: str):
    """``research/scripts/<name>.py`` as a module (its records readers, sets and report helpers), loaded once."""
    spec = importlib.util.spec_from_file_location(f"_research_{name}", SCRIPTS / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # a script's dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def _missed_rows() -> set:
    """The product suite's named small-response misses (``tests/test_small_responses.py``'s ``MISSED``)."""
    sys.path.insert(0, str(ROOT))
    try:
        from tests.test_small_responses import MISSED
    finally:
        sys.path.remove(str(ROOT))
    return MISSED


# --- one sitting, two real layouts, one env (scripts/step_layout_neighbours.py, declared before it ran) ----------

NEIGHBOURS = RUNS / "fresh-poll-2x1-4.5gbit" / "experiments" / "step-layout-neighbours"


def _round_differences(f: Path) -> np.ndarray:
    """Fusion off - defaults (ms) per round of one job of scripts/step_layout_neighbours.py (``validate``'s records,
    read with the project's reader: no damaged line, every trial ok and without the timeline)."""
    from autotuner.frameworks.horovod.readers.runs import parse_records

    recs, problems = parse_records(f.read_text(), f.name)
    assert not problems
    by: dict[str, dict[str, float]] = {}
    for r in recs:
        assert r["status"] == "ok" and not r["timeline_recorded"]
        by.setdefault(r["trial"].rsplit("/", 1)[1], {})[r["label"]] = r["measured_step_time_ms"]
    return np.array([x["proposal-1"] - x["default"] for x in by.values()])


def _paired_ms(job: str) -> tuple[float, float]:
    """Fusion off - defaults of one job of the sitting, paired by round: mean and standard error (ms)."""
    d = _round_differences(NEIGHBOURS / f"{job}.jsonl")
    assert len(d) == 5
    return float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d)))


def _scenario(job: str):
    from autotuner.frameworks.horovod.predict import make_scenario

    model = {"vit_s16-300ms": "vit_s16", "distilbert-300ms": "distilbert"}.get(
        job, str(NEIGHBOURS / f"{job.split('-')[0]}.json"))
    return make_scenario(MODELS, "fresh-poll-2x1-4.5gbit", model, compute_ms=float(job.split("-")[-1][:-2]))[0]


def _difference_ms(sc, a_ms: float, copy_ms_per_mib: float | None = None) -> float:
    from autotuner.frameworks.horovod.knobs import config_from_values

    cost = sc.cost.at_small_alpha(a_ms * 1e-3 / (2 * (sc.cluster.size - 1)))
    if copy_ms_per_mib is not None:
        cost = replace(cost, host=replace(cost.host, memcpy_s_per_byte=copy_ms_per_mib * 1e-3 / 2**20))
    s = replace(sc, cost=cost)
    return (s.simulate(config_from_values({"fusion_threshold_mb": 0})).step_time_ms
            - s.simulate(config_from_values({})).step_time_ms)


def _price_ms(job: str) -> float:
    from scipy.optimize import brentq

    sc, (m, _) = _scenario(job), _paired_ms(job)
    return float(brentq(lambda a: _difference_ms(sc, a) - m, 0.0, 10.0, xtol=1e-3))


def test_the_step_phase_re_measured_on_two_hosts_reproduces_its_price():
    """Declared 4: the phase's own job (256 KiB weights, 100 ms) in another sitting wants within 30 % of the charged
    price (1.61 against 1.46 ms: +10 %)."""
    charged = json.loads((MODELS / "fresh-poll-2x1-4.5gbit.json").read_text())["fit"]["small_responses"]["step"]
    assert abs(_price_ms("w256k-100ms") / charged["fixed_ms"] - 1) < 0.30


def test_two_real_layouts_of_one_sitting_want_prices_far_apart():
    """vit_s16 and DistilBERT replayed in one sitting on one env, both at 300 ms of compute: the per-response price
    that meets each one's fusion off - defaults is 1.11 and 1.95 ms (the step phase charges 1.46), and no pair of
    price (0.3-3 ms) and fusion-buffer copy rate (0.2-0.6 ms per MiB: the fused phase's 0.41 +- 0.10 and up) meets
    both within 2.5 standard errors of their rounds (the nearest: 2.8 and 3.0). One price per small response cannot
    carry both layouts (docs/accuracy.md, "Two real layouts in one sitting")."""
    pv, pd = _price_ms("vit_s16-300ms"), _price_ms("distilbert-300ms")
    assert pd > 1.5 * pv
    scs = {j: _scenario(j) for j in ("vit_s16-300ms", "distilbert-300ms")}
    meas = {j: _paired_ms(j) for j in scs}
    best = min(max(abs(_difference_ms(sc, a, c) - meas[j][0]) / meas[j][1] for j, sc in scs.items())
               for c in np.arange(0.2, 0.61, 0.05) for a in np.arange(0.3, 3.01, 0.05))
    assert best > 2.5, best


# --- the copy credit: two hosts against one (scripts/step_layout_neighbours.py's fourth set, session 54) -----------

#: env -> the jobs of one sitting (the fourth set on fresh-poll-2x1-2.5gbit: 10 and 300 ms of compute)
CREDIT_SETS = {"fresh-poll-2x1-2.5gbit": ("vit_s16-10ms", "distilbert-10ms", "vit_s16-c-300ms", "distilbert-c-300ms"),
               "fresh-poll-2x1-4.5gbit": ("vit_s16-300ms", "distilbert-300ms", "vit_s16-b-300ms", "distilbert-b-300ms"),
               "fresh-poll-2.5gbit": ("vit_s16-300ms", "distilbert-300ms")}


def _nearest_se(env: str, copy: str) -> float:
    """Over prices 0.3-3 ms (0.05 apart), the least of the largest |simulated - measured| / se among the set's jobs'
    fusion off - defaults, with the fused responses' copies ``copy`` = "charged" (the env's rate) or "free" (0)."""
    from autotuner.frameworks.horovod.knobs import config_from_values
    from autotuner.frameworks.horovod.predict import make_scenario

    d0, fo = config_from_values({}), config_from_values({"fusion_threshold_mb": 0})
    jobs = []
    for j in CREDIT_SETS[env]:
        d = _round_differences(RUNS / env / "experiments" / "step-layout-neighbours" / f"{j}.jsonl")
        assert len(d) == 5
        sc = make_scenario(MODELS, env, j.split("-")[0], compute_ms=float(j.rsplit("-", 1)[1][:-2]))[0]
        if copy == "free":
            sc = replace(sc, cost=replace(sc.cost, host=replace(sc.cost.host, memcpy_s_per_byte=0.0,
                                                                memcpy_spill_s_per_byte=0.0)))
        jobs.append((sc, d.mean(), d.std(ddof=1) / np.sqrt(len(d))))

    def worst(a: float) -> float:
        out = 0.0
        for sc, m, se in jobs:
            s = replace(sc, cost=sc.cost.at_small_alpha(a * 1e-3 / (2 * (sc.cluster.size - 1))))
            out = max(out, abs(s.simulate(fo).step_time_ms - s.simulate(d0).step_time_ms - m) / se)
        return out

    return min(worst(a) for a in np.arange(0.3, 3.01, 0.05))


def test_two_hosts_want_no_copy_credit_one_host_the_charged_one():
    """The real layouts' fusion off - defaults, one sitting per env: on the two two-host envs one small-response price
    meets every job within 2 standard errors only with the fused responses' copies free (fresh-poll-2x1-2.5gbit at 10
    and 300 ms of compute: 1.1 at 1.10 ms, against 3.5 with its 0.24 ms per MiB charged; fresh-poll-2x1-4.5gbit: 2.0
    against 3.3); on the one-host fresh-poll-2.5gbit only with them charged (0.5 against 3.8). A fit direction, not
    the mechanism: the copies are paid, by the probe and by a replayed step (the tests below), so it says what the two
    layouts' differences want, not why (docs/accuracy.md, "What fusion off saves on two hosts")."""
    for env in ("fresh-poll-2x1-2.5gbit", "fresh-poll-2x1-4.5gbit"):
        assert _nearest_se(env, "free") <= 2.05 < 3.0 < _nearest_se(env, "charged"), env
    assert _nearest_se("fresh-poll-2.5gbit", "charged") <= 1.0 and _nearest_se("fresh-poll-2.5gbit", "free") > 3.0


def test_the_fused_phase_pays_the_copies_at_the_sizes_a_step_fuses():
    """scripts/fused_large.py (declared before it ran): the fused phase on fresh-poll-2x1-2.5gbit at S = 4-96 MiB, in
    the fourth set's sitting: ``x(S) / S`` (median over 3 jobs) is at least 0.15 ms per MiB at 16, 32, 64 and 96 MiB,
    the sizes whose fused responses the real layouts' defaults pay nothing for (the test above): declared outcome 2,
    what differs between the phase and a step is not the size."""
    from autotuner.frameworks.horovod.fit.phase_fused import fused_copy
    from autotuner.frameworks.horovod.readers.sweep import parse_fused_records

    f = RUNS / "fresh-poll-2x1-2.5gbit" / "experiments" / "fused-large.jsonl"
    recs, problems = parse_fused_records(f.read_text(), f.name)
    assert not problems and len(recs) == 3
    pts = fused_copy(recs, None)["points"]
    for mib in (16, 32, 64, 96):
        assert np.median([x for b, _, x in pts if b == mib * 2**20]) / mib >= 0.15, mib


def test_the_probe_s_float32_fused_responses_pay_the_copies_whatever_the_dtype_or_tensor_count():
    """scripts/fused_variants.py (declared before it ran), 3 jobs on fresh-poll-2x1-2.5gbit, per MiB of S (medians
    over jobs of the per-round differences): one float32 response of 16 fused tensors costs at least 0.2 ms per MiB
    more than one lone float32 tensor of the same bytes, at 32 and at 96 MiB (declared outcome 2); a lone float64
    tensor costs no more than a lone float32 one (not the dtype), and 64 tensors fused no more than 16 beyond 0.15 ms
    per MiB (not the tensor count)."""
    import statistics

    fv = _script("fused_variants")
    f = RUNS / fv.ENV / fv.RECORDS
    recs, problems = fv._parse(f.read_text(), f.name)
    assert not problems and len(recs) == 3
    d = {k: statistics.median(v) for k, v in fv.differences(recs).items()}
    for s in fv.SIZES:
        assert d[("fused32 - lone32", s)] >= 0.2 and d[("lone64 - lone32", s)] <= 0.0
        assert abs(d[("many32 - fused32", s)]) <= 0.15


def test_a_replayed_step_pays_the_copies_too():
    """Declared in scripts/step_layout_neighbours.py (the sixth set): ``sixteen16`` (16 float32 tensors of 16 MiB, 10
    ms of compute) on fresh-poll-2x1-2.5gbit, 8 rounds: fusion off - defaults at most -30 ms (-69.6 +- 18.4; the
    simulator -61.6 with the env's copies, +9.6 without); and DistilBERT's own defaults at 10 ms, one trial with the
    timeline (experiments/timeline-distilbert/): its fused responses of 64 MiB and more spend at least 0.15 ms per MiB
    in MEMCPY_IN + MEMCPY_OUT. Fusion off's copy credit is real; what the real layouts' differences want instead is
    not the copies (docs/accuracy.md, "What fusion off saves on two hosts")."""
    from autotuner.readers.timeline import read_timeline

    d = RUNS / "fresh-poll-2x1-2.5gbit" / "experiments"
    diffs = _round_differences(d / "step-layout-neighbours" / "sixteen16-10ms.jsonl")
    assert len(diffs) == 8 and np.mean(diffs) <= -30.0
    big = [r for r in read_timeline(d / "timeline-distilbert" / "default-r0.json.gz").responses if r.nbytes >= 64 * 2**20]
    assert len(big) >= 6
    assert np.median([(r.memcpy_in_us + r.memcpy_out_us) / 1e3 / (r.nbytes / 2**20) for r in big]) >= 0.15


def _median_difference_ms(env: str, job: str) -> float:
    """Median over rounds of fusion off - defaults (ms) of one job of scripts/step_layout_neighbours.py."""
    return float(np.median(_round_differences(RUNS / env / "experiments" / "step-layout-neighbours" / f"{job}.jsonl")))


def test_small_responses_cost_more_among_distilbert_s_large_responses_than_alone():
    """The seventh set (declared before it ran; 10 ms of compute, 6 rounds, fresh-poll-2x1-2.5gbit), medians of fusion
    off - defaults: DistilBERT's 62 small responses cost +61 ms alone and +152 among its mid-size and large ones
    (whole - mid-size-and-large), at least twice as much; vit_s16's 101 cost +89 alone and +110 among its own, less
    than 1.5 times. Alone, each costs under 1.1 ms (the difference over their count), under the step phase's charged 1.95
    (docs/accuracy.md, "What fusion off saves on two hosts")."""
    env = "fresh-poll-2x1-2.5gbit"
    m = {j: _median_difference_ms(env, j) for j in ("vit_s16-s-10ms", "vit_s16-nosmall-10ms", "vit_s16-small-10ms",
                                                    "distilbert-s-10ms", "distilbert-nosmall-10ms",
                                                    "distilbert-small-10ms")}
    among_d = m["distilbert-s-10ms"] - m["distilbert-nosmall-10ms"]
    among_v = m["vit_s16-s-10ms"] - m["vit_s16-nosmall-10ms"]
    assert among_d >= 2 * m["distilbert-small-10ms"] and among_v <= 1.5 * m["vit_s16-small-10ms"]
    assert m["distilbert-small-10ms"] / 62 < 1.1 and m["vit_s16-small-10ms"] / 101 < 1.1


def test_a_small_response_costs_no_more_right_after_a_larger_one_in_the_probe():
    """scripts/fused_variants.py --set neighbours (declared before it ran; 3 jobs, fusion off, on
    fresh-poll-2x1-2.5gbit): a small response right after a 9 MiB response costs within 0.3 ms of one right after a
    2.25 MiB response (1.43 against 1.54 ms, medians over jobs; among small ones, 1.41): declared outcome 2, the
    neighbour's size is not what makes DistilBERT's small responses dearer in a replayed step (docs/accuracy.md,
    "What fusion off saves on two hosts")."""
    import statistics

    fv = _script("fused_variants")
    f = RUNS / fv.ENV / fv.SETS["neighbours"][2]
    recs, problems = fv._parse(f.read_text(), f.name, "neighbours")
    assert not problems and len(recs) == 3
    a = {k: statistics.median(v) for k, v in fv.neighbour_costs(recs).items()}
    assert abs(a["a(9 MiB)"] - a["a(2.25 MiB)"]) <= 0.3 and a["a(9 MiB)"] < 1.5 * a["alone"]


def test_enqueued_at_once_both_layouts_small_responses_cost_alike_among_their_larger_ones():
    """scripts/fused_variants.py --set layouts (declared before it ran; 3 jobs, fusion off): the real layouts' own
    orders enqueued at once. A small response costs 1.29 ms among vit_s16's larger responses and 1.32 among
    DistilBERT's (within 0.3 ms of each other), 1.05 and 0.82 alone; in the replays (tensors handed over through the
    backward) DistilBERT's cost 2.45. By the declared letter DistilBERT's among/alone is at least 1.5x (1.61); its
    surcharge here is a third of the replay's."""
    import statistics

    fv = _script("fused_variants")
    f = RUNS / fv.ENV / fv.SETS["layouts"][2]
    recs, problems = fv._parse(f.read_text(), f.name, "layouts")
    assert not problems and len(recs) == 3
    c = {k: statistics.median(v) for k, v in fv.layout_costs(recs).items()}
    assert abs(c["distilbert among"] - c["vit_s16 among"]) <= 0.3
    assert c["distilbert among"] >= 1.5 * c["distilbert alone"]
    replay_among = (_median_difference_ms("fresh-poll-2x1-2.5gbit", "distilbert-s-10ms")
                    - _median_difference_ms("fresh-poll-2x1-2.5gbit", "distilbert-nosmall-10ms")) / 62
    assert replay_among - c["distilbert alone"] >= 2.5 * (c["distilbert among"] - c["distilbert alone"])


def test_the_replay_s_surcharge_is_not_the_hand_over_s_timing():
    """The ninth set (declared before it ran): DistilBERT whole and split replayed at 0.3 ms of compute (its tensors
    handed over all but at once), medians of 6 rounds: a small response costs at least 1.2 ms more among the larger
    responses than alone (2.57 against 1.11), as at 10 ms of compute (1.45), where the probe's direct
    ``allreduce_async_`` found 0.50."""
    env = "fresh-poll-2x1-2.5gbit"
    among = (_median_difference_ms(env, "distilbert-h-0.3ms") - _median_difference_ms(env, "distilbert-nosmall-h-0.3ms")) / 62
    assert among - _median_difference_ms(env, "distilbert-small-h-0.3ms") / 62 >= 1.2



def test_in_one_job_neither_the_replay_s_values_nor_its_optimizer_make_small_responses_dearer():
    """scripts/fused_variants.py --set hooks (the fourth set, declared before it ran; 3 fusion-off jobs on
    fresh-poll-2x1-2.5gbit): DistilBERT's tensors through direct ``allreduce_async_`` (the probe's), with the replay's
    values and names, and through the replay's own graph and ``hvd.DistributedOptimizer``, in one job. A small response
    among the larger ones costs 1.37, 1.01 and 0.93 ms (medians over jobs): neither the values nor the optimizer's path
    adds the 0.5 ms declared for outcomes 2 and 3, and none comes near the 2.45-2.57 the replays' paired differences
    gave (docs/accuracy.md, "In one job, no surcharge")."""
    import statistics

    fv = _script("fused_variants")
    f = RUNS / fv.ENV / fv.SETS["hooks"][2]
    recs, problems = fv._parse(f.read_text(), f.name, "hooks")
    assert not problems and len(recs) == 3
    among = {way: statistics.median(fv.layout_costs(recs, way)["distilbert among"])
             for way in ("direct", "values", "hooks")}
    assert among["values"] < among["direct"] + 0.5 and among["hooks"] < among["values"] + 0.5
    assert max(among.values()) < 1.5



def test_in_one_job_the_step_phase_s_small_responses_cost_more_after_256_kib_weights_than_after_2_25_mib_ones():
    """scripts/fused_variants.py --set blocks (the fifth set, declared before it ran; 3 fusion-off jobs on
    fresh-poll-2x1-2.5gbit): the step phase's 32 blocks (a weight, then three 1 KiB vectors) enqueued at once. A small
    response costs 1.51 ms among the phase's 256 KiB weights (every job 1.51-1.55: declared outcome 1, at its edge) and
    1.13 among 2.25 MiB ones (0.95-1.20; the declared 0.4 ms of outcome 2 missed by 0.02), both under the 1.95 the fit
    solves from the phase's replays on this env (docs/accuracy.md, "The step phase's own blocks in one job")."""
    import json

    fv = _script("fused_variants")
    f = RUNS / fv.ENV / fv.SETS["blocks"][2]
    recs, problems = fv._parse(f.read_text(), f.name, "blocks")
    assert not problems and len(recs) == 3
    c = fv.block_costs(recs)
    assert min(c["among(0.25 MiB)"]) > max(c["among(2.25 MiB)"])
    step = json.loads((ROOT / "autotuner" / "models" / f"{fv.ENV}.json").read_text())["fit"]["small_responses"]["step"]
    assert 1.4 <= float(np.median(c["among(0.25 MiB)"])) <= step["fixed_ms"] - 0.3


#: the envs the fifth set ran on (scripts/fused_variants.py --set blocks with ENV=...), the first one first
BLOCK_ENVS = ("fresh-poll-2x1-2.5gbit", "fresh-poll-2x1-4.5gbit", "fresh-poll-2x1-3gbit", "fresh-2x1-5gbit",
              "fresh-poll-3gbit", "fresh-poll-2.5gbit")


def test_fresh_poll_2x1_2_5gbit_s_reading_of_the_step_phase_s_blocks_holds_on_no_other_env():
    """The fifth set on five more envs (declared before they ran, session 55): each of its three declared readings
    holds on fresh-poll-2x1-2.5gbit alone. (1) The simulator charges the 96 vectors alone at least twice what they
    measure there only (1.5-1.7x on the other two-host envs; on one host it charges less than they measure); (2) the
    step phase's price lies at least 0.3 ms above a small response among 256 KiB weights in one job there only
    (elsewhere within 0.32 ms of it, or far below it on one host: 0.30 against 1.21 ms on fresh-poll-3gbit); (3) a
    256 KiB weight alone costs more than 0.25 ms over the simulator's price there only (docs/accuracy.md, "The step
    phase's blocks on six envs")."""
    import json
    import statistics

    fv = _script("fused_variants")
    held = {1: set(), 2: set(), 3: set()}
    for env in BLOCK_ENVS:
        f = RUNS / env / fv.SETS["blocks"][2]
        recs, problems = fv._parse(f.read_text(), f.name, "blocks")
        assert not problems and len(recs) == 3, env
        w = fv.BLOCK_WEIGHTS[0]
        measured = {item: statistics.median(x for r in recs for x in r["items"][item][0]) for item in fv.LAYOUT_ITEMS}
        sim = fv.simulated_blocks(env)
        step = json.loads((ROOT / "autotuner" / "models" / f"{env}.json").read_text())["fit"]["small_responses"]["step"]
        among = statistics.median(fv.block_costs(recs)["among(0.25 MiB)"])
        if sim[("small", w)] >= 2 * measured["small"]:
            held[1].add(env)
        if step["fixed_ms"] - among >= 0.3:
            held[2].add(env)
        if (measured["nosmall"] - sim[("nosmall", w)]) / fv.BLOCKS > 0.25:
            held[3].add(env)
    assert held == {k: {"fresh-poll-2x1-2.5gbit"} for k in held}, held


def test_heavy_traffic_does_not_make_the_next_small_responses_dearer():
    """scripts/fused_variants.py --set decay (the sixth set, declared before it ran; 3 fusion-off jobs per env): 96
    vectors timed right after 18 MiB of weights cost under 1.3x what they cost right after 96 other vectors (declared
    outcome 1 fails on both envs: 0.71x and 0.98x), and on fresh-poll-2x1-2.5gbit less, in every job, at 0 and 10 ms
    of delay (docs/accuracy.md, "Heavy traffic does not make the next small responses dearer")."""
    import statistics

    fv = _script("fused_variants")
    for env in ("fresh-poll-2x1-2.5gbit", "fresh-poll-3gbit"):
        f = RUNS / env / fv.SETS["decay"][2]
        recs, problems = fv._parse(f.read_text(), f.name, "decay")
        assert not problems and len(recs) == 3, env
        med = {item: statistics.median(x for r in recs for x in r["items"][item][0])
               for item in ("after_heavy", "after_light")}
        assert med["after_heavy"] < 1.3 * med["after_light"], env
        if env == "fresh-poll-2x1-2.5gbit":
            assert all(statistics.median(r["items"]["after_heavy"][k]) < statistics.median(r["items"]["after_light"][k])
                       for r in recs for k in (0, 1))

def _medians_by_kind(env: str, job: str) -> dict[str, float]:
    """Median measured step (ms) of the defaults (``"default"``) and of the other configuration (``"proposal"``) of one
    job of scripts/step_layout_neighbours.py, and their predictions (``"default predicted"``, ``"proposal predicted"``)
    as the job recorded them."""
    import json

    recs = [json.loads(x) for x in (RUNS / env / "experiments" / "step-layout-neighbours" / f"{job}.jsonl")
            .read_text().splitlines() if x.strip()]
    out = {}
    for kind in ("default", "proposal"):
        mine = [r for r in recs if r["kind"] == kind]
        out[kind] = float(np.median([r["measured_step_time_ms"] for r in mine]))
        out[f"{kind} predicted"] = mine[0]["predicted_step_time_ms"]
    return out


def test_the_replays_surcharge_is_their_defaults_not_their_fusion_off():
    """Where the replays' 1.45 ms surcharge came from (docs/accuracy.md, "In one job, no surcharge"): in the seventh and
    ninth sets DistilBERT's defaults ran at least 25 ms faster whole than without its small tensors (1119.6 against
    1159.9 ms, 1145.0 against 1178.1; predicted within 5 ms of each other), and the paired differences charged that gap
    to the small responses. Fusion off alone, whole minus the mid-size and large part over 62, gives 1.6 and 2.0 ms per
    small response across jobs minutes apart: no more than the simulator charges there (2.03) and no less than the
    fourth set timed in one job (0.93-1.17 per job)."""
    import statistics

    env = "fresh-poll-2x1-2.5gbit"
    fv = _script("fused_variants")
    f = RUNS / fv.ENV / fv.SETS["hooks"][2]
    recs, _ = fv._parse(f.read_text(), f.name, "hooks")
    k = fv.LAYOUT_MODELS.index("distilbert")
    in_job = statistics.median(statistics.median(w - x for w, x in zip(r["items"]["hooks_whole"][k],
                                                                        r["items"]["hooks_nosmall"][k])) for r in recs)
    for whole, nosmall in (("distilbert-s-10ms", "distilbert-nosmall-10ms"),
                           ("distilbert-h-0.3ms", "distilbert-nosmall-h-0.3ms")):
        w, n = _medians_by_kind(env, whole), _medians_by_kind(env, nosmall)
        assert w["default"] - n["default"] <= -25.0
        assert abs(w["default predicted"] - n["default predicted"]) <= 5.0
        per_small = (w["proposal"] - n["proposal"]) / 62
        assert in_job / 62 <= per_small <= (w["proposal predicted"] - n["proposal predicted"]) / 62 + 0.1


# --------------------------------------------------------------------------- completion times (session 56)

def test_a_poller_thread_slows_a_two_host_fusion_off_step_the_plain_replay_meets_the_model_that_sitting():
    """scripts/completion_times.py --set plain (declared before it ran; 3 interleaved rounds on fresh-poll-2x1-4.5gbit's
    testbed, 300 ms of compute): a Python thread polling the oldest handle every 0.2 ms slows vit_s16's fusion off
    1.17x against the plain replay beside it, so its services are not the step's own; the plain replays of that sitting
    are predicted within 4 %, vit_s16's fusion off included (the env's committed sittings measured 444.4-505.5 ms)."""
    ct = _script("completion_times")
    recs, rounds = ct.load("fresh-poll-2x1-4.5gbit"), ct.SETS["plain"]
    assert len([r for r in recs if r["round"] in rounds]) == 2 * 3 * 2 * 2
    ratio = (ct.step_median(recs, rounds, "vit_s16", "fusion-off", False)
             / ct.step_median(recs, rounds, "vit_s16", "fusion-off", True))
    assert ratio > 1.10
    for model in ct.MODELS:
        for knobs in ct.KNOBS:
            plain = ct.step_median(recs, rounds, model, knobs, True)
            sim = ct.simulated(model, knobs, "fresh-poll-2x1-4.5gbit")["step_ms"]
            assert abs(sim / plain - 1) < 0.04, (model, knobs, plain, sim)


def test_on_fresh_poll_2x1_2_5gbit_the_over_charge_is_vit_s16_s_small_responses_after_the_backward():
    """--set tail (declared before it ran; polling only after the backward, beside the plain replay, 3 rounds): a third
    sitting reproduces the env's over-prediction of vit_s16's fusion off (plain 631.2 ms against 715.6 simulated; the
    earlier sittings 592.2 and 637.2), and after the backward its small responses' services summed fall more than 20 ms
    below the simulated ones while its weights' stay within 10 ms: the price a small response is charged there, not
    the weights or the schedule's tail, carries the excess."""
    ct = _script("completion_times")
    env = "fresh-poll-2x1-2.5gbit"
    recs, rounds = ct.load(env), ct.SETS["tail"]
    sim = ct.simulated("vit_s16", "fusion-off", env)
    assert ct.step_median(recs, rounds, "vit_s16", "fusion-off", True) <= 0.92 * sim["step_ms"]
    steps = [s for r in recs if r["round"] in rounds and r["model"] == "vit_s16" and r["knobs"] == "fusion-off"
             and r["way"] == "tail" for s in r["steps"]]
    by = ct._services_by_class(steps, sim, tail=True)
    (_, _, small_sum, _, small_sim, _), (_, _, w_sum, _, w_sim, _) = by["small"], by["weight"]
    assert small_sum < small_sim - 20 and abs(w_sum - w_sim) < 10, by


def test_the_step_phase_s_price_carries_its_256_kib_weights_under_pricing():
    """--set probe (declared before it ran; the step phase's own layout at 100 ms, tail polling beside the plain
    replay, 3 rounds, fresh-poll-2x1-2.5gbit): after the backward its 1 KiB vectors cost what vit_s16's and DistilBERT's
    small responses do (within 0.25 ms of 1.75 on the mean) and less than simulated, its 256 KiB weights at least
    0.5 ms more than simulated: the one latency solved from fusion off - defaults reads the weights' excess as the
    vectors'."""
    ct = _script("completion_times")
    env = "fresh-poll-2x1-2.5gbit"
    recs, rounds = ct.load(env), ct.SETS["probe"]
    plain = {k: ct.step_median(recs, rounds, ct.PROBE, k, True) for k in ct.KNOBS}
    committed = json.loads((MODELS / f"{env}.json").read_text())["fit"]["small_responses"]["step"]["delta_ms"]
    assert abs((plain["fusion-off"] - plain["defaults"]) / committed - 1) < 0.25
    sim = ct.simulated(ct.PROBE, "fusion-off", env)
    steps = [s for r in recs if r["round"] in rounds and r["knobs"] == "fusion-off" and r["way"] == "tail"
             for s in r["steps"]]
    by = ct._services_by_class(steps, sim, tail=True)
    (v_mean, _, _, v_sim, _, _), (w_mean, _, _, w_sim, _, _) = by["small"], by["weight"]
    assert abs(v_mean - 1.75) < 0.25 and v_mean < v_sim - 0.15 and w_mean > w_sim + 0.5, by


def test_fresh_poll_3gbit_s_mobilenet_fusion_off_miss_is_the_model_s_not_the_sitting_s():
    """--set sitting (declared before it ran; the plain replay alone at the committed sitting's 60 ms, 3 rounds): the
    defaults within 5 % of the committed sitting's 116.7 ms, the fusion off above 178.1 ms (more than 10 % over the
    160.3 predicted): the miss named in MISSED is the model's."""
    ct = _script("completion_times")
    recs, rounds = ct.load("fresh-poll-3gbit"), ct.SETS["sitting"]
    d = ct.step_median(recs, rounds, "mobilenet_v2", "defaults", True)
    f = ct.step_median(recs, rounds, "mobilenet_v2", "fusion-off", True)
    assert abs(d / 116.7 - 1) < 0.05 and f > 178.1
    assert ct.simulated("mobilenet_v2", "fusion-off", "fresh-poll-3gbit")["step_ms"] == pytest.approx(160.3, abs=0.1)


def test_on_one_host_the_step_phase_s_price_drifts_between_sittings_and_a_same_sitting_price_carries_mobilenet():
    """--set onehost (declared before it ran; fresh-poll-3gbit, MobileNetV2 at 60 ms and the step phase's layout at 100
    ms, tail polling beside the plain replay): MobileNetV2's small responses after the backward sum at least 20 ms
    above the simulated, its weights within 10 ms; the step phase's own job measures a fusion off - defaults at least
    twice the committed one's (the defaults within 5 % of theirs), and the fit's solve on it (read after, not
    declared) prices a small response at which MobileNetV2's fusion off is predicted within 10 %, where the shipped
    price misses it by more than 20 %. On fresh-poll-2x1-2.5gbit the same solve leaves vit_s16 further off."""
    ct = _script("completion_times")
    env = "fresh-poll-3gbit"
    recs, rounds = ct.load(env), ct.SETS["onehost"]
    sim = ct.simulated("mobilenet_v2", "fusion-off", env)
    steps = [s for r in recs if r["round"] in rounds and r["model"] == "mobilenet_v2" and r["knobs"] == "fusion-off"
             and r["way"] == "tail" for s in r["steps"]]
    by = ct._services_by_class(steps, sim, tail=True)
    assert by["small"][2] > by["small"][4] + 20 and abs(by["weight"][2] - by["weight"][4]) < 10, by
    step = json.loads((MODELS / f"{env}.json").read_text())["fit"]["small_responses"]["step"]
    r = ct.same_sitting(env)
    assert r["delta_ms"] > 2 * step["delta_ms"] and r["charged_ms"] == pytest.approx(step["fixed_ms"], rel=1e-6)
    defaults = ct.step_median(recs, rounds, ct.PROBE, "defaults", True)
    assert abs(defaults / float(np.median([x[1] for x in step["rounds"]])) - 1) < 0.05
    rows = {(m, k): (pred, meas) for m, k, pred, _, meas in r["rows"]}
    pred, meas = rows[("mobilenet_v2", "fusion-off")]
    assert abs(pred / meas - 1) < 0.10 and abs(sim["step_ms"] / meas - 1) > 0.20
    # two hosts: the same solve makes vit_s16 worse; with the phase's 256 KiB weights at their tail price the price
    # falls to about the vectors' own (1.72 ms) and vit_s16 comes nearer, DistilBERT stays within 5 %
    r2 = ct.same_sitting("fresh-poll-2x1-2.5gbit")
    two = {(m, k): (p, pw, mm) for m, k, p, pw, mm in r2["rows"]}
    p2, pw2, m2 = two[("vit_s16", "fusion-off")]
    assert p2 / m2 - 1 > ct.simulated("vit_s16", "fusion-off", "fresh-poll-2x1-2.5gbit")["step_ms"] / m2 - 1 > 0.10
    assert r2["weights_extra_ms"] > 1.0 and abs(r2["price_ms"][1] - 1.72) < 0.2 and pw2 < p2
    pd, pwd, md = two[("distilbert", "fusion-off")]
    assert abs(pwd / md - 1) < 0.05


def test_held_out_a_same_sitting_step_phase_does_not_carry_mobilenet_on_fresh_poll_1_25gbit():
    """--set heldout (declared before it ran; fresh-poll-1.25gbit, the plain replay alone, 3 rounds): the declared
    reading (the same-sitting price predicts MobileNetV2's fusion off within 10 % and no further off than the shipped
    price) fails: the step phase's own job and MobileNetV2's fusion off moved apart since the committed sittings."""
    ct = _script("completion_times")
    env = "fresh-poll-1.25gbit"
    r = ct.same_sitting(env)
    rows = {(m, k): (pred, meas) for m, k, pred, _, meas in r["rows"]}
    pred, meas = rows[("mobilenet_v2", "fusion-off")]
    shipped = ct.simulated("mobilenet_v2", "fusion-off", env)["step_ms"]
    assert abs(pred / meas - 1) > 0.10 and abs(shipped / meas - 1) < abs(pred / meas - 1)
    step = json.loads((MODELS / f"{env}.json").read_text())["fit"]["small_responses"]["step"]
    committed = float(np.median([x["measured_step_time_ms"] for x in map(json.loads, (
        RUNS / env / "validation" / "fresh-mobilenet_v2-nt.jsonl").read_text().splitlines())
        if x.get("label") == "proposal-1" and x.get("status") == "ok"]))  # fusion off, 423.6 ms
    assert r["delta_ms"] > 1.15 * step["delta_ms"] and meas < 0.9 * committed  # apart: the phase up, the job down


def test_which_misses_a_prediction_could_still_meet_every_sitting_of_their_job():
    """scripts/sitting_spread.py (read after session 56's sets, nothing charged): the 7 named misses are its missed
    rows, and they are 5 jobs. A sitting with median m and repeats [lo, hi] accepts a prediction in [min(0.9 m, lo),
    max(1.1 m, hi)] (the acceptance's rule). fresh-poll-3gbit's MobileNetV2 fusion off was measured 180.3, 213.3 and
    232.7 ms in three sittings: the first accepts at most 202.5, the third at least 209.4, so no prediction meets
    both (the machine's). The other four jobs admit one that meets every sitting and the shipped model's misses it
    (the model's): vit_s16's fusion off on two hosts wants 473.5-488.8 ms (543.4 predicted) and 568.1-651.7 (715.6),
    DistilBERT's cache off on fresh-2x1-5gbit 984.7-1157.9 (898.9), its 1 MiB 953.3-1091.7 (949.2)."""
    ss = _script("sitting_spread")
    rows = ss.missed_rows()
    assert {(e, f) for e, f, _, _ in rows} == {(e, f) for e, f, _ in _missed_rows()} and len(rows) == len(_missed_rows())
    jobs = {(e, k) for e, _, _, k in rows}
    got = {(e, k[0], k[1], k[3]): (ss.verdict(ss.sittings(e)[k]), ss.feasible(ss.sittings(e)[k]),
                                   ss.sittings(e)[k][0].predicted_ms) for e, k in jobs}
    want = {("fresh-poll-3gbit", "mobilenet_v2", 0, 1024): ("machine", None, 160.3),
            ("fresh-poll-2x1-4.5gbit", "vit_s16", 0, 1024): ("model", (473.5, 488.8), 543.4),
            ("fresh-poll-2x1-2.5gbit", "vit_s16", 0, 1024): ("model", (568.1, 651.7), 715.6),
            ("fresh-2x1-5gbit", "distilbert", 128 << 20, 0): ("model", (984.7, 1157.9), 898.9),
            ("fresh-2x1-5gbit", "distilbert", 1 << 20, 1024): ("model", (953.3, 1091.7), 949.2)}
    assert set(got) == set(want)
    for k, (v, f, p) in want.items():
        gv, gf, gp = got[k]
        assert gv == v and gp == pytest.approx(p, abs=0.1), (k, got[k])
        assert (gf is None) if f is None else gf == pytest.approx(f, abs=0.1), (k, gf)
    # one sitting alone always accepts its own median: a job of one sitting is never the machine's
    one = ss.Sitting("x", 100.0, 95.0, 130.0, 0.0)
    assert ss.feasible([one]) == (90.0, 130.0) and ss.verdict([one]) == "model"
