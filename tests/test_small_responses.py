"""The small-response regime. A step's small responses (fusion off, thresholds of 1 MiB and
below) run back to back in a busy cycle; the fit prices them from the ``measure`` phases that run them that
way (:func:`autotuner.frameworks.horovod.fit.phase_small.busy_small_response`), never from the env's validation records
(research/notes/accuracy.md, "The small-response regime"). No Horovod is run here."""
from __future__ import annotations

import json
from dataclasses import replace
import re
from pathlib import Path

import numpy as np
import pytest

from autotuner.frameworks.horovod.fit.phase_small import MIN_SMALL_RESPONSES, SMALL_RESPONSE_BYTES, busy_small_response
from autotuner.model.costmodel import Tier
from autotuner.readers.timeline import FusedResponse
from autotuner.render import fit_regime_lines

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "runs"
MODELS = ROOT / "autotuner" / "models"


class _TL:  # the one attribute busy_small_response reads of a timeline
    def __init__(self, responses):
        self.responses = responses


def _resp(name: str, nbytes: int, start_us: float, dur_us: float) -> FusedResponse:
    return FusedResponse("allreduce", (f"allreduce.{name}",), (nbytes,), nbytes, start_us, dur_us, "GLOO_ALLREDUCE",
                         0.0, 0.0)


def test_fixed_cost_is_the_mean_span_less_the_bandwidth_part():
    """First use of each name left out, responses over 64 KiB and other phases' names left out; the
    fixed cost is the mean of span - n/B (2 ranks: 2(p-1)/p n/B = n/B)."""
    tier = Tier(alpha_s=0.25e-3, bandwidth_Bps=1e8)  # the line: 0.5 ms + n / 1e8 s on 2 ranks
    k = MIN_SMALL_RESPONSES // 2 + 1
    rs, t = [], 0.0
    for r in range(3):  # three batches of k names: the first is each name's first use
        for i in range(k):
            rs.append(_resp(f"sweep.unfused.4096.{i}", 4096, t, 2000.0 if r == 0 else 1000.0 + 100.0 * i))
            t += 5000
    rs.append(_resp("sweep.unfused.1048576.0", 1 << 20, t, 99.0))  # over 64 KiB: left out (twice: no first use)
    rs.append(_resp("sweep.unfused.1048576.0", 1 << 20, t + 1e4, 99.0))
    rs.append(_resp("sweep.allreduce.4096", 4096, t + 2e4, 9e5))  # another phase's name: left out
    out = busy_small_response([_TL(rs)], [], ".", [], tier, 2)
    spans = np.array([1000.0 + 100.0 * i for i in range(k)] * 2) * 1e-6
    want = float(np.mean(spans - 4096 / 1e8)) * 1e3
    assert out["phases"]["unfused"]["n"] == 2 * k and out["n"] == 2 * k
    assert out["fixed_ms"] == pytest.approx(want, rel=1e-12)
    assert out["line_a_ms"] == pytest.approx(0.5, rel=1e-12) and out["up_to_bytes"] == SMALL_RESPONSE_BYTES


def test_too_few_back_to_back_responses_keep_the_line():
    tier = Tier(alpha_s=0.25e-3, bandwidth_Bps=1e8)
    rs = [_resp("sweep.unfused.4096.0", 4096, 1e3 * i, 800.0) for i in range(MIN_SMALL_RESPONSES)]  # 1 first use
    out = busy_small_response([_TL(rs)], [], ".", [], tier, 2)
    assert out["fixed_ms"] is None and "fewer than" in out["note"] and out["n"] == MIN_SMALL_RESPONSES - 1


FRESH = sorted(p.parent.name for p in RUNS.glob("fresh-*/sweep.jsonl"))
#: fresh envs whose replays are fp16 at Horovod's defaults only (measured on another machine, for the fp16 rule)
FP16_ONLY = {"fresh-poll-1gbit", "fresh-poll-2.25gbit"}


@pytest.mark.parametrize("env", FRESH)
def test_shipped_fresh_models_price_small_responses_from_the_step_phase(env):
    """Every fresh env measured the step phase (3 rounds, no timeline); its small-message latency is the step
    phase's price, not the timelines' back-to-back spans (recorded, not charged: their writer's CPU is in them) nor
    the sweep line's intercept (recorded)."""
    d = json.loads((MODELS / f"{env}.json").read_text())
    small, inter = d["fit"]["small_responses"], d["cost_model"]["inter"]
    step = small["step"]
    assert step["charged"] and len(step["rounds"]) >= 3 and not small["charged"]
    assert small["n"] >= 1000 and small["phases"]["trickle_b2b"]["n"] >= 700  # the timelines' figure, kept
    assert 2 * inter["alpha_us"] * 1e-3 == pytest.approx(step["fixed_ms"], rel=1e-9)
    lo, hi = step["fixed_range_ms"]
    assert lo <= step["fixed_ms"] <= hi
    lines = fit_regime_lines(d)
    assert "from the step phase" in lines[0] and "not a step's regime" in lines[-1]


def test_a_cluster_of_more_ranks_than_the_phases_keeps_the_line():
    """local-gloo-2x2: the phases ran 2 ranks (one per host), the cluster has 4 sharing 2 cores: measured, not
    charged (the 2-rank host regime says nothing of 4 ranks on 2 cores)."""
    d = json.loads((MODELS / "local-gloo-2x2.json").read_text())
    small = d["fit"]["small_responses"]
    assert small["fixed_ms"] is not None and not small["charged"] and "not charged" in small["note"]
    assert 2 * d["cost_model"]["inter"]["alpha_us"] * 1e-3 == pytest.approx(small["line_a_ms"], rel=1e-9)
    assert "not charged" in fit_regime_lines(d)[0]


def test_other_formats_print_no_regime_lines():
    assert fit_regime_lines(json.loads((MODELS / "v100-16gbit.json").read_text())) == []


# --- the acceptance rows (held out: the fit never reads validation/) ------------------------------------------

def _small_rows():
    from autotuner.paths import model_search_path, runs_search_path
    from autotuner.frameworks.horovod.views.accuracy import cases

    out = {}
    for c in cases(runs_search_path(), model_search_path()):
        m = re.search(r"\((\S+) MiB, \S+ ms(.*?)\)", c.what)
        if c.env.startswith("fresh-") and c.what.endswith("step time (ms)") and m and (
                float(m.group(1)) <= 1 or "cache off" in m.group(2)):
            out[(c.env, c.source.split("/")[-1].split(" ")[0], c.what.split(":")[0])] = c
    return out


@pytest.fixture(scope="module")
def small_rows():
    return _small_rows()


def _repeat_range(env: str, fname: str, label: str) -> tuple[float, float]:
    v = [r["measured_step_time_ms"] for r in map(json.loads, (RUNS / env / "validation" / fname).read_text().splitlines())
         if r.get("label") == label and r.get("status") == "ok"]
    return min(v), max(v)


#: like with like (no timeline), the rows the step phase's price brought within 10 % (research/notes/accuracy.md, "The step
#: phase"): fusion off on fresh-poll-1.25gbit +24.9 -> +0.9 %, on fresh-2x1-5gbit (its rerun) -12.6 -> -9.6 %
FIXED = [("fresh-poll-1.25gbit", "fresh-mobilenet_v2-nt.jsonl", "mobilenet_v2 proposal-1 (0 MiB, 1 ms)"),
         ("fresh-poll-2.75gbit", "small-mobilenet_v2-nt.jsonl", "mobilenet_v2 proposal-1 (0 MiB, 1 ms)"),
         ("fresh-2x1-5gbit", "small-distilbert-rerun.jsonl", "distilbert proposal-2 (0 MiB, 1 ms) on 2x1"),
         # and those the mid-size burst phase's shift of the line above the knee brought within 10 % (research/notes/accuracy.md,
         # "Mid-size responses back to back"): +14.8 -> +4.7, +16.2 -> +6.0, +17.6 -> +8.8, +16.3 -> +8.6 %
         ("fresh-poll-2x1-3gbit", "fresh-vit_s16-nt.jsonl", "vit_s16 proposal-2 (1 MiB, 1 ms) on 2x1"),
         ("fresh-poll-2x1-3gbit", "small-vit_s16-rerun.jsonl", "vit_s16 proposal-1 (1 MiB, 1 ms) on 2x1"),
         ("fresh-poll-2x1-3gbit", "small-vit_s16-rerun.jsonl", "vit_s16 proposal-2 (0 MiB, 1 ms) on 2x1"),
         ("fresh-poll-2x1-3gbit", "small-vit_s16-rerun.jsonl", "vit_s16 proposal-3 (4 MiB, 5 ms, cache off) on 2x1"),
         # and those the bandwidth below the knee from the same phase brought within 10 % (research/notes/accuracy.md, "Mid-size
         # responses below the knee"; the two envs it was written from): fusion off +14.7 -> +8.5 and +13.9 -> +7.7 %,
         # 1 MiB +10.6 -> +3.4 %, 4 MiB / 5 ms / cache off +12.1 -> +4.1 and +11.0 -> +3.0 % on fresh-poll-2x1-4gbit;
         # fusion off +12.5 -> +6.3 %, 4 MiB / 5 ms / cache off +16.0 -> +7.8 % on fresh-poll-2x1-3.5gbit
         ("fresh-poll-2x1-4gbit", "small-vit_s16-nt.jsonl", "vit_s16 proposal-1 (0 MiB, 1 ms) on 2x1"),
         ("fresh-poll-2x1-4gbit", "small-vit_s16-nt-2.jsonl", "vit_s16 proposal-1 (0 MiB, 1 ms) on 2x1"),
         ("fresh-poll-2x1-4gbit", "small-vit_s16-nt.jsonl", "vit_s16 proposal-2 (1 MiB, 1 ms) on 2x1"),
         ("fresh-poll-2x1-4gbit", "small-vit_s16-nt.jsonl", "vit_s16 proposal-3 (4 MiB, 5 ms, cache off) on 2x1"),
         ("fresh-poll-2x1-4gbit", "small-vit_s16-nt-2.jsonl", "vit_s16 proposal-3 (4 MiB, 5 ms, cache off) on 2x1"),
         ("fresh-poll-2x1-3.5gbit", "small-vit_s16-nt.jsonl", "vit_s16 proposal-1 (0 MiB, 1 ms) on 2x1"),
         ("fresh-poll-2x1-3.5gbit", "small-vit_s16-nt.jsonl", "vit_s16 proposal-3 (4 MiB, 5 ms, cache off) on 2x1"),
         # and the one the cache-off cycle charged from the step phase brought within 10 % (research/notes/accuracy.md, "Cache
         # off from the step phase"): +10.6 -> +4.4 %
         ("fresh-poll-2x1-4.5gbit", "small-vit_s16-nt-2.jsonl", "vit_s16 proposal-3 (4 MiB, 5 ms, cache off) on 2x1"),
         # and the one the below-knee bound's second form brought within 10 % (written after it missed: not held out):
         # MobileNetV2 1 MiB / 1 ms on fresh-poll-3gbit -14.7 -> -1.9 %
         ("fresh-poll-3gbit", "small-mobilenet_v2-nt.jsonl", "mobilenet_v2 proposal-2 (1 MiB, 1 ms)")]


