"""Validation runs: real horovodrun trials of defaults, autotune, autotune's best and proposals.

A validation is a list of trials (:class:`TrialSpec`), each one horovodrun job. Results are
appended, one JSON object per line, to ``runs/<env>/validation/<name>.jsonl`` as soon as a trial
finishes (:class:`TrialStore`: one ``write`` of a whole line on an ``O_APPEND`` descriptor, then
``fsync``; a line cut by a kill is dropped on the next open, a whole last record that only lacks its
newline is kept). A re-run with the same
:class:`Setup` skips every trial already recorded, so a killed validation resumes where it stopped
and never runs a finished trial twice. A rank that crashes or a job that hits its timeout is
recorded as a failed trial and the batch goes on.

Record keys (one line per trial): ``trial`` (id, e.g. ``proposal-1/r2``), ``kind``
(``default`` | ``autotune`` | ``autotune_best`` | ``proposal``), ``repeat``, ``config``
(knobs, :meth:`Config.to_dict`; null for the autotune run), ``status`` (``ok`` | ``failed`` |
``timeout``), ``measured_step_time_ms`` (median over the trial's measured steps), ``step_times_ms``,
``spread_ms`` (interquartile range of the step times), ``predicted_step_time_ms`` (the env's cost
model at launch time, or null: a prediction for the job without Horovod's timeline),
``timeline_recorded`` (whether Horovod's timeline ran in the trial: its writer's cost is then in the step
times; off by default, as in a production job; older records lack the key, see
:func:`autotuner.schemas.records.timeline_recorded`), ``timeline`` (fused-response samples read from the
trial's timeline, or null), ``autotune`` (the autotune log's samples, best row, score), ``setup``, ``testbed``,
``score_bytes_per_us`` (bytes allreduced per step / step time: the unit of Horovod's autotune
score), ``wall_s``, ``error``, ``finished_at``.
"""
from __future__ import annotations

import gzip
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from ...errors import ValidationError
from .knobs import DEFAULTS_0_28, Config
from .readers.runs import parse_records
from .schemas import Setup  # noqa: F401 (the setup of a validation, defined with its record schema)
from .schemas.records import timeline_recorded

#: environment variables every trial's command gets: measured steps and warm-up steps (a user's
#: script reads them when not told otherwise; the replay workload gets them as flags too)
STEPS_VAR, WARMUP_VAR = "AUTOTUNER_STEPS", "AUTOTUNER_WARMUP"


class TrialKind(StrEnum):
    """What a trial measures: Horovod's defaults, Horovod's autotune run, autotune's best
    configuration re-run with fixed knobs, or one of the proposals."""

    default = "default"
    autotune = "autotune"
    autotune_best = "autotune_best"
    proposal = "proposal"


KINDS = tuple(TrialKind)


@dataclass(frozen=True)
class TrialSpec:
    """One planned trial. ``config`` is None only for the autotune run; ``compression``: the
    gradient compression the training script applies (``none`` or ``fp16``, horovod/torch/compression.py)."""

    trial: str
    kind: str
    repeat: int
    config: Config | None
    label: str = ""
    compression: str = "none"


#: a planned configuration: knobs, or knobs with a gradient compression (``(Config, "fp16")``)
Candidate = Config | tuple[Config, str]


def split_candidate(c: Candidate) -> tuple[Config, str]:
    """(knobs, compression) of a planned configuration (a bare Config: no compression)."""
    return (c, "none") if isinstance(c, Config) else (c[0], str(c[1]))


def plan(proposals: list[Candidate], *, repeats: int, autotune: bool, defaults: bool = True,
         autotune_best: Config | None = None) -> list[TrialSpec]:
    """The trial list: the autotune run first, then ``repeats`` interleaved rounds of
    [defaults, autotune's best, proposal 1..k] (round r runs every configuration once). A proposal
    is a Config or ``(Config, compression)``.

    ``autotune_best`` is known only after the autotune run; call again with it to extend the plan.
    Raises ValidationError for ``repeats < 1`` or nothing to run.
    """
    if repeats < 1:
        raise ValidationError(f"repeats must be >= 1, got {repeats}")
    fixed: list[tuple[str, str, Config, str]] = []
    if defaults:
        fixed.append(("default", TrialKind.default, DEFAULTS_0_28, "none"))
    if autotune_best is not None:
        fixed.append(("autotune_best", TrialKind.autotune_best, autotune_best, "none"))
    for i, c in enumerate(proposals, 1):
        fixed.append((f"proposal-{i}", TrialKind.proposal, *split_candidate(c)))
    if not fixed and not autotune:
        raise ValidationError("nothing to validate: no defaults, no autotune, no proposals")
    specs = [TrialSpec("autotune/r0", TrialKind.autotune, 0, None, "autotune")] if autotune else []
    for r in range(repeats):
        specs += [TrialSpec(f"{name}/r{r}", kind, r, cfg, name, comp) for name, kind, cfg, comp in fixed]
    return specs


