"""Horovod's launcher: one ``horovodrun`` job (:class:`Job`: ranks, hosts, knobs as flags and ``HOROVOD_*``
variables, autotune, timeline) run as an owned process group (:func:`autotuner.realrun.launcher.run_argv`), and the
replay workload's command line (:func:`replay_command`).
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ...realrun.launcher import JobResult, run_argv
from .knobs import Config, horovod_env, horovodrun_flags


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
        launcher: argv that replaces ``horovodrun`` (an emulated cluster's
            :mod:`autotuner.frameworks.horovod.hostlaunch`, which takes horovodrun's own arguments), or ().
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
    launcher: tuple[str, ...] = ()

    def launcher_argv(self) -> tuple[str, ...]:
        """What starts the job: ``launcher`` when given; for a ``--gloo`` job with Horovod importable by this Python,
        :mod:`autotuner.frameworks.horovod.horovodrun` (horovodrun's own entry point, without its per-job check of
        the build: 7.5 s of a 16 s job on the 2-core machines); otherwise the ``horovodrun`` script
        (:func:`horovodrun_path`)."""
        if self.launcher:
            return self.launcher
        if self.gloo and importlib.util.find_spec("horovod") is not None:
            return (sys.executable, "-m", "autotuner.frameworks.horovod.horovodrun")
        return (horovodrun_path() or "horovodrun",)

    def argv(self) -> list[str]:
        a = [*self.prefix, *self.launcher_argv(), "-np", str(self.np), "-H", self.hosts or f"localhost:{self.np}"]
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


def run_job(job: Job, timeout_s: float, cwd: Path | None = None) -> JobResult:
    """Run ``job`` (:func:`run_argv`): to completion, or until ``timeout_s`` seconds, then kill all of it.

    Raises FileNotFoundError (horovodrun missing) and re-raises KeyboardInterrupt after killing the job.
    """
    return run_argv(job.argv(), timeout_s, env=job.env(), cwd=cwd)


def replay_command(model: str, compute_ms: float, steps: int, warmup: int, update_ms: float = 0.0,
                   wait: str = "spin", compression: str = "none") -> tuple[str, ...]:
    """The replay workload's command line (see :mod:`autotuner.frameworks.horovod.replay`; ``wait``: its ``--wait``,
    ``compression``: its ``--compression``, ``none`` or ``fp16``)."""
    return (sys.executable, "-m", "autotuner.frameworks.horovod.replay", "--model", model, "--compute-ms", f"{compute_ms:g}",
            "--update-ms", f"{update_ms:g}", "--steps", str(steps), "--warmup", str(warmup)) + (
            ("--wait", wait) if wait != "spin" else ()) + (
            ("--compression", compression) if compression != "none" else ())
