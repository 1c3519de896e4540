"""Command line: ``autotuner fit | simulate | suggest | validate | inspect | compare | explore | scale``. Thin: parse, call, print.

Every error we can name prints one line (``error: ...``) on stderr and exits with status 2.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .api import (
    Scenario,
    ScenarioError,
    compare_timelines,
    fit_runs,
    make_scenario,
    write_simulated_timeline,
)
from .fit.fitters import FitError
from .fit.store import ModelStoreError
from .knobs import DEFAULTS_0_28, MIB, Config, KnobError, horovod_env, horovodrun_flags
from .model.costmodel import CostModelError
from .model.layout import LayoutError
from .readers.autotune_log import AutotuneLogError
from .readers.runs import RunsError
from .readers.timeline import TimelineError
from .realrun.validation import ValidationError
from .search.bayes import search, top_distinct
from .views.explore import ExploreError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Predict and tune Horovod's knobs from measured bandwidth data.")
out = Console()
err = Console(stderr=True)
USER_ERRORS = (RunsError, FitError, LayoutError, ModelStoreError, ScenarioError, KnobError, CostModelError,
               ValidationError, AutotuneLogError, TimelineError, ExploreError)
DEFAULT_MODEL_DIR = Path("model")


def _config(fusion_threshold_mb: Optional[float], cycle_time_ms: Optional[float], cache_capacity: Optional[int],
            hierarchical_allreduce: Optional[bool], hierarchical_allgather: Optional[bool]) -> Config:
    d = DEFAULTS_0_28
    return Config(
        fusion_threshold_bytes=d.fusion_threshold_bytes if fusion_threshold_mb is None else int(round(fusion_threshold_mb * MIB)),
        cycle_time_ms=d.cycle_time_ms if cycle_time_ms is None else cycle_time_ms,
        cache_capacity=d.cache_capacity if cache_capacity is None else cache_capacity,
        hierarchical_allreduce=bool(hierarchical_allreduce),
        hierarchical_allgather=bool(hierarchical_allgather)).validate()


def _result_dict(sc: Scenario, cfg: Config, r) -> dict:
    return {"env": sc.env, "model": sc.model, "layout": sc.layout.name,
            "nodes": sc.cluster.nodes, "gpus_per_node": sc.cluster.gpus_per_node,
            "bandwidth_gbps": sc.cost.link_gbps, "compression": sc.compression, "config": cfg.to_dict(),
            "step_time_ms": r.step_time_ms, "score_bytes_per_us": r.score_bytes_per_us,
            "comm_ms": r.comm_s * 1e3, "overlap": r.overlap, "bytes_per_step": r.bytes_per_step,
            "responses": [{"bytes": x.nbytes, "tensors": x.n_tensors, "start_ms": x.start_s * 1e3,
                           "duration_ms": x.duration_s * 1e3} for x in r.responses]}


@app.command()
def fit(runs_dir: Path = typer.Argument(..., help="folder of environments (each with env.toml)"),
        model_dir: Path = typer.Option(DEFAULT_MODEL_DIR, "--out", help="where model/<env>.json goes")) -> None:
    """Fit a cost model per environment under RUNS_DIR; write model/<env>.json and a plot."""
    fitted, problems = fit_runs(runs_dir, model_dir)
    for p in problems:
        err.print(f"[yellow]warning:[/] {p}", highlight=False)
    t = Table(title="fitted environments")
    for col in ("env", "form", "alpha (µs)", "busbw (Gbit/s)", "R²", "MAPE %", "models (compute ms, comm scale)"):
        t.add_column(col)
    for d, path, png in fitted:
        f, inter = d["fit"], d["cost_model"]["inter"]
        r2 = f.get("r2_with_comm_scale", f.get("r2"))
        mp = f.get("mape_percent_with_comm_scale", f.get("mape_percent"))
        models = ", ".join(f"{m} ({w['forward_ms'] + w['backward_ms']:.1f}, {w.get('comm_scale', 1.0):.2f})"
                           for m, w in d["workloads"].items())
        t.add_row(d["env"], f["form"], f"{inter['alpha_us']:.1f}", f"{inter['bandwidth_gbps']:.2f}",
                  "-" if r2 is None else f"{r2:.4f}", "-" if mp is None else f"{mp:.1f}", models)
    out.print(t)
    for d, path, png in fitted:
        f = d["fit"]
        if "r2_with_comm_scale" in f:
            out.print(f"{d['env']}: pooled fit R² {f['r2']:.4f}, MAPE {f['mape_percent']:.1f}% over {f['n_samples']} "
                      f"samples; with per-model comm scale R² {f['r2_with_comm_scale']:.4f}, "
                      f"MAPE {f['mape_percent_with_comm_scale']:.1f}%", highlight=False)
        out.print(f"wrote {path}" + (f" and {png}" if png else ""), highlight=False)
    if not fitted:
        raise FitError("no environment could be fitted")


@app.command()
def simulate(model: str = typer.Option(..., "--model", help="vgg16, resnet50, ..., a layout .json, or pkg.mod:factory"),
             env: Optional[str] = typer.Option(None, "--env", help="fitted environment (default: first by name)"),
             fusion_threshold_mb: Optional[float] = typer.Option(None, "--fusion-threshold-mb", help="MiB (default 128)"),
             cycle_time_ms: Optional[float] = typer.Option(None, "--cycle-time-ms", help="ms (default 1)"),
             cache_capacity: Optional[int] = typer.Option(None, "--cache-capacity", help="entries (default 1024; 0 = off)"),
             hierarchical_allreduce: bool = typer.Option(False, "--hierarchical-allreduce/--no-hierarchical-allreduce"),
             hierarchical_allgather: bool = typer.Option(False, "--hierarchical-allgather/--no-hierarchical-allgather"),
             nodes: Optional[int] = typer.Option(None, "--nodes"),
             gpus_per_node: Optional[int] = typer.Option(None, "--gpus-per-node"),
             bandwidth_gbps: Optional[float] = typer.Option(None, "--bandwidth-gbps", help="what-if link rate, Gbit/s"),
             compression: str = typer.Option("none", "--compression", help="none | fp16"),
             compute_ms: Optional[float] = typer.Option(None, "--compute-ms", help="forward+backward ms for an uncalibrated model"),
             model_dir: Path = typer.Option(DEFAULT_MODEL_DIR, "--model-dir"),
             timeline: Optional[Path] = typer.Option(None, "--timeline",
                                                     help="also write the simulated steps as a Horovod timeline "
                                                          "(Chrome trace JSON; .gz = gzipped)"),
             timeline_steps: int = typer.Option(2, "--timeline-steps", help="steady-state steps in the timeline"),
             as_json: bool = typer.Option(False, "--json", help="print one JSON object")) -> None:
    """Simulate one configuration (unset knobs take Horovod 0.28's defaults)."""
    cfg = _config(fusion_threshold_mb, cycle_time_ms, cache_capacity, hierarchical_allreduce, hierarchical_allgather)
    sc, fenv = make_scenario(model_dir, env, model, nodes=nodes, gpus_per_node=gpus_per_node,
                             bandwidth_gbps=bandwidth_gbps, compression=compression, compute_ms=compute_ms)
    r = sc.simulate(cfg)
    d = _result_dict(sc, cfg, r)
    if timeline is not None:
        path, _ = write_simulated_timeline(sc, fenv, cfg, timeline, steps=timeline_steps)
        d["timeline"] = str(path)
    if as_json:
        print(json.dumps(d))
        return
    out.print(f"[bold]{sc.model}[/] (layout {sc.layout.name}, {sc.layout.n_tensors} tensors, "
              f"{sc.layout.total_bytes / MIB:.1f} MiB) on [bold]{sc.env}[/] "
              f"({sc.cluster.nodes}x{sc.cluster.gpus_per_node}, {sc.cost.link_gbps:g} Gbit/s)")
    out.print(f"step time {r.step_time_ms:.1f} ms, {len(r.responses)} responses/step, collectives {r.comm_s * 1e3:.1f} ms "
              f"({r.overlap:.0%} during backward), autotune score {r.score_bytes_per_us:.1f} bytes/µs")
    t = Table(title="fused responses (one step)")
    for col in ("#", "MiB", "tensors", "start ms", "duration ms"):
        t.add_column(col, justify="right")
    for i, x in enumerate(r.responses[:40]):
        t.add_row(str(i), f"{x.nbytes / MIB:.2f}", str(x.n_tensors), f"{x.start_s * 1e3:.1f}", f"{x.duration_s * 1e3:.2f}")
    out.print(t)
    if len(r.responses) > 40:
        out.print(f"... {len(r.responses) - 40} more (use --json)")
    if timeline is not None:
        out.print(f"wrote {d['timeline']} ({timeline_steps} simulated steps, Horovod timeline format)", highlight=False)


@app.command()
def suggest(model: str = typer.Option(..., "--model", help="vgg16, resnet50, ..., a layout .json, or pkg.mod:factory"),
            env: Optional[str] = typer.Option(None, "--env", help="fitted environment (default: first by name)"),
            top: int = typer.Option(3, "--top", min=1, help="proposals to show"),
            n_calls: int = typer.Option(24, "--n-calls", min=1, help="Bayesian-optimization proposals"),
            seed: int = typer.Option(0, "--seed"),
            nodes: Optional[int] = typer.Option(None, "--nodes"),
            gpus_per_node: Optional[int] = typer.Option(None, "--gpus-per-node"),
            bandwidth_gbps: Optional[float] = typer.Option(None, "--bandwidth-gbps"),
            compression: str = typer.Option("none", "--compression"),
            compute_ms: Optional[float] = typer.Option(None, "--compute-ms"),
            model_dir: Path = typer.Option(DEFAULT_MODEL_DIR, "--model-dir"),
            as_json: bool = typer.Option(False, "--json")) -> None:
    """Search the knobs with Bayesian optimization; print the best settings and their flags."""
    sc, _ = make_scenario(model_dir, env, model, nodes=nodes, gpus_per_node=gpus_per_node,
                          bandwidth_gbps=bandwidth_gbps, compression=compression, compute_ms=compute_ms)
    default = DEFAULTS_0_28
    objective = lambda c: sc.simulate(c).step_time_s  # noqa: E731
    t0 = time.perf_counter()
    with Progress(TextColumn("searching"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=err, transient=True, disable=as_json or not err.is_terminal) as prog:
        task = prog.add_task("search", total=None)
        trials = search(objective, default, multi_node=sc.cluster.nodes > 1, n_calls=n_calls, seed=seed,
                        batch_objective=sc.step_times,
                        progress=lambda done, total: prog.update(task, completed=done, total=total))
    wall = time.perf_counter() - t0
    base = sc.simulate(default)
    best = top_distinct(trials, top, default)

    def entry(c: Config) -> dict:
        r = sc.simulate(c)
        return {"config": c.to_dict(), "step_time_ms": r.step_time_ms,
                "speedup_vs_default": base.step_time_s / r.step_time_s,
                "score_bytes_per_us": r.score_bytes_per_us, "horovodrun_flags": horovodrun_flags(c),
                "env_vars": horovod_env(c)}
    res = {"env": sc.env, "model": sc.model, "layout": sc.layout.name,
           "nodes": sc.cluster.nodes, "gpus_per_node": sc.cluster.gpus_per_node,
           "default": entry(default), "proposals": [entry(t.config) for t in best],
           "evaluations": len(trials), "search_seconds": wall}
    if as_json:
        print(json.dumps(res))
        return
    out.print(f"[bold]{sc.model}[/] (layout {sc.layout.name}) on [bold]{sc.env}[/] "
              f"({sc.cluster.nodes}x{sc.cluster.gpus_per_node}, {sc.cost.link_gbps:g} Gbit/s): "
              f"{len(trials)} configurations simulated in {wall:.1f} s")
    t = Table(title="proposals (predicted)")
    for col in ("", "fusion MiB", "cycle ms", "cache", "hier. allreduce", "step ms", "speed-up", "score B/µs"):
        t.add_column(col, justify="right")
    rows = [("default (0.28)", res["default"])] + [(f"#{i + 1}", p) for i, p in enumerate(res["proposals"])]
    for name, p in rows:
        c = p["config"]
        t.add_row(name, f"{c['fusion_threshold_mb']:g}", f"{c['cycle_time_ms']:.2f}", "on" if c["cache_capacity"] else "off",
                  "yes" if c["hierarchical_allreduce"] else "no", f"{p['step_time_ms']:.1f}",
                  f"{p['speedup_vs_default']:.3f}x", f"{p['score_bytes_per_us']:.1f}")
    out.print(t)
    b = res["proposals"][0]
    if b["speedup_vs_default"] < 1.005:
        out.print("No configuration is predicted more than 0.5% faster than Horovod's defaults here: "
                  "keep the defaults (the proposals tie with them).", highlight=False)
    out.print("horovodrun flags:  " + " ".join(b["horovodrun_flags"]), highlight=False)
    out.print("environment:       " + " ".join(f"{k}={v}" for k, v in b["env_vars"].items()), highlight=False)


@app.command()
def validate(env: str = typer.Option(..., "--env", help="environment name: results go to runs/<env>/validation/"),
             model: str = typer.Option(..., "--model", help="layout the replay workload (or your command) trains"),
             command: Optional[List[str]] = typer.Argument(None, help="after --: your own training command "
                                                           "(prints 'AUTOTUNER_STEP_TIME_MS <ms>' per step)"),
             np_: int = typer.Option(2, "--np", min=1, help="ranks"),
             hosts: str = typer.Option("", "--hosts", help="horovodrun -H (default localhost:<np>)"),
             bandwidth_gbit: Optional[float] = typer.Option(None, "--bandwidth-gbit",
                                                            help="emulated link, Gbit/s (root only; else plain loopback)"),
             compute_ms: float = typer.Option(300.0, "--compute-ms", help="replay: forward+backward compute per step, ms"),
             steps: int = typer.Option(6, "--steps", min=1, help="measured steps per trial"),
             warmup: int = typer.Option(2, "--warmup", min=0, help="warm-up steps per trial"),
             repeats: int = typer.Option(3, "--repeats", min=1, help="repeats of each fixed configuration"),
             top: int = typer.Option(1, "--top", min=1, help="proposals from suggest to validate"),
             proposals_file: Optional[Path] = typer.Option(None, "--proposals", help="JSON list of configs (or suggest --json)"),
             autotune: bool = typer.Option(True, "--autotune/--no-autotune", help="run Horovod autotune and its best config"),
             defaults: bool = typer.Option(True, "--defaults/--no-defaults", help="run Horovod's defaults"),
             name: Optional[str] = typer.Option(None, "--name", help="record file name (default: the model)"),
             timeout_s: float = typer.Option(600.0, "--timeout", help="seconds per trial before it is killed"),
             keep_timelines: bool = typer.Option(False, "--keep-timelines", help="keep each trial's timeline (gzipped)"),
             batch_size: Optional[int] = typer.Option(None, "--batch-size", min=1,
                                                      help="images per rank per step (for img/sec output)"),
             runs_dir: Path = typer.Option(Path("runs"), "--runs-dir"),
             model_dir: Path = typer.Option(DEFAULT_MODEL_DIR, "--model-dir")) -> None:
    """Run real horovodrun trials: defaults, autotune, autotune's best, proposals; write a report."""
    from .api import load_proposals, run_validation
    from .readers.layouts import load_layout
    from .realrun.validation import Setup

    load_layout(model)  # fail fast on an unknown model
    if bandwidth_gbit is not None and not bandwidth_gbit > 0:
        raise ValidationError(f"--bandwidth-gbit must be > 0, got {bandwidth_gbit}")
    setup = Setup(env=env, model=model, np=np_, hosts=hosts, bandwidth_gbit=bandwidth_gbit, compute_ms=compute_ms,
                  steps=steps, warmup=warmup, command=tuple(command or ()), batch_size=batch_size)
    proposals = load_proposals(proposals_file) if proposals_file else None
    recs, report, verdict = run_validation(setup, runs_dir=runs_dir, model_dir=model_dir, name=name or Path(model).stem,
                                           proposals=proposals, top=top, repeats=repeats, autotune=autotune,
                                           defaults=defaults, timeout_s=timeout_s, keep_timelines=keep_timelines,
                                           on_event=lambda line: err.print(line, highlight=False, markup=False))
    out.print(f"{len(recs)} trials recorded; report: {report}", highlight=False)
    out.print(verdict, highlight=False)


@app.command()
def inspect(path: Path = typer.Argument(..., help="a Horovod autotune log CSV (--autotune-log-file)"),
            model: Optional[str] = typer.Option(None, "--model", help="layout, to turn the score into a time per step")) -> None:
    """Explain a Horovod autotune log: trials, best row, whether tuning finished, the score."""
    from .readers.autotune_log import explain, read_autotune_log
    from .readers.layouts import load_layout

    log = read_autotune_log(path)
    nbytes = load_layout(model).total_bytes if model else None
    for line in explain(log, nbytes):
        out.print(line, highlight=False, markup=False, soft_wrap=True)


@app.command()
def compare(real: Path = typer.Argument(..., help="a real Horovod timeline (.json or .json.gz)"),
            sim: Path = typer.Argument(..., help="a simulated one (autotuner simulate --timeline), or another real one"),
            skip_real: int = typer.Option(1, "--skip-real", help="first complete steps of REAL to skip (warm-up)"),
            skip_sim: int = typer.Option(0, "--skip-sim", help="first complete steps of SIM to skip"),
            top: int = typer.Option(10, "--top", help="largest per-response differences to show"),
            as_json: bool = typer.Option(False, "--json", help="print one JSON object")) -> None:
    """Line a real timeline up against a simulated one: per step, by response size, per response."""
    from .views.timeline_compare import fmt_num as f

    d = compare_timelines(real, sim, skip_real=skip_real, skip_sim=skip_sim, top=top)
    if as_json:
        print(json.dumps(d))
        return
    rs, ss = d["real"], d["sim"]
    out.print(f"[bold]real[/] {rs['source']}: {rs['steps_used']} step(s) used of {rs['steps_found']} "
              f"(skipped {rs['steps_skipped']}), {rs['tensors']} tensors", highlight=False)
    out.print(f"[bold]sim[/]  {ss['source']}: {ss['steps_used']} step(s) used of {ss['steps_found']} "
              f"(skipped {ss['steps_skipped']}), {ss['tensors']} tensors", highlight=False)
    for n in d["notes"]:
        err.print(f"[yellow]note:[/] {n}", highlight=False)
    t = Table(title="per step (mean over the steps used)")
    for col in ("", "real", "sim", "sim / real"):
        t.add_column(col, justify="right")
    for key, label, spec in (("responses_per_step", "responses", ".1f"), ("bytes_per_step", "MiB", ".1f"),
                             ("collective_ms_per_step", "collective ms", ".1f"),
                             ("memcpy_ms_per_step", "memcpy ms", ".1f"),
                             ("comm_span_ms_per_step", "first start to last end ms", ".1f"),
                             ("step_period_ms", "step period ms", ".1f")):
        scale = 1 / MIB if key == "bytes_per_step" else 1
        a = None if rs[key] is None else rs[key] * scale
        b = None if ss[key] is None else ss[key] * scale
        t.add_row(label, f(a, spec), f(b, spec), f(d["ratio"][key], ".2f"))
    out.print(t)
    t = Table(title="by response size (responses per step, mean collective ms)")
    for col in ("size", "real n", "sim n", "real ms", "sim ms", "sim / real"):
        t.add_column(col, justify="right")
    for b in d["by_size"]:
        t.add_row(b["bucket"], f(b["real_per_step"], ".1f"), f(b["sim_per_step"], ".1f"), f(b["real_mean_ms"]),
                  f(b["sim_mean_ms"]), f(b["ratio"]))
    out.print(t)
    if len(d["by_position"]) <= 40:
        t = Table(title="response by position in the step (mean over steps)")
        for col in ("#", "real MiB", "sim MiB", "real tensors", "sim tensors", "real ms", "sim ms"):
            t.add_column(col, justify="right")
        for b in d["by_position"]:
            t.add_row(str(b["position"]), f(b["real_bytes"] and b["real_bytes"] / MIB), f(b["sim_bytes"] and b["sim_bytes"] / MIB),
                      f(b["real_tensors"], ".1f"), f(b["sim_tensors"], ".1f"), f(b["real_ms"]), f(b["sim_ms"]))
        out.print(t)
    else:
        out.print(f"{len(d['by_position'])} responses per step at most: response by position in --json", highlight=False)
    out.print(f"{d['n_matched']} response(s) fused alike on both sides; {d['unmatched_real']} real and "
              f"{d['unmatched_sim']} simulated tensor groups without a counterpart", highlight=False)
    if d["largest_differences"]:
        t = Table(title=f"largest differences, responses fused alike (top {len(d['largest_differences'])})")
        for col in ("first tensor", "tensors", "MiB", "real ms", "sim ms", "Δ ms", "sim/real"):
            t.add_column(col, justify="right", no_wrap=col != "first tensor")
        for m in d["largest_differences"]:
            t.add_row(m["first_tensor"].removeprefix("allreduce."), str(m["tensors"]), f"{m['bytes'] / MIB:.2f}", f(m["real_ms"]),
                      f(m["sim_ms"]), f(m["diff_ms"], "+.2f"), f(m["ratio"]))
        out.print(t)


def _wide_console() -> Console:
    """The terminal's console, or one 180 columns wide when stdout is not a terminal (wide tables stay readable)."""
    return out if out.is_terminal else Console(width=180)


@app.command("explore")
def explore_cmd(model: str = typer.Option(..., "--model", help="vgg16, resnet50, ..., a layout .json, or pkg.mod:factory"),
                env: Optional[str] = typer.Option(None, "--env", help="fitted environment (default: first by name)"),
                compute_ms: Optional[float] = typer.Option(None, "--compute-ms", help="forward+backward ms for an uncalibrated model"),
                out_dir: Path = typer.Option(Path("explore"), "--out", help="folder for the PNG and SVG plots"),
                resolution: int = typer.Option(64, "--resolution", help="points per axis (threshold and cycle time)"),
                suggest_pick: bool = typer.Option(True, "--suggest/--no-suggest", help="run suggest and mark its pick"),
                pick_file: Optional[Path] = typer.Option(None, "--pick", help="mark this saved pick (suggest --json output) instead of running suggest"),
                nodes: Optional[int] = typer.Option(None, "--nodes"),
                gpus_per_node: Optional[int] = typer.Option(None, "--gpus-per-node"),
                bandwidth_gbps: Optional[float] = typer.Option(None, "--bandwidth-gbps", help="what-if link rate, Gbit/s"),
                compression: str = typer.Option("none", "--compression", help="none | fp16"),
                runs_dir: Path = typer.Option(Path("runs"), "--runs-dir", help="measured validations: <runs>/<env>/validation"),
                model_dir: Path = typer.Option(DEFAULT_MODEL_DIR, "--model-dir"),
                as_json: bool = typer.Option(False, "--json", help="print the grid, marks and measured points as JSON")) -> None:
    """Predicted step time over fusion threshold x cycle time per on/off combination; heatmaps + sensitivity."""
    wide = _wide_console()
    from .api import load_proposals, read_validation_records, suggest_configs
    from .views.explore import explore
    from .views.plots_explore import heatmaps, sensitivity_plot

    if nodes is not None and nodes < 1 or gpus_per_node is not None and gpus_per_node < 1:
        raise ExploreError(f"--nodes and --gpus-per-node must be >= 1, got {nodes} and {gpus_per_node}")
    sc, _ = make_scenario(model_dir, env, model, nodes=nodes, gpus_per_node=gpus_per_node,
                          bandwidth_gbps=bandwidth_gbps, compression=compression, compute_ms=compute_ms)
    t0 = time.perf_counter()
    if pick_file is not None:
        pick, suggest_pick = load_proposals(pick_file)[0], False
    elif suggest_pick:
        # one BLAS thread: the GP refits are small matrices, and on a shared machine threaded BLAS
        # spin-waits (suggest 43 s wall vs 9 s single-threaded, 2 cores at load 6)
        from threadpoolctl import (
            threadpool_limits,  # scikit-learn's dependency, so skopt's
        )

        with threadpool_limits(limits=1):
            pick = suggest_configs(sc)[1][0].config
    else:
        pick = None
    t_suggest = time.perf_counter() - t0
    same_setup = nodes is None and gpus_per_node is None and bandwidth_gbps is None and compression == "none"
    records = read_validation_records(runs_dir, sc.env) if same_setup else []
    ex = explore(sc, resolution=resolution, suggested=pick, measured_records=records)
    t1 = time.perf_counter()
    files = heatmaps(ex, out_dir / f"explore-{sc.env}-{Path(sc.model).stem}") + \
        sensitivity_plot(ex, out_dir / f"sensitivity-{sc.env}-{Path(sc.model).stem}")
    t_plot = time.perf_counter() - t1
    if as_json:
        print(json.dumps(ex.to_dict() | {"files": [str(f) for f in files], "suggest_seconds": t_suggest}))
        return
    s = ex.scenario
    wide.print(f"[bold]{s['model']}[/] on [bold]{s['env']}[/] ({s['nodes']}x{s['gpus_per_node']}, "
              f"{s['bandwidth_gbps']:g} Gbit/s): {ex.evaluations} configurations simulated in {ex.seconds:.1f} s"
              + (f", suggest {t_suggest:.1f} s" if suggest_pick else "") + f", plots {t_plot:.1f} s")
    t = Table(title="per combination (grid minimum)")
    for col in ("combination", "best step ms", "fusion MiB", "cycle ms", "fusion off, best ms"):
        t.add_column(col, justify="right")
    for label, g in ex.grid.groupby("combo", sort=False):
        b = g.loc[g["step_time_ms"].idxmin()]
        off = g[g["fusion_threshold_bytes"] == 0]["step_time_ms"].min()
        t.add_row(label, f"{b['step_time_ms']:.1f}", f"{b['fusion_threshold_mb']:.3g}", f"{b['cycle_time_ms']:.3g}",
                  f"{off:.1f}")
    wide.print(t)
    for m in ex.marks:
        if m.kind != "autotune-start":
            c = m.config
            wide.print(f"{m.name}: {m.step_time_ms:.1f} ms ({c.fusion_threshold_mb:.3g} MiB, {c.cycle_time_ms:.3g} ms, "
                      f"cache {'on' if c.cache_enabled else 'off'}, hierarchical {'on' if c.hierarchical_allreduce else 'off'})",
                      highlight=False)
    if len(ex.measured):
        mt = Table(title=f"measured (runs/{sc.env}/validation) vs predicted now")
        for col in ("source", "fusion MiB", "cycle ms", "cache", "n", "measured ms", "predicted ms", "error %"):
            mt.add_column(col, justify="right")
        for _, r in ex.measured.iterrows():
            mt.add_row(r["source"], f"{r['fusion_threshold_mb']:.3g}", f"{r['cycle_time_ms']:.3g}",
                       "on" if r["cache"] else "off", str(r["n"]),
                       f"{r['measured_step_time_ms']:.1f}", f"{r['predicted_step_time_ms']:.1f}",
                       f"{r['error_percent']:+.1f}")
        wide.print(mt)
    elif not same_setup:
        wide.print("measured points: not overlaid (a what-if differs from the measured setup)")
    wide.print("wrote " + ", ".join(str(f) for f in files), highlight=False, soft_wrap=True)


@app.command("scale")
def scale_cmd(model: str = typer.Option(..., "--model", help="vgg16, resnet50, ..., a layout .json, or pkg.mod:factory"),
              nodes: str = typer.Option("1,2,4,8,16,32,64", "--nodes", help="comma-separated node counts"),
              gpus_per_node: Optional[int] = typer.Option(None, "--gpus-per-node", help="GPUs (ranks) per node (default: the env's)"),
              env: Optional[str] = typer.Option(None, "--env", help="fitted environment (default: first by name)"),
              bandwidth_gbps: Optional[str] = typer.Option(None, "--bandwidth-gbps", help="comma-separated inter-node link rates, Gbit/s (default: the env's)"),
              batch_size: Optional[int] = typer.Option(None, "--batch-size", help="samples per GPU per step (default: runs/<env>/env.toml batch_size)"),
              compute_ms: Optional[float] = typer.Option(None, "--compute-ms", help="forward+backward ms for an uncalibrated model"),
              compression: str = typer.Option("none", "--compression", help="none | fp16"),
              out_dir: Path = typer.Option(Path("scale"), "--out", help="folder for the PNG and SVG plot"),
              runs_dir: Path = typer.Option(Path("runs"), "--runs-dir"),
              model_dir: Path = typer.Option(DEFAULT_MODEL_DIR, "--model-dir"),
              as_json: bool = typer.Option(False, "--json", help="print the table as JSON")) -> None:
    """What-if at scale: step time, throughput, scaling efficiency per node count (best config and defaults)."""
    wide = _wide_console()
    from .api import env_batch_size
    from .views.plots_explore import scale_plot
    from .views.scale import parse_float_list, parse_int_list, scale

    ns = parse_int_list(nodes, "--nodes")
    bws = parse_float_list(bandwidth_gbps, "--bandwidth-gbps") if bandwidth_gbps is not None else None
    if gpus_per_node is not None and gpus_per_node < 1:
        raise ExploreError(f"--gpus-per-node must be >= 1, got {gpus_per_node}")
    if batch_size is not None and batch_size < 1:
        raise ExploreError(f"--batch-size must be >= 1, got {batch_size}")
    sc, _ = make_scenario(model_dir, env, model, compression=compression, compute_ms=compute_ms)
    batch = batch_size or env_batch_size(runs_dir, sc.env)
    res = scale(sc, ns, gpus_per_node=gpus_per_node, bandwidths_gbps=bws, batch_per_gpu=batch)
    files = scale_plot(res, out_dir / f"scale-{sc.env}-{Path(sc.model).stem}")
    if as_json:
        print(json.dumps(res.to_dict() | {"files": [str(f) for f in files]}))
        return
    s = res.scenario
    intra = (f"intra-node tier {s['intra_bandwidth_gbps']:.1f} Gbit/s (fitted)" if s["intra_bandwidth_gbps"]
             else "intra-node tier not measured in this env: the inter-node tier is used for it")
    wide.print(f"[bold]{s['model']}[/] scaled from [bold]{s['env']}[/]: per-GPU compute {s['compute_ms']:.1f} ms and "
              f"batch {batch or '?'} fixed (weak scaling); {intra}; {res.evaluations} configurations simulated "
              f"in {res.seconds:.1f} s", highlight=False)
    thr_col = "samples/s" if batch else "GPU-steps/s"
    for bw, g in res.table.groupby("bandwidth_gbps", sort=True):
        t = Table(title=f"{bw:g} Gbit/s inter-node link")
        for col in ("nodes", "GPUs", "best ms", f"best {thr_col}", "best eff.", "default ms", "default eff.",
                    "speed-up", "fusion MiB (within 1%)", "cycle ms", "cache", "hier.", "hier. gain %"):
            t.add_column(col, justify="right")
        for _, r in g.iterrows():
            thr = r["best_samples_per_s"] if batch else r["best_gpu_steps_per_s"]
            t.add_row(str(r["nodes"]), str(r["ranks"]), f"{r['best_step_time_ms']:.1f}", f"{thr:.1f}",
                      f"{r['best_efficiency']:.3f}", f"{r['default_step_time_ms']:.1f}", f"{r['default_efficiency']:.3f}",
                      f"{r['speedup_vs_default']:.3f}x",
                      f"{r['best_fusion_threshold_mb']:g} ({r['near_threshold_lo_mb']:g}-{r['near_threshold_hi_mb']:g})",
                      f"{r['best_cycle_time_ms']:g}", "on" if r["best_cache"] else "off",
                      "yes" if r["best_hierarchical_allreduce"] else "no",
                      "-" if r["hier_gain_percent"] != r["hier_gain_percent"] else f"{r['hier_gain_percent']:+.1f}")
        wide.print(t)
    for f in res.findings:
        wide.print(f, highlight=False, soft_wrap=True)
    wide.print("efficiency = throughput(N) / (N/N0 x throughput(N0)), N0 = smallest node count; "
              "defaults = Horovod 0.28 (128 MiB, 1 ms, cache on, flat)", highlight=False)
    wide.print("wrote " + ", ".join(str(f) for f in files), highlight=False, soft_wrap=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (2 for user errors, one line on stderr)."""
    try:
        app(args=argv, standalone_mode=False)
    except USER_ERRORS as e:
        err.print(f"error: {e}", highlight=False, markup=False, soft_wrap=True)
        return 2
    except (typer.Exit, SystemExit) as e:
        return int(getattr(e, "exit_code", getattr(e, "code", 0)) or 0)
    except (typer.Abort, KeyboardInterrupt):
        err.print("interrupted (anything already recorded is kept; re-run the same command to resume)")
        return 130
    except Exception as e:  # click usage errors (typer may vendor click: duck-typed)
        if callable(getattr(e, "show", None)) and isinstance(getattr(e, "exit_code", None), int):
            e.show()
            return e.exit_code
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