@pytest.mark.parametrize("key", FIXED, ids=[k[0] for k in FIXED])
def test_small_response_rows_a_later_term_brought_within_10_percent_stay_there(small_rows, key):
    """Each row of :data:`FIXED` (once a miss) is within 10 % of its measured step."""
    assert abs(small_rows[key].error_pct) <= 10.0, small_rows[key]


#: the like-with-like rows (no timeline) the model misses: fresh-2x1-5gbit's cache off -14.4 % (its defaults spread
#: 834-1122 ms across two sittings; the same configuration in the other sitting -9.8 %); its knee at 2 MiB leaves one
#: mid-size record size under it, too few for the rule below the knee. And the held-out env of that rule,
#: fresh-poll-2x1-4.5gbit, in its second sitting of replays (every vit_s16 configuration measured faster than in the
#: first: the defaults 1.8 %, 1 MiB 1.2 %, the others 4-9 %): vit_s16 fusion off +13.5 % (+7.5 % in the first sitting; +25.2 % without the
#: rule; the price the step phase gives, 1.46 ms per small response, charges vit_s16's ~150 responses 159 ms where its
#: rounds measured 104 +- 8: research/notes/accuracy.md, "Cache off from the step phase")
#: A third sitting of both (judged as declared before it ran; research/notes/accuracy.md,
#: "A third sitting of the two misses") misses three rows more: on fresh-2x1-5gbit the whole sitting ran slow (its
#: defaults -16.1 %, which is no small-response row) and cache off (-17.8 %) and 1 MiB (-10.4 %) with it, while cache
#: off - defaults paired by round stays inside its noise; vit_s16 fusion off +22.3 %, the third sitting of three to
#: measure its ~150 responses cheaper than the step phase's price charges them (a model error, not a sitting).
MISSED = {("fresh-2x1-5gbit", "small-distilbert-nt.jsonl", "distilbert proposal-3 (128 MiB, 1 ms, cache off) on 2x1"),
          ("fresh-poll-2x1-4.5gbit", "small-vit_s16-nt-2.jsonl", "vit_s16 proposal-1 (0 MiB, 1 ms) on 2x1"),
          ("fresh-2x1-5gbit", "small-distilbert-sitting-3.jsonl", "distilbert proposal-1 (128 MiB, 1 ms, cache off) on 2x1"),
          ("fresh-2x1-5gbit", "small-distilbert-sitting-3.jsonl", "distilbert proposal-3 (1 MiB, 1 ms) on 2x1"),
          ("fresh-poll-2x1-4.5gbit", "small-vit_s16-nt-3.jsonl", "vit_s16 proposal-1 (0 MiB, 1 ms) on 2x1"),
          # the below-knee bound's held-out env: MobileNetV2 fusion off, -7.9 % until
          # the bound's second form (no cheaper per byte below the knee than from it, written after this env's 1 MiB
          # miss) lowered the step phase's price 0.45 -> 0.30 ms: -11.1 % (180.3 ms measured, 167.0-202.5; 160.3
          # predicted; research/notes/accuracy.md, "The below-knee slope the sweep cannot identify")
          # (two more sittings measured it 213.3 and 232.7 ms, the defaults within 3 %; the step phase's own job,
          # re-measured in the second, wanted 0.71 ms, at which it is -3.7 %: the price drifts between sittings here)
          ("fresh-poll-3gbit", "small-mobilenet_v2-nt.jsonl", "mobilenet_v2 proposal-1 (0 MiB, 1 ms)"),
          # held out (declared before it ran): a two-host env no fit had seen,
          # vit_s16 fusion off +20.8 % (592.2 ms measured, 715.6 predicted; the burst phase's price gives 600.6), as
          # on the other two-host envs; DistilBERT's fusion off +2.9 % and the other six rows within 6.2 %
          ("fresh-poll-2x1-2.5gbit", "small-vit_s16-nt.jsonl", "vit_s16 proposal-1 (0 MiB, 1 ms) on 2x1")}
#: Held out on an env no fit had seen (declared before it ran),
#: MobileNetV2 fusion off on fresh-poll-2.75gbit missed at -15.9 % (184.8 ms measured, 182.3-200.2; 155.4
#: predicted); with the line below the knee bounded by the link (sweep.bound_below_knee, written after that miss:
#: not held out) it is -7.7 % (research/notes/accuracy.md, "The below-knee slope the sweep cannot identify").


def test_every_small_response_row_within_10_percent_or_its_repeat_range(small_rows):
    """Acceptance, like with like: fusion off, <= 1 MiB thresholds and cache off, each replayed without Horovod's
    timeline (the job the prediction is for), within 10 % or inside their own repeats' range, on every committed
    fresh env, except the named misses (which must still miss: they are stated in the docs). Every fresh env has
    such rows."""
    bad, envs = set(), set()
    for key, c in small_rows.items():
        if "timeline ran" in key[2]:
            continue
        envs.add(key[0])
        lo, hi = _repeat_range(key[0], key[1], c.what.split(" ")[1])
        if not (abs(c.error_pct) <= 10.0 or lo <= c.predicted <= hi):
            bad.add(key)
    # the two envs measured for the fp16 rule (on a faster-changing machine: research/notes/compression.md, "Held
    # out: a new machine") replayed fp16 at the defaults only: no small-response rows there yet
    assert envs == set(FRESH) - FP16_ONLY
    assert bad == MISSED, sorted(bad ^ MISSED)


def test_small_response_rows_that_ran_the_timeline_are_another_job(small_rows):
    """The rows whose replays ran Horovod's timeline measured another job than the prediction's (its writer costs a
    step of hundreds of small responses up to 30 %, docs/how-to/validate.md): named so, and no further off than 25 %."""
    tl = {k: c for k, c in small_rows.items() if "timeline ran" in k[2]}
    assert len(tl) >= 25 and all("timeline ran" in c.what for c in tl.values())
    over = {k for k, c in tl.items() if abs(c.error_pct) >= 25.0}
    assert over == set(TIMELINE_OVER_25), sorted((round(tl[k].error_pct, 1), k) for k in over ^ set(TIMELINE_OVER_25))


#: timeline-ran rows further off than 25 %: fresh-poll-1.25gbit's MobileNetV2 fusion off with the timeline, -20.5 %
#: until the below-knee bound's second form lowered its step phase's price (1.24 -> 0.87 ms per small response): -27.6 %
#: (533.2 ms measured with the writer; the same configuration without it, fresh-mobilenet_v2-nt.jsonl, -8.8 %)
TIMELINE_OVER_25 = {("fresh-poll-1.25gbit", "fresh-mobilenet_v2.jsonl", "mobilenet_v2 proposal-1 (0 MiB, 1 ms, timeline ran)"):
                    "-27.6 %"}


# --------------------------------------------------------------------------- the burst phase (no timeline)

def _burst_record(cost, alpha_s: float, repeat: int, p: int = 2, offset_ms: float = 3.0) -> dict:
    """A burst.jsonl record whose wall times are the simulator's for ``alpha_s``, plus a start ``offset_ms``
    that every round pays (the cycle's alignment): what the fit must see through."""
    from dataclasses import replace as _replace

    from autotuner.frameworks.horovod.fit.phase_small import _burst_marginal_sim_s

    c = _replace(cost, inter=_replace(cost.inter, alpha_s=alpha_s))
    walls = []
    for b in (4096, 16384, 65536):
        m = _burst_marginal_sim_s(c, b, 32, p) * 1e3
        walls += [[b, 1, [offset_ms] * 4], [b, 32, [offset_ms + 31 * m] * 4]]
    return {"phase": "burst", "tier": "single", "repeat": repeat, "sizes": [4096, 16384, 65536], "counts": [1, 32],
            "rounds": 5, "wait": "sleep", "ranks": p, "wall_ms": walls}


def test_burst_phase_recovers_the_latency_it_was_simulated_with():
    """Wall times simulated with a known small-message latency (and a start offset every round pays) give that
    latency back: the marginal (T(32) - T(1)) / 31 less what the fitted negotiation and host gaps charge."""
    from autotuner.frameworks.horovod.fit.store import load_env
    from autotuner.frameworks.horovod.fit.phase_small import burst_small_response

    cost = load_env(MODELS, "fresh-3gbit").cost
    for alpha in (0.05e-3, 0.4e-3):
        out = burst_small_response([_burst_record(cost, alpha, k) for k in range(3)], cost, 2)
        assert out["alpha_us"] == pytest.approx(alpha * 1e6, rel=1e-6), out
        assert out["fixed_ms"] == pytest.approx(2 * alpha * 1e3, rel=1e-6) and out["jobs"] == 3
        assert len(out["points"]) == 9 and "without the timeline" in out["regime"]


