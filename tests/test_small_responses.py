"""Issue 29 part 5: the small-response regime. A step's small responses (fusion off, thresholds of 1 MiB and
below) run back to back in a busy cycle; the fit prices them from the ``measure`` phases that run them that
way (:func:`autotuner.frameworks.horovod.fit.sweep.busy_small_response`), never from the env's validation records
(docs/accuracy.md, "The small-response regime"). No Horovod is run here."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from autotuner.frameworks.horovod.fit.sweep import MIN_SMALL_RESPONSES, SMALL_RESPONSE_BYTES, busy_small_response
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


@pytest.mark.parametrize("env", FRESH)
def test_shipped_fresh_models_price_small_responses_from_the_back_to_back_phases(env):
    """Every fresh env measured both phases; its small-message latency is the phases' fixed cost, not the
    sweep line's intercept (which stays recorded)."""
    d = json.loads((MODELS / f"{env}.json").read_text())
    small, inter = d["fit"]["small_responses"], d["cost_model"]["inter"]
    assert small["charged"] and small["n"] >= 1000 and small["phases"]["trickle_b2b"]["n"] >= 700
    assert 2 * inter["alpha_us"] * 1e-3 == pytest.approx(small["fixed_ms"], rel=1e-9)
    lines = fit_regime_lines(d)
    assert "back-to-back responses in a busy cycle" in lines[0] and "not a step's regime" in lines[-1]


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


#: the rows that missed 10 % before this fit (docs/accuracy.md, "The small-response regime"): -14.5, -10.6, -10.9 %
FIXED = [("fresh-0.5gbit", "fresh-mobilenet_v2.jsonl", "mobilenet_v2 proposal-2 (0 MiB, 1 ms, timeline ran)"),
         ("fresh-3gbit", "fresh-vit_s16.jsonl", "vit_s16 proposal-3 (1 MiB, 1 ms, timeline ran)"),
         ("fresh-poll-0.75gbit", "fresh-mobilenet_v2.jsonl", "mobilenet_v2 proposal-2 (0 MiB, 1 ms, timeline ran)")]


@pytest.mark.parametrize("key", FIXED, ids=[k[0] for k in FIXED])
def test_small_response_rows_that_missed_are_within_10_percent(small_rows, key):
    assert abs(small_rows[key].error_pct) <= 10.0, small_rows[key]


#: the rows no form fitted from the phases passes: fresh-poll-2x1-3gbit's replays with and without Horovod's timeline
#: differ by 20-30 % on these configurations, and every measure phase records a timeline
MISSED = {("fresh-poll-2x1-3gbit", "fresh-vit_s16.jsonl", "vit_s16 proposal-1 (0 MiB, 1 ms, timeline ran) on 2x1"),
          ("fresh-poll-2x1-3gbit", "fresh-vit_s16.jsonl",
           "vit_s16 autotune_best (4 MiB, 5 ms, cache off, timeline ran) on 2x1"),
          ("fresh-poll-2x1-3gbit", "fresh-vit_s16-nt.jsonl", "vit_s16 proposal-2 (1 MiB, 1 ms) on 2x1"),
          # the no-timeline replays of issue 29 (scripts/small_responses_nt.sh): cache off on two emulated hosts,
          # measured 1052.6 ms (1041.1-1130.5) against 901.2 predicted; its defaults spread 834-985 ms
          ("fresh-2x1-5gbit", "small-distilbert-nt.jsonl", "distilbert proposal-3 (128 MiB, 1 ms, cache off) on 2x1"),
          # measured again on 2026-11-27 (scripts/small_responses_rerun.sh, 5 repeats, no timeline): on
          # fresh-poll-2x1-3gbit the defaults +7.5 % and the small responses +16 to +23 %, too slow even against the
          # defaults (fusion off 1.30x the defaults measured, 1.48x predicted); fresh-2x1-5gbit's defaults spread
          # 963-1122 ms (IQR 345 ms) and fusion off lands -12.6 %, below its range
          ("fresh-poll-2x1-3gbit", "small-vit_s16-rerun.jsonl", "vit_s16 proposal-1 (1 MiB, 1 ms) on 2x1"),
          ("fresh-poll-2x1-3gbit", "small-vit_s16-rerun.jsonl", "vit_s16 proposal-2 (0 MiB, 1 ms) on 2x1"),
          ("fresh-poll-2x1-3gbit", "small-vit_s16-rerun.jsonl", "vit_s16 proposal-3 (4 MiB, 5 ms, cache off) on 2x1"),
          ("fresh-2x1-5gbit", "small-distilbert-rerun.jsonl", "distilbert proposal-2 (0 MiB, 1 ms) on 2x1")}


