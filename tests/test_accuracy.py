"""The shipped autotuner/models against the committed runs/ (fails if either drifts)."""
import functools
from pathlib import Path

import pytest

from autotuner.frameworks.horovod.views.accuracy import cases

ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def every_case() -> dict:
    """Every committed measurement beside its shipped model's prediction, keyed ``(env, what)``: computed on first
    use, not as pytest collects this file (10-20 s in each xdist worker on the CI machines)."""
    return {(c.env, c.what): c for c in cases(ROOT / "runs", ROOT / "autotuner" / "models")}


@pytest.mark.parametrize("what", [
    "resnet50 fusion 64 MB: step time (ms)",   # calibrated (compute time) on this one
    "resnet50 fusion 0 MB: step time (ms)",    # predicted: fusion off comes from cost model + simulator
    "vgg16 fusion 64 MB: step time (ms)",
    "vgg16 fusion 0 MB: step time (ms)",
])
def test_report000_step_times_within_5pct(what):
    c = every_case()[("v100-16gbit", what)]
    assert abs(c.error_pct) <= 5.0, c


@pytest.mark.parametrize("what", [
    "resnet50 fusion 0 MB: responses per step",
    "vgg16 fusion 0 MB: responses per step",
    "vgg16 fusion 64 MB: responses per step",
    "resnet50 fusion 64 MB: responses per step",  # 4.28 measured: needs host-side hand-over + async NCCL
])
def test_report000_responses_per_step_within_15pct(what):
    c = every_case()[("v100-16gbit", what)]
    assert abs(c.error_pct) <= 15.0, c


def test_report000_fusion_off_histograms_match_exactly():
    # with fusion off every tensor is its own response: the layout must match bucket by bucket
    for (env, what), c in every_case().items():
        if env == "v100-16gbit" and "fusion 0 MB: responses per step in" in what:
            assert abs(c.predicted - c.measured) <= 0.05, c


def test_fusion_off_costs_more_than_on_for_both_models():
    for m in ("resnet50", "vgg16"):
        on = every_case()[("v100-16gbit", f"{m} fusion 64 MB: step time (ms)")].predicted
        off = every_case()[("v100-16gbit", f"{m} fusion 0 MB: step time (ms)")].predicted
        assert off > on


@pytest.mark.parametrize("what", ["resnet50 4x1: step time (ms)", "vgg16 4x1: step time (ms)"])
def test_report001_4x1_within_7pct(what):
    # drift guard; the 5% target is below, as a strict xfail
    c = every_case()[("v100-5gbit", what)]
    assert abs(c.error_pct) <= 7.0, c


@pytest.mark.xfail(strict=True, raises=AssertionError, reason="not reachable with one shared link rate: the report's own NIC "
                   "counters and host phase times bound the best shared fit at +-5.6% (research/notes/accuracy.md)")
def test_report001_4x1_within_5pct():
    for m in ("resnet50", "vgg16"):
        c = every_case()[("v100-5gbit", f"{m} 4x1: step time (ms)")]
        assert abs(c.error_pct) <= 5.0, c


def _holdout_step_cases():
    return [c for c in every_case().values() if c.env == "local-gloo-1gbit" and not c.calibrated
            and c.what.endswith("step time (ms)") and "holdout-sweep" in c.source]


def test_local_testbed_holdout_configs_within_5pct():
    """Real 2-rank Gloo runs at 1 Gbit/s (runs/local-gloo-1gbit), 7 configurations the fit never saw, spanning the
    knobs: every one within 5 % of its measured step. The bound is the data's: the worst is fusion off at +4.0 %,
    whose two trials themselves differ by 11 % (2311.6 and 2061.4 ms); the six others are within 1.2 %."""
    held = _holdout_step_cases()
    assert len(held) == 7 and all(abs(c.error_pct) <= 5 for c in held), [(c.what, round(c.error_pct, 1)) for c in held]
    cfgs = [c.what.split("(")[1].split(")")[0] for c in held]  # "16 MiB, 10 ms"
    mib = [float(x.split(" MiB")[0]) for x in cfgs]
    ms = [float(x.split(", ")[1].split(" ms")[0]) for x in cfgs]
    assert min(mib) == 0 and max(mib) == 128 and min(ms) == 1 and max(ms) == 50


def test_local_testbed_response_counts_follow_the_fusion_threshold():
    rps = [c for c in every_case().values() if c.env == "local-gloo-1gbit" and c.what.endswith("responses per step")
           and "holdout-sweep" in c.source]
    assert rps and all(abs(c.predicted - c.measured) <= max(1.0, 0.15 * c.measured) for c in rps), \
        [(c.what, c.measured, c.predicted) for c in rps]


