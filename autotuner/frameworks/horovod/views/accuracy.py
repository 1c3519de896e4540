"""Accuracy checks: the fitted models against the measured runs they came from.

Each :class:`Case` is one measured number next to its prediction. Used by the tests
(tests/test_accuracy.py) and by ``autotuner accuracy`` (docs/accuracy.md is generated from it).
"""
from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..fit.fitters import run_config, workload_for
from ....errors import ModelStoreError, RunsError, ScenarioError
from ..fit.store import load_env
from ..knobs import MIB, Config
from ....model.costmodel import Cluster, CostModel
from ..simulator import simulate_step
from ....readers.layouts import load_recorded_layout
from ..readers.runs import read_runs
from ..schemas.records import same_values_on_every_rank, timeline_recorded, zero_gradients


#: what a validation row's quantity says when its trials ran Horovod's timeline (not the predicted job)
TIMELINE_RAN = "timeline ran"
#: what an fp16 validation row's quantity says when its replay allreduced zeros (the oldest
#: records, :func:`autotuner.schemas.records.zero_gradients`): a CPU sums float16 zeros far faster than gradients
ZERO_GRADIENTS = "zero gradients"
#: what an fp16 validation row's quantity says when its replay's ranks held the same values from the second step on
#: (older records, :func:`autotuner.schemas.records.same_values_on_every_rank`): Gloo's
#: float16 sum of ``x + x`` runs 10-22 % faster than a training job's sum of two ranks' own values
SAME_VALUES = "same values on every rank"
#: the tags of rows whose trials ran another job than the one predicted
OTHER_JOB = (TIMELINE_RAN, ZERO_GRADIENTS, SAME_VALUES)


@dataclass(frozen=True)
class Case:
    """A measured quantity and its prediction; ``calibrated`` marks numbers used by the fit."""

    env: str
    what: str
    measured: float
    predicted: float
    source: str
    calibrated: bool = False
    #: (low, high): the prediction with the small-response price at either end of what the env's phases leave open
    #: (:attr:`autotuner.model.costmodel.CostModel.small_alpha_range_s`); None where the model has no such range
    predicted_range: tuple[float, float] | None = None

    @property
    def error_pct(self) -> float:
        return (self.predicted - self.measured) / self.measured * 100


def _read_runs_from(runs_dirs: list[Path]):
    """The environments of several runs folders, searched in order: each env from the first
    folder holding it. A folder that is missing or holds no environment is skipped, unless it is
    the only one. Raises RunsError when no folder holds an environment."""
    if len(runs_dirs) == 1:
        return read_runs(runs_dirs[0])
    envs: dict[str, object] = {}
    problems: list[str] = []
    for d in runs_dirs:
        try:
            es, ps = read_runs(d)
        except RunsError:
            continue
        problems += ps
        for e in es:
            envs.setdefault(e.name, e)
    if not envs:
        raise RunsError(f"no measured environment (a folder with env.toml and its records) in any of "
                        f"{', '.join(map(str, runs_dirs))}: the package ships fitted models, not records; run from "
                        "the repository's root (./runs) or pass --runs-dir")
    return [envs[k] for k in sorted(envs)], problems