def test_burst_phase_floor_and_too_few_points():
    from dataclasses import replace as _replace

    from autotuner.frameworks.horovod.fit.store import load_env
    from autotuner.frameworks.horovod.fit.phase_small import burst_small_response

    cost = load_env(MODELS, "fresh-3gbit").cost
    rec = _burst_record(cost, 0.0, 0)
    for row in rec["wall_ms"]:
        if row[1] == 32:
            row[2] = [row[2][0] * 0.5 + 1.5] * 4  # faster than the fitted negotiation and gaps alone
    out = burst_small_response([rec], cost, 2)
    assert out["alpha_us"] == 0.0  # never a negative latency
    one = _replace_rows(_burst_record(cost, 1e-4, 0), keep=1)
    out = burst_small_response([one], cost, 2)
    assert out["alpha_us"] is None and "fewer than" in out["note"]
    assert burst_small_response([], cost, 2)["note"].startswith("no burst phase")


def _replace_rows(rec: dict, keep: int) -> dict:
    sizes = sorted({b for b, _, _ in rec["wall_ms"]})[:keep]
    rec["wall_ms"] = [w for w in rec["wall_ms"] if w[0] in sizes]
    return rec


def test_burst_records_validate_and_bad_ones_are_named():
    from autotuner.frameworks.horovod.readers.sweep import parse_burst_records

    good = {"phase": "burst", "tier": "single", "repeat": 0, "sizes": [4096], "counts": [1, 32], "rounds": 3,
            "wait": "spin", "ranks": 2, "wall_ms": [[4096, 1, [1.0, 1.1]], [4096, 32, [3.0, 3.2]]]}
    bad = {**good, "wall_ms": [[4096, 1, [-1.0]], [4096, 32, [3.0]]]}
    recs, problems = parse_burst_records("\n".join(json.dumps(r) for r in (good, bad)) + "\n", "burst.jsonl")
    assert len(recs) == 1 and len(problems) == 1 and "burst.jsonl" in problems[0]


def test_the_committed_burst_phases_are_recorded_not_charged():
    """Every committed sweep env measured the burst phase (3 jobs each); the shipped models
    record its price and never charge it (research/notes/accuracy.md, "The burst phase": the busy regime alone under-prices a
    step's small responses on the polling envs)."""
    from autotuner.frameworks.horovod.fit.phase_small import BURST_RECORDS

    envs = sorted(p.parent.name for p in RUNS.glob("*/sweep.jsonl"))
    assert len(envs) == 27
    for env in envs:
        assert (RUNS / env / BURST_RECORDS).exists(), env
        d = json.loads((MODELS / f"{env}.json").read_text())
        small = d["fit"]["small_responses"]
        b = small["burst"]
        assert b["jobs"] == 3 and len(b["points"]) == 9 and b["charged"] is False, env
        # under 2 ms per small response on the machine of the other envs; 2.4-2.9 ms on the fp16 rule's one
        # (FP16_ONLY: env.toml's stack names it), whose small responses cost more in every phase
        assert 0 <= b["fixed_ms"] < (3.5 if env in FP16_ONLY else 2.0), env
        p = int(d["fit"]["p"])
        charged = small["step"]["fixed_ms"] if small["step"]["charged"] else small["fixed_ms"] if small["charged"] else None
        if charged is not None:  # the charged latency is the step phase's, else the timelines' back-to-back figure
            assert 2 * (p - 1) * d["cost_model"]["inter"]["alpha_us"] * 1e-3 == pytest.approx(charged, rel=1e-9)


# --------------------------------------------------------------------------- the step phase (no timeline)

def _step_records(cost, cluster, fixed_ms: float, offset_ms: float = 7.0, rounds: int = 3,
                  after_ms: float | None = None, long_rounds: int = 0) -> list[dict]:
    """step.jsonl records whose step times are the simulator's for a small-response latency ``fixed_ms`` (ms per
    response; ``after_ms`` after the backward, None: the same), plus an ``offset_ms`` both jobs pay (a testbed's
    offset): what the fit must see through. ``long_rounds`` rounds of defaults and fusion off at 300 ms of compute."""
    from autotuner.frameworks.horovod.fit.phase_step import _step_delta_sim_ms
    from autotuner.frameworks.horovod.stepprobe import LAYOUT_NAME, LONG_COMPUTE_MS

    out = []
    for compute, n, jobs in ((100.0, rounds, ("defaults", "fusion-off", "cache-off")),
                             (LONG_COMPUTE_MS, long_rounds, ("defaults", "fusion-off"))):
        d = _step_delta_sim_ms(cost, cluster, fixed_ms, "fusion-off", "gloo", compute, after_ms=after_ms)
        base = compute + offset_ms
        for k in range(n):
            for job in jobs:
                t = {"defaults": base, "fusion-off": base + d, "cache-off": base + 3.0}[job]
                out.append({"phase": "step", "tier": "single", "repeat": k, "job": job, "layout": LAYOUT_NAME,
                            "ranks": cluster.size, "compute_ms": compute, "wait": "sleep", "step_times_ms": [t] * 4})
    return out


def test_step_phase_recovers_the_latency_it_was_simulated_with():
    """Step times simulated with a known small-response latency (and an offset both jobs pay) give a latency whose
    simulated difference is the measured one; it is the latency simulated with to 0.03 ms: the simulated difference
    rises about 127 ms per ms of latency (127 more responses) but steps back by up to 1.6 ms where a response
    crosses a 1 ms cycle, so a difference can have several latencies 0.015 ms apart. Cache off - defaults is
    recorded."""
    from autotuner.frameworks.horovod.fit.phase_step import _step_delta_sim_ms
    from autotuner.frameworks.horovod.fit.store import load_env
    from autotuner.frameworks.horovod.fit.phase_step import step_small_response

    fenv = load_env(MODELS, "fresh-poll-1.25gbit")
    for fixed in (0.6, 1.3, 2.2):
        out = step_small_response(_step_records(fenv.cost, fenv.cluster, fixed), fenv.cost, fenv.cluster, "gloo")
        want = _step_delta_sim_ms(fenv.cost, fenv.cluster, fixed, "fusion-off", "gloo")
        got = _step_delta_sim_ms(fenv.cost, fenv.cluster, out["fixed_ms"], "fusion-off", "gloo")
        assert got == pytest.approx(want, abs=0.05) and out["delta_ms"] == pytest.approx(want, rel=1e-12)
        assert out["fixed_ms"] == pytest.approx(fixed, abs=0.03), out
        assert out["alpha_us"] == pytest.approx(out["fixed_ms"] * 1e3 / 2, rel=1e-12)  # 2 ranks: 2(p-1) latencies
        assert out["fixed_range_ms"] == pytest.approx([out["fixed_ms"]] * 2, abs=1e-9)
        assert out["cache_off_delta_ms"] == pytest.approx(3.0) and len(out["rounds"]) == 3
        assert "without the timeline" in out["regime"]


def test_step_phase_at_two_computes_records_the_latencies_during_and_after_the_backward():
    """Step times simulated with one latency during the backward and another after it, at 100 and 300 ms of
    compute: the fit records (``long``, not charged) latencies that meet the 100 ms difference exactly and the 300 ms
    one to within 2 ms (the simulated 300 ms difference is a step function of the latency: responses cross 1 ms
    cycles), near those it was simulated with; the charged price stays the one latency that meets 100 ms alone.
    Without 300 ms rounds, ``long`` says so."""
    from autotuner.frameworks.horovod.fit.store import load_env
    from autotuner.frameworks.horovod.fit.phase_step import _step_delta_sim_ms, step_small_response

    fenv = load_env(MODELS, "fresh-poll-1.25gbit")
    for a, b in ((0.8, 1.6), (1.2, 1.2), (1.4, 1.0)):
        recs = _step_records(fenv.cost, fenv.cluster, a, after_ms=b, long_rounds=3)
        out = step_small_response(recs, fenv.cost, fenv.cluster, "gloo")
        long = out["long"]
        one = _step_delta_sim_ms(fenv.cost, fenv.cluster, out["fixed_ms"], "fusion-off", "gloo")
        assert one == pytest.approx(out["delta_ms"], abs=0.05) and long["charged"] is False
        assert long["during_ms"] == pytest.approx(a, abs=0.21) and long["after_ms"] == pytest.approx(b, abs=0.3), long
        got = _step_delta_sim_ms(fenv.cost, fenv.cluster, long["during_ms"], "fusion-off", "gloo",
                                 after_ms=long["after_ms"])
        assert got == pytest.approx(out["delta_ms"], abs=0.05) and abs(long["miss_ms"]) < 2.0, long
        assert long["during_range_ms"][0] <= long["during_ms"] <= long["during_range_ms"][1]
        assert long["after_backward_us"] == pytest.approx((long["after_ms"] - long["during_ms"]) * 1e3)
        assert len(long["rounds"]) == 3 and long["compute_ms"] == 300.0
    one = step_small_response(_step_records(fenv.cost, fenv.cluster, 1.0, long_rounds=2), fenv.cost, fenv.cluster,
                              "gloo")
    assert one["long"]["after_ms"] is None and "fewer than 3" in one["long"]["note"]
    assert one["fixed_ms"] == pytest.approx(1.0, abs=0.03)


def test_step_phase_refuses_too_few_rounds_other_layouts_and_impossible_differences():
    from autotuner.frameworks.horovod.fit.store import load_env
    from autotuner.frameworks.horovod.fit.phase_step import MAX_STEP_FIXED_MS, step_small_response

    fenv = load_env(MODELS, "fresh-poll-1.25gbit")
    recs = _step_records(fenv.cost, fenv.cluster, 1.0, rounds=2)
    out = step_small_response(recs, fenv.cost, fenv.cluster, "gloo")
    assert out["fixed_ms"] is None and "fewer than 3" in out["note"]
    other = [{**r, "layout": "step-probe/0"} for r in _step_records(fenv.cost, fenv.cluster, 1.0)]
    assert step_small_response(other, fenv.cost, fenv.cluster, "gloo")["note"].startswith("no step phase")
    faster = _step_records(fenv.cost, fenv.cluster, 1.0)
    for r in faster:
        if r["job"] == "fusion-off":  # fusion off faster than the defaults: no latency >= 0 gives that
            r["step_times_ms"] = [50.0] * 4
    out = step_small_response(faster, fenv.cost, fenv.cluster, "gloo")
    assert out["fixed_ms"] is None and f"0-{MAX_STEP_FIXED_MS:g} ms" in out["note"]