def test_accuracy_command_per_env_with_what_the_fit_used():
    """`autotuner accuracy --env E --json`: the env's rows only, each saying whether the fit used it;
    the summary's held-out MAPE is the mean of the held-out step-time errors."""
    import json

    from tests.cli_helpers import assert_one_line_error, run

    p = run("accuracy", "--env", "local-gloo-1gbit", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["cases"] and {c["env"] for c in d["cases"]} == {"local-gloo-1gbit"}
    held = [abs(c["error_percent"]) for c in d["cases"]
            if c["quantity"].endswith("step time (ms)") and not c["used_by_fit"]]
    used = [c for c in d["cases"] if c["used_by_fit"]]
    assert held and used and all("fit-sweep" in c["source"] for c in used)
    (s,) = d["summary"]
    assert s["held_out"] == len(held) and abs(s["held_out_mape_percent"] - sum(held) / len(held)) < 1e-9
    assert_one_line_error(run("accuracy", "--env", "nope"), "no such environment")


def test_accuracy_reads_trials_that_name_their_layout_by_an_absolute_path(tmp_path):
    """``validate --model /abs/path/layout.json`` records that path in ``setup.model``, and ``accuracy`` reads
    it (never "setup.model: must be a relative path inside the environment's folder"). Whatever ``validate`` records, ``accuracy`` reads: the same trials predicted as with the shipped layout's
    name; a recorded file that is gone: one line, exit 2."""
    import json
    import shutil

    from autotuner.frameworks.horovod.environments import accuracy_table
    from tests.cli_helpers import assert_one_line_error, run

    env, models = "fresh-3gbit", ROOT / "autotuner" / "models"
    runs = tmp_path / "runs"
    shutil.copytree(ROOT / "runs" / env, runs / env, ignore=shutil.ignore_patterns("*timelines*", "*.png"))
    layout = tmp_path / "elsewhere" / "my_layout.json"
    layout.parent.mkdir()
    shutil.copy(ROOT / "autotuner" / "layouts" / "vit_s16.json", layout)
    for f in (runs / env / "validation").glob("*.jsonl"):
        recs = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
        assert {r["setup"]["model"] for r in recs} == {"vit_s16"}
        for r in recs:
            r["setup"]["model"] = str(layout)
        f.write_text("".join(json.dumps(r) + "\n" for r in recs))
    shipped = accuracy_table(ROOT / "runs", models, env)["cases"]
    moved = accuracy_table(runs, models, env)["cases"]
    assert len(moved) == len(shipped) > 4 and all(str(layout) in c["quantity"] for c in moved)
    for a, b in zip(shipped, moved):
        assert a["quantity"].replace("vit_s16", str(layout)) == b["quantity"]
        assert b["predicted"] == pytest.approx(a["predicted"], rel=1e-9)  # the same layout, read from elsewhere
    p = run("accuracy", "--env", env, "--runs-dir", str(runs), "--model-dir", str(models))
    assert p.returncode == 0 and str(layout) in p.stdout, p.stderr
    layout.unlink()
    p = run("accuracy", "--env", env, "--runs-dir", str(runs), "--model-dir", str(models))
    assert_one_line_error(p, f"{str(layout)!r}: no such layout file")


def test_trials_that_ran_the_timeline_are_their_own_rows_and_say_so():
    """Like with like: a trial that ran Horovod's timeline is never pooled with one that did not,
    and its row says "timeline ran" (the prediction is for the production job, without the writer). On
    fresh-poll-2gbit the same configurations were replayed with the timeline (fresh-vit_s16.jsonl) and
    without (fresh-vit_s16-nt.jsonl)."""
    rows = [c for (env, what), c in every_case().items() if env == "fresh-poll-2gbit" and "vit_s16 default" in what
            and what.endswith("step time (ms)")]
    with_tl = [c for c in rows if "timeline ran" in c.what]
    without = [c for c in rows if "timeline ran" not in c.what]
    assert with_tl and without
    assert all("fresh-vit_s16.jsonl" in c.source for c in with_tl)
    assert all("fresh-vit_s16-nt.jsonl" in c.source for c in without)


def test_the_summary_sets_the_production_jobs_rows_apart():
    """Each env's summary counts its held-out rows that ran the timeline and gives the mean and worst of the rest
    (the production job, as predicted) on their own; `autotuner accuracy` prints both."""
    from autotuner.frameworks.horovod.views.accuracy import TIMELINE_RAN, summary

    cs = [c for (env, _), c in every_case().items() if env == "fresh-3gbit"]
    s = summary(cs)[0]
    held = [c for c in cs if not c.calibrated and c.what.endswith("step time (ms)")]
    prod = [c for c in held if TIMELINE_RAN not in c.what]
    assert s["held_out_other_job"] == len(held) - len(prod) > 0 and s["held_out_as_predicted"] == len(prod) > 0
    assert s["as_predicted_mape_percent"] == pytest.approx(sum(abs(c.error_pct) for c in prod) / len(prod))
    assert TIMELINE_RAN not in s["as_predicted_worst"]["quantity"]


def test_the_trust_block_judges_the_production_job_alone():
    """Like with like in ``fit``'s trust block, which sets the error band ``suggest`` holds a gain
    against and the trust line every prediction prints: on fresh-3gbit, replayed with and without Horovod's
    timeline, the block's configurations, mean and worst error are those of the held-out rows that ran the
    predicted job (no timeline), and the rows that ran another job are counted, not pooled. The shipped model's
    block is what a refit gives (relative 1e-6: a refit's floats move in their 8th digit between machines)."""
    import json
    import numpy as np
    from autotuner.frameworks.horovod.views.accuracy import OTHER_JOB, trust_of

    t = trust_of(ROOT / "runs", ROOT / "autotuner" / "models", "fresh-3gbit")
    held = [c for c in cases(ROOT / "runs", ROOT / "autotuner" / "models", "fresh-3gbit")  # no other shape there
            if not c.calibrated and c.what.endswith("step time (ms)")]
    prod = [c for c in held if not any(x in c.what for x in OTHER_JOB)]
    assert 0 < len(prod) < len(held)
    assert t["configurations"] == len(prod) and t["other_job_configurations"] == len(held) - len(prod)
    assert "only_other_job" not in t and t["other_jobs"] == ["timeline ran"]
    assert t["mean_error_pct"] == pytest.approx(float(np.mean([abs(c.error_pct) for c in prod])), rel=1e-9)
    worst = max(prod, key=lambda c: abs(c.error_pct))
    assert t["worst_pct"] == pytest.approx(worst.error_pct, rel=1e-9)
    shipped = json.loads((ROOT / "autotuner" / "models" / "fresh-3gbit.json").read_text())["trust"]
    assert shipped.keys() == t.keys()
    assert shipped == {k: v if isinstance(v, list) else pytest.approx(v, rel=1e-6) for k, v in t.items()}


def test_an_env_checked_only_against_another_job_says_so():
    """Where every held-out row ran another job than predicted (an env replayed only with the timeline), the trust
    block keeps those rows' figures, marks them ``only_other_job``, and the trust line says so."""
    from autotuner.frameworks.horovod.environments import error_band
    from autotuner.frameworks.horovod.fit.store import load_env
    from autotuner.frameworks.horovod.views.accuracy import OTHER_JOB, trust_of

    models = ROOT / "autotuner" / "models"
    only = []
    every = cases(ROOT / "runs", models)
    for env in sorted({c.env for c in every}):
        held = [c for c in every if c.env == env and not c.calibrated and c.what.endswith("step time (ms)")]
        if held and all(any(x in c.what for x in OTHER_JOB) for c in held):
            only.append(env)
    assert only, "no env checked only against another job"
    t = trust_of(ROOT / "runs", models, only[0])
    assert t["only_other_job"] is True and t["configurations"] > 0 and "other_job_configurations" not in t
    assert t["other_jobs"] and set(t["other_jobs"]) <= set(OTHER_JOB)
    line = error_band(models, load_env(models, only[0]))["line"]
    assert f"every one ran another job than predicted: {', '.join(t['other_jobs'])}" in line, line


def test_each_case_names_its_file_and_where_in_it():
    """``accuracy_table``'s cases carry their source split as ``file`` and ``where`` (what ``accuracy`` titles a table
    with, and prints in its "from" column): a validation file's trials, a lab report's line or lines."""
    from autotuner.frameworks.horovod.views.accuracy import source_parts

    assert source_parts("e/validation/x-1.jsonl (5 trials)") == ("e/validation/x-1.jsonl", "5 trials")
    assert source_parts("e/validation/x.jsonl (1 trial)") == ("e/validation/x.jsonl", "1 trial")
    assert source_parts("v100-16gbit/report-000.md:39-46") == ("v100-16gbit/report-000.md", "lines 39-46")
    assert source_parts("laptop-cpu/report-003.md:50") == ("laptop-cpu/report-003.md", "line 50")
    assert source_parts("somewhere else") == ("somewhere else", "")
    from autotuner import accuracy_table

    cs = accuracy_table(env="v100-16gbit")["cases"]
    assert {c["file"] for c in cs} >= {"v100-16gbit/report-000.md"}
    import re

    assert all(c["source"].startswith(c["file"]) and re.fullmatch(r"lines? \d+(-\d+)?|\d+ trials?", c["where"])
               for c in cs), cs