def cases(runs_dir: Path | Sequence[Path], model_dir: Path | Sequence[Path], env: str | None = None,
          notes: list[str] | None = None, cost_model: str | None = None) -> list[Case]:
    """Every measured number of ``runs_dir`` (one env, or all) next to the prediction of its
    fitted model in ``model_dir``. With ``cost_model`` (a fitted env's name, e.g. a ``measure``
    sweep), the real trials of ``validation`` envs are predicted with that env's cost model and
    cluster instead, their compute from each trial's own setup (the replay workload's emulated
    compute): every row is then held out. Other formats are skipped and named in ``notes``. Each is one folder or several searched in order
    (:mod:`autotuner.paths`: an env from the first folder holding it). An environment without a
    fitted model is skipped and named in ``notes``. Raises RunsError for an unreadable runs dir,
    ScenarioError for an unknown env."""
    dirs = [Path(runs_dir)] if isinstance(runs_dir, (str, Path)) else [Path(d) for d in runs_dir]
    envs, problems = _read_runs_from(dirs)
    if notes is not None:
        notes += problems
    every = list(envs)
    if env is not None:
        if env not in {e.name for e in envs}:
            raise ScenarioError(f"--env: {env!r}: no such environment in {', '.join(map(str, dirs))} "
                                f"(known: {', '.join(sorted(e.name for e in envs))})")
        envs = [e for e in envs if e.name == env]
    out: list[Case] = []
    other = load_env(model_dir, cost_model) if cost_model is not None else None
    for env in envs:
        if other is not None:
            if env.meta["format"] == "validation":
                out += _validation_cases(env, other, transfer=True)
            elif notes is not None:
                notes.append(f"{env.name}: not compared with the {cost_model} cost model (only real validation "
                             f"trials, whose compute is known, are; this env's format is {env.meta['format']!r})")
            continue
        try:
            fenv = load_env(model_dir, env.name)
        except ModelStoreError as e:
            if notes is not None:
                notes.append(f"{env.name}: not compared ({e})")
            continue
        meta = env.meta
        if meta["format"] == "responses":
            steps = int(meta.get("steps", 0)) or None  # responses per step need the report's step count
            for run in meta["run"]:
                wl = fenv.workloads[run["model"]][1]
                L = fenv.layout_for(run["model"])
                cfg = run_config(meta, run)
                r = simulate_step(L.sizes_bytes, L.ready_fraction, wl, cfg, fenv.cost, fenv.cluster)
                st = next(s for s in env.step_times if s.run == run["id"])
                tag = f"{run['model']} fusion {run['fusion_threshold_mb']} MB"
                out.append(Case(env.name, f"{tag}: step time (ms)", st.step_ms, r.step_time_ms,
                                f"{env.path.name}/{meta['source']}:{st.line}", bool(run.get("reference"))))
                bks = [b for b in env.buckets if b.run == run["id"]]
                sizes = np.array([x.nbytes for x in r.responses])
                if steps is None or not bks:
                    continue
                out.append(Case(env.name, f"{tag}: responses per step", sum(b.count for b in bks) / steps,
                                float(len(sizes)), f"{env.path.name}/{meta['source']}:{bks[0].line}-{bks[-1].line}"))
                for b in bks:
                    n = int(((sizes > b.lo_bytes) & (sizes <= b.hi_bytes)).sum())
                    out.append(Case(env.name, f"{tag}: responses per step in ({b.lo_bytes / MIB:g}, {b.hi_bytes / MIB:g}] MiB",
                                    b.count / steps, float(n), f"{env.path.name}/{meta['source']}:{b.line}"))
        elif meta["format"] == "breakdown":
            cfg = run_config(meta)
            for col in meta["column"]:
                cl = Cluster(col["nodes"], col["gpus_per_node"])
                for m, (layout_name, wl) in fenv.workloads.items():
                    cell = next((c for c in env.breakdown if c.model == m and c.column == col["key"] and c.row == "step"), None)
                    if cell is None:
                        continue
                    L = fenv.layout_for(m)
                    r = simulate_step(L.sizes_bytes, L.ready_fraction, wl, cfg, fenv.cost, cl)
                    out.append(Case(env.name, f"{m} {col['key']}: step time (ms)", cell.value, r.step_time_ms,
                                    f"{env.path.name}/{meta['source']}:{cell.line}", True))
        elif meta["format"] == "validation":
            out += _validation_cases(env, fenv)
        elif meta["format"] == "sweep" and (env.path / "validation").is_dir():
            out += _validation_cases(env, fenv, held_out_only=True)
        elif meta["format"] == "sweep" and (twins := _same_setup(env, every)):
            for v in twins:  # a sweep with no trials of its own predicts those measured on its setup
                out += [replace(c, env=env.name, what=f"on {v.name}'s trials: {c.what}")
                        for c in _validation_cases(v, fenv, transfer=True)]
        elif meta["format"] in MODEL_FILE_HELD_OUT and (fenv.raw.get("fit") or {}).get("held_out"):
            out += _model_file_cases(env, fenv, meta)
        elif notes is not None:  # sweep, nccl-tests, timelines: no step time measured with known compute
            notes.append(f"{env.name}: a {meta['format']} environment has no step time to predict; check it "
                         f"against real training with --cost-model {env.name} --env <a validation env>")
    return out


#: formats whose fit holds out whole runs and records their predictions in the model file
#: (``fit.held_out``: :mod:`autotuner.frameworks.horovod.fit.backend_runs`, :mod:`autotuner.frameworks.horovod.fit.compression_runs`,
#: :mod:`autotuner.frameworks.horovod.fit.cpu_scaling`)
MODEL_FILE_HELD_OUT = ("backend-runs", "compression-runs", "cpu-scaling")

