"""Fit an environment from a user's own Horovod timelines (env.toml ``format = "timelines"``).

``source`` is a glob, relative to the environment's folder, of HOROVOD_TIMELINE files of any
training job (``horovodrun --timeline-filename F [--timeline-mark-cycles]`` or
``HOROVOD_TIMELINE=F [HOROVOD_TIMELINE_MARK_CYCLES=1]``): closed (>= 0.20.1), unclosed
(<= 0.20.0) or cut mid-write, plain or gzipped (:func:`autotuner.readers.timeline.read_timeline`).
A file that cannot be read is skipped and named in ``env.problems``, as is every record the
reader drops (a cut tail, a tensor still in flight). See docs/how-to/fit-from-timelines.md.

What is fitted, per file then pooled (the same arithmetic as ``validation`` envs,
:func:`autotuner.frameworks.horovod.fit.fitters.fit_validation_env`, so the same timelines fit the same model):

- **Collective tier**: the file's allreduce responses (:func:`~autotuner.readers.timeline.samples`)
  grouped by byte count: one sample ``(bytes, count, mean duration)`` per (file, size), as
  :func:`autotuner.frameworks.horovod.validation.summarize_timeline` summarises one trial (the validation
  summary rounds the mean to 0.1 µs; here it is not rounded). Sizes whose mean reads 0 µs are
  dropped (1 µs resolution). Then :func:`~autotuner.fit.collective.fit_collective_tier` (linear,
  and piecewise where the samples allow).
- **Fusion-buffer copy rate**: 2 x bytes / (MEMCPY_IN + MEMCPY_OUT span) summed over every
  fused response (more than one tensor) of every file.
- **Host passes and the negotiation cost per cycle**: :func:`~autotuner.readers.timeline_steps.host_samples`
  of each file, pooled, then :func:`~autotuner.fit.regression.fit_host_passes` when there are at
  least 3 fused responses and 3 back-to-back pairs. ``host_samples`` needs the cycle time to know
  when the background loop did not sleep between two cycles. It is the smaller of env.toml's
  ``cycle_time_ms`` (when given) and the file's *cycle bound* (:func:`cycle_bound_ms`: the
  shortest interval between two CYCLE_START marks, +1 µs), else None (no marks, no knob:
  ``host_samples``' 50 ms rule).
- **Workload** (only with env.toml ``layout``): one compute time for that model, calibrated
  (:func:`~autotuner.frameworks.horovod.fit.fitters.calibrate_compute`) so that the simulated step equals the
  measured one: the median, over every file, of the time from one step's first allreduce
  response start to the next step's (steps cut by :func:`~autotuner.readers.timeline_steps.split_steps`,
  the first complete step of each file skipped as warm-up), simulated with the job's knobs
  (:func:`job_config`). Without a layout there is no workload: ``simulate --compute-ms`` then
  gives the compute time.

Why the cycle bound is an upper bound on the cycle time: Horovod 0.28.1
``horovod/common/operations.cc`` ``RunLoopOnce`` sleeps until ``last_cycle_start +
CycleTimeMs()``, then sets ``last_cycle_start = now()`` and writes the CYCLE_START mark
(``Timeline::MarkCycleStart``, ``horovod/common/timeline.cc``, whole µs): two marks are never
closer than the cycle time (up to the 1 µs rounding, hence +1 µs). An upper bound only keeps
fewer next-cycle pairs (those after a collective at least that long), never one where the loop
slept.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ....errors import AutotunerError, FitError, KnobError
from ..knobs import MIB, Config, config_from_values
from ....model.costmodel import Cluster, CostModel
from ..readers.runs import EnvData
from ....readers.timeline import Timeline, read_timeline, samples
from ....readers.timeline_steps import host_samples, split_steps
from .fitters import (
    _async,
    _data_layout,
    _host_backward_s,
    _model_dict,
    _workload_json,
    calibrate_compute,
    fit_collective_tier,
    run_config,
    timeline_cost_model,
    workload_for,
)

#: fewest fused responses and back-to-back pairs for a host-pass fit (as ``fit_validation_env``)
MIN_HOST_SAMPLES = 3
#: files whose cycle bounds lie within this ratio are taken to share one cycle time
CYCLE_AGREE_RATIO = 1.05
#: how many file names ``calibrated_on`` lists before "and N more"
_LISTED = 4


@dataclass(frozen=True)
class TimelineFile:
    """One readable timeline of the env: ``rel`` its path relative to the env folder,
    ``cycle_bound_ms`` :func:`cycle_bound_ms` of it (None without two CYCLE_START marks)."""

    rel: str
    timeline: Timeline
    cycle_bound_ms: float | None


def cycle_bound_ms(tl: Timeline) -> float | None:
    """Upper bound on the cycle time ``tl`` was recorded with (ms): the shortest interval
    between two CYCLE_START marks + 1 µs (see the module docstring), or None with fewer than
    two marks (recorded without ``--timeline-mark-cycles``)."""
    marks = np.sort(np.asarray(tl.cycle_starts_us, dtype=float))
    if marks.size < 2:
        return None
    return round(float(np.min(np.diff(marks)) + 1.0) * 1e-3, 3)  # whole µs


def timeline_paths(env: EnvData) -> list[Path]:
    """The files ``source`` (a glob relative to the env folder) matches, sorted. A match that is
    not a regular file, or that resolves outside the env folder (a symbolic link), is left out
    and named in ``env.problems``. Raises FitError (one line) when none is left."""
    pattern = env.meta["source"]
    base = env.path.resolve()
    out = []
    for p in sorted(set(env.path.glob(pattern))):
        rel = f"{env.path.name}/{p.relative_to(env.path)}"
        try:
            inside = p.resolve().is_relative_to(base)
        except (OSError, RuntimeError):
            inside = False
        if not inside:
            env.problems.append(f"{rel}: resolves outside {env.path}: not read")
        elif not p.is_file():
            env.problems.append(f"{rel}: matches source {pattern!r} but is not a file: not read")
        else:
            out.append(p)
    if not out:
        raise FitError(f"{env.name}: source {pattern!r} matches no readable file in {env.path}")
    return out


def _named(msg: str, path: Path, rel: str) -> str:
    """A reader message (which starts with the file's full path) with the path made env-relative."""
    return rel + msg[len(str(path)):] if msg.startswith(str(path)) else f"{rel}: {msg}"


def read_timelines(env: EnvData) -> list[TimelineFile]:
    """Read every file of :func:`timeline_paths`. A file that cannot be read at all
    (TimelineError: not a timeline, corrupt gzip, not UTF-8, ...) is skipped; its error and every
    problem the reader reports for the others (a cut tail, tensors still in flight, dropped
    records) go to ``env.problems``, each naming the file. Raises FitError (one line, with the
    first file's error) when no file can be read."""
    tls, errors = [], []
    for p in timeline_paths(env):
        rel = f"{env.path.name}/{p.relative_to(env.path)}"
        try:
            tl = read_timeline(p)
        except AutotunerError as e:
            errors.append(_named(str(e), p, rel))
            env.problems.append(f"{errors[-1]} (file skipped)")
            continue
        env.problems += [_named(m, p, rel) for m in tl.problems]
        tls.append(TimelineFile(str(p.relative_to(env.path)), tl, cycle_bound_ms(tl)))
    if not tls:
        raise FitError(f"{env.name}: no usable timeline among the files matching {env.meta['source']!r}: "
                       f"none of the {len(errors)} is a readable Horovod timeline (first: {errors[0]})")
    return tls


def job_config(env: EnvData, files: list[TimelineFile]) -> Config:
    """The knobs the job ran with: env.toml's knob values over the defaults of its
    ``horovod_version`` (:func:`~autotuner.frameworks.horovod.fit.fitters.run_config`); when env.toml gives no
    ``cycle_time_ms`` and every file with cycle marks has a cycle bound within
    :data:`CYCLE_AGREE_RATIO` of the others, the smallest bound is taken as the cycle time.
    Files that disagree (different jobs or autotune), or a bound outside the knob's range, leave
    the default and are named in ``env.problems``. Raises KnobError for a bad env.toml knob."""
    cfg = run_config(env.meta)
    bounds = [f.cycle_bound_ms for f in files if f.cycle_bound_ms is not None]
    if "cycle_time_ms" in env.meta or not bounds:
        return cfg
    lo, hi = min(bounds), max(bounds)
    src = f"{env.path.name}/env.toml"
    if hi > lo * CYCLE_AGREE_RATIO:
        env.problems.append(f"{src}: no cycle_time_ms, and the timelines' cycle marks disagree (shortest cycle "
                            f"{lo:.3f} to {hi:.3f} ms across files): measured_config and any workload "
                            f"calibration use cycle_time_ms {cfg.cycle_time_ms:g}")
        return cfg
    try:
        return config_from_values({"cycle_time_ms": lo}, cfg, where=src)
    except KnobError as e:
        env.problems.append(f"{e} (the cycle marks' bound; cycle_time_ms {cfg.cycle_time_ms:g} used instead)")
        return cfg


def _check_fusion(env: EnvData, files: list[TimelineFile], cfg: Config) -> None:
    """Name a file with a fused response over the job's fusion threshold: Horovod never fuses
    past it (``horovod/common/controller.cc`` ``FuseResponses``), so env.toml's threshold is not
    the one the job ran with."""
    for f in files:
        big = max((r.nbytes for r in f.timeline.responses if len(r.tensors) > 1), default=0)
        if big > cfg.fusion_threshold_bytes:
            env.problems.append(f"{env.path.name}/{f.rel}: a fused response of {big / MIB:.2f} MiB is over the "
                                f"fusion threshold {cfg.fusion_threshold_bytes / MIB:g} MiB used for the "
                                f"workload calibration (give fusion_threshold_mb in env.toml)")


def fit_timelines_env(env: EnvData) -> dict[str, Any]:
    """Fit a ``timelines`` environment (see the module docstring); returns the model dict
    (schema ``autotuner.model/1``). Units: bytes, seconds inside, ms/µs in the dict as named.

    Raises FitError (one line, "no usable timeline ...") when no file matches, none can be read or
    none holds an allreduce response, or when they hold fewer than 2 allreduce sizes with a
    non-zero mean duration; LayoutError for a bad
    ``layout``; KnobError for a bad env.toml knob.
    """
    meta = env.meta
    cluster = Cluster(int(meta["nodes"]), int(meta["gpus_per_node"]))
    files = read_timelines(env)
    env_cycle = run_config(meta).cycle_time_ms if "cycle_time_ms" in meta else None
    label = Path(meta["layout"]).stem if meta.get("layout") else "timelines"
    rows: list[tuple[float, float, float, str]] = []
    mem = np.zeros(2)
    host_mem: list = []
    host_gaps: list = []
    intervals: list[float] = []
    used, host_used, cycles, n_tensors = [], [], {}, set()
    for f in files:
        rel = f"{env.path.name}/{f.rel}"
        df = samples(f.timeline)
        if df.empty:
            env.problems.append(f"{rel}: no allreduce response: file not used")
            continue
        # summarize_timeline's grouping: per size, the count and the mean duration (the step pays the total)
        g = df.groupby("nbytes")["duration_s"].agg(["count", "mean"]).reset_index()
        rows += [(float(n), float(c), float(m), f.rel) for n, c, m in zip(g["nbytes"], g["count"], g["mean"]) if m > 0]
        fused = [r for r in f.timeline.responses if len(r.tensors) > 1]
        mem += [sum(r.nbytes for r in fused), sum(r.memcpy_in_us + r.memcpy_out_us for r in fused)]
        used.append(f.rel)
        cyc = min((c for c in (env_cycle, f.cycle_bound_ms) if c is not None), default=None)
        cycles[f.rel] = cyc
        try:
            hs = host_samples(f.timeline, cycle_time_ms=cyc)
            st = split_steps(f.timeline, skip=1)
        except AutotunerError as e:  # TimelineError: no complete step after the first
            env.problems.append(f"{_named(str(e), Path(f.timeline.source), rel)}: file not used for host "
                                f"passes or step time")
            continue
        host_mem += hs.memcpy
        host_gaps += hs.gaps
        host_used.append(f.rel)
        n_tensors.add(st.n_tensors)
        starts = [s[0].start_us for s in st.steps]
        intervals += list(np.diff(starts) * 1e-3)
    if not used:
        raise FitError(f"{env.name}: no usable timeline among the files matching {meta['source']!r}: "
                       f"{len(files)} readable, none with an allreduce response")
    if len(rows) < 2:
        raise FitError(f"{env.name}: fewer than 2 allreduce sizes with a measured duration in "
                       f"{len(used)} usable timeline(s) of {meta['source']!r}")
    arr = np.array([r[:3] for r in rows], dtype=float)
    nbytes, counts, times = arr[:, 0], arr[:, 1], arr[:, 2]
    tier, lin, pred, piece_info = fit_collective_tier(nbytes, counts, times, cluster.size)
    cost, host_info = timeline_cost_model(tier, link_gbps=float(meta["link_gbps"]), ranks=cluster.size,
                                          memcpy_bytes=mem[0], memcpy_s=mem[1] * 1e-6, host_mem=host_mem,
                                          host_gaps=host_gaps, min_host=MIN_HOST_SAMPLES)
    if host_info is not None:
        host_info["timelines"] = host_used
    else:
        env.problems.append(f"{env.path.name}/{meta['source']}: {len(host_mem)} fused response(s) and "
                            f"{len(host_gaps)} back-to-back pair(s) in complete steps: too few for host passes "
                            f"(>= {MIN_HOST_SAMPLES} of each); memcpy rate and fitted latency used instead")
    cfg = job_config(env, files)
    step_ms = float(np.median(intervals)) if intervals else None
    workloads: dict[str, Any] = {}
    if meta.get("layout"):
        workloads = _calibrate(env, files, cfg, cost, cluster, step_ms, len(intervals), n_tensors, host_used)
    fit_info = {"form": "alpha-beta (ring)", "p": cluster.size, "a_ms": lin.a_s * 1e3,
                "b_ms_per_mib": lin.b_s_per_byte * MIB * 1e3, "r2": lin.r2, "mape_percent": lin.mape,
                "n_samples": lin.n, "n_timelines": len(used), "piecewise": piece_info, "host_passes": host_info,
                "timelines": used, "host_cycle_time_ms": cycles, "step_time_ms": step_ms,
                "n_step_intervals": len(intervals),
                "samples": [{"bytes": float(n), "time_ms": float(t * 1e3), "count": int(c), "pred_ms": float(q * 1e3),
                             "model": label, "file": r[3]}
                            for n, t, c, q, r in zip(nbytes, times, counts, pred, rows)]}
    return _model_dict(env, cluster, cost, fit_info, workloads, cfg)


def _calibrate(env: EnvData, files: list[TimelineFile], cfg: Config, cost: CostModel, cluster: Cluster,
               step_ms: float | None, n_intervals: int, n_tensors: set[int], host_used: list[str]) -> dict[str, Any]:
    """The workload of env.toml's ``layout`` (one compute time, see the module docstring), or {}
    with the reason in ``env.problems`` (no step interval, or communication alone slower than the
    measured step). Raises LayoutError for a layout that cannot be loaded."""
    meta = env.meta
    layout = _data_layout(env, meta["layout"], "layout")
    where = f"{env.path.name}/env.toml: layout {meta['layout']!r}"
    if n_tensors and n_tensors != {len(layout.names)}:
        env.problems.append(f"{where} has {len(layout.names)} tensors but the timelines' steps allreduce "
                            f"{', '.join(map(str, sorted(n_tensors)))}: is it the job's model?")
    _check_fusion(env, files, cfg)
    if step_ms is None:
        env.problems.append(f"{where}: no two consecutive complete steps after the first in any timeline: "
                            "no workload calibrated (use --compute-ms)")
        return {}
    overlap = float(meta.get("overlap", 1.0))
    hb = _host_backward_s(meta, layout.name)
    try:
        compute = calibrate_compute(layout, step_ms, 1.0, overlap, cfg, cost, cluster, hb, _async(meta))
    except FitError as e:
        env.problems.append(f"{where}: no workload calibrated ({e})")
        return {}
    wl = workload_for(compute, 1.0, overlap, hb, _async(meta))
    more = len(host_used) - _LISTED
    shown = ", ".join(host_used[:_LISTED]) + (f" and {more} more" if more > 0 else "")
    return {layout.name: {"layout": meta["layout"], **_workload_json(wl),
                          "calibrated_on": (f"{env.path.name}/{meta['source']}: median of {n_intervals} step "
                                            f"intervals = {step_ms:.1f} ms ({shown}); cycle_time_ms "
                                            f"{cfg.cycle_time_ms:g}, fusion_threshold_mb "
                                            f"{cfg.fusion_threshold_bytes / MIB:g}")}}
