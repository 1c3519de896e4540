"""Start real ``horovodrun`` jobs: the only code in autotuner that launches training processes.

Every command is an argument list (never a shell string). A job runs in its own session so that a
timeout or Ctrl-C kills horovodrun and every rank it started (the whole process group).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..knobs import Config, horovod_env, horovodrun_flags


def horovodrun_path() -> str | None:
    """The ``horovodrun`` beside this Python (the project's venv), else the one on PATH, else None."""
    beside = Path(sys.executable).parent / "horovodrun"
    return str(beside) if beside.exists() else shutil.which("horovodrun")


@dataclass(frozen=True)
class AutotuneSettings:
    """Horovod autotune, shortened to fit a validation run.

    Horovod's own defaults (horovod/common/parameter_manager.cc, v0.28.1): 3 warm-up samples,
    10 steps per sample, at most 20 Bayesian-optimisation samples per categorical combination.

    Attributes:
        log_file: where Horovod writes its CSV log (``--autotune-log-file``).
        warmup_samples: ``--autotune-warmup-samples``.
        steps_per_sample: ``--autotune-steps-per-sample``.
        max_samples: ``--autotune-bayes-opt-max-samples``.
    """

    log_file: Path
    warmup_samples: int = 1
    steps_per_sample: int = 1
    max_samples: int = 5

    def flags(self) -> list[str]:
        return ["--autotune", "--autotune-log-file", str(self.log_file),
                "--autotune-warmup-samples", str(self.warmup_samples),
                "--autotune-steps-per-sample", str(self.steps_per_sample),
                "--autotune-bayes-opt-max-samples", str(self.max_samples)]


@dataclass(frozen=True)
class Job:
    """One horovodrun job.

    Attributes:
        np: number of ranks; hosts: ``-H`` value (``localhost:<np>`` when empty).
        command: the training command (argument list) each rank runs.
        config: fixed knobs (flags + ``HOROVOD_*`` env vars), or None to let autotune choose.
        autotune: autotune settings, or None.
        timeline: path for ``--timeline-filename`` (with ``--timeline-mark-cycles``), or None.
        gloo: pass ``--gloo`` (this machine has no MPI).
        prefix: argv prefix (e.g. ``ip netns exec NS`` from :mod:`autotuner.realrun.testbed`).
    """

    np: int
    command: tuple[str, ...]
    config: Config | None = None
    autotune: AutotuneSettings | None = None
    timeline: Path | None = None
    hosts: str = ""
    gloo: bool = True
    prefix: tuple[str, ...] = ()
    extra_env: dict[str, str] = field(default_factory=dict)

    def argv(self) -> list[str]:
        a = [*self.prefix, horovodrun_path() or "horovodrun", "-np", str(self.np), "-H", self.hosts or f"localhost:{self.np}"]
        if self.gloo:
            a.append("--gloo")
        if self.config is not None:
            a += horovodrun_flags(self.config)
        if self.autotune is not None:
            a += self.autotune.flags()
        if self.timeline is not None:
            a += ["--timeline-filename", str(self.timeline), "--timeline-mark-cycles"]
        return a + list(self.command)

    def env(self) -> dict[str, str]:
        e = dict(os.environ)
        # Knobs the flags cannot spell (a fusion threshold that is not a whole MiB) go as env vars.
        if self.config is not None:
            e.update(horovod_env(self.config))
        e.update(self.extra_env)
        e.setdefault("PYTHONUNBUFFERED", "1")
        return e


@dataclass(frozen=True)
class JobResult:
    """What a finished (or killed) job left: exit status, output, wall time in seconds."""

    returncode: int | None
    stdout: str
    stderr: str
    wall_s: float
    timed_out: bool


def run_job(job: Job, timeout_s: float, cwd: Path | None = None) -> JobResult:
    """Run ``job`` to completion or until ``timeout_s`` seconds, then kill its process group.

    Raises FileNotFoundError (horovodrun missing) and re-raises KeyboardInterrupt after killing the job.
    """
    t0 = time.monotonic()
    proc = subprocess.Popen(job.argv(), env=job.env(), cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
        return JobResult(proc.returncode, out, err, time.monotonic() - t0, False)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        return JobResult(proc.returncode, out, err, time.monotonic() - t0, True)
    except BaseException:
        _kill_group(proc)
        proc.communicate()
        raise


def _kill_group(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


def replay_command(model: str, compute_ms: float, steps: int, warmup: int, update_ms: float = 0.0) -> tuple[str, ...]:
    """The replay workload's command line (see :mod:`autotuner.realrun.replay`)."""
    return (sys.executable, "-m", "autotuner.realrun.replay", "--model", model, "--compute-ms", f"{compute_ms:g}",
            "--update-ms", f"{update_ms:g}", "--steps", str(steps), "--warmup", str(warmup))