#: the quantity's suffix for a whole run's wall time
WALL = "wall time of the run (s)"


#: env.toml keys that make two environments the same setup (:func:`_same_setup`)
SETUP_KEYS = ("nodes", "gpus_per_node", "link_gbps", "backend")


def _same_setup(env, envs) -> list:
    """The ``validation`` environments measured on ``env``'s setup (:data:`SETUP_KEYS` equal in
    their env.toml): where a sweep without trials of its own is checked (as ``--cost-model``)."""
    key = tuple(env.meta.get(k) for k in SETUP_KEYS)
    return [e for e in envs if e.meta["format"] == "validation" and tuple(e.meta.get(k) for k in SETUP_KEYS) == key]


def _model_file_cases(env, fenv, meta) -> list[Case]:
    """The held-out runs a fit recorded in the model file (``fit.held_out``: measured and predicted
    wall time of a whole run, s), one :class:`Case` each, never used by the fit."""
    out = []
    for h in fenv.raw["fit"]["held_out"]:
        what = ", ".join(f"{k} {h[k]}" for k in ("model", "run", "backend", "processes", "devices", "ranks") if k in h)
        line = str(h.get("line", ""))
        src = line if "/" in line else f"{env.path.name}/{meta['source']}:{line}"
        out.append(Case(env.name, f"{what}: {WALL}", float(h["measured_s"]), float(h["predicted_s"]), src, False))
    return out


def simulate_trial(fenv, env_path: Path, cfg: Config, setup: dict, where: str = "setup.model",
                   compression: str = "none", cost: CostModel | None = None):
    """Predict one real replay trial with ``fenv`` (a :class:`autotuner.frameworks.horovod.fit.store.FittedEnv`):
    the trial's layout (``setup.model``: shipped name, a layout stored with the env under
    ``env_path``, or an absolute ``.json`` path as ``validate --model`` recorded it:
    :func:`autotuner.readers.layouts.load_recorded_layout`), its emulated compute (``setup.compute_ms``, forward 1/3 and backward 2/3 as
    :mod:`autotuner.frameworks.horovod.replay` sleeps them, plus ``setup.update_ms``), the trial's shape
    (``setup.testbed_hosts`` x ``setup.ranks_per_host``; else the env's cluster; the cost model for
    that shape, :meth:`autotuner.frameworks.horovod.fit.store.FittedEnv.cost_for`) and the env's backend; ``compression``: the
    trial's (``fp16``: half the bytes, and the env's measured fp16 cost when it has one,
    :class:`autotuner.model.costmodel.Fp16Cost`); ``cost``: another cost model of the env in place of
    ``fenv.cost`` (e.g. at an end of the small-response price, :meth:`autotuner.model.costmodel.CostModel.small_alpha_ends`;
    None: the env's own).
    Returns the :class:`autotuner.frameworks.horovod.simulator.StepResult`. Raises KeyError for a
    setup without ``compute_ms``, LayoutError (one line) for an unknown or missing layout."""
    from ..scenario import COMPRESSION_RATIO

    wl = replace(workload_for(float(setup["compute_ms"]) * 1e-3), update_s=float(setup.get("update_ms", 0.0)) * 1e-3)
    L = load_recorded_layout(setup["model"], env_path, where)
    hosts, rph = setup.get("testbed_hosts"), setup.get("ranks_per_host")
    cluster = fenv.cluster if hosts is None else Cluster(int(hosts), int(rph))
    backend = str((fenv.raw.get("cluster") or {}).get("backend") or "").lower() or None
    cost = fenv.cost_for(cluster) if cost is None else replace(fenv, cost=cost).cost_for(cluster)
    if compression == "fp16":
        if cost.fp16 is not None:
            wl = replace(wl, update_s=wl.update_s + cost.fp16.update_s(float(np.sum(L.sizes_bytes)), len(L.sizes_bytes)))
        cost = cost.for_fp16()
    return simulate_step(L.sizes_bytes, L.ready_fraction, wl, cfg, cost, cluster, backend=backend,
                         compression_ratio=COMPRESSION_RATIO[compression])


