"""``autotuner tune``: Bayesian optimisation on real ``horovodrun`` trials, the simulator as its prior.

The decisions are :mod:`autotuner.search.tune` (pure, every framework's) over Horovod's candidates
(:mod:`autotuner.frameworks.horovod.tune_space`); this module runs them: each trial is one real job
(:class:`autotuner.frameworks.horovod.validation.TrialRunner`, the replay workload or the user's command, in the
testbed ``validate`` uses), appended to ``runs/<env>/tune/<name>.jsonl`` as soon as it ends
(:class:`~autotuner.frameworks.horovod.validation.TrialStore`: one fsynced append per trial). A re-run with the same
setup reads the records, rebuilds the same belief and goes on where it stopped; a finished tune prints its
answer again without running anything.

The order of trials and the stop (the simulator's best, then Horovod's defaults, then the incumbent again,
then the expected-improvement argmax, until no candidate's expected improvement beats one trial's noise or
the budget is spent) are one pure function, :func:`autotuner.search.tune.decide`, for every compression set;
this loop only rebuilds the state from the records, calls it, and runs the trial it names.

Record keys: those of a validation record (:func:`~autotuner.frameworks.horovod.validation.make_record`, kind ``tune``,
label the candidate's key, ``predicted_step_time_ms`` the refitted simulator's at launch) plus ``tune``:
``{"candidate", "index", "steps", "bandwidth_scale", "rms_before", "rms_after", "prior_ms",
"prior_unrefit_ms", "ei_ms", "noise_sd", "reason"}`` (the refit in force when the trial was chosen and
why it was chosen).

Horovod's default autotune, for the head-to-head (:func:`run_default_autotune`): the same job with
``--autotune`` and Horovod's own settings (3 warm-up samples, 10 steps per sample, 20 Bayesian samples:
horovod/common/parameter_manager.cc), watched until its log's best-values row appears; the steps and wall
seconds it spent until then are recorded, then the job is stopped.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ...errors import ValidationError
from ...search.tune import TuneState, decide
from .tune_space import (LENGTH_SCALES, Candidate, baseline_index, candidate_grid, features, prior_ms,
                         prior_unchecked)
from .validation import Outcome, TrialSpec, TrialStore, make_record, matching

#: tune's kind in the record file
TUNE_KIND = "tune"


def state_from_records(records: Sequence[dict[str, Any]], cands: list[Candidate], notes: list[str]) -> TuneState:
    """The tune so far from its records (kind ``tune``, any order kept): measured step times per
    candidate, failed candidates, steps and wall seconds spent. A record whose candidate is not in
    ``cands`` (another ``--compression``) still counts its steps and is named in ``notes``."""
    index = {c.key: i for i, c in enumerate(cands)}
    st = TuneState(cands)
    for r in records:
        if r.get("kind") != TUNE_KIND:
            continue
        t = r.get("tune") or {}
        st.records.append(r)
        st.steps += int(t.get("steps") or 0)
        st.wall_s += float(r.get("wall_s") or 0.0)
        i = index.get(str(t.get("candidate")))
        if i is None:
            notes.append(f"{r['trial']}: candidate {t.get('candidate')} is not searched now; its steps count, "
                         "its result is left out")
            continue
        if r.get("status") == "ok" and r.get("measured_step_time_ms"):
            st.measured.setdefault(i, []).append(float(r["measured_step_time_ms"]))
            st.fails_in_a_row = 0
        else:
            st.failed.add(i)
            st.fails_in_a_row += 1
            st.last_error = str(r.get("error") or r.get("status"))
    return st


@dataclass(frozen=True)
class TuneAnswer:
    """Where a tune ended: the incumbent and what was spent."""

    candidate: Candidate | None
    measured_ms: list[float]
    steps: int
    trials: int
    wall_s: float
    stop: str
    refits: list[dict[str, Any]]


def run_tune(setup, sc, store: TrialStore, run_trial: Callable[[TrialSpec], Outcome], *, compressions: Sequence[str],
             budget_steps: int, prior_sd_band: float, noise_fallback: float, testbed_note: str,
             say: Callable[[str], None] = lambda s: None,
             progress: Callable[[int, int, str], None] = lambda steps, budget, inc: None) -> tuple[TuneAnswer, list]:
    """The loop (module docstring). ``sc``: the env's scenario for this model and shape; ``prior_sd_band``: the
    env's error band (fraction); ``noise_fallback``: one trial's relative noise until repeats measure it. Returns the
    answer and every record of this setup (old and new)."""
    if budget_steps < 1:
        raise ValidationError(f"--budget-steps must be >= 1, got {budget_steps}")
    cands = candidate_grid(tuple(compressions))
    def predict(scale: float, idx=None) -> np.ndarray:
        return prior_ms(sc, cands, scale, idx)

    base_prior = predict(1.0)
    unchecked = prior_unchecked(sc, cands, base_prior)
    x, base = features(cands), baseline_index(cands)
    per_trial = setup.steps + setup.warmup
    notes: list[str] = []
    refits: list[dict[str, Any]] = []
    while True:
        st = state_from_records(matching(store.records(), setup), cands, notes)
        d = decide(cands, st, predict, x=x, length_scales=LENGTH_SCALES, base=base, baseline_name="Horovod's defaults",
                   sd=prior_sd_band, noise_fallback=noise_fallback, budget_steps=budget_steps,
                   steps_per_trial=per_trial, base_prior=base_prior, unchecked=unchecked)
        inc = "" if d.incumbent is None else f"{cands[d.incumbent].key} {d.incumbent_ms:.1f} ms"
        progress(st.steps, budget_steps, inc)
        if d.index is None:
            break
        c = cands[d.index]
        n = len(st.records) + 1
        spec = TrialSpec(f"tune-{n}", TUNE_KIND, len(st.measured.get(d.index, [])), c.config, c.key, c.compression)
        say(f"tune-{n}: {c.key} ({d.reason}; refit: bandwidth x{d.scale:.3f})")
        out = run_trial(spec)
        rec = make_record(spec, setup, out, float(d.prior[d.index]), testbed_note)
        rec["tune"] = {"candidate": c.key, "index": d.index, "steps": per_trial, "bandwidth_scale": round(d.scale, 4),
                       "rms_before": None if d.rms_before is None else round(d.rms_before, 5),
                       "rms_after": None if d.rms_after is None else round(d.rms_after, 5),
                       "prior_ms": round(float(d.prior[d.index]), 3),
                       "prior_unrefit_ms": round(float(d.prior_unrefit[d.index]), 3),
                       "ei_ms": None if d.ei_ms is None else round(d.ei_ms, 4), "noise_sd": round(d.noise_sd, 5),
                       "reason": d.reason}
        store.append(rec)
        if rec["status"] != "ok" and not st.measured:
            # the job itself does not run (no step times, a crash): nothing to tune; the record is kept
            raise ValidationError(f"tune-{n} ({c.key}) {rec['status']}: {rec['error'] or 'no step times'}; "
                                  f"fix the job and re-run (records kept in {store.path})")
        m = rec["measured_step_time_ms"]
        say(f"tune-{n}: {rec['status']}" + (f", {m:.1f} ms/step (simulator {rec['tune']['prior_ms']:.1f})" if m else "")
            + (f" - {rec['error']}" if rec["error"] else ""))
    for r in st.records:
        t = r["tune"]
        refits.append({"trial": r["trial"], "bandwidth_scale": t.get("bandwidth_scale"),
                       "rms_before": t.get("rms_before"), "rms_after": t.get("rms_after")})
    for n_ in notes:
        say(f"note: {n_}")
    best = None if d.incumbent is None else cands[d.incumbent]
    ans = TuneAnswer(best, list(st.measured.get(d.incumbent, [])) if best else [], st.steps, len(st.records),
                     st.wall_s, d.stop, refits)
    return ans, matching(store.records(), setup)


# --------------------------------------------------------------------------- Horovod's default autotune

#: the replay's per-step line on rank 0, as horovodrun passes it on (``[0]<stdout>:step 12 time_ms 33.1``)
_STEP_LINE = re.compile(rb"(?:^|:)step (\d+) time_ms ([0-9.]+)", re.M)


def run_default_autotune(job, timeout_s: float, log_file: Path, poll_s: float = 0.5) -> tuple[Outcome, dict[str, Any]]:
    """Run ``job`` (a :class:`autotuner.frameworks.horovod.launch.Job` with Horovod's default autotune settings) until its
    autotune log has its best-values row (tuning finished), then stop it. Returns the outcome (step times of
    the steps after settling, if any: usually none) and ``settled``: ``{"finished", "steps", "wall_s",
    "rows"}`` (the replay's steps rank 0 had printed, read from its ``step N time_ms`` lines, or None for a
    command that prints none; seconds since the job's start when the finished log was seen; logged rows)."""
    from .autotune_log import read_autotune_log
    from ...realrun.launcher import OwnedProcess
    from .validation import summarize_autotune_log

    t0 = time.monotonic()
    settled = {"finished": False, "steps": None, "wall_s": None, "rows": 0}
    with OwnedProcess(job.argv(), env=job.env()) as p:
        while p.proc.poll() is None and time.monotonic() - t0 < timeout_s:
            time.sleep(poll_s)
            if log_file.exists():
                try:
                    log = read_autotune_log(log_file)
                except ValueError:
                    continue
                settled["rows"] = len(log.samples)
                if log.finished:
                    seen = _STEP_LINE.findall(p.stdout_so_far())
                    settled.update(finished=True, wall_s=round(time.monotonic() - t0, 2),
                                   steps=max((int(n) for n, _ in seen), default=-1) + 1)
                    break
        p.stop()
        out_b = p.stdout_so_far()
        _, err = p.output()
    wall = time.monotonic() - t0
    times = [float(t) for _, t in _STEP_LINE.findall(out_b)]
    if settled["finished"] and not settled["steps"]:  # a command whose steps this cannot read (a user's own)
        settled["steps"] = None
    o = Outcome("ok" if settled["finished"] else "timeout", wall_s=wall,
                error="" if settled["finished"] else f"autotune did not finish within {timeout_s:.0f} s "
                                                     f"({settled['rows']} rows logged)")
    if settled["finished"] and settled["steps"] is not None:
        o.step_times_ms = times[settled["steps"]:] or []
    if log_file.exists():
        try:
            o.autotune = summarize_autotune_log(log_file)
        except ValueError as e:
            o.autotune = {"error": str(e)}
    if not settled["finished"] and err.strip():
        o.error += f"; stderr: {err.strip().splitlines()[-1][-200:]}"
    return o, settled


def expected_default_autotune_steps(categorical_combinations: int) -> int:
    """Steps Horovod 0.28.1's default autotune spends before settling, by its source: (3 warm-up + 21 Bayesian
    samples per combination) x 5 scores per sample x 10 steps per score (parameter_manager.cc: warm-ups 3,
    steps per sample 10, Bayesian samples until ``iteration_ > 20``, a logged score the median of 5)."""
    return (3 + 21 * categorical_combinations) * 5 * 10