def test_every_small_response_row_within_10_percent_or_its_repeat_range(small_rows):
    """Acceptance: fusion off, <= 1 MiB thresholds and cache off within 10 % or inside their own repeats' range,
    on every committed fresh env, except the named misses (which must still miss: they are stated in the docs)."""
    bad = set()
    for key, c in small_rows.items():
        lo, hi = _repeat_range(key[0], key[1], c.what.split(" ")[1])
        if not (abs(c.error_pct) <= 10.0 or lo <= c.predicted <= hi):
            bad.add(key)
    assert bad == MISSED, sorted(bad ^ MISSED)


# --------------------------------------------------------------------------- the burst phase (no timeline)

def _burst_record(cost, alpha_s: float, repeat: int, p: int = 2, offset_ms: float = 3.0) -> dict:
    """A burst.jsonl record whose wall times are the simulator's for ``alpha_s``, plus a start ``offset_ms``
    that every round pays (the cycle's alignment): what the fit must see through."""
    from dataclasses import replace as _replace

    from autotuner.frameworks.horovod.fit.sweep import _burst_marginal_sim_s

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
    from autotuner.frameworks.horovod.fit.sweep import burst_small_response

    cost = load_env(MODELS, "fresh-3gbit").cost
    for alpha in (0.05e-3, 0.4e-3):
        out = burst_small_response([_burst_record(cost, alpha, k) for k in range(3)], cost, 2)
        assert out["alpha_us"] == pytest.approx(alpha * 1e6, rel=1e-6), out
        assert out["fixed_ms"] == pytest.approx(2 * alpha * 1e3, rel=1e-6) and out["jobs"] == 3
        assert len(out["points"]) == 9 and "without the timeline" in out["regime"]


def test_burst_phase_floor_and_too_few_points():
    from dataclasses import replace as _replace

    from autotuner.frameworks.horovod.fit.store import load_env
    from autotuner.frameworks.horovod.fit.sweep import burst_small_response

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
    from autotuner.readers.sweep import parse_burst_records

    good = {"phase": "burst", "tier": "single", "repeat": 0, "sizes": [4096], "counts": [1, 32], "rounds": 3,
            "wait": "spin", "ranks": 2, "wall_ms": [[4096, 1, [1.0, 1.1]], [4096, 32, [3.0, 3.2]]]}
    bad = {**good, "wall_ms": [[4096, 1, [-1.0]], [4096, 32, [3.0]]]}
    recs, problems = parse_burst_records("\n".join(json.dumps(r) for r in (good, bad)) + "\n", "burst.jsonl")
    assert len(recs) == 1 and len(problems) == 1 and "burst.jsonl" in problems[0]


def test_the_committed_burst_phases_are_recorded_not_charged():
    """Every committed sweep env measured the burst phase (scripts/probe_phase.py, 3 jobs each); the shipped models
    record its price and keep the timelines' back-to-back price as the small-message latency (docs/accuracy.md,
    "The burst phase": the busy regime alone under-prices a step's small responses on the polling envs)."""
    from autotuner.frameworks.horovod.fit.sweep import BURST_RECORDS

    envs = sorted(p.parent.name for p in RUNS.glob("*/sweep.jsonl"))
    assert len(envs) == 12
    for env in envs:
        assert (RUNS / env / BURST_RECORDS).exists(), env
        d = json.loads((MODELS / f"{env}.json").read_text())
        small = d["fit"]["small_responses"]
        b = small["burst"]
        assert b["jobs"] == 3 and len(b["points"]) == 9 and b["charged"] is False, env
        assert 0 <= b["fixed_ms"] < 2.0, env
        if small.get("charged"):  # the charged latency is still the timelines' back-to-back figure
            p = int(d["fit"]["p"])
            assert 2 * (p - 1) * d["cost_model"]["inter"]["alpha_us"] * 1e-3 == pytest.approx(small["fixed_ms"], rel=1e-9)