def _validation_cases(env, fenv, transfer: bool = False, held_out_only: bool = False) -> list[Case]:
    """Real trials of a ``validation`` env: the fit's own records (marked calibrated) and every
    other ``validation/*.jsonl`` (held out: their configurations were not used by the fit).
    ``transfer``: ``fenv`` is another environment's model (see :func:`cases`): its cost model
    and cluster, the trial setup's compute (forward 1/3, backward 2/3 of ``compute_ms``, as
    :mod:`autotuner.frameworks.horovod.replay` runs it, plus ``update_ms``), the trial's shipped layout;
    no row is calibrated. ``held_out_only``: the env was fitted from something else (a ``sweep``
    env's trials under ``validation/``, e.g. runs/local-gloo-2x2): every trial is held out and its
    workload comes from its setup as for ``transfer``.

    A trial run on an emulated cluster (setup ``testbed_hosts`` x ``ranks_per_host``) is predicted
    for that shape, not the env's; the env's backend decides whether a hierarchical flag acts
    (:func:`autotuner.frameworks.horovod.knobs.hierarchical_allreduce_supported`).
    Per configuration: measured = median over repeats of each trial's median step time. Trials that ran
    Horovod's timeline (:func:`autotuner.schemas.records.timeline_recorded`) are their own rows, named
    "timeline ran": the prediction is for a job without the timeline, whose writer costs such a step 3-30 %
    (docs/how-to/validate.md), so those rows are not like with like and say so. So are fp16 trials whose replay
    allreduced zeros (:func:`autotuner.schemas.records.zero_gradients`), named "zero gradients", and those whose
    replay's ranks allreduced the same values from the second step on
    (:func:`autotuner.schemas.records.same_values_on_every_rank`), named "same values on every rank".
    """
    from ..readers.runs import read_validation_files

    out: list[Case] = []
    for f, recs in read_validation_files(env.path):
        fitted = f.resolve() == (env.path / env.meta["source"]).resolve()
        groups: dict[tuple, list[dict]] = {}
        for r in recs:
            if r.get("status") == "ok" and r.get("config") and not r["setup"].get("command"):
                shape = (r["setup"].get("testbed_hosts"), r["setup"].get("ranks_per_host"))
                groups.setdefault((r["setup"]["model"], r.get("label"), json.dumps(r["config"], sort_keys=True),
                                   shape, r.get("compression", "none"), *_other_jobs(r)),
                                  []).append(r)
        backend = str((fenv.raw.get("cluster") or {}).get("backend") or "").lower() or None
        for (model, label, _, shape, comp, tl, zeros, same), rs in groups.items():
            cfg = Config.from_dict(rs[0]["config"])
            rng = None
            if transfer or held_out_only:
                if "compute_ms" not in rs[0]["setup"]:
                    continue
                sim = simulate_trial(fenv, env.path, cfg, rs[0]["setup"], f"{f.name}: setup.model", comp)
                if not transfer:  # the step at either end of the price the phases leave open (charged: reused)
                    rng = sorted(sim.step_time_ms if m is None else simulate_trial(
                        fenv, env.path, cfg, rs[0]["setup"], f"{f.name}: setup.model", comp, m).step_time_ms
                        for m in fenv.cost.small_alpha_ends()) or None
            elif comp != "none":
                continue  # a calibrated workload's trials ran without compression
            elif model not in fenv.workloads:
                continue
            else:
                wl = fenv.workloads[model][1]
                L = fenv.layout_for(model)
                cluster = fenv.cluster if shape[0] is None else Cluster(int(shape[0]), int(shape[1]))
                sim = simulate_step(L.sizes_bytes, L.ready_fraction, wl, cfg, fenv.cost_for(cluster), cluster,
                                    backend=backend)
            tag = (f"{model} {label} ({cfg.fusion_threshold_mb:g} MiB, {cfg.cycle_time_ms:g} ms"
                   + (", cache off" if cfg.cache_capacity == 0 else "")
                   + (", hierarchical" if cfg.hierarchical_allreduce else "")
                   + ("" if comp == "none" else f", {comp}")
                   + (f", {TIMELINE_RAN}" if tl else "") + (f", {ZERO_GRADIENTS}" if zeros else "")
                   + (f", {SAME_VALUES}" if same else "") + ")"
                   + ("" if shape[0] is None else f" on {shape[0]}x{shape[1]}"))
            src = f"{env.path.name}/validation/{f.name} ({len(rs)} trials)"
            name = f"{env.name} (cost model: {fenv.name})" if transfer else env.name
            fitted = fitted and not transfer
            out.append(Case(name, f"{tag}: step time (ms)",
                            float(np.median([r["measured_step_time_ms"] for r in rs])), sim.step_time_ms, src, fitted,
                            None if rng is None else (rng[0], rng[1])))
            rps = [r["timeline"]["responses_per_step"] for r in rs if (r.get("timeline") or {}).get("responses_per_step")]
            if rps:
                out.append(Case(name, f"{tag}: responses per step", float(np.median(rps)),
                                float(len(sim.responses)), src, fitted))
    return out