class TrialStore:
    """Append-only JSONL record file of one validation (see the module docstring).

    ``dropped``: one line per repair or skipped line, each noted once however often :meth:`records` runs.
    """

    def __init__(self, path: Path, parse: Callable[[str, str], tuple[list, list]] = parse_records):
        self.path = path
        self.parse = parse  # (text, file name) -> (records, problems); the record schema of this store
        self.dropped: list[str] = []

    def _note(self, line: str) -> None:
        if line not in self.dropped:
            self.dropped.append(line)

    def records(self) -> list[dict[str, Any]]:
        """Every complete record (a JSON object with a ``trial`` id), in file order.

        A last line without its newline is a whole record if it parses as a JSON object (only the newline is
        missing): it is kept and the newline written. Otherwise it was cut by a kill mid-write: it is removed from
        the file, so its trial runs again. Unreadable lines before the last are skipped, not removed.
        Raises ValidationError if the file exists but cannot be read or repaired.
        """
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as e:
            raise ValidationError(f"{self.path}: cannot read ({e.strerror})") from None
        if raw and not raw.endswith(b"\n"):
            keep = raw.rfind(b"\n") + 1
            try:
                if _is_json_object(raw[keep:]):
                    self._sync(lambda f: f.write(b"\n"))
                    raw += b"\n"
                    self._note(f"{self.path.name}: added the missing newline after the last record")
                else:
                    self._sync(lambda f: f.truncate(keep))
                    self._note(f"{self.path.name}: dropped a cut last line ({len(raw) - keep} bytes)")
                    raw = raw[:keep]
            except OSError as e:
                raise ValidationError(f"{self.path}: cannot repair the last line ({e.strerror})") from None
        records, problems = self.parse(raw.decode("utf-8", "replace"), self.path.name)
        for p in problems:
            self._note(p)
        return records

    def _sync(self, change: Callable[[Any], Any]) -> None:
        """Apply ``change(file)`` at the end of the record file, then fsync it."""
        with open(self.path, "r+b") as f:
            f.seek(0, os.SEEK_END)
            change(f)
            f.flush()
            os.fsync(f.fileno())

    def append(self, rec: dict[str, Any]) -> None:
        """Write one record as one line, durably, in one append (after a newline if the last line has none)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = (json.dumps(rec, separators=(",", ":"), allow_nan=False) + "\n").encode()
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data  # never glue a record onto a line that has no end
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)


def _is_json_object(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line.decode("utf-8")), dict)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False


def matching(records: Iterable[dict[str, Any]], setup: Setup) -> list[dict[str, Any]]:
    """Records made with exactly ``setup`` (others in the same file are left alone)."""
    want = setup.to_dict()
    return [r for r in records if r.get("setup") == want]


def step_stats(step_times_ms: list[float]) -> tuple[float, float]:
    """(median, interquartile range) of step times, ms."""
    a = np.asarray(step_times_ms, dtype=float)
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    return float(med), float(q3 - q1)


@dataclass
class Outcome:
    """What running one trial produced, before it becomes a record."""

    status: str
    step_times_ms: list[float] = field(default_factory=list)
    error: str = ""
    wall_s: float = 0.0
    timeline: dict[str, Any] | None = None
    autotune: dict[str, Any] | None = None
    bytes_per_step: int | None = None
    #: whether the job ran with Horovod's timeline (``--timeline-filename``), whatever it then wrote
    timeline_recorded: bool = False
    #: the values the gradients held (the replay's result says; a user's script: its own), None if unknown
    gradients: str | None = None


def make_record(spec: TrialSpec, setup: Setup, outcome: Outcome, predicted_ms: float | None,
                testbed_note: str) -> dict[str, Any]:
    """The JSONL record of one finished trial (keys in the module docstring)."""
    med, iqr = step_stats(outcome.step_times_ms) if outcome.step_times_ms else (None, None)
    return {
        "trial": spec.trial, "kind": spec.kind, "label": spec.label, "repeat": spec.repeat,
        "config": spec.config.to_dict() if spec.config is not None else None,
        "compression": spec.compression,
        "status": outcome.status,
        "measured_step_time_ms": None if med is None else round(med, 3),
        "spread_ms": None if iqr is None else round(iqr, 3),
        "step_times_ms": [round(t, 3) for t in outcome.step_times_ms],
        "predicted_step_time_ms": None if predicted_ms is None else round(predicted_ms, 3),
        "timeline_recorded": bool(outcome.timeline_recorded),
        "gradients": outcome.gradients,
        "timeline": outcome.timeline, "autotune": outcome.autotune,
        # Horovod autotune's score unit, for comparing with its log: gradient bytes allreduced per
        # µs of wall time (horovod/common/parameter_manager.cc)
        "score_bytes_per_us": (round(outcome.bytes_per_step / (med * 1e3), 3)
                               if outcome.bytes_per_step and med else None),
        "setup": setup.to_dict(), "testbed": testbed_note, "wall_s": round(outcome.wall_s, 2),
        "error": outcome.error, "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def same_job(rec: dict[str, Any], spec: TrialSpec, timeline: bool | None = None) -> bool:
    """Whether record ``rec`` measured the job ``spec`` plans: the same trial id, knobs and compression and,
    unless ``timeline`` is None, run with (True) or without (False) Horovod's timeline. The autotune run
    never records a timeline, so its mode does not count. A record from an earlier plan under the same
    name (other knobs or compression for ``proposal-1``) or the other timeline mode is another job."""
    if rec.get("trial") != spec.trial:
        return False
    if spec.config is None:
        return rec.get("config") is None
    try:
        cfg = Config.from_dict(rec["config"]) if rec.get("config") else None
    except (TypeError, ValueError):
        return False
    return (cfg == spec.config and str(rec.get("compression") or "none") == spec.compression
            and (timeline is None or timeline_recorded(rec) == timeline))


def plan_records(records: Iterable[dict[str, Any]], specs: list[TrialSpec],
                 timeline: bool | None = None) -> list[dict[str, Any]]:
    """The records, in file order, that measured a job of ``specs`` (:func:`same_job`); the last one of
    each trial id where a file holds several."""
    last: dict[str, int] = {}
    recs = list(records)
    for i, r in enumerate(recs):
        if any(same_job(r, s, timeline) for s in specs if s.trial == r.get("trial")):
            last[r["trial"]] = i
    keep = set(last.values())
    return [r for i, r in enumerate(recs) if i in keep]


def run_pending(specs: list[TrialSpec], store: TrialStore, setup: Setup,
                run_trial: Callable[[TrialSpec], Outcome],
                predict: Callable[[Config, str], float | None], testbed_note: str,
                on_done: Callable[[dict[str, Any]], None] | None = None,
                timeline: bool | None = None) -> list[dict[str, Any]]:
    """Run, in order, every spec not yet recorded for ``setup``; append each record as it finishes.

    ``timeline``: whether ``run_trial`` records Horovod's timeline; given, a trial counts as recorded only
    when a record of it is the same job (:func:`same_job`: knobs, compression, timeline mode), so a re-run
    in the other mode measures again rather than reusing another job's step times. None: the trial id alone.

    Returns all records of this setup (old and new).
    """
    recs = matching(store.records(), setup)
    if timeline is None:
        done = {r["trial"] for r in recs}
    else:
        done = {s.trial for s in specs if any(same_job(r, s, timeline) for r in recs)}
    for spec in specs:
        if spec.trial in done:
            continue
        outcome = run_trial(spec)
        pred = predict(spec.config, spec.compression) if spec.config is not None else None
        rec = make_record(spec, setup, outcome, pred, testbed_note)
        store.append(rec)
        done.add(spec.trial)
        if on_done:
            on_done(rec)
    return matching(store.records(), setup)


# --------------------------------------------------------------------------- real trials

def _last_error_line(text: str) -> str:
    """The most telling line of a failed job's stderr (one line, for the record)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "Error" in ln or "error:" in ln:
            return ln[-300:]
    return lines[-1][-300:] if lines else "no output"