def _cache_off_step(fixed_ms: float, deltas: list[float]) -> dict:
    """A charged ``fit.small_responses.step`` whose rounds measured cache off - defaults = ``deltas`` (ms)."""
    rounds = [[k, 100.0, 150.0, 100.0 + d] for k, d in enumerate(deltas)]
    return {"charged": True, "fixed_ms": fixed_ms, "rounds": rounds, "cache_off_delta_ms": float(np.median(deltas))}


def _timeline_negotiation(fenv):
    """fresh-poll-1.25gbit's cost with a cache-off cycle as its timelines might say it: 2 ms busy, 4 ms without the
    cache, 20 µs per tensor per rank."""
    from dataclasses import replace

    return replace(fenv.cost, negotiation=replace(fenv.cost.negotiation, busy_s=2e-3, nocache_s=4e-3, per_tensor_s=20e-6))


def test_cache_off_from_the_step_phase_recovers_the_share_it_was_simulated_with():
    """Step-phase cache-off differences simulated with a known share ``k`` of the timelines' extra give back a ``k``
    whose simulated difference is the measured one (to 0.5 ms: the simulator's 1 ms cycles make the difference a step
    function of ``k``), and the cost's two terms scaled by it; below what ``k`` = 0 simulates the extra is all gone
    (``nocache`` = busy, no per-tensor work), above what ``k`` = 1 simulates the timelines' figures stand."""
    from dataclasses import replace

    from autotuner.frameworks.horovod.fit.store import load_env
    from autotuner.frameworks.horovod.fit.phase_step import _step_delta_sim_ms, step_cache_off

    fenv = load_env(MODELS, "fresh-poll-1.25gbit")
    cost = _timeline_negotiation(fenv)
    # the line below the knee as its sweep fitted it (before the below-knee bound): this tests the solve, not the line,
    # and the simulator's 1 ms cycles make the difference a step function of k whose steps move with the line
    from autotuner.model.costmodel import GBIT

    borrowed = fenv.raw["fit"]["piecewise"]["small"]["per_byte_borrowed"]
    cost = replace(cost, inter=replace(cost.inter, bandwidth_Bps=borrowed["fitted_busbw_gbps"] * GBIT))
    neg = cost.negotiation

    def sim(k: float) -> float:
        c = replace(cost, negotiation=replace(neg, nocache_s=neg.busy_s + k * (neg.nocache_s - neg.busy_s),
                                              per_tensor_s=k * neg.per_tensor_s))
        return _step_delta_sim_ms(c, fenv.cluster, 1.2, "cache-off", "gloo")

    assert sim(1.0) > sim(0.0) + 5.0  # the extra is visible in the replay, or the test proves nothing
    for k in (0.3, 0.7):
        d = sim(k)
        info, new = step_cache_off(_cache_off_step(1.2, [d - 1.0, d, d + 2.0]), cost, fenv.cluster, "gloo")
        assert info["charged"] and info["simulated_ms"] == pytest.approx(d, abs=0.5), info
        assert info["k"] == pytest.approx(k, abs=0.1) and info["measured_range_ms"] == pytest.approx([d - 1.0, d + 2.0])
        assert new.negotiation.per_tensor_s == pytest.approx(info["k"] * 20e-6)
        assert new.negotiation.nocache_s == pytest.approx(2e-3 + info["k"] * 2e-3)
        assert info["nocache_us"] == pytest.approx([4000.0, new.negotiation.nocache_s * 1e6])
        assert info["simulated_before_ms"] == pytest.approx(sim(1.0))
    info, new = step_cache_off(_cache_off_step(1.2, [sim(0.0) - 3.0] * 3), cost, fenv.cluster, "gloo")
    assert info["k"] == 0.0 and new.negotiation.nocache_s == 2e-3 and new.negotiation.per_tensor_s == 0.0
    info, new = step_cache_off(_cache_off_step(1.2, [sim(1.0) + 3.0] * 3), cost, fenv.cluster, "gloo")
    assert info["k"] == 1.0 and new.negotiation == neg


def test_cache_off_from_the_step_phase_leaves_the_timelines_terms_where_it_cannot_say():
    """Not charged (the cost unchanged, a note saying why): the step phase's price not charged, fewer than 3 rounds
    with cache off, or no cache-off cycle fitted from the timelines."""
    from dataclasses import replace

    from autotuner.frameworks.horovod.fit.store import load_env
    from autotuner.frameworks.horovod.fit.phase_step import step_cache_off

    fenv = load_env(MODELS, "fresh-poll-1.25gbit")
    cost = _timeline_negotiation(fenv)
    for step, needle in (({**_cache_off_step(1.2, [1.0] * 3), "charged": False}, "not charged"),
                         (_cache_off_step(1.2, [1.0] * 2), "fewer than 3")):
        info, new = step_cache_off(step, cost, fenv.cluster, "gloo")
        assert not info["charged"] and needle in info["note"] and new is cost
    none = replace(cost, negotiation=replace(cost.negotiation, nocache_s=None))
    info, new = step_cache_off(_cache_off_step(1.2, [1.0] * 3), none, fenv.cluster, "gloo")
    assert not info["charged"] and "no cache-off cycle" in info["note"] and new is none


#: the envs whose timelines put a cache-off busy cycle below a cache-on one, so that even k = 0 simulates cache off
#: faster than the step phase measured it: fresh-poll-3gbit (busy cycle 2.26 ms cache on, 1.21 ms cache off;
#: cache off +1.2 ms measured against -3.5 simulated)
CACHE_OFF_UNDER = {"fresh-poll-3gbit"}


def test_the_shipped_models_charge_cache_off_from_their_step_phase():
    """Every shipped sweep model whose step phase is charged charges its cache-off cycle from it: the cost model's
    ``nocache_us`` and ``per_tensor_us`` are the scaled ones the fit records, the share in [0, 1], and where it lies
    strictly inside, the simulated step-phase difference meets the measured one (within 2 ms: 1 ms cycles); the
    others record it, not charged."""
    charged = 0
    for f in sorted(MODELS.glob("*.json")):
        d = json.loads(f.read_text())
        step = (((d.get("fit") or {}).get("small_responses") or {}).get("step")) or {}
        if not step:
            continue
        co = step["cache_off"]
        neg = d["cost_model"]["negotiation"]
        if not step.get("charged") or "nocache_us" not in neg:
            assert not co["charged"] and co["note"], f.name
            continue
        charged += 1
        assert co["charged"] and 0.0 <= co["k"] <= 1.0, f.name
        assert neg["nocache_us"] == pytest.approx(co["nocache_us"][1], rel=1e-9), f.name
        assert neg["per_tensor_us"] == pytest.approx(co["per_tensor_us"][1], rel=1e-9), f.name
        if 0.0 < co["k"] < 1.0:
            assert co["simulated_ms"] == pytest.approx(co["measured_ms"], abs=2.0), f.name
        elif co["k"] == 0.0 and f.stem in CACHE_OFF_UNDER:  # named: k = 0 and still under the measured
            assert co["measured_ms"] > co["simulated_ms"] + 2.0, f.name
        elif co["k"] == 0.0:
            assert co["measured_ms"] <= co["simulated_ms"] + 2.0, f.name
        else:
            assert co["measured_ms"] >= co["simulated_before_ms"] - 2.0, f.name
    assert charged >= 15


def test_step_records_validate_and_bad_ones_are_named():
    from autotuner.frameworks.horovod.readers.sweep import parse_step_records

    good = {"phase": "step", "tier": "single", "repeat": 0, "job": "fusion-off", "layout": "step-probe/1",
            "ranks": 2, "compute_ms": 100.0, "wait": "sleep", "step_times_ms": [210.0, 212.5]}
    bad = {**good, "job": "fusion-on"}
    worse = {**good, "step_times_ms": [-1.0]}
    recs, problems = parse_step_records("\n".join(json.dumps(r) for r in (good, bad, worse)) + "\n", "step.jsonl")
    assert len(recs) == 1 and len(problems) == 2 and all("step.jsonl" in p for p in problems)


def test_the_step_phase_layout_is_what_its_docstring_says():
    from autotuner.frameworks.horovod.stepprobe import BLOCKS, JOBS, layout

    L = layout()
    assert len(L.sizes_bytes) == 4 * BLOCKS == 128
    assert list(L.sizes_bytes[:4]) == [256 * 256 * 4, 1024, 1024, 1024]
    assert L.ready_fraction[0] == pytest.approx(1 / BLOCKS) and L.ready_fraction[-1] == pytest.approx(1.0)
    assert JOBS["fusion-off"].fusion_threshold_bytes == 0 and JOBS["cache-off"].cache_capacity == 0
    assert JOBS["defaults"].fusion_threshold_bytes == 128 * 1024 * 1024 and JOBS["defaults"].cycle_time_ms == 1.0


