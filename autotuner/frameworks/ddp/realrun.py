"""DDP's real runs: ``measure`` (the DDP sweep, :mod:`.sweepprobe`) and ``validate`` (real DDP replays of bucket
settings, :mod:`.replay`), both under torchrun (:mod:`.launch`) on this host, a shaped loopback or an emulated
cluster (:func:`autotuner.realrun.launcher.testbed_for`). Records are appended one line at a time and fsynced; a
killed run resumes where it stopped (the sweep by job, a validation by setting and repeat).

Records: ``<runs>/<env>/ddp-sweep.jsonl`` (one per sweep job: the probe's output, ``setup``, ``testbed``, the exit
statuses) and ``<runs>/<env>/ddp-validation/<name>.jsonl`` (one per trial: ``label``, ``repeat``, ``ddp`` (the
knobs), ``status``, ``measured_step_time_ms`` (median of the measured steps), ``step_times_ms``, ``first_step_ms``,
``buckets`` (DDP's own rebuilt bucket sizes), ``gradients``, the replay's ``minor_faults_per_step``,
``malloc_env``, ``stages`` and ``stage_overrun_ms`` where it reports them, ``exit``, ``setup``, ``testbed``, ``wall_s``).
A trial's result is rank 0's result line: a rank aborting at teardown after it (2 of 5 runs on a 2-core machine) leaves a
non-zero exit status in ``exit`` and the trial ``ok``; no result line is a failed trial, with the last stderr.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Callable

from ...errors import ValidationError
from .knobs import DdpConfig

#: the sweep's sizes: 4 KiB .. 128 MiB, doubling (DDP's buckets: 1 MiB first, 25 MiB default, up to hundreds)
SWEEP_SIZES = tuple(1 << k for k in range(12, 28))
#: the bucket settings a validation replays by default (at least 10): DDP's default, single caps from 1 to
#: 200 MiB, 25 MiB set explicitly (its first bucket 25 MiB, not 1: the first-bucket effect), a per-bucket list,
#: the gradient view, the fp16 hook
#: the burst phase's file and default job count (:mod:`.burstprobe`)
BURST_RECORDS, BURST_JOBS = "ddp-burst.jsonl", 3
#: the first-touch phase's file and default job count (:mod:`.firsttouchprobe`)
FIRST_TOUCH_RECORDS, FIRST_TOUCH_JOBS = "ddp-first-touch.jsonl", 1
#: the cpu phase's file and default job count (:mod:`.cpuprobe`)
CPU_RECORDS, CPU_JOBS = "ddp-cpu.jsonl", 1
DEFAULT_SETTINGS = (DdpConfig(), DdpConfig(bucket_cap_mb=1), DdpConfig(bucket_cap_mb=4), DdpConfig(bucket_cap_mb=10),
                    DdpConfig(bucket_cap_mb=25), DdpConfig(bucket_cap_mb=50), DdpConfig(bucket_cap_mb=100),
                    DdpConfig(bucket_cap_mb=200), DdpConfig(bucket_cap_mb_list=(1, 4, 25)),
                    DdpConfig(gradient_as_bucket_view=True), DdpConfig(comm_hook="fp16_compress"))


def _shape(setup: dict) -> str:
    if setup.get("testbed_hosts"):
        return f"{setup['testbed_hosts']} emulated hosts x {setup.get('ranks_per_host')} at {setup.get('link_gbit')} Gbit/s"
    bw = setup.get("bandwidth_gbit")
    return f"{setup.get('np')} ranks on this host" + (f" at {bw} Gbit/s" if bw else "")


def append_record(path: Path, rec: dict) -> None:
    """Append one JSON line to ``path`` and fsync it (nothing measured is lost on a kill)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps(rec, separators=(",", ":")) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _setup(np_: int, bandwidth_gbit, testbed_hosts, ranks_per_host, link_gbit) -> dict:
    topo = bool(testbed_hosts)
    return {"np": testbed_hosts * ranks_per_host if topo else np_, "bandwidth_gbit": bandwidth_gbit,
            "testbed_hosts": testbed_hosts or None, "ranks_per_host": ranks_per_host if topo else None,
            "link_gbit": link_gbit, "launcher": "torchrun", "backend": "gloo"}


def _result(stdout: str, tag: str) -> dict | None:
    line = next((x for x in stdout.splitlines() if f"{tag} " in x), None)
    return json.loads(line.split(f"{tag} ", 1)[1]) if line else None