def summarize_timeline(path: Path, steps_run: int) -> dict[str, Any]:
    """Compact, JSON-ready summary of a trial's timeline: fused-response samples grouped by size.

    ``samples``: ``[[nbytes, count, median_duration_us, mean_duration_us], ...]`` (bytes, µs), from
    :func:`autotuner.readers.timeline.samples`; ``responses_per_step`` over ``steps_run`` steps;
    ``memcpy``: ``[bytes, µs]`` summed over fused responses (MEMCPY_IN + MEMCPY_OUT_FUSION_BUFFER);
    ``negotiation_us``: median NEGOTIATE_ALLREDUCE span per tensor (µs) or None.
    Raises TimelineError for an unreadable file.
    """
    from ...readers.timeline import read_timeline, samples

    tl = read_timeline(path)
    df = samples(tl)
    g = df.groupby("nbytes")["duration_s"].agg(["count", "median", "mean"]).reset_index()
    rows = [[int(n), int(c), round(float(m) * 1e6, 1), round(float(a) * 1e6, 1)]
            for n, c, m, a in zip(g["nbytes"], g["count"], g["median"], g["mean"])]
    fused = [r for r in tl.responses if len(r.tensors) > 1]
    memcpy = [int(sum(r.nbytes for r in fused)), round(sum(r.memcpy_in_us + r.memcpy_out_us for r in fused), 1)]
    neg = [n.duration_us for n in tl.negotiations]
    return {"samples": rows, "responses": int(len(df)), "memcpy": memcpy,
            "negotiation_us": round(float(np.median(neg)), 1) if neg else None,
            "responses_per_step": round(len(df) / max(steps_run, 1), 3),
            "form": tl.horovod_form, "problems": tl.problems[:5]}