def _first_sitting_records(env: str) -> list[dict]:
    """``runs/<env>/experiments/step-layout-first-sitting.jsonl`` (``autotuner validate`` of the step phase's layout,
    defaults and fusion off, before the phase existed) as step-phase records."""
    from autotuner.frameworks.horovod.stepprobe import LAYOUT_NAME

    out = []
    for line in (RUNS / env / "experiments" / "step-layout-first-sitting.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r["status"] != "ok":
            continue
        out.append({"phase": "step", "tier": "single", "repeat": r["repeat"], "layout": LAYOUT_NAME,
                    "job": {"default": "defaults", "proposal-1": "fusion-off"}[r["label"]], "ranks": 2,
                    "compute_ms": r["setup"]["compute_ms"], "wait": r["setup"].get("replay_wait") or "spin",
                    "step_times_ms": r["step_times_ms"]})
    return out


#: the envs whose two sittings' prices differ by more than 0.3 ms (research/notes/accuracy.md, "The step phase"):
#: fresh-2x1-5gbit 1.38 against 1.87 ms (its phase's own rounds 1.26-2.25), fresh-poll-2gbit 1.60 against 0.97
SITTINGS_APART = {"fresh-2x1-5gbit", "fresh-poll-2gbit"}


def test_the_step_phase_price_holds_in_a_second_sitting():
    """The first sitting (validate, 4 repeats, same layout tensor for tensor, same compute and steps) fitted as the
    phase is: within 0.3 ms of the committed phase's price on every fresh env but the two named."""
    from autotuner.frameworks.horovod.fit.store import load_env
    from autotuner.frameworks.horovod.fit.phase_step import step_small_response
    from autotuner.frameworks.horovod.stepprobe import COMPUTE_MS, LAYOUT

    first = json.loads((RUNS / "fresh-3gbit" / "experiments" / "step-layout-first-sitting.jsonl").open().readline())
    assert first["setup"]["compute_ms"] == COMPUTE_MS and first["setup"]["steps"] == 8
    apart = set()
    sat = [e for e in FRESH if (RUNS / e / "experiments" / "step-layout-first-sitting.jsonl").exists()]
    assert len(sat) == 9  # every fresh env measured before the phase existed (not fresh-poll-2x1-4gbit, measured after)
    for env in sat:
        fenv = load_env(MODELS, env)
        recs = _first_sitting_records(env)
        assert len(recs) == 8 and len(LAYOUT["tensors"]) == 128
        got = step_small_response(recs, fenv.cost, fenv.cluster, "gloo")["fixed_ms"]
        shipped = fenv.raw["fit"]["small_responses"]["step"]["fixed_ms"]
        if abs(got - shipped) > 0.3:
            apart.add(env)
    assert apart == SITTINGS_APART


def test_at_300_ms_of_compute_the_step_layout_costs_less_than_the_100_ms_price_says():
    """The lead the step phase leaves (research/notes/accuracy.md, "The step phase"): the same layout with 300 ms of compute
    (``experiments/step-layout-300ms.jsonl``, validate, 3 repeats, no timeline) on the two envs tried: fusion off -
    defaults measured well under what the shipped models (priced at 100 ms) predict, i.e. small responses handed
    over through a long backward cost less per response than after a short one."""
    from autotuner.frameworks.horovod.fit.store import load_env
    from autotuner.frameworks.horovod.fit.phase_step import _step_delta_sim_ms

    for env in ("fresh-poll-2x1-3gbit", "fresh-poll-1.25gbit"):
        recs = [json.loads(x) for x in (RUNS / env / "experiments" / "step-layout-300ms.jsonl").read_text().splitlines()]
        assert all(r["setup"]["compute_ms"] == 300.0 and not r["timeline_recorded"] for r in recs)
        by = {}
        for r in recs:
            by.setdefault(r["repeat"], {})[r["label"]] = r["measured_step_time_ms"]
        d = sorted(j["proposal-1"] - j["default"] for j in by.values())[len(by) // 2]
        fenv = load_env(MODELS, env)
        price = fenv.raw["fit"]["small_responses"]["step"]["fixed_ms"]
        sim = _step_delta_sim_ms(fenv.cost, fenv.cluster, price, "fusion-off", "gloo", compute_ms=300.0)
        assert len(by) == 3 and d < 0.8 * sim, (env, d, sim)


#: the sweep envs whose step phase ran 300 ms rounds and where fusion off's measured difference at 300 ms is not
#: well under what the charged one latency simulates there (research/notes/accuracy.md, "The step phase at 300 ms of compute")
LONG_NOT_UNDER = {"fresh-poll-2gbit": "18.1 ms measured against 13.5 simulated (rounds 17.6-29.1)",
                  # the two envs whose step phase prices a small response at 0.35-0.44 ms (0.9-1.9 on
                  # the others): at 300 ms fusion off costs them little either way
                  "fresh-poll-1.1gbit": "13.4 ms against 12.5 (rounds 0.9-17.9)",
                  "fresh-poll-2.75gbit": "3.1 ms against 1.4 (rounds 1.3-8.6)",
                  "fresh-poll-3gbit": "2.4 ms against 1.4 (rounds 0.1-9.5)",
                  "fresh-poll-0.75gbit": "80.9 ms against 91.4 (rounds 68.6-127.2): the link, not the responses, "
                                         "holds fusion off at 0.75 Gbit/s",
                  "fresh-poll-2x1-3gbit": "37.5 ms against 41.0 (rounds 33.7-38.6)",
                  "fresh-poll-2x1-4gbit": "26.3 ms against 22.9 (rounds 21.1-43.5)",
                  "fresh-poll-2x1-3.5gbit": "33.2 ms against 32.2 (rounds 18.9-55.0)",
                  "fresh-0.5gbit": "157.0 ms against 191.8 (rounds 145.3-173.3): the link holds fusion off",
                  "fresh-poll-2.5gbit": "18.4 ms against 8.2 (rounds 4.8-23.4)",
                  "fresh-poll-1gbit": "377.4 ms against 370.3 (the fp16 rule's machine: fusion off adds 340-460 "
                                      "ms at 300 ms of compute there, 18-81 ms on the earlier one)",
                  "fresh-poll-2.25gbit": "378.9 ms against 367.6 (the fp16 rule's machine)",
                  # 0.73x (40.3 against 55.5) until the below-knee bound's second form lowered its price 1.24 -> 0.87 ms: 0.76x
                  "fresh-poll-1.25gbit": "40.3 ms against 52.7 (rounds 25.9-51.9)",
                  # the below-knee bound's held-out envs: small differences either way
                  "fresh-poll-1.5gbit": "8.3 ms against 5.6 (rounds 6.0-10.7)",
                  "fresh-poll-3.5gbit": "2.1 ms against 1.3 (rounds 0.1-3.3)",
                  "fresh-poll-4gbit": "4.0 ms against 1.1 (rounds 1.4-4.9)",
                  "fresh-poll-2.2gbit": "4.7 ms against 1.8 (rounds 0.4-5.7)",
                  # the held-out two-host env
                  "fresh-poll-2x1-2.5gbit": "66.9 ms against 68.8"}


def test_the_step_phase_at_300_ms_is_recorded_not_charged_and_says_the_one_price_is_dear_there():
    """Every sweep env whose step phase ran 3 rounds at 300 ms records them in ``fit.small_responses.step.long``
    (not charged: no model file carries ``after_backward_us``), and on the others than :data:`LONG_NOT_UNDER` the
    measured fusion off - defaults difference at 300 ms is under 0.75x what the charged one latency simulates there:
    small responses handed over through a long backward cost less than the 100 ms phase's price."""
    from autotuner.frameworks.horovod.fit.store import load_env
    from autotuner.frameworks.horovod.fit.phase_step import _step_delta_sim_ms

    seen = []
    for f in sorted(MODELS.glob("*.json")):
        d = json.loads(f.read_text())
        assert "after_backward_us" not in d["cost_model"], f.name
        long = ((d.get("fit") or {}).get("small_responses") or {}).get("step", {}).get("long") or {}
        if long.get("delta_ms") is None:
            continue
        env = f.stem
        seen.append(env)
        recs = [json.loads(x) for x in (RUNS / env / "step.jsonl").read_text().splitlines()]
        assert sum(1 for r in recs if r["compute_ms"] == 300.0) == 2 * len(long["rounds"]) >= 6
        assert long["charged"] is False and long["during_ms"] is not None
        fenv = load_env(MODELS, env)
        price = d["fit"]["small_responses"]["step"]["fixed_ms"]
        sim = _step_delta_sim_ms(fenv.cost, fenv.cluster, price, "fusion-off", "gloo", compute_ms=300.0)
        assert sim == pytest.approx(long["one_latency_delta_ms"], abs=0.05)
        if env not in LONG_NOT_UNDER:
            assert long["delta_ms"] < 0.75 * sim, (env, long["delta_ms"], sim)
    assert len(seen) == 25 and set(LONG_NOT_UNDER) <= set(seen)


def test_the_300_ms_lead_holds_inside_one_sitting():
    """The 300 ms rounds were measured a day after the 100 ms ones; the same phase run again with both computes
    interleaved in one sitting (``experiments/step-two-computes-same-sitting.jsonl``, 3 rounds, four envs) gives the
    same lead: fusion off's difference at 300 ms under 0.55x what the latency that meets that sitting's own 100 ms
    difference simulates."""
    from autotuner.frameworks.horovod.fit.store import load_env
    from autotuner.frameworks.horovod.fit.phase_step import step_small_response

    for env in ("fresh-3gbit", "fresh-1.5gbit", "local-gloo-1gbit-sweep", "fresh-2x1-5gbit"):
        recs = [json.loads(x) for x in
                (RUNS / env / "experiments" / "step-two-computes-same-sitting.jsonl").read_text().splitlines()]
        assert len(recs) == 15 and len({r["finished_at"][:13] for r in recs}) <= 2
        fenv = load_env(MODELS, env)
        out = step_small_response(recs, fenv.cost, fenv.cluster, "gloo")
        long = out["long"]
        assert len(out["rounds"]) == 3 == len(long["rounds"])
        assert long["delta_ms"] < 0.55 * long["one_latency_delta_ms"], (env, long)


def test_the_bandwidth_plot_names_where_its_small_message_latency_comes_from():
    """``fit``'s plot draws the charged curve; its legend says which regime priced the small responses (the step
    phase on the charged sweep envs, the pooled line where nothing else was charged, as on the 2x2 envs)."""
    from autotuner.model.costmodel import CostModel
    from autotuner.views.plots import _curve_label

    m = json.loads((MODELS / "fresh-3gbit.json").read_text())
    a_ms = m["fit"]["small_responses"]["step"]["fixed_ms"]
    assert _curve_label(m, CostModel.from_dict(m["cost_model"]), 2).endswith(
        f"small responses {a_ms:.2f} ms (a step's, from the step phase)")
    m = json.loads((MODELS / "local-gloo-2x2.json").read_text())
    assert _curve_label(m, CostModel.from_dict(m["cost_model"]), 2) == "fitted alpha-beta (pooled)"


@pytest.mark.parametrize("args, needle", [(["--sizes", "x"], "--sizes"), (["--sizes", "6"], "multiple of 4"),
                                          (["--counts", "8"], "at least two"), (["--counts", "8,1"], "increasing"),
                                          (["--counts", "0,4"], "from 1 up"), (["--rounds", "1"], "--rounds")])
def test_the_burst_probe_refuses_bad_sizes_and_counts_in_one_line(capsys, args, needle):
    """The burst probe's ``--sizes`` / ``--counts`` (measure's mid-size burst phase): a bad one is one
    line on stderr and status 2, before Horovod is imported."""
    from autotuner.frameworks.horovod import burstprobe

    assert burstprobe.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err


# --------------------------------------------------------------------------- mid-size bursts (the line above the knee)

def _mid_record(cost, shift_ms: float, repeat: int, p: int = 2, jitter_ms: float = 0.0, offset_ms: float = 3.0,
                below_ms_per_mib: float = 0.0, below_fixed_ms: float = 0.0) -> dict:
    """A burst-mid.jsonl record whose wall times are the simulator's on ``cost`` with every response at or above the
    knee ``shift_ms`` dearer back to back, every one below it ``below_fixed_ms + below_ms_per_mib * MiB`` dearer
    (``jitter_ms`` added to each marginal), plus a start offset every round pays."""
    from autotuner.frameworks.horovod.fit.phase_small import _burst_marginal_sim_s
    from autotuner.frameworks.horovod.measure import MID_SIZES

    walls = []
    for b in MID_SIZES:
        above = cost.inter.large_from_bytes is not None and b >= cost.inter.large_from_bytes
        m = _burst_marginal_sim_s(cost, b, 8, p) * 1e3 + (
            shift_ms if above else below_fixed_ms + below_ms_per_mib * b / (1 << 20))
        walls += [[b, 1, [offset_ms] * 4], [b, 8, [offset_ms + 7 * (m + jitter_ms)] * 4]]
    return {"phase": "burst", "tier": "inter", "repeat": repeat, "sizes": list(MID_SIZES), "counts": [1, 8],
            "rounds": 5, "wait": "sleep", "ranks": p, "wall_ms": walls}


def test_the_mid_size_phase_recovers_the_shift_it_was_simulated_with():
    """Wall times simulated with the line above the knee moved down by a known latency give that shift back, and it
    is charged: every size's jobs below the line's price."""
    from autotuner.frameworks.horovod.fit.store import load_env
    from autotuner.frameworks.horovod.fit.phase_small import mid_response

    cost = load_env(MODELS, "fresh-poll-2x1-2gbit").cost
    assert cost.inter.large_from_bytes == 512 * 1024
    for shift in (-1.2, -0.4):
        out = mid_response([_mid_record(cost, shift, k) for k in range(3)], cost, 2)
        assert out["shift_ms"] == pytest.approx(shift, abs=1e-6) and out["charged"], out
        assert [r[0] for r in out["sizes"]] == [1048576, 2359296, 4194304] and out["jobs"] == 3
    # a wall clock above the line is resolved just as well, and recorded, not charged (only the timeline writer's
    # cost is taken out of a line fitted on timeline spans; research/notes/accuracy.md)
    out = mid_response([_mid_record(cost, 0.6, k) for k in range(3)], cost, 2)
    assert out["shift_ms"] == pytest.approx(0.6, abs=1e-6) and not out["charged"] and "above the line" in out["note"]


def test_the_mid_size_phase_charges_nothing_inside_its_own_scatter_or_on_too_few_jobs():
    from dataclasses import replace as _replace

    from autotuner.frameworks.horovod.fit.store import load_env
    from autotuner.frameworks.horovod.fit.phase_small import mid_response

    cost = load_env(MODELS, "fresh-poll-2x1-2gbit").cost
    # jobs at -0.5, +0.1 and +1.5 ms around a shift of +0.3: the simulated price sits inside their range
    recs = [_mid_record(cost, 0.3, k, jitter_ms=j) for k, j in enumerate((-0.8, -0.2, 1.2))]
    out = mid_response(recs, cost, 2)
    assert not out["charged"] and out["shift_ms"] == pytest.approx(0.1, abs=1e-6) and "scatter" in out["note"]
    out = mid_response([_mid_record(cost, 1.0, k) for k in range(2)], cost, 2)
    assert not out["charged"] and "fewer than 3" in out["note"]
    assert mid_response([], cost, 2)["note"].startswith("no mid-size burst phase")
    one_line = _replace(cost, inter=_replace(cost.inter, large_from_bytes=None))
    assert "one line" in mid_response([_mid_record(cost, 1.0, k) for k in range(3)], one_line, 2)["note"]
    tl = [{**_mid_record(cost, 1.0, k), "timeline_recorded": True} for k in range(3)]
    assert mid_response(tl, cost, 2)["jobs"] == 0  # jobs with the timeline are another job: never read


def test_the_committed_mid_size_phases_move_the_line_only_where_their_jobs_resolve_it():
    """The committed mid-size records (measure's mid-size burst phase, or the same probe's rounds with and without
    the timeline; research/notes/accuracy.md, "Mid-size responses back to back"): the shipped models move the line
    down on fresh-poll-2x1-3gbit (0.8-1.6 ms per queued response of 1 MiB and more) and on the held-out
    fresh-poll-2x1-4gbit and fresh-poll-2x1-3.5gbit (1.0-1.8 ms at 4 MiB), on fresh-poll-1.75gbit and -2.5gbit (0.1-0.6
    ms; measured for the fused phase's rule), and nowhere else: fresh-poll-2gbit's wall clock sits 0.2-0.8 ms above
    its line at every size, recorded, not charged; fresh-2x1-5gbit's differences grow with the size inside a 2-3x
    scatter of its jobs. After the shift the simulator prices the queued responses of the charged envs within 0.6 ms
    of the no-timeline wall clock at every size at or above the knee."""
    from autotuner.frameworks.horovod.measure import MID_COUNTS, MID_RECORDS, MID_SIZES
    from autotuner.frameworks.horovod.readers.sweep import parse_burst_records

    envs = sorted(p.parent.name for p in RUNS.glob(f"*/{MID_RECORDS}"))
    assert set(FRESH) | {"local-gloo-1gbit-sweep"} <= set(envs), envs
    charged, records = {}, {}
    for e in envs:
        recs, problems = parse_burst_records((RUNS / e / MID_RECORDS).read_text(), MID_RECORDS)
        assert not problems and sum(not r.get("timeline_recorded") for r in recs) >= 3, (e, problems)
        assert all(r["sizes"] == list(MID_SIZES) and r["counts"] == list(MID_COUNTS) for r in recs)
        records[e] = recs
        mid = json.loads((MODELS / f"{e}.json").read_text())["fit"]["small_responses"]["mid"]
        if mid["charged"]:
            charged[e] = mid["shift_ms"]
    assert set(charged) == {"fresh-poll-2x1-3gbit", "fresh-poll-2x1-4gbit", "fresh-poll-2x1-3.5gbit",
                            "fresh-poll-1.75gbit", "fresh-poll-2.5gbit", "fresh-poll-1.5gbit",
                            "fresh-poll-2x1-2.5gbit"}, charged
    # the held-out two-host env (2.5 Gbit/s, knee at 0.25 MiB): as its two-host siblings
    assert -2.0 <= charged["fresh-poll-2x1-2.5gbit"] <= -1.6, charged
    assert -1.6 <= charged["fresh-poll-2x1-3gbit"] <= -0.8, charged
    # the two envs measured for the fused phase's rule (one host, 1.75 and 2.5 Gbit/s, knees at 0.25 and 0.5 MiB)
    assert -0.6 <= charged["fresh-poll-1.75gbit"] <= -0.1 and -0.6 <= charged["fresh-poll-2.5gbit"] <= -0.1, charged
    # and one of the below-knee bound's held-out envs (one host, 1.5 Gbit/s, knee at 0.25 MiB)
    assert -0.6 <= charged["fresh-poll-1.5gbit"] <= -0.1, charged
    # the held-out envs, each from its 4 MiB jobs alone (the knee at 4 MiB)
    assert -1.8 <= charged["fresh-poll-2x1-4gbit"] <= -1.2 and -1.8 <= charged["fresh-poll-2x1-3.5gbit"] <= -1.0, charged
    two = json.loads((MODELS / "fresh-poll-2gbit.json").read_text())["fit"]["small_responses"]["mid"]
    assert 0.2 <= two["shift_ms"] <= 0.8 and not two["charged"] and "above the line" in two["note"], two
    five = json.loads((MODELS / "fresh-2x1-5gbit.json").read_text())["fit"]["small_responses"]["mid"]
    assert five["shift_ms"] > 5.0 and "scatter" in five["note"], five
    # fit's output says which: the moved line, or the shift recorded and why not
    three = fit_regime_lines(json.loads((MODELS / "fresh-poll-2x1-3gbit.json").read_text()))
    assert any(ln.startswith("  large responses queued back to back: -1.") and "becomes" in ln for ln in three), three
    lines = fit_regime_lines(json.loads((MODELS / "fresh-2x1-5gbit.json").read_text()))
    assert any("mid-size burst phase (recorded, not charged): +" in ln and "scatter" in ln for ln in lines), lines
    # the charged envs' shipped cost models (the line above the knee shifted), against the same jobs without the
    # timeline: mid_response's rows at every size at or above the knee, [bytes, jobs, min, median, max, simulated]
    from autotuner.frameworks.horovod.fit.store import load_env
    from autotuner.frameworks.horovod.fit.phase_small import mid_response

    for e in sorted(charged):
        fenv = load_env(MODELS, e)
        rows = mid_response(records[e], fenv.cost, int(records[e][0]["ranks"]))["sizes"]
        assert rows, e
        for b, _, _, med, _, sim in rows:
            if (e, b) != ("fresh-poll-2x1-2.5gbit", 262144):
                assert abs(med - sim) < 0.6, (e, b, med, sim)
            else:  # its knee is 256 KiB, where one shift for every size misses: 2.91 against 1.82 ms
                assert 1.0 < med - sim < 1.2, (e, b, med, sim)


def _knee_4mib_cost():
    from dataclasses import replace as _replace

    from autotuner.frameworks.horovod.fit.store import load_env

    cost = load_env(MODELS, "fresh-poll-2x1-2gbit").cost
    return _replace(cost, inter=_replace(cost.inter, large_from_bytes=4.0 * (1 << 20)))


def test_the_below_knee_rule_recovers_the_bandwidth_it_was_simulated_with():
    """Wall times simulated with every response below a 4 MiB knee ``k`` ms per MiB off the line give ``k`` back,
    charged in either direction; the bandwidth it sets makes the simulator charge exactly the measured marginals at
    the sizes it read (the simulated marginal is linear in the line's time per byte), and leaves the fixed part."""
    from dataclasses import replace as _replace

    from autotuner.frameworks.horovod.fit.phase_small import _burst_marginal_sim_s, mid_bandwidth

    cost = _knee_4mib_cost()
    for k in (-0.45, 0.3):
        recs = [_mid_record(cost, 0.0, j, below_ms_per_mib=k) for j in range(3)]
        out = mid_bandwidth(recs, cost, 2)
        assert out["charged"] and out["k_ms_per_mib"] == pytest.approx(k, abs=1e-6), out
        assert [r[0] for r in out["sizes"]] == [1048576, 2359296] and out["jobs"] == 3
        moved = _replace(cost, inter=_replace(cost.inter, bandwidth_Bps=out["bandwidth_gbps"][1] / 8e-9))
        for b, _, _, med, _, _ in out["sizes"]:
            assert _burst_marginal_sim_s(moved, b, 8, 2) * 1e3 == pytest.approx(med, abs=1e-6)
        assert moved.inter.alpha_s == cost.inter.alpha_s
        assert (out["bandwidth_gbps"][1] > out["bandwidth_gbps"][0]) == (k < 0)


def test_the_below_knee_rule_charges_nothing_a_bandwidth_does_not_explain():
    """A difference that does not grow with the size (a fixed part), jobs on both sides, too few jobs or sizes, no knee, jobs with the
    timeline: recorded with the reason, the line stands."""
    from dataclasses import replace as _replace

    from autotuner.frameworks.horovod.fit.phase_small import mid_bandwidth

    cost = _knee_4mib_cost()
    # -0.55 ms at 1 MiB, -0.49 ms at 2.25 MiB: below the line at both, shrinking with the size
    flat = mid_bandwidth([_mid_record(cost, 0.0, j, below_fixed_ms=-0.6, below_ms_per_mib=0.05) for j in range(3)],
                         cost, 2)
    assert not flat["charged"] and "does not grow" in flat["note"], flat
    spread = [_mid_record(cost, 0.0, j, below_ms_per_mib=-0.3, jitter_ms=x) for j, x in enumerate((-0.5, 0.0, 1.2))]
    out = mid_bandwidth(spread, cost, 2)
    assert not out["charged"] and "scatter" in out["note"], out
    out = mid_bandwidth([_mid_record(cost, 0.0, j, below_ms_per_mib=-0.4) for j in range(2)], cost, 2)
    assert not out["charged"] and "fewer than 3" in out["note"], out
    low_knee = _replace(cost, inter=_replace(cost.inter, large_from_bytes=2.0 * (1 << 20)))
    out = mid_bandwidth([_mid_record(low_knee, 0.0, j, below_ms_per_mib=-0.4) for j in range(3)], low_knee, 2)
    assert not out["charged"] and "1 record size(s)" in out["note"] and out["k_ms_per_mib"] is None, out
    one_line = _replace(cost, inter=_replace(cost.inter, large_from_bytes=None))
    out = mid_bandwidth([_mid_record(one_line, 0.0, j, below_ms_per_mib=-0.4) for j in range(3)], one_line, 2)
    assert not out["charged"] and "one line" in out["note"], out
    tl = [{**_mid_record(cost, 0.0, j, below_ms_per_mib=-0.4), "timeline_recorded": True} for j in range(3)]
    assert mid_bandwidth(tl, cost, 2)["jobs"] == 0
    # the rule needs the time per byte to stay positive
    out = mid_bandwidth([_mid_record(cost, 0.0, j, below_ms_per_mib=-50.0) for j in range(3)], cost, 2)
    assert not out["charged"] and "no time per byte" in out["note"], out


def test_the_committed_mid_size_phases_move_the_bandwidth_below_the_knee_only_where_they_resolve_it():
    """The below-knee rule on the committed records (research/notes/accuracy.md, "Mid-size responses below the knee"): charged
    on the two envs it was written from (fresh-poll-2x1-4gbit, -3.5gbit) and on the env measured after it was
    committed to judge it (fresh-poll-2x1-4.5gbit, knee 16 MiB: 1, 2.25 and 4 MiB read), nowhere else; the moved line
    prices those sizes' queued responses within 0.35 ms of the wall clock (the least-squares residuals), the step
    phase was solved again on it, and fit's output says which."""
    from autotuner.frameworks.horovod.fit.phase_small import MID_RECORDS, _burst_marginal_sim_s
    from autotuner.frameworks.horovod.fit.store import load_env

    charged = {}
    for e in sorted(p.parent.name for p in RUNS.glob(f"*/{MID_RECORDS}")):
        low = json.loads((MODELS / f"{e}.json").read_text())["fit"]["small_responses"]["mid"]["below"]
        if low["charged"]:
            charged[e] = low
        else:
            assert low.get("note"), (e, low)
    # and, since the below-knee bound's second form, on two one-host envs with a 16 MiB knee whose sweep put the line
    # below it 1-4 % cheaper per byte than the segment from it: the bound took that, and the phase's 1-4 MiB records
    # queued back to back give it back (within 3 %: an independent reading of the same slope)
    back = {"fresh-poll-1.1gbit", "local-gloo-1gbit-sweep"}
    assert set(charged) == {"fresh-poll-2x1-4gbit", "fresh-poll-2x1-3.5gbit", "fresh-poll-2x1-4.5gbit"} | back, \
        sorted(charged)
    for e in back:
        d = json.loads((MODELS / f"{e}.json").read_text())["fit"]
        fitted = d["piecewise"]["small"]["per_byte_borrowed"]["fitted_busbw_gbps"]
        assert charged.pop(e)["bandwidth_gbps"][1] == pytest.approx(fitted, rel=0.03), e
    for e, low in charged.items():
        assert -0.9 <= low["k_ms_per_mib"] <= -0.3, (e, low)
        b0, b1 = low["bandwidth_gbps"]
        assert b1 > b0 and load_env(MODELS, e).cost.inter.bandwidth_Bps * 8e-9 == pytest.approx(b1, rel=1e-9)
        lo, hi = low["step_fixed_ms"]
        assert 0 < hi - lo < 0.1, (e, low["step_fixed_ms"])  # the 256 KiB gradients a little cheaper: a little more fixed
        cost = load_env(MODELS, e).cost
        for b, _, _, med, _, _ in low["sizes"]:
            assert abs(_burst_marginal_sim_s(cost, b, 8, 2) * 1e3 - med) < 0.35, (e, b)
    # the held-out env: its line below the knee lands at its link's own TCP rate (3.59 Gbit/s measured host to host
    # when measure built the testbed, env.toml; 3.63 when validate did), from the sweep's 2.76
    assert charged["fresh-poll-2x1-4.5gbit"]["bandwidth_gbps"][1] == pytest.approx(3.62, abs=0.05)
    lines = fit_regime_lines(json.loads((MODELS / "fresh-poll-2x1-4.5gbit.json").read_text()))
    assert any(ln.startswith("  mid-size responses (< 16 MiB) queued back to back: -0.7") and "2.76 -> 3.62 Gbit/s" in ln
               for ln in lines), lines
    assert any(ln.startswith("  per byte (< 16 MiB): 2.31 ms/MiB, the mid-size burst phase's") for ln in lines), lines
    three = fit_regime_lines(json.loads((MODELS / "fresh-0.5gbit.json").read_text()))
    # (since the below-knee bound's second form its 1-4 MiB records lie on one side of the bounded line, by a difference
    # that does not grow with the size: still recorded, not charged)
    assert any("mid-size responses (< 16 MiB) (recorded, not charged)" in ln and "the line stands" in ln
               for ln in three), three


def test_a_below_knee_slope_cheaper_than_the_segment_from_the_knee_borrows_it():
    """sweep.bound_below_knee: below the knee no cheaper per byte than the segment from it. A busbw above the link's
    line rate is the spans' scatter; one under the link but above the segment's is lone allreduces after an idle link.
    Either way the line below the knee takes the segment's per-byte cost (its fixed part kept), and says why; a slope
    no cheaper than the segment's, or a tier without a knee, stands."""
    from autotuner.frameworks.horovod.fit.phase_fused import bound_below_knee
    from autotuner.model.costmodel import GBIT

    tier = Tier(alpha_s=0.2e-3, bandwidth_Bps=5e4 * GBIT, large_from_bytes=262144.0, large_alpha_s=0.15e-3,
                large_bandwidth_Bps=1.3 * GBIT)
    info = {"small": {"a_ms": 0.35}}
    got = bound_below_knee(tier, 2.75, info)
    assert got.bandwidth_Bps == tier.large_bandwidth_Bps and got.alpha_s == tier.alpha_s
    assert info["small"]["per_byte_borrowed"] == {"fitted_busbw_gbps": pytest.approx(5e4), "link_gbps": 2.75,
                                                  "busbw_gbps": pytest.approx(1.3), "why": "above the link"}
    under = replace(tier, bandwidth_Bps=2.0 * GBIT)  # under the 2.75 Gbit/s link, above the segment's 1.3
    info2 = {"small": {}}
    got2 = bound_below_knee(under, 2.75, info2)
    assert got2.bandwidth_Bps == tier.large_bandwidth_Bps and got2.alpha_s == tier.alpha_s
    assert info2["small"]["per_byte_borrowed"]["why"] == "cheaper than the segment from the knee"
    slow = replace(tier, bandwidth_Bps=1.0 * GBIT)  # dearer per byte than the segment: a measurement, kept
    info3 = {"small": {}}
    assert bound_below_knee(slow, 2.75, info3) is slow and info3 == {"small": {}}
    one_line = Tier(alpha_s=0.2e-3, bandwidth_Bps=5e4 * GBIT)
    assert bound_below_knee(one_line, 2.75, None) is one_line


def test_the_shipped_sweep_models_charge_no_cheaper_bytes_below_the_knee_than_from_it():
    """Every shipped sweep env's line below the knee carries at most its link's rate and at most the rate of the segment
    from its knee; where the sweep put it above (three above the link, fresh-poll-2gbit 610132, fresh-poll-2.75gbit
    51897, local-gloo-2x2-poll 88 Gbit/s; ten more above the segment, fresh-poll-3gbit 2.74 against 1.41) it borrows
    the segment from the knee, and `fit` says so."""
    borrowed, above = set(), set()
    for f in sorted(MODELS.glob("*.json")):
        d = json.loads(f.read_text())
        toml_path = RUNS / f.stem / "env.toml"
        if (d.get("fit") or {}).get("form", "").find("sweep") < 0 or not toml_path.exists():
            continue
        import tomllib

        link = tomllib.loads(toml_path.read_text())["link_gbps"]
        inter = d["cost_model"]["inter"]
        assert inter["bandwidth_gbps"] <= link * (1 + 1e-9), (f.stem, inter["bandwidth_gbps"], link)
        small = ((d["fit"].get("piecewise") or {}).get("small") or {})
        moved = (((d["fit"].get("small_responses") or {}).get("mid") or {}).get("below") or {}).get("charged")
        if inter.get("large_from_bytes") and not moved:
            assert inter["bandwidth_gbps"] <= inter["large_bandwidth_gbps"] * (1 + 1e-9), f.stem
        if "per_byte_borrowed" in small:
            b = small["per_byte_borrowed"]
            borrowed.add(f.stem)
            if b["why"] == "above the link":
                above.add(f.stem)
            assert b["fitted_busbw_gbps"] > b["busbw_gbps"]
            assert (b["fitted_busbw_gbps"] > link) == (b["why"] == "above the link"), f.stem
            assert any("borrowed from the segment from the knee" in ln for ln in fit_regime_lines(d)) or moved, f.stem
    assert above == {"fresh-poll-2gbit", "fresh-poll-2.75gbit", "local-gloo-2x2-poll", "fresh-poll-1.5gbit",
                     "fresh-poll-2.2gbit"}
    assert borrowed == above | {"fresh-0.5gbit", "fresh-1.5gbit", "fresh-3gbit", "fresh-poll-0.75gbit",
                                "fresh-poll-1.1gbit", "fresh-poll-1.25gbit", "fresh-poll-1.75gbit",
                                "fresh-poll-2.5gbit", "fresh-poll-3gbit", "local-gloo-1gbit-sweep",
                                # the bound's held-out envs: 1.5gbit's slope above its link, 3.5gbit's under
                                # it and above its segment's
                                "fresh-poll-1.5gbit", "fresh-poll-3.5gbit", "fresh-poll-4gbit", "fresh-poll-2.2gbit"}


# --- the small-response price the phases leave open (recorded, not charged; research/notes/accuracy.md) ------------------

@pytest.mark.parametrize("env", FRESH)
def test_the_price_left_open_spans_the_burst_and_the_step_phase(env):
    """Every fresh env has both phases on its own ranks: the model records the tier's alpha at either price, low to
    high, and the charged alpha is the step phase's end (nothing else moved by the range)."""
    d = json.loads((MODELS / f"{env}.json").read_text())
    small, cm, p = d["fit"]["small_responses"], d["cost_model"], d["fit"]["p"]
    want = sorted((small["step"]["fixed_ms"], small["burst"]["fixed_ms"]))
    assert small["range"]["ms"] == pytest.approx(want, rel=1e-9)
    lo, hi = cm["small_alpha_range_us"]
    assert [lo, hi] == pytest.approx([w * 1e3 / (2 * (p - 1)) for w in want], rel=1e-9)
    assert cm["inter"]["alpha_us"] == pytest.approx(small["step"]["alpha_us"], rel=1e-12)
    assert lo <= cm["inter"]["alpha_us"] * (1 + 1e-12) and cm["inter"]["alpha_us"] <= hi * (1 + 1e-12)
    assert any("small-response price left open" in line for line in fit_regime_lines(d))


def test_no_range_without_both_phases():
    from autotuner.frameworks.horovod.fit.phase_step import small_price_range

    both = small_price_range({"fixed_ms": 1.4, "charged": True}, {"fixed_ms": 0.8}, 2)
    assert both["ms"] == [0.8, 1.4] and both["alpha_us"] == pytest.approx([400.0, 700.0])
    assert small_price_range({"fixed_ms": 1.4, "charged": False}, {"fixed_ms": 0.8}, 2)["ms"] is None
    assert "burst" in small_price_range({"fixed_ms": 1.4, "charged": True}, {"fixed_ms": None}, 2)["note"]
    for env in ("local-gloo-2x2", "local-gloo-2x2-poll"):  # the step phase ran 2 of 4 ranks: not charged, no range
        d = json.loads((MODELS / f"{env}.json").read_text())
        assert "small_alpha_range_us" not in d["cost_model"] and d["fit"]["small_responses"]["range"]["ms"] is None


def test_simulate_gives_the_step_at_both_ends_of_the_price():
    """fresh-poll-2x1-4.5gbit's vit_s16 fusion off (300 ms of compute, as replayed): the step phase's price is the
    charged prediction and the high end; the burst phase's gives the low end. The committed replays of three
    sittings (444.4-505.5 ms medians, research/notes/accuracy.md) lie between them; the defaults barely move."""
    import autotuner

    fo = autotuner.simulate("vit_s16", "fresh-poll-2x1-4.5gbit", config={"fusion_threshold_mb": 0}, compute_ms=300)
    lo, hi = fo.step_time_range_ms
    assert hi == pytest.approx(fo.step_time_ms, rel=1e-12) and lo < 0.9 * hi
    assert fo.small_price_range_ms == pytest.approx((0.7716, 1.4645), abs=1e-3)
    assert lo < 444.4 and 505.5 < hi
    d = autotuner.simulate("vit_s16", "fresh-poll-2x1-4.5gbit", compute_ms=300)
    assert d.step_time_range_ms[1] - d.step_time_range_ms[0] < 0.05 * d.step_time_ms
    j = fo.to_dict()
    assert j["step_time_range_ms"] == [lo, hi] and len(j["small_price_range_ms"]) == 2
    assert autotuner.simulate("vgg16").step_time_range_ms is None  # a lab report's env: one price, no range


def test_a_cost_model_refuses_a_negative_latency():
    from autotuner.errors import CostModelError
    from autotuner.model.costmodel import CostModel

    cm = CostModel(inter=Tier(alpha_s=1e-4, bandwidth_Bps=1e9))
    assert cm.at_small_alpha(2e-4).inter.alpha_s == 2e-4 and cm.at_small_alpha(2e-4).inter.bandwidth_Bps == 1e9
    with pytest.raises(CostModelError):
        cm.at_small_alpha(-1e-6)
    with pytest.raises(CostModelError):
        cm.at_small_alpha(float("nan"))


def test_a_model_file_whose_range_is_upside_down_is_one_line_and_exit_2(tmp_path):
    from tests.cli_helpers import assert_one_line_error, run

    d = json.loads((MODELS / "fresh-poll-3gbit.json").read_text())
    d["cost_model"]["small_alpha_range_us"] = d["cost_model"]["small_alpha_range_us"][::-1]
    (tmp_path / "fresh-poll-3gbit.json").write_text(json.dumps(d))
    p = run("simulate", "--model", "mobilenet_v2", "--env", "fresh-poll-3gbit", "--compute-ms", "60",
            "--model-dir", str(tmp_path))
    assert_one_line_error(p, "small_alpha_range_us")


def test_the_accuracy_table_gives_each_replay_the_step_at_both_ends():
    """``autotuner accuracy``: a replay on an env with the range carries ``predicted_range`` (the charged prediction
    at the step phase's end), the table shows it under the prediction where it moves it by more than 2 %, and an env
    without the range (a lab report's) has none."""
    import autotuner
    from tests.cli_helpers import run

    cs = autotuner.accuracy_table(env="fresh-poll-2x1-4.5gbit")["cases"]
    fo = [c for c in cs if c["quantity"].startswith("vit_s16 proposal-1 (0 MiB, 1 ms) on 2x1")]
    assert len(fo) == 3
    for c in fo:
        lo, hi = c["predicted_range"]
        assert hi == pytest.approx(c["predicted"], rel=1e-12) and lo < 0.85 * hi
    assert all("predicted_range" not in c for c in autotuner.accuracy_table(env="v100-16gbit")["cases"])
    p = run("accuracy", "--env", "fresh-poll-2x1-4.5gbit", env={**__import__("os").environ, "COLUMNS": "80"})
    assert p.returncode == 0 and "443-543" in p.stdout and "prediction(s) with a second line" in p.stdout


def test_suggest_notes_the_rows_the_price_left_open_moves_past_the_band():
    """``suggest`` with fusion kept off on fresh-poll-2x1-4.5gbit: every row is in the small-response regime and the
    range moves it by ~20 %, past the env's band, so a note names each row's step at either end; with the knobs
    free the proposals (fused) move by less than the band and no such note is written."""
    import autotuner

    r = autotuner.suggest("vit_s16", "fresh-poll-2x1-4.5gbit", fixed={"fusion_threshold_mb": 0}, compute_ms=300)
    notes = [n for n in r.notes if n.startswith("small responses:")]
    assert len(notes) == 1 and "0.77-1.46 ms" in notes[0] and "the reference row is 442.7-543.4 ms" in notes[0], notes
    r = autotuner.suggest("vit_s16", "fresh-poll-2x1-4.5gbit", compute_ms=300)
    assert not [n for n in r.notes if n.startswith("small responses:")], r.notes