_TRIALS = re.compile(r"^(?P<file>.*) \((?P<n>\d+) trials?\)$")
_LINES = re.compile(r"^(?P<file>.*):(?P<lines>\d+(?:-\d+)?)$")


def source_parts(source: str) -> tuple[str, str]:
    """A case's ``source`` split into the file and where in it: ``("env/validation/x.jsonl", "5 trials")`` for
    ``"env/validation/x.jsonl (5 trials)"``, ``("env/report-000.md", "line 39")`` or ``("...", "lines 39-46")`` for a
    report's line or lines, ``(source, "")`` otherwise (a source the readers wrote in no such form)."""
    m = _TRIALS.match(source)
    if m:
        n = int(m["n"])
        return m["file"], f"{n} trial" + ("" if n == 1 else "s")
    m = _LINES.match(source)
    if m:
        return m["file"], ("lines " if "-" in m["lines"] else "line ") + m["lines"]
    return source, ""


def markdown(cs: list[Case]) -> str:
    lines = ["| env | quantity | measured | predicted | error | source | calibrated on it |",
             "|---|---|---:|---:|---:|---|---|"]
    for c in cs:
        lines.append(f"| {c.env} | {c.what} | {c.measured:.2f} | {c.predicted:.2f} | {c.error_pct:+.1f}% | "
                     f"{c.source} | {'yes' if c.calibrated else 'no'} |")
    return "\n".join(lines)



def summary(cs: list[Case]) -> list[dict]:
    """Per environment, the step-time rows (and a whole run's wall time, where the env records
    runs: :data:`WALL`) in brief: how many, how many the fit used, and for
    the held-out ones (not used by the fit: the honest test) the mean absolute error and the
    worst case, in percent. ``None`` where there is no held-out step time. ``held_out_other_job`` counts the
    held-out rows whose trials ran another job than the prediction's (tagged :data:`OTHER_JOB`: Horovod's
    timeline, fp16 over zero gradients or over the same values on every rank); ``held_out_as_predicted``, ``as_predicted_mape_percent`` and
    ``as_predicted_worst`` are the rest's."""
    out = []
    for env in dict.fromkeys(c.env for c in cs):
        st = [c for c in cs if c.env == env and (c.what.endswith("step time (ms)") or c.what.endswith(WALL))]
        held = [c for c in st if not c.calibrated]
        worst = max(held, key=lambda c: abs(c.error_pct), default=None)
        # like with like: the held-out rows whose trials ran the job predicted
        prod = [c for c in held if not any(t in c.what for t in OTHER_JOB)]
        pworst = max(prod, key=lambda c: abs(c.error_pct), default=None)
        out.append({"env": env, "step_time_rows": len(st), "used_by_fit": len(st) - len(held),
                    "held_out": len(held),
                    "held_out_mape_percent": float(np.mean([abs(c.error_pct) for c in held])) if held else None,
                    "held_out_worst": None if worst is None else {"quantity": worst.what,
                                                                  "error_percent": worst.error_pct},
                    "held_out_other_job": len(held) - len(prod),
                    "held_out_as_predicted": len(prod),
                    "as_predicted_mape_percent": float(np.mean([abs(c.error_pct) for c in prod])) if prod else None,
                    "as_predicted_worst": None if pworst is None else {"quantity": pworst.what,
                                                                           "error_percent": pworst.error_pct}})
    return out


def _other_jobs(r: dict) -> tuple[bool, bool, bool]:
    """Which other job than the one predicted validation record ``r``'s trial ran, as flags in
    :data:`OTHER_JOB`'s order (timeline ran, fp16 over zero gradients, fp16 over the same values on every
    rank): the tags of :func:`_validation_cases`' rows and what :func:`trust_of` leaves out."""
    fp16 = r.get("compression", "none") == "fp16"
    return (bool(timeline_recorded(r)), fp16 and bool(zero_gradients(r)), fp16 and bool(same_values_on_every_rank(r)))


#: the suffix of a validation case run on another emulated shape (``... on 1x4: step time (ms)``)
_SHAPE = re.compile(r"\) on (\d+)x(\d+): ")