def replay_args(model: str, compute_ms: float, steps: int, warmup: int, cfg: DdpConfig) -> list[str]:
    """The DDP replay's arguments (:mod:`.replay`) for one setting."""
    a = ["--model", model, "--compute-ms", f"{compute_ms:g}", "--steps", str(steps), "--warmup", str(warmup)]
    if cfg.bucket_cap_mb_list is not None:
        a += ["--bucket-cap-mb-list", ",".join(f"{c:g}" for c in cfg.bucket_cap_mb_list)]
    elif cfg.bucket_cap_mb is not None:
        a += ["--bucket-cap-mb", f"{cfg.bucket_cap_mb:g}"]
    if cfg.gradient_as_bucket_view:
        a += ["--gradient-as-bucket-view"]
    if cfg.static_graph:
        a += ["--static-graph"]
    if cfg.comm_hook != "allreduce":
        a += ["--comm-hook", cfg.comm_hook]
    return a


def measure_ddp(env_dir: Path, *, np_: int = 2, bandwidth_gbit: float | None = None, testbed_hosts: int = 0,
                ranks_per_host: int = 1, link_gbit: float | None = None, jobs: int = 3, repeats: int = 7,
                burst_jobs: int = BURST_JOBS, first_touch_jobs: int = FIRST_TOUCH_JOBS, cpu_jobs: int = CPU_JOBS,
                timeout_s: float = 600.0, say: Callable[[str], None] = print) -> Path:
    """The DDP sweep of an environment: ``jobs`` sweep jobs (:mod:`.sweepprobe`, :data:`SWEEP_SIZES`, ``repeats``
    timed allreduces per size after 2 warm-ups) appended to ``env_dir/ddp-sweep.jsonl``, then ``burst_jobs`` jobs
    of the burst phase (:mod:`.burstprobe`: allreduces back to back against lone ones) appended to
    ``env_dir/ddp-burst.jsonl`` (0 skips it), then ``first_touch_jobs`` jobs of the first-touch phase
    (:mod:`.firsttouchprobe`: fresh gradients held to the step's end against dropped after their copy, every rank of a
    host at once) appended to ``env_dir/ddp-first-touch.jsonl`` (0 skips it), then ``cpu_jobs`` jobs of the cpu phase
    (:mod:`.cpuprobe`: compute beside a stream of allreduces and alone, every rank at once) appended to
    ``env_dir/ddp-cpu.jsonl`` (0 skips it), each resuming after the jobs already there. Returns the sweep's file.
    Raises ValidationError (one line) when a job gives no result or the testbed cannot be built."""
    from ...realrun.launcher import testbed_for
    from .launch import run_ddp
    from .records import read_jsonl

    out = env_dir / "ddp-sweep.jsonl"
    burst = env_dir / BURST_RECORDS
    done = read_jsonl(out) if out.exists() else []
    have = len(done)
    have_b = len(read_jsonl(burst)) if burst.exists() else 0
    touch = env_dir / FIRST_TOUCH_RECORDS
    have_f = len(read_jsonl(touch)) if touch.exists() else 0
    cpu = env_dir / CPU_RECORDS
    have_c = len(read_jsonl(cpu)) if cpu.exists() else 0
    if have >= jobs and have_b >= burst_jobs and have_f >= first_touch_jobs and have_c >= cpu_jobs:
        say(f"{out}: {have} sweep job(s) already there; {have_b} burst job(s); {have_f} first-touch job(s); "
            f"{have_c} cpu job(s)")
        return out
    topo = (testbed_hosts, ranks_per_host) if testbed_hosts else None
    setup = _setup(np_, bandwidth_gbit, testbed_hosts, ranks_per_host, link_gbit)
    if have:  # the env's own setup: a resumed or added phase runs where the sweep ran
        first = done[0].get("setup") or {}
        if {k: first.get(k) for k in ("np", "bandwidth_gbit", "testbed_hosts", "ranks_per_host", "link_gbit")} != \
                {k: setup[k] for k in ("np", "bandwidth_gbit", "testbed_hosts", "ranks_per_host", "link_gbit")}:
            raise ValidationError(f"{out} was measured with {_shape(first)}; this run asks for {_shape(setup)}: "
                                  "give the env's own shape and link, or a new --env")
    with testbed_for(topo, bandwidth_gbit, link_gbit) as (tb, note):
        say(note)
        nproc = ranks_per_host if topo else np_
        sweep_args = ["--sizes", ",".join(map(str, SWEEP_SIZES)), "--repeats", str(repeats), "--warmup", "2"]
        for module, args, tag, path, start, n, what in (
                ("sweepprobe", sweep_args, "AUTOTUNER_DDP_SWEEP", out, have, jobs, "sweep"),
                ("burstprobe", [], "AUTOTUNER_DDP_BURST", burst, have_b, burst_jobs, "burst"),
                ("firsttouchprobe", [], "AUTOTUNER_DDP_FIRST_TOUCH", touch, have_f, first_touch_jobs, "first-touch"),
                ("cpuprobe", ["--hosts", str(testbed_hosts or 1)], "AUTOTUNER_DDP_CPU", cpu, have_c, cpu_jobs, "cpu")):
            for k in range(start, n):
                r = run_ddp(f"autotuner.frameworks.ddp.{module}", args, ranks_per_host=nproc, testbed=tb,
                            timeout_s=timeout_s)
                rec = _result(r.stdout, tag)
                if rec is None:
                    last = (r.stderr.strip().splitlines() or ["(no output)"])[-1][:200]
                    raise ValidationError(f"DDP {what} job {k + 1} gave no result (exit {list(r.returncodes)}): {last}")
                append_record(path, {"phase": f"ddp-{what}", "repeat": k, **rec, "setup": setup, "testbed": note,
                                     "exit": list(r.returncodes), "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
                say(f"DDP {what} job {k + 1} of {n}: done")
    return out


def knob_env(cfg: DdpConfig, steps: int, warmup: int) -> dict[str, str]:
    """The environment a user's script reads a trial's setting from (``examples/train_ddp.py``):
    ``AUTOTUNER_DDP_BUCKET_CAP_MB`` or ``..._BUCKET_CAP_MB_LIST`` (MiB), ``..._GRADIENT_AS_BUCKET_VIEW`` (0/1),
    ``..._COMM_HOOK``, and the step counts (``AUTOTUNER_STEPS``, ``AUTOTUNER_WARMUP``)."""
    e = {"AUTOTUNER_STEPS": str(steps), "AUTOTUNER_WARMUP": str(warmup),
         "AUTOTUNER_DDP_GRADIENT_AS_BUCKET_VIEW": "1" if cfg.gradient_as_bucket_view else "0",
         "AUTOTUNER_DDP_COMM_HOOK": cfg.comm_hook}
    if cfg.bucket_cap_mb_list is not None:
        e["AUTOTUNER_DDP_BUCKET_CAP_MB_LIST"] = ",".join(f"{c:g}" for c in cfg.bucket_cap_mb_list)
    elif cfg.bucket_cap_mb is not None:
        e["AUTOTUNER_DDP_BUCKET_CAP_MB"] = f"{cfg.bucket_cap_mb:g}"
    return e


def script_of(command: list[str]) -> tuple[str, list[str]]:
    """(script path, its arguments) of a user's ``python script.py args`` (torchrun runs the script itself).
    Raises ValidationError (one line) for a command that is not a Python script."""
    import sys

    rest = list(command)
    while rest and (Path(rest[0]).name.startswith("python") or rest[0] == sys.executable):
        rest = rest[1:]
    if not rest or not rest[0].endswith(".py"):
        raise ValidationError(f"the command must be `python your_script.py [args]` (torchrun runs the script), got "
                              f"{' '.join(command)!r}")
    if not Path(rest[0]).is_file():
        raise ValidationError(f"no script {rest[0]}")
    return str(Path(rest[0]).resolve()), rest[1:]


def run_trial(cfg: DdpConfig, model: str, compute_ms: float, steps: int, warmup: int, ranks: int, tb,
              timeout_s: float, script: tuple[str, list[str]] | None = None):
    """One real DDP trial of ``cfg`` under torchrun on ``ranks`` ranks per host of testbed ``tb``: the replay
    workload of layout ``model``, or the user's ``script`` (path, arguments; it reads :func:`knob_env`). Returns
    (result or None when no step time came back, the :class:`~.launch.DdpJobResult`); the result has the replay's
    keys (``median_step_time_ms``, ``step_times_ms``, ``first_step_ms``, ``buckets``, ``gradients``)."""
    import statistics

    from ...errors import ReplayOutputError
    from ...readers.replay_output import parse_output
    from .launch import run_ddp

    if script is None:
        r = run_ddp("autotuner.frameworks.ddp.replay", replay_args(model, compute_ms, steps, warmup, cfg),
                    ranks_per_host=ranks, testbed=tb, timeout_s=timeout_s)
        return _result(r.stdout, "AUTOTUNER_RESULT"), r
    r = run_ddp(script[0], script[1], ranks_per_host=ranks, testbed=tb, timeout_s=timeout_s,
                env={**os.environ, **knob_env(cfg, steps, warmup)})
    try:
        times = list(parse_output(r.stdout).step_times_ms)
    except ReplayOutputError:
        times = []
    res = None if not times else {"median_step_time_ms": round(statistics.median(times), 3), "step_times_ms": times,
                                  "first_step_ms": None, "buckets": None, "gradients": "the script's own"}
    return res, r


def trial_fields(cfg: DdpConfig, res: dict | None, r, setup: dict, note: str) -> dict:
    """The record fields every DDP trial carries (module docstring), from :func:`run_trial`'s answer."""
    return {"ddp": cfg.to_dict(), "status": "ok" if res else ("timeout" if r.timed_out else "failed"),
            "measured_step_time_ms": res["median_step_time_ms"] if res else None,
            "step_times_ms": res["step_times_ms"] if res else [],
            "first_step_ms": res["first_step_ms"] if res else None,
            "buckets": res["buckets"] if res else None, "gradients": res["gradients"] if res else None,
            **{k: res[k] for k in ("minor_faults_per_step", "malloc_env", "stages", "stage_overrun_ms") if res and k in res},
            "exit": list(r.returncodes), "error": "" if res else r.stderr[-300:], "setup": setup, "testbed": note,
            "wall_s": round(r.wall_s, 2), "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def validate_ddp(env_dir: Path, model: str, settings, *, name: str | None = None, compute_ms: float = 100.0,
                 steps: int = 5, warmup: int = 3, repeats: int = 3, np_: int = 2, bandwidth_gbit: float | None = None,
                 testbed_hosts: int = 0, ranks_per_host: int = 1, link_gbit: float | None = None,
                 command: list[str] | None = None, timeout_s: float = 600.0,
                 say: Callable[[str], None] = print) -> Path:
    """Real DDP runs for each of ``settings`` (:class:`DdpConfig`), ``repeats`` rounds, interleaved (round r runs
    every setting once), appended to ``env_dir/ddp-validation/<name>.jsonl`` (``name`` default: the layout's name),
    resuming after the (setting, repeat) pairs already there: the replay workload of layout ``model``, or the user's
    ``command`` (``python script.py args``: it reads the setting from :func:`knob_env`'s variables and prints
    ``AUTOTUNER_STEP_TIME_MS`` lines). Returns the file. Raises ValidationError (one line) when the testbed cannot
    be built or the command is not a script."""
    from ...readers.layouts import load_layout
    from ...realrun.launcher import testbed_for
    from .records import read_jsonl

    layout_name = load_layout(model).name
    out = env_dir / "ddp-validation" / f"{name or layout_name}.jsonl"
    recorded = model
    if model.endswith(".json") and Path(model).is_file():  # the records keep their layout beside them
        from ...writers.atomic import atomic_write_text

        copy = out.with_suffix(".layout.json")
        if not copy.exists():
            atomic_write_text(copy, Path(model).read_text())
        recorded = str(copy.relative_to(env_dir))
    done = {(r.get("label"), r.get("repeat")) for r in (read_jsonl(out) if out.exists() else [])}
    topo = (testbed_hosts, ranks_per_host) if testbed_hosts else None
    script = script_of(command) if command else None
    setup = {**_setup(np_, bandwidth_gbit, testbed_hosts, ranks_per_host, link_gbit), "model": recorded,
             "compute_ms": compute_ms, "steps": steps, "warmup": warmup, "command": list(command or [])}
    with testbed_for(topo, bandwidth_gbit, link_gbit) as (tb, note):
        say(note)
        for rep in range(repeats):
            for cfg in settings:
                label = cfg.label()
                if (label, rep) in done:
                    continue
                res, r = run_trial(cfg, model, compute_ms, steps, warmup, ranks_per_host if topo else np_, tb,
                                   timeout_s, script)
                rec = {"trial": f"{label}/r{rep}", "label": label, "repeat": rep,
                       **trial_fields(cfg, res, r, setup, note)}
                append_record(out, rec)
                say(f"{layout_name} {label} r{rep}: {rec['status']}"
                    + (f", {rec['measured_step_time_ms']:.1f} ms/step" if res else "")
                    + (f" (first {rec['first_step_ms']:.1f})" if res and rec["first_step_ms"] else ""))
    return out