def autotune_best_config(log_summary: dict[str, Any]) -> Config | None:
    """The configuration autotune settled on (the recorded summary's best row), as a
    :class:`Config` (:func:`autotuner.frameworks.horovod.autotune_log.row_config`); KnobError when it is
    outside the knob table."""
    from .autotune_log import row_config

    b = log_summary.get("best") if log_summary else None
    return row_config(b) if b else None


def summarize_autotune_log(path: Path) -> dict[str, Any]:
    """JSON-ready summary of an autotune log (samples, best row, finished). Raises AutotuneLogError."""
    from .autotune_log import read_autotune_log

    log = read_autotune_log(path)

    def row(s):
        return {"hierarchical_allreduce": s.hierarchical_allreduce,
                "hierarchical_allgather": s.hierarchical_allgather, "cache_enabled": s.cache_enabled,
                "cycle_time_ms": s.cycle_time_ms, "fusion_threshold_mb": s.fusion_threshold_mb,
                "score_bytes_per_us": s.score_bytes_per_us}

    return {"samples": [row(s) for s in log.samples], "best": row(log.best) if log.best else None,
            "finished": log.finished, "columns_version": log.columns_version,
            "problems": log.problems[:5]}


@dataclass(frozen=True)
class TrialRunner:
    """Runs one :class:`TrialSpec` for real with horovodrun (see :mod:`autotuner.realrun.launcher`).

    Attributes: setup; prefix (testbed argv prefix); launcher (an emulated cluster's horovodrun
    stand-in, :class:`autotuner.frameworks.horovod.launch.Job`); scratch (folder for timelines and autotune
    logs); keep_timelines (folder where each trial's raw timeline is kept gzipped, or None); timeout_s (per fixed-configuration trial; the autotune run gets
    ``timeout_s * autotune_timeout_factor``); autotune_warmup_samples, autotune_steps_per_sample,
    autotune_max_samples (the shortened autotune, :class:`autotuner.frameworks.horovod.launch.AutotuneSettings`);
    timeline (record Horovod's timeline in fixed-configuration trials, for their responses/step; off, the
    default: the production job the predictions are for; the timeline's writer costs a step several per cent,
    docs/how-to/validate.md).
    """

    setup: Setup
    scratch: Path
    prefix: tuple[str, ...] = ()
    timeout_s: float = 600.0
    autotune_warmup_samples: int = 1
    autotune_steps_per_sample: int = 1
    autotune_max_samples: int = 5
    autotune_timeout_factor: float = 6.0
    timeline: bool = False
    keep_timelines: Path | None = None
    launcher: tuple[str, ...] = ()

    def autotune_steps(self) -> int:
        """Training steps given to the autotune run before its measured steps: enough for every
        categorical combination Horovod tries (at most 4 here: cache x hierarchical allgather,
        as in ../shared/examples) to score its samples, each the median of 5 measurements of
        ``steps_per_sample`` steps (horovod/common/parameter_manager.cc), plus warm-up samples."""
        # measured here (0.28.1, Gloo): max_samples=5 gave 6 logged samples per combination
        samples = 4 * (self.autotune_max_samples + 1) + self.autotune_warmup_samples + 1
        return int(self.autotune_steps_per_sample * 5 * samples * 1.15) + 4

    def __call__(self, spec: TrialSpec) -> Outcome:
        from ...readers.replay_output import ReplayOutputError, parse_output
        from .launch import AutotuneSettings, Job, replay_command, run_job

        s = self.setup
        self.scratch.mkdir(parents=True, exist_ok=True)
        scratch = self.scratch.resolve()  # ranks may not share our working directory
        tag = spec.trial.replace("/", "-")
        warmup, timeout = s.warmup, self.timeout_s
        at = None
        if spec.kind == TrialKind.autotune:
            log = scratch / f"{tag}-autotune.csv"
            log.unlink(missing_ok=True)
            at = AutotuneSettings(log, self.autotune_warmup_samples, self.autotune_steps_per_sample,
                                  self.autotune_max_samples)
            warmup = self.autotune_steps()
            timeout = self.timeout_s * self.autotune_timeout_factor
        timeline = scratch / f"{tag}-timeline.json" if (self.timeline and spec.config is not None) else None
        if timeline is not None:
            timeline.unlink(missing_ok=True)
        if s.command and spec.compression != "none":
            return Outcome("failed", error=f"{spec.compression} compression is set in your own script, not by "
                                           "autotuner: run it with the replay workload or drop the compression")
        command = s.command or replay_command(s.model, s.compute_ms, s.steps, warmup, s.update_ms, s.replay_wait,
                                              spec.compression)
        # A user's command learns the trial's step counts from the environment (examples/train_horovod.py).
        counts = {STEPS_VAR: str(s.steps), WARMUP_VAR: str(warmup)}
        job = Job(np=s.np, hosts=s.hosts, command=tuple(command), config=spec.config, autotune=at,
                  timeline=timeline, prefix=self.prefix, launcher=self.launcher, extra_env=counts)
        try:
            res = run_job(job, timeout)
        except FileNotFoundError as e:
            return Outcome("failed", error=f"cannot start horovodrun ({e.strerror}): run scripts/install_horovod.sh")
        except OSError as e:
            return Outcome("failed", error=f"cannot start horovodrun ({e.strerror or e})")
        out = Outcome("ok", wall_s=res.wall_s, timeline_recorded=timeline is not None)
        if res.timed_out:
            out.status, out.error = "timeout", f"killed after {timeout:.0f} s timeout"
        elif res.returncode != 0:
            out.status, out.error = "failed", f"exit {res.returncode}: {_last_error_line(res.stderr + res.stdout)}"
        else:
            try:
                parsed = parse_output(res.stdout, batch_size=s.batch_size)
                out.step_times_ms = list(parsed.step_times_ms)
                out.bytes_per_step = parsed.extra.get("bytes_per_step")
                g = parsed.extra.get("gradients")
                out.gradients = (str(g)[:80] if g is not None else None) if not s.command else "the script's own"
                if not out.step_times_ms:
                    out.status, out.error = "failed", "output gives img/sec only: pass --batch-size"
            except ReplayOutputError as e:
                out.status, out.error = "failed", str(e)
        if timeline is not None and timeline.exists() and timeline.stat().st_size > 0:
            try:
                out.timeline = summarize_timeline(timeline, s.steps + warmup)
            except ValueError as e:
                out.timeline = {"error": str(e)}
            if self.keep_timelines is not None:
                self.keep_timelines.mkdir(parents=True, exist_ok=True)
                with open(timeline, "rb") as src, gzip.open(self.keep_timelines / f"{tag}.json.gz", "wb") as dst:
                    shutil.copyfileobj(src, dst)
        if at is not None and at.log_file.exists():
            try:
                out.autotune = summarize_autotune_log(at.log_file)
            except ValueError as e:
                out.autotune = {"error": str(e)}
        return out