def trust_of(runs_dir: Path | Sequence[Path], model_dir: Path | Sequence[Path], env: str) -> dict:
    """How far ``env``'s fitted model has been checked against real runs (a model file's
    ``trust``, :class:`autotuner.schemas.TrustEntry`).

    ``configurations``: held-out step times of :func:`cases` (numbers the fit did not use), and
    held-out whole runs' wall times where the env records runs (:data:`WALL`);
    ``mean_error_pct`` / ``worst_pct``: their mean absolute and worst signed error (%);
    ``trials``: the ok real trials behind them (validation records; a lab report's rows count one
    each); trials on another shape than the env's (``validate --testbed-hosts``) are what-ifs and
    left out; ``repeat_spread_pct``: median over configurations run >= 2 times of (max - min) / median
    of their trials' step times (%); ``band``: the larger of the mean error and the repeat spread,
    as a fraction: predicted differences inside it are not evidence. Like with like: rows whose
    trials ran another job than the prediction's (:data:`OTHER_JOB`: Horovod's timeline, fp16 over zero
    gradients or over the same values on every rank) are left out of every figure, their trials too, and
    counted in ``other_job_configurations`` (``other_jobs``: which, as the rows' tags); where every held-out
    row ran another job, the figures are those rows' and ``only_other_job`` is true (the trust line says
    so). An env with no held-out step time gives ``{"trials": 0, "configurations": 0}`` (never checked).
    Never raises for a missing runs folder or env, nor for records the fit left out (never checked)."""
    from ..readers.runs import read_validation_records
    from ....errors import AutotunerError

    try:
        fenv = load_env(model_dir, env)
        own = (fenv.cluster.nodes, fenv.cluster.gpus_per_node)

        def other_shape(what: str) -> bool:  # trials on another shape are what-ifs, not this env
            m = _SHAPE.search(what)
            return m is not None and (int(m.group(1)), int(m.group(2))) != own
        cs = [c for c in cases(runs_dir, model_dir, env) if c.what.endswith(("step time (ms)", WALL)) and not c.calibrated
              and not other_shape(c.what)]
    except (AutotunerError, StopIteration, KeyError, ValueError, TypeError):  # a row the fit left out
        cs, own = [], None
    prod = [c for c in cs if not any(t in c.what for t in OTHER_JOB)]  # the rows that ran the predicted job
    only_other = bool(cs) and not prod
    other_job = len(cs) - len(prod)
    kinds = [t for t in OTHER_JOB if any(t in c.what for c in cs)]  # which other jobs, in OTHER_JOB's order
    cs = prod or cs
    out: dict = {"trials": 0, "configurations": len(cs)}
    if not cs:
        return out
    if only_other:
        out["only_other_job"] = True
    elif other_job:
        out["other_job_configurations"] = other_job
    if kinds:
        out["other_jobs"] = kinds
    err = np.array([c.error_pct for c in cs])
    spreads, trials = [], 0
    dirs = [Path(runs_dir)] if isinstance(runs_dir, (str, Path)) else [Path(d) for d in runs_dir]
    first = next((d for d in dirs if (d / env / "env.toml").is_file()), None)  # the env's folder, as cases()
    groups: dict[tuple, list[float]] = {}
    for stem, r in read_validation_records(first, env) if first is not None else []:
        if (r.get("status") == "ok" and r.get("config") and not r["setup"].get("command")
                and (r["setup"].get("testbed_hosts") is None
                     or (r["setup"]["testbed_hosts"], r["setup"].get("ranks_per_host")) == own)
                and (only_other or not any(_other_jobs(r)))):
            # one job: its knobs and its compression (an fp16 proposal at the defaults' knobs is another job than
            # the defaults; pooled, their repeat spread read 103 % on fresh-poll-2.25gbit)
            key = (stem, r["setup"].get("model"), json.dumps(r["config"], sort_keys=True),
                   r.get("compression", "none"), r["setup"].get("testbed_hosts"), r["setup"].get("ranks_per_host"))
            groups.setdefault(key, []).append(float(r["measured_step_time_ms"]))
    for rs in groups.values():
        trials += len(rs)
        if len(rs) >= 2:
            spreads.append((max(rs) - min(rs)) / float(np.median(rs)) * 100)
    out["trials"] = trials or len(cs)
    out["mean_error_pct"] = float(np.mean(np.abs(err)))
    out["worst_pct"] = float(err[np.argmax(np.abs(err))])
    if spreads:
        out["repeat_spread_pct"] = float(np.median(spreads))
    out["band"] = max(out["mean_error_pct"], out.get("repeat_spread_pct", 0.0)) / 100
    return out
