"""Command line: ``autotuner fit | simulate | suggest | validate | inspect | compare | explore | scale |
accuracy | measure | profile``.

Thin: parse (typer; the knob options are generated from :data:`autotuner.frameworks.horovod.knobs.KNOBS`, the
numeric options checked by :mod:`autotuner.options`), call the public API (``autotuner.__all__``), render (rich).

Every error the tool can name is an :class:`~autotuner.errors.AutotunerError`: it prints one
line (``error: ...``) on stderr and exits with status 2. Ctrl-C prints one line and exits 130.
"""
from __future__ import annotations

import os
import signal
import sys
import textwrap

from ._sigint import INTERRUPTED  # noqa: E402
from ._sigint import interrupted_while_loading as _interrupted_while_loading  # noqa: E402

# only when run as the program (not imported by a test or a library user), and not when the caller ignores SIGINT;
# as the console script, autotuner/__init__.py has installed it already (the program's first module)
if (__name__ == "__main__" or os.path.basename(sys.argv[0]) == "autotuner") and \
        signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, _interrupted_while_loading)

import functools  # noqa: E402
import inspect as _inspect  # noqa: E402
import json  # noqa: E402
import typing  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import List, Optional  # noqa: E402

import typer  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn  # noqa: E402
from rich.table import Table  # noqa: E402

import autotuner  # noqa: E402  (the public API: everything the commands do)
from autotuner import (  # noqa: E402  (option types)
    KNOBS,
    AutotunerError,
    Backend,
    Compression,
    ProfileDevice,
    SearchStrategy,
)

from . import options as opt  # noqa: E402  (the command line's own option checks)
from .render import CHECKED_HEADER, MIB, RANGE_SHOWN, checked_cell, fit_regime_lines, fmt_num, render_table  # noqa: E402  (the command line's own rendering)

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Predict and tune Horovod's knobs (and PyTorch DDP's: autotuner ddp) from measured "
                       "bandwidth data.\n\n"
                       "First hour (docs/your-cluster.md): autotuner measure --env NAME; autotuner fit runs/; "
                       "autotuner profile ...; autotuner suggest --model M --env NAME; "
                       "autotuner validate --env NAME --model M -- python train.py")
out = Console()
err = Console(stderr=True)


def _print_version(value: bool) -> None:
    if not value:
        return
    from importlib.metadata import PackageNotFoundError, version

    def ver(dist: str) -> str:
        try:
            return version(dist)
        except PackageNotFoundError:
            return "not installed"
    print(f"autotuner {ver('hvd-autotuner')} (models Horovod 0.28.1; installed horovod: {ver('horovod')})")
    raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                       help="print the version and exit")) -> None:
    """Predict and tune Horovod's knobs from measured bandwidth data.

    First hour: autotuner measure --env NAME (your cluster), autotuner fit runs/, autotuner suggest
    --model MODEL --env NAME, autotuner validate --env NAME --model MODEL -- python train.py
    (docs/your-cluster.md).
    """
#: no --model-dir / --runs-dir given: the search of :mod:`autotuner.paths` (--model-dir X searches X first)
DEFAULT_MODEL_DIR = None
MODEL_DIR_HELP = ("fitted models searched first (then $AUTOTUNER_MODEL_DIR, the user's folder, the shipped "
                  "models; the first holding <env>.json wins)")
RUNS_DIR_HELP = ("runs searched first (then $AUTOTUNER_RUNS_DIR, ./runs, the user's folder, the shipped runs)")


def _model_dir_opt(help: str = MODEL_DIR_HELP):
    return typer.Option(DEFAULT_MODEL_DIR, "--model-dir", help=help, show_default=False)


def _runs_dir_opt(help: str = RUNS_DIR_HELP):
    return typer.Option(None, "--runs-dir", help=help, show_default=False)


def _np_opt():
    return typer.Option(2, "--np", help="ranks", callback=opt.checked(opt.Count, "--np"))


def _trained_model_opt():
    return typer.Option(..., "--model", help="layout the replay workload (or your command) trains")


def _command_arg():
    return typer.Argument(None, help="after --: your own training command (prints 'AUTOTUNER_STEP_TIME_MS <ms>' "
                                     "per step)")


def _hosts_opt(more: str = ""):
    return typer.Option("", "--hosts", help="horovodrun -H (default localhost:<np>)" + more)


def _testbed_bw_opt():
    return typer.Option(None, "--bandwidth-gbit", help="emulated link, Gbit/s (root only; else plain loopback)",
                        callback=opt.checked(opt.LinkGbit, "--bandwidth-gbit"))


def _testbed_opts():
    """``--testbed-hosts H --ranks-per-host L --link-gbit G``: an emulated cluster (root only)."""
    return (typer.Option(None, "--testbed-hosts", help="emulate H hosts, one network namespace each, joined by a "
                         "switch (root only; replaces --np/--hosts)", callback=opt.checked(opt.Count, "--testbed-hosts")),
            typer.Option(None, "--ranks-per-host", help="ranks on each emulated host",
                         callback=opt.checked(opt.Count, "--ranks-per-host")),
            typer.Option(None, "--link-gbit", help="each emulated host's link, Gbit/s, both directions (HTB); "
                         "--bandwidth-gbit then shapes each host's loopback", callback=opt.checked(opt.LinkGbit, "--link-gbit")))


def knob_options(help_for: str):
    """Decorator: one typer option per knob of :data:`autotuner.frameworks.horovod.knobs.KNOBS` (the ``horovodrun``
    flag as the option name, its unit and Horovod 0.28's default in the help). The command gets
    ``knobs``: the options given, ``{param: value in flag units}`` (unset ones left out).
    ``help_for`` says what the knobs mean for this command."""
    def deco(fn):
        sig = _inspect.signature(fn)
        hints = typing.get_type_hints(fn)
        params = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in sig.parameters.values()
                  if p.name != "knobs"]
        for k in KNOBS:
            if k.is_switch:
                decl = f"{k.flag}/--no-{k.flag[2:]}"
                o = typer.Option(None, decl, help=f"{k.doc}; {help_for} (default off)", show_default=False)
                ann = Optional[bool]
            else:
                ann = Optional[float] if k.type is float or k.flag_scale != 1 else Optional[int]
                o = typer.Option(None, k.flag, show_default=False,
                                 help=f"{k.doc}; {k.flag_unit}, {k.low / k.flag_scale:.10g}-{k.high / k.flag_scale:.10g}; "
                                      f"{help_for} (default {k.default / k.flag_scale:g})")
            params.append(_inspect.Parameter(k.param, _inspect.Parameter.KEYWORD_ONLY, default=o, annotation=ann))

        @functools.wraps(fn)
        def wrapper(**kw):
            given = {k.param: kw.pop(k.param) for k in KNOBS}
            return fn(knobs={p: v for p, v in given.items() if v is not None}, **kw)

        wrapper.__signature__ = sig.replace(parameters=params)
        wrapper.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
        del wrapper.__wrapped__  # typer must read the generated signature, not fn's
        return wrapper
    return deco


MODEL_HELP = "vgg16, resnet50, ..., a layout .json, or pkg.mod:factory"
ENV_HELP = "fitted environment (default: the one marked default)"
COMPUTE_HELP = "forward+backward ms for an uncalibrated model"


def _nodes_opt():
    return typer.Option(None, "--nodes", help="what-if node count", callback=opt.checked(opt.Count, "--nodes"))


def _gpus_opt(help: str = "what-if GPUs (ranks) per node"):
    return typer.Option(None, "--gpus-per-node", help=help, callback=opt.checked(opt.GpusPerNode, "--gpus-per-node"))


def _bw_opt():
    return typer.Option(None, "--bandwidth-gbps", help="what-if link rate, Gbit/s",
                        callback=opt.checked(opt.LinkGbit, "--bandwidth-gbps"))


def _compression_opt():
    return typer.Option(Compression.none, "--compression", help="gradient compression")


def _compute_opt():
    return typer.Option(None, "--compute-ms", help=COMPUTE_HELP, callback=opt.checked(opt.Millis, "--compute-ms"))


def _backend_opt():
    return typer.Option(None, "--backend", show_default=False,
                        help="what-if collective backend: its fitted intra-node tier (default: the env's own)")


@app.command(short_help="fit a cost model per environment under RUNS_DIR")
def fit(runs_dir: Path = typer.Argument(..., help="folder of environments (each with env.toml), or one environment's "
                                         "folder"),
        model_dir: Optional[Path] = typer.Option(None, "--out", show_default=False,
                                                 help="where <env>.json goes (default: $AUTOTUNER_MODEL_DIR, else "
                                                      "the user's model folder)")) -> None:
    """Fit a cost model per environment under RUNS_DIR; write <env>.json and a plot (they win over shipped models).

    Example:

    \b
        autotuner fit runs/
    """
    res = autotuner.fit_environments(runs_dir, model_dir)
    fitted, problems = res.fitted, res.problems
    for p in problems:
        err.print(f"warning: {p}", highlight=False, markup=False, soft_wrap=True)
    t = Table(title="fitted environments")
    with_models = any(d["workloads"] for d, _, _ in fitted)
    for col in ("env", "form", "alpha µs", "busbw Gbit/s", "R²", "MAPE %") + (("models",) if with_models else ()):
        t.add_column(col, justify="right" if col in ("alpha µs", "busbw Gbit/s", "R²", "MAPE %") else "left")
    forms: dict[str, tuple[str, list[str]]] = {}  # the fit's own words -> (table cell, envs), printed under it
    for d, path, png in fitted:
        f, inter = d["fit"], d["cost_model"]["inter"]
        r2 = f.get("r2_with_comm_scale", f.get("r2"))
        mp = f.get("mape_percent_with_comm_scale", f.get("mape_percent"))
        short = short_form(f["form"])
        if short != f["form"]:
            forms.setdefault(f["form"], (short, []))[1].append(d["env"])
        # busbw as nccl-tests means it, the large-message plateau: a sweep tier's segment from its knee where it has
        # one (below the knee a span is mostly its fixed cost, and its per-byte slope can be ~0: 51897 Gbit/s on
        # fresh-poll-2.75gbit; the regime lines below give that segment)
        busbw = inter.get("large_bandwidth_gbps", inter["bandwidth_gbps"])
        t.add_row(d["env"], short, f"{inter['alpha_us']:.1f}", f"{busbw:.2f}",
                  "-" if r2 is None else f"{r2:.4f}", "-" if mp is None else f"{mp:.1f}",
                  *((", ".join(d["workloads"]) or "-",) if with_models else ()))
    render_table(out, t)
    for full, (short, envs) in forms.items():  # several sentences under one cell name their envs
        shared = sum(s_ == short for s_, _ in forms.values()) > 1
        out.print(textwrap.fill(f"form {short}" + (f" ({', '.join(envs)})" if shared else "") + f": {full}",
                                width=max(out.width, 40), subsequent_indent="    ", break_long_words=False,
                                break_on_hyphens=False), highlight=False, soft_wrap=True)
    for d, path, png in fitted:
        f = d["fit"]
        if d["workloads"]:  # each fitted model's compute and comm scale
            out.print(textwrap.fill(f"{d['env']}: models (compute ms, comm scale): " + ", ".join(
                f"{m} ({w['forward_ms'] + w['backward_ms']:.1f}, {w.get('comm_scale', 1.0):.2f})"
                for m, w in d["workloads"].items()), width=max(out.width, 40), subsequent_indent="    ",
                break_long_words=False, break_on_hyphens=False), highlight=False, soft_wrap=True)
        if "r2_with_comm_scale" in f:
            out.print(f"{d['env']}: pooled fit R² {f['r2']:.4f}, MAPE {f['mape_percent']:.1f}% over {f['n_samples']} "
                      f"samples; with per-model comm scale R² {f['r2_with_comm_scale']:.4f}, "
                      f"MAPE {f['mape_percent_with_comm_scale']:.1f}%", highlight=False)
        if regimes := fit_regime_lines(d):  # which regime each figure of a sweep env comes from
            out.print(f"{d['env']}: where each figure comes from", highlight=False)
            for line in regimes:  # each figure on its own lines, wrapped to the terminal (80 columns when piped)
                out.print(textwrap.fill(line, width=max(out.width, 40), subsequent_indent="    ",
                                        break_long_words=False, break_on_hyphens=False), highlight=False, soft_wrap=True)
        out.print(f"wrote {path}" + (f" and {png}" if png else ""), highlight=False)
    if res.default_folder:
        out.print(f"models folder: {res.model_dir} (no --out; every command reads it before the shipped models)",
                  highlight=False, soft_wrap=True)
    if problems:
        err.print(f"warning: {len(problems)} input problem(s) above (each names what was dropped or repaired)",
                  highlight=False, markup=False, soft_wrap=True)


def short_form(form: str) -> str:
    """A fit's ``form`` (the model file's ``fit.form``, one sentence) cut to a table cell: an alpha-beta form fitted
    on an allreduce sweep is ``sweep``, on step times ``steps``, otherwise ``alpha-beta``; the others keep their
    first words (``wall time``, ``global work``). The fit's own words are printed once under the table."""
    if form.startswith("alpha-beta"):
        return "sweep" if "sweep" in form else "steps" if "step times" in form else "alpha-beta"
    return "wall time" if form.startswith("wall =") else "global work" if form.startswith("global work") else form


@app.command(short_help="predict one configuration's step time")
@knob_options("the configuration to simulate")
def simulate(model: str = typer.Option(..., "--model", help=MODEL_HELP),
             env: Optional[str] = typer.Option(None, "--env", help=ENV_HELP),
             nodes: Optional[int] = _nodes_opt(),
             gpus_per_node: Optional[int] = _gpus_opt(),
             bandwidth_gbps: Optional[float] = _bw_opt(),
             compression: Compression = _compression_opt(),
             compute_ms: Optional[float] = _compute_opt(),
             backend: Optional[Backend] = _backend_opt(),
             model_dir: Optional[Path] = _model_dir_opt(),
             timeline: Optional[Path] = typer.Option(None, "--timeline",
                                                     help="also write the simulated steps as a Horovod timeline "
                                                          "(Chrome trace JSON; .gz = gzipped)"),
             timeline_steps: int = typer.Option(2, "--timeline-steps", help="steady-state steps in the timeline",
                                                callback=opt.checked(opt.Count, "--timeline-steps")),
             as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
             reference_version: Optional[str] = typer.Option(
                 None, "--reference-version", show_default=False,
                 help="the Horovod release whose defaults the unset knobs take (default: the env's own, from its "
                      "env.toml; 0.20.x: 64 MiB / 5 ms, 0.21 on: 128 MiB / 1 ms)",
                 callback=opt.horovod_release("--reference-version")),
             knobs: dict = None) -> None:
    """Simulate one configuration (unset knobs take the defaults of the env's own Horovod release).

    Example:

    \b
        autotuner simulate --model resnet50 --env local-gloo-1gbit --timeline sim.json
    """
    import autotuner

    r = autotuner.simulate(model, env, config=knobs, compression=str(compression), nodes=nodes,
                           gpus_per_node=gpus_per_node, bandwidth_gbps=bandwidth_gbps, compute_ms=compute_ms,
                           backend=None if backend is None else str(backend), model_dir=model_dir,
                           timeline=timeline, timeline_steps=timeline_steps, reference_version=reference_version)
    for w in r.warnings:
        err.print(f"warning: {w}", highlight=False, markup=False, soft_wrap=True)
    for n in r.notes:
        err.print(f"note: {n}", highlight=False, markup=False, soft_wrap=True)
    if as_json:
        print(json.dumps(r.to_dict(), allow_nan=False))
        return
    be = f", backend {r.backend}" if r.backend else ""
    out.print(f"[bold]{r.model}[/] (layout {r.layout}, {r.n_tensors} tensors, {r.layout_mib:.1f} MiB) on "
              f"[bold]{r.env}[/] ({r.nodes}x{r.gpus_per_node}, {r.link_gbps:g} Gbit/s{be})", soft_wrap=True)
    c = r.config
    out.print(f"knobs: {c.fusion_threshold_mb:g} MiB, {c.cycle_time_ms:g} ms, cache {c.cache_capacity}"
              + (", hierarchical allreduce" if c.hierarchical_allreduce else "")
              + f" (unset knobs: Horovod {r.reference_version}'s defaults)", highlight=False, soft_wrap=True)
    out.print(f"step time {r.step_time_ms:.1f} ms, {len(r.responses)} responses/step, collectives {r.comm_ms:.1f} ms "
              f"({r.overlap:.0%} during backward), autotune score {r.score_bytes_per_us:.1f} bytes/µs", soft_wrap=True)
    if r.step_time_range_ms is not None:
        (lo, hi), (a_lo, a_hi) = r.step_time_range_ms, r.small_price_range_ms
        out.print(f"small-response price left open by the env's phases ({a_lo:.2f}-{a_hi:.2f} ms per response): step "
                  f"time {lo:.1f}-{hi:.1f} ms", highlight=False, soft_wrap=True)
    out.print(f"trust: {r.env}: {r.trust}", highlight=False, soft_wrap=True)
    if r.wall_time_s is not None:
        out.print(f"wall time of the whole run {r.wall_time_s:.1f} s ({r.startup_s:g} s start-up + "
                  f"{r.steps_per_rank} steps per rank x {r.step_time_ms:.1f} ms)", highlight=False, soft_wrap=True)
    t = Table(title="fused responses (one step)")
    for col in ("#", "MiB", "tensors", "start ms", "duration ms"):
        t.add_column(col, justify="right")
    for i, x in enumerate(r.responses[:40]):
        t.add_row(str(i), f"{x.nbytes / MIB:.2f}", str(x.tensors), f"{x.start_ms:.1f}", f"{x.duration_ms:.2f}")
    render_table(out, t)
    if len(r.responses) > 40:
        out.print(f"... {len(r.responses) - 40} more (use --json)")
    if r.timeline is not None:
        out.print(f"wrote {r.timeline} ({timeline_steps} simulated steps, Horovod timeline format)", highlight=False,
                  soft_wrap=True)


@app.command(short_help="the best knobs, predicted, with their flags")
@knob_options("kept fixed by the search (the others are searched)")
def suggest(model: str = typer.Option(..., "--model", help=MODEL_HELP),
            env: Optional[str] = typer.Option(None, "--env", help=ENV_HELP),
            top: int = typer.Option(3, "--top", help="proposals to show", callback=opt.checked(opt.Count, "--top")),
            n_calls: int = typer.Option(24, "--n-calls", help="Bayesian-optimization proposals (--strategy bayes)",
                                        callback=opt.checked(opt.Calls, "--n-calls")),
            seed: int = typer.Option(0, "--seed", callback=opt.checked(opt.Seed, "--seed")),
            strategy: SearchStrategy = typer.Option(SearchStrategy.grid, "--strategy",
                                                    help="grid: the exact grid on the fast simulator (under a "
                                                         "second); bayes: also a Bayesian search (--n-calls, "
                                                         "--seed; a few seconds)"),
            nodes: Optional[int] = _nodes_opt(),
            gpus_per_node: Optional[int] = _gpus_opt(),
            bandwidth_gbps: Optional[float] = _bw_opt(),
            compression: Optional[Compression] = typer.Option(
                None, "--compression", show_default=False,
                help="pin the gradient compression (default: search none and fp16, Horovod 0.28.1's; "
                     "int8 is lossy and never proposed)"),
            compute_ms: Optional[float] = _compute_opt(),
            backend: Optional[Backend] = _backend_opt(),
            reference_version: Optional[str] = typer.Option(
                None, "--reference-version", show_default=False,
                help="compare with this Horovod release's defaults, e.g. 0.28.1 (128 MiB, 1 ms) or 0.20.3 "
                     "(64 MiB, 5 ms) (default: the env's own Horovod version)",
                callback=opt.horovod_release("--reference-version")),
            model_dir: Optional[Path] = _model_dir_opt(),
            as_json: bool = typer.Option(False, "--json"),
            knobs: dict = None) -> None:
    """Search the knobs (and the gradient compression, none or fp16); print the best settings and their flags.

    The exact grid on the fast simulator (~10^5-10^6 configurations, under a second);
    --strategy bayes pools a Bayesian search's trials with it. Example:

    \b
        autotuner suggest --model resnet50 --env local-gloo-1gbit --compute-ms 300
    """
    import autotuner

    search = autotuner.BayesStrategy(n_calls=n_calls, seed=seed) if strategy == SearchStrategy.bayes else None
    with Progress(TextColumn("searching"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, transient=True, disable=as_json or not err.is_terminal) as prog:
        task = prog.add_task("search", total=1 if compression else 2)
        r = autotuner.suggest(model, env, fixed=knobs, compression=None if compression is None else str(compression),
                              strategy=search, top=top, nodes=nodes, gpus_per_node=gpus_per_node,
                              bandwidth_gbps=bandwidth_gbps, compute_ms=compute_ms,
                              backend=None if backend is None else str(backend), model_dir=model_dir,
                              progress=lambda done, total: prog.update(task, completed=done, total=total),
                              reference_version=reference_version)
    for n in r.notes:
        err.print(f"note: {n}", highlight=False, markup=False, soft_wrap=True)
    for w in r.warnings:
        err.print(f"warning: {w}", highlight=False, markup=False, soft_wrap=True)
    if as_json:
        print(json.dumps(r.to_dict(), allow_nan=False))
        return
    be = f", backend {r.backend}" if r.backend else ""
    out.print(f"[bold]{r.model}[/] (layout {r.layout}) on [bold]{r.env}[/] "
              f"({r.nodes}x{r.gpus_per_node}, {r.link_gbps:g} Gbit/s{be}): "
              f"{r.evaluations} configurations simulated in {r.search_seconds:.2f} s", soft_wrap=True)
    t = Table(title="proposals (predicted)")
    for col in ("", "fusion MiB", "cycle ms", "cache", "hier. allreduce", "compression", "step ms", "speed-up",
                "score B/µs"):
        t.add_column(col, justify="right")
    ref = (f"reference (Horovod {r.reference_version} + fixed)" if r.fixed
           else f"default (Horovod {r.reference_version})")
    for name, p in [(ref, r.default)] + [(f"#{i + 1}", p) for i, p in enumerate(r.proposals)]:
        c = p.config
        t.add_row(name, f"{c.fusion_threshold_bytes / MIB:g}", f"{c.cycle_time_ms:.2f}",
                  "on" if c.cache_capacity else "off", "yes" if c.hierarchical_allreduce else "no", p.compression,
                  f"{p.step_time_ms:.1f}", f"{p.speedup_vs_default:.3f}x", f"{p.score_bytes_per_us:.1f}")
    render_table(out, t)
    if any(p.compression != "none" for p in r.proposals):
        out.print("score B/µs:        Horovod autotune's score, gradient bytes allreduced per µs of collective time: "
                  "fp16 sends half the bytes, so its score is lower while its step is faster", highlight=False,
                  soft_wrap=True)
    b, pk = r.best, r.choice
    out.print(f"trust:             {r.env}: {r.trust}", highlight=False, soft_wrap=True)
    out.print(f"error band:        {pk.band:.1%} ({pk.band_source})", highlight=False, soft_wrap=True)
    if r.keep_defaults:
        out.print(f"Keep the defaults: the best configuration found is predicted {pk.gain:.1%} faster "
                  f"({pk.best_step_time_ms:.1f} vs {r.default.step_time_ms:.1f} ms), inside the "
                  f"{pk.band:.1%} error band.", highlight=False, soft_wrap=True)
    else:
        ko = r.knob_only.config
        what = ("keep the reference's knobs" if pk.keep_knobs else
                f"{ko.fusion_threshold_bytes / MIB:g} MiB, {ko.cycle_time_ms:g} ms, cache "
                f"{'on' if ko.cache_capacity else 'off'}")
        cmp_ = "inside" if pk.keep_knobs else "beyond"
        out.print(f"knobs only:        {what}: {r.knob_only.step_time_ms:.1f} ms (best found "
                  f"{pk.best_step_time_ms:.1f} ms, {pk.gain:.1%} faster than the reference: {cmp_} the "
                  f"{pk.band:.1%} band); equally good within the band: {pk.threshold_mib[0]:g}-"
                  f"{pk.threshold_mib[1]:g} MiB, {pk.cycle_ms[0]:g}-{pk.cycle_ms[1]:g} ms "
                  f"({pk.equivalent} configurations)", highlight=False, soft_wrap=True)
    out.print("horovodrun flags:  " + " ".join(b.horovodrun_flags), highlight=False, soft_wrap=True)
    out.print("environment:       " + " ".join(f"{k}={v}" for k, v in b.env_vars.items()), highlight=False,
              soft_wrap=True)
    _print_compression(r, b)


def _print_compression(r, b) -> None:
    """suggest: how to switch on the best proposal's compression, what it does to the numerics,
    and, when compression was searched and is not proposed, what it was predicted to give."""
    best = r.best_by_compression
    if b.compression != r.default.compression:
        out.print(f"compression:       {b.compression} (not a horovodrun flag: pass {b.compression_code} to "
                  f"hvd.DistributedOptimizer in the training script)", highlight=False, soft_wrap=True)
    elif len(best) > 1:
        others = ", ".join(f"{c} {ms:.1f} ms" for c, ms in best.items() if c != b.compression)
        faster = any(ms < best[b.compression] * (1 - r.choice.band) for c, ms in best.items() if c != b.compression)
        why = ("its cost beyond the bytes was never measured on this env (see the note)" if faster else
               f"not faster by more than {r.choice.band:.1%}")
        out.print(f"compression:       {b.compression} (best with {others}: {why}, so not proposed)",
                  highlight=False, soft_wrap=True)
    if b.compression in r.compression_notes:
        out.print(f"numerics:          {r.compression_notes[b.compression]}", highlight=False, soft_wrap=True)


@app.command(short_help="real horovodrun trials: defaults, autotune, proposals")
def validate(env: str = typer.Option(..., "--env", help="environment name: results go to <runs>/<env>/validation/",
                                     callback=opt.checked(opt.PlainName, "--env")),
             model: str = _trained_model_opt(),
             command: Optional[List[str]] = _command_arg(),
             np_: int = _np_opt(),
             hosts: str = _hosts_opt(),
             bandwidth_gbit: Optional[float] = _testbed_bw_opt(),
             testbed_hosts: Optional[int] = _testbed_opts()[0],
             ranks_per_host: Optional[int] = _testbed_opts()[1],
             link_gbit: Optional[float] = _testbed_opts()[2],
             replay_wait: str = typer.Option("spin", "--replay-wait", help="replay: spin (Horovod's own "
                                             "synchronize) or sleep (poll every 0.2 ms: emulated hosts sharing "
                                             "few cores, docs/validation.md)",
                                             callback=opt.checked(opt.ReplayWait, "--replay-wait")),
             compute_ms: Optional[float] = typer.Option(None, "--compute-ms",
                                                       help="replay: forward+backward compute per step, ms (default: "
                                                            "a profiled layout's measured times, else 300)",
                                                       callback=opt.checked(opt.Millis, "--compute-ms")),
             steps: int = typer.Option(6, "--steps", help="measured steps per trial", callback=opt.checked(opt.Count, "--steps")),
             warmup: int = typer.Option(2, "--warmup", help="warm-up steps per trial", callback=opt.checked(opt.Index, "--warmup")),
             repeats: int = typer.Option(3, "--repeats", help="repeats of each fixed configuration",
                                         callback=opt.checked(opt.Count, "--repeats")),
             top: int = typer.Option(1, "--top", help="proposals from suggest to validate", callback=opt.checked(opt.Count, "--top")),
             proposals_file: Optional[Path] = typer.Option(None, "--proposals", help="JSON list of configs (or suggest --json)"),
             autotune: bool = typer.Option(True, "--autotune/--no-autotune",
                                           help="run Horovod autotune (shortened to about 150 steps: 1 warm-up "
                                                "sample, 1 step per sample, at most 5 samples per combination; "
                                                "Horovod's defaults take thousands) and then its best config"),
             defaults: bool = typer.Option(True, "--defaults/--no-defaults", help="run Horovod's defaults"),
             name: Optional[str] = typer.Option(None, "--name", help="record file name (default: the model)",
                                                callback=opt.checked(opt.PlainName, "--name")),
             timeout_s: float = typer.Option(600.0, "--timeout", help="seconds per trial before it is killed",
                                             callback=opt.checked(opt.Seconds, "--timeout")),
             keep_timelines: bool = typer.Option(False, "--keep-timelines", help="record and keep each trial's timeline "
                                                 "(gzipped; implies --timeline)"),
             timeline: Optional[bool] = typer.Option(None, "--timeline/--no-timeline",
                                                     help="record Horovod's timeline in each trial, for responses/step "
                                                     "(its writer's cost is then in every step time, which the "
                                                     "predictions leave out; default: off, the production job, unless "
                                                     "--keep-timelines; --no-timeline: the default, kept for old "
                                                     "commands)"),
             batch_size: Optional[int] = typer.Option(None, "--batch-size",
                                                      help="images per rank per step (for img/sec output)",
                                                      callback=opt.checked(opt.Count, "--batch-size")),
             runs_dir: Optional[Path] = _runs_dir_opt("where results go (default: $AUTOTUNER_RUNS_DIR, else ./runs "
                                                      "when it holds environments, else the user's runs folder)"),
             model_dir: Optional[Path] = _model_dir_opt()) -> None:
    """Run real horovodrun trials: defaults, autotune, autotune's best, proposals; write a report.

    Example:

    \b
        autotuner validate --env mycluster --model my_layout.json --no-autotune -- python examples/train_horovod.py
    """
    r = autotuner.validate(env, model, command=tuple(command or ()), np=np_, hosts=hosts, bandwidth_gbit=bandwidth_gbit,
                           testbed_hosts=testbed_hosts, ranks_per_host=ranks_per_host, link_gbit=link_gbit,
                           replay_wait=replay_wait, compute_ms=compute_ms, steps=steps, warmup=warmup, repeats=repeats,
                           top=top, proposals_file=proposals_file, autotune=autotune, defaults=defaults, name=name,
                           timeout_s=timeout_s, keep_timelines=keep_timelines, timeline=timeline, batch_size=batch_size,
                           runs_dir=runs_dir, model_dir=model_dir,
                           on_event=lambda line: err.print(line, highlight=False, markup=False, soft_wrap=True))
    recs, report, verdict = r.records, r.report, r.verdict
    out.print(f"{len(recs)} trials recorded; report: {report}", highlight=False)
    out.print(verdict, highlight=False)


@app.command(short_help="Bayesian optimisation on real runs, the simulator as its prior")
def tune(env: str = typer.Option(..., "--env", help="a fitted environment: its model is the prior; results go to "
                                 "<runs>/<env>/tune/", callback=opt.checked(opt.PlainName, "--env")),
         model: str = _trained_model_opt(),
         command: Optional[List[str]] = _command_arg(),
         np_: int = _np_opt(),
         hosts: str = _hosts_opt(),
         bandwidth_gbit: Optional[float] = _testbed_bw_opt(),
         testbed_hosts: Optional[int] = _testbed_opts()[0],
         ranks_per_host: Optional[int] = _testbed_opts()[1],
         link_gbit: Optional[float] = _testbed_opts()[2],
         replay_wait: str = typer.Option("spin", "--replay-wait", help="replay: spin or sleep (as validate)",
                                         callback=opt.checked(opt.ReplayWait, "--replay-wait")),
         compute_ms: Optional[float] = typer.Option(None, "--compute-ms", help="replay: forward+backward compute per "
                                                    "step, ms", callback=opt.checked(opt.Millis, "--compute-ms")),
         steps: int = typer.Option(6, "--steps", help="measured steps per trial", callback=opt.checked(opt.Count, "--steps")),
         warmup: int = typer.Option(2, "--warmup", help="warm-up steps per trial", callback=opt.checked(opt.Index, "--warmup")),
         budget_steps: int = typer.Option(240, "--budget-steps", help="steps all trials may run, warm-up included "
                                          "(Horovod's default autotune takes about 4,000)",
                                          callback=opt.checked(opt.Count, "--budget-steps")),
         compression: str = typer.Option("none", "--compression", help="compressions searched: none, fp16 or "
                                         "none,fp16 (fp16 runs for real through hvd.Compression.fp16)"),
         against_autotune: bool = typer.Option(False, "--against-autotune", help="then run Horovod's autotune with its "
                                               "default settings on the same job and measure both finals and the "
                                               "defaults, interleaved"),
         repeats: int = typer.Option(3, "--repeats", help="--against-autotune: repeats of each final",
                                     callback=opt.checked(opt.Count, "--repeats")),
         name: Optional[str] = typer.Option(None, "--name", help="record file name (default: tune-<model>)",
                                            callback=opt.checked(opt.PlainName, "--name")),
         timeout_s: float = typer.Option(600.0, "--timeout", help="seconds per trial before it is killed",
                                         callback=opt.checked(opt.Seconds, "--timeout")),
         batch_size: Optional[int] = typer.Option(None, "--batch-size", help="images per rank per step (img/sec output)",
                                                  callback=opt.checked(opt.Count, "--batch-size")),
         runs_dir: Optional[Path] = _runs_dir_opt("where results go (default: $AUTOTUNER_RUNS_DIR, else ./runs "
                                                  "when it holds environments, else the user's runs folder)"),
         model_dir: Optional[Path] = _model_dir_opt(),
         as_json: bool = typer.Option(False, "--json", help="print one JSON object")) -> None:
    """Tune the knobs with real horovodrun trials, starting from the simulator's belief.

    A Gaussian process models where real trials disagree with the simulator; each trial refits the env's
    link bandwidth; it stops when no candidate's expected improvement beats the measured noise. Example:

    \b
        autotuner tune --env mycluster --model resnet50 --compute-ms 300 --budget-steps 200
    """
    comps = [c.strip() for c in compression.split(",") if c.strip()]
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, disable=as_json or not err.is_terminal) as bar:
        task = bar.add_task("tune", total=budget_steps)

        def progress(spent, budget, incumbent):
            bar.update(task, completed=spent, total=budget,
                       description=f"tune (steps; best {incumbent})" if incumbent else "tune (steps)")

        r = autotuner.tune(env, model, command=tuple(command or ()), np=np_, hosts=hosts, bandwidth_gbit=bandwidth_gbit,
                           testbed_hosts=testbed_hosts, ranks_per_host=ranks_per_host, link_gbit=link_gbit,
                           replay_wait=replay_wait, compute_ms=compute_ms, steps=steps, warmup=warmup,
                           budget_steps=budget_steps, compressions=comps, against_autotune=against_autotune,
                           repeats=repeats, name=name, timeout_s=timeout_s, batch_size=batch_size, runs_dir=runs_dir,
                           model_dir=model_dir, progress=progress,
                           on_event=None if as_json else (lambda line: err.print(line, highlight=False, markup=False,
                                                                                 soft_wrap=True)))
    if as_json:
        print(json.dumps({"final": r.final, "steps": r.steps, "trials": r.trials, "wall_s": r.wall_s, "stop": r.stop,
                          "refits": list(r.refits), "defaults_ms": list(r.defaults_ms), "report": str(r.report),
                          "trust": r.trust, "head_to_head": r.head_to_head}, allow_nan=False, default=str))
        return
    if r.final is None:
        out.print(f"no configuration was measured: {r.stop}", highlight=False, soft_wrap=True)
        raise typer.Exit(1)
    f = r.final
    m = f["measured_ms"]
    rng = f"range {min(m):.1f}-{max(m):.1f} ms over {len(m)} trials" if len(m) > 1 else "one trial"
    is_defaults = f["compression"] == "none" and f["config"] == autotuner.DEFAULTS_0_28.to_dict()
    lines = [f"final: {f['key']}: {f['median_ms']:.1f} ms/step ({rng})"
             + (": Horovod's defaults, keep them" if is_defaults else "")]
    if r.defaults_ms and not is_defaults:
        import statistics

        d = r.defaults_ms
        lines.append(f"Horovod's defaults measured {statistics.median(d):.1f} ms/step"
                     + (f" (range {min(d):.1f}-{max(d):.1f} ms over {len(d)} trials)" if len(d) > 1 else " (one trial)"))
    lines += [f"spent: {r.steps} steps in {r.trials} trials, {r.wall_s:.0f} s of jobs",
              f"stopped: {r.stop}", "horovodrun flags: " + " ".join(f["flags"]),
              "env vars: " + " ".join(f"{k}={v}" for k, v in f["env"].items())]
    if f["compression"] != "none":
        lines.append(f"in your script: {f['compression_code']}")
    if r.head_to_head:
        a = r.head_to_head["autotune"]
        lines.append(f"Horovod's default autotune: {'settled' if a.get('finished') else 'did not settle'} after "
                     f"{a.get('steps')} steps, {a.get('wall_s')} s")
        lines.append(r.head_to_head["verdict"])
    lines.append(f"trust: {r.trust}")
    lines.append(f"report: {r.report}")
    for ln in lines:
        out.print(ln, highlight=False, markup=False, soft_wrap=True)


@app.command(short_help="explain a Horovod autotune log")
def inspect(path: Path = typer.Argument(..., help="a Horovod autotune log CSV (--autotune-log-file)"),
            model: Optional[str] = typer.Option(None, "--model", help="layout, to turn the score into a time per step")) -> None:
    """Explain a Horovod autotune log: trials, best row, whether tuning finished, the score.

    Example:

    \b
        autotuner inspect autotune_log.csv
    """
    for line in autotuner.inspect_log(path, model):
        out.print(line, highlight=False, markup=False, soft_wrap=True)


@app.command(short_help="a real timeline against a simulated one")
def compare(real: Path = typer.Argument(..., help="a real Horovod timeline (.json or .json.gz)"),
            sim: Path = typer.Argument(..., help="a simulated one (autotuner simulate --timeline), or another real one"),
            skip_real: int = typer.Option(1, "--skip-real", help="first complete steps of REAL to skip (warm-up)",
                                          callback=opt.checked(opt.Index, "--skip-real")),
            skip_sim: int = typer.Option(0, "--skip-sim", help="first complete steps of SIM to skip",
                                         callback=opt.checked(opt.Index, "--skip-sim")),
            top: int = typer.Option(10, "--top", help="largest per-response differences to show",
                                    callback=opt.checked(opt.Index, "--top")),
            as_json: bool = typer.Option(False, "--json", help="print one JSON object")) -> None:
    """Line a real timeline up against a simulated one: per step, by response size, per response.

    Example:

    \b
        autotuner compare real.json.gz sim.json
    """
    f = fmt_num
    d = autotuner.compare_timelines(real, sim, skip_real=skip_real, skip_sim=skip_sim, top=top)
    if as_json:
        print(json.dumps(d, allow_nan=False))
        return
    rs, ss = d["real"], d["sim"]
    out.print(f"[bold]real[/] {rs['source']}: {rs['steps_used']} step(s) used of {rs['steps_found']} "
              f"(skipped {rs['steps_skipped']}), {rs['tensors']} tensors", highlight=False)
    out.print(f"[bold]sim[/]  {ss['source']}: {ss['steps_used']} step(s) used of {ss['steps_found']} "
              f"(skipped {ss['steps_skipped']}), {ss['tensors']} tensors", highlight=False)
    for n in d["notes"]:
        err.print(f"note: {n}", highlight=False, markup=False, soft_wrap=True)
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
    render_table(out, t)
    t = Table(title="by response size (responses per step, mean collective ms)")
    for col in ("size", "real n", "sim n", "real ms", "sim ms", "sim / real"):
        t.add_column(col, justify="right")
    for b in d["by_size"]:
        t.add_row(b["bucket"], f(b["real_per_step"], ".1f"), f(b["sim_per_step"], ".1f"), f(b["real_mean_ms"]),
                  f(b["sim_mean_ms"]), f(b["ratio"]))
    render_table(out, t)
    if len(d["by_position"]) <= 40:
        t = Table(title="response by position in the step (mean over steps)")
        for col in ("#", "real MiB", "sim MiB", "real tensors", "sim tensors", "real ms", "sim ms"):
            t.add_column(col, justify="right")
        for b in d["by_position"]:
            t.add_row(str(b["position"]), f(b["real_bytes"] and b["real_bytes"] / MIB), f(b["sim_bytes"] and b["sim_bytes"] / MIB),
                      f(b["real_tensors"], ".1f"), f(b["sim_tensors"], ".1f"), f(b["real_ms"]), f(b["sim_ms"]))
        render_table(out, t)
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
        render_table(out, t)


@app.command("explore", short_help="step time over threshold x cycle time; plots")
@knob_options("a configuration to mark, instead of suggest's pick")
def explore_cmd(model: str = typer.Option(..., "--model", help=MODEL_HELP),
                env: Optional[str] = typer.Option(None, "--env", help=ENV_HELP),
                compute_ms: Optional[float] = _compute_opt(),
                out_dir: Path = typer.Option(Path("explore"), "--out", help="folder for the PNG and SVG plots"),
                resolution: int = typer.Option(64, "--resolution", help="points per axis (threshold and cycle time)",
                                               callback=opt.checked(opt.Resolution, "--resolution")),
                suggest_pick: bool = typer.Option(True, "--suggest/--no-suggest", help="run suggest and mark its pick"),
                pick_file: Optional[Path] = typer.Option(None, "--pick", help="mark this saved pick (suggest --json output) instead of running suggest"),
                nodes: Optional[int] = _nodes_opt(),
                gpus_per_node: Optional[int] = _gpus_opt(),
                bandwidth_gbps: Optional[float] = _bw_opt(),
                compression: Compression = _compression_opt(),
                backend: Optional[Backend] = _backend_opt(),
                runs_dir: Optional[Path] = _runs_dir_opt("measured validations <runs>/<env>/validation, searched "
                                                         "first (then $AUTOTUNER_RUNS_DIR, ./runs, the user's and "
                                                         "the shipped runs)"),
                model_dir: Optional[Path] = _model_dir_opt(),
                as_json: bool = typer.Option(False, "--json", help="print the grid, marks and measured points as JSON"),
                knobs: dict = None) -> None:
    """Predicted step time over fusion threshold x cycle time per on/off combination; heatmaps + sensitivity.

    Example:

    \b
        autotuner explore --model resnet50 --env local-gloo-1gbit --out explore/
    """
    wide = out
    r = autotuner.explore(model, env, config=knobs or None, pick_file=pick_file, suggest_pick=suggest_pick,
                          resolution=resolution, nodes=nodes, gpus_per_node=gpus_per_node, bandwidth_gbps=bandwidth_gbps,
                          compression=str(compression), compute_ms=compute_ms,
                          backend=None if backend is None else str(backend), out_dir=out_dir, runs_dir=runs_dir,
                          model_dir=model_dir)
    ex, files = r.exploration, r.files
    if as_json:
        print(json.dumps(r.to_dict(), allow_nan=False))
        return
    s = ex.scenario
    be = f", backend {r.backend}" if r.backend else ""
    wide.print(f"[bold]{s['model']}[/] on [bold]{s['env']}[/] ({s['nodes']}x{s['gpus_per_node']}, "
               f"{s['bandwidth_gbps']:g} Gbit/s{be}, compression {r.compression}): {ex.evaluations} configurations "
               f"simulated in {ex.seconds:.1f} s"
               + (f", suggest {r.suggest_seconds:.1f} s" if r.suggest_seconds is not None else "")
               + f", plots {r.plot_seconds:.1f} s", soft_wrap=True)
    t = Table(title="per combination (grid minimum)")
    for col in ("combination", "best step ms", "fusion MiB", "cycle ms", "fusion off, best ms"):
        t.add_column(col, justify="right")
    for label, c, ms, off in ex.by_combination:  # ties as the grid best's: closest to the defaults
        t.add_row(label, f"{ms:.1f}", f"{c.fusion_threshold_mb:.3g}", f"{c.cycle_time_ms:.3g}", f"{off:.1f}")
    render_table(wide, t)
    for m in ex.marks:
        if m.kind != "autotune-start":
            c = m.config
            wide.print(f"{m.name}: {m.step_time_ms:.1f} ms ({c.fusion_threshold_mb:.3g} MiB, {c.cycle_time_ms:.3g} ms, "
                      f"cache {'on' if c.cache_enabled else 'off'}, hierarchical {'on' if c.hierarchical_allreduce else 'off'})",
                      highlight=False)
    if len(ex.measured):
        mt = Table(title=f"measured (runs/{s['env']}/validation) vs predicted now")
        for col in ("source", "fusion MiB", "cycle ms", "cache", "compression", "n", "measured ms", "predicted ms",
                    "error %"):
            mt.add_column(col, justify="right")
        for _, row in ex.measured.iterrows():  # a timeline trial is another job than the prediction's: no error
            mt.add_row(row["source"], f"{row['fusion_threshold_mb']:.3g}", f"{row['cycle_time_ms']:.3g}",
                       "on" if row["cache"] else "off", row["compression"], str(row["n"]),
                       f"{row['measured_step_time_ms']:.1f}" + (" (timeline)" if row["timeline"] else ""),
                       f"{row['predicted_step_time_ms']:.1f}",
                       "n/a" if row["error_percent"] is None else f"{row['error_percent']:+.1f}")
        render_table(wide, mt)
        if ex.measured["timeline"].any():
            wide.print("(timeline): Horovod's timeline ran in those trials; its writer's cost is in their measured time "
                       "and not in the prediction (a job without it), so they have no error %", highlight=False,
                       soft_wrap=True)
    elif not r.measured_overlaid:
        wide.print("measured points: not overlaid (a what-if differs from the measured setup)")
    wide.print("wrote " + ", ".join(str(f) for f in files), highlight=False, soft_wrap=True)


@app.command("scale", short_help="what-if at more nodes, ranks or link rates")
def scale_cmd(model: str = typer.Option(..., "--model", help=MODEL_HELP),
              nodes: Optional[str] = typer.Option(None, "--nodes", show_default=False,
                                                  help="comma-separated node counts (default "
                                                       f"{','.join(map(str, autotuner.SCALE_NODES))})"),
              ranks: Optional[str] = typer.Option(None, "--ranks", show_default=False,
                                                  help="comma-separated rank counts on one node (single-server "
                                                       "scaling), instead of --nodes and --gpus-per-node"),
              gpus_per_node: Optional[int] = _gpus_opt("GPUs (ranks) per node (default: the env's)"),
              env: Optional[str] = typer.Option(None, "--env", help=ENV_HELP),
              bandwidth_gbps: Optional[str] = typer.Option(None, "--bandwidth-gbps", help="comma-separated inter-node link rates, Gbit/s (default: the env's)"),
              batch_size: Optional[int] = typer.Option(None, "--batch-size", help="samples per GPU per step (default: runs/<env>/env.toml batch_size)",
                                                       callback=opt.checked(opt.Count, "--batch-size")),
              compute_ms: Optional[float] = _compute_opt(),
              compression: Compression = _compression_opt(),
              backend: Optional[Backend] = _backend_opt(),
              out_dir: Path = typer.Option(Path("scale"), "--out", help="folder for the PNG and SVG plot"),
              runs_dir: Optional[Path] = _runs_dir_opt("<runs>/<env>/env.toml for the batch size, searched first "
                                                       "(then $AUTOTUNER_RUNS_DIR, ./runs, the user's and the "
                                                       "shipped runs)"),
              model_dir: Optional[Path] = _model_dir_opt(),
              reference_version: Optional[str] = typer.Option(
                  None, "--reference-version", show_default=False,
                  help="the defaults compared: this Horovod release's, e.g. 0.28.1 (128 MiB, 1 ms) or 0.20.3 "
                       "(64 MiB, 5 ms) (default: the env's own Horovod version)",
                  callback=opt.horovod_release("--reference-version")),
              as_json: bool = typer.Option(False, "--json", help="print the table as JSON")) -> None:
    """What-if at scale: step time, throughput, scaling efficiency per node count, or per rank count on one
    node (--ranks); best config and defaults; the whole run's wall time (s) where the env has its run shape.

    Example:

    \b
        autotuner scale --model resnet50 --env local-gloo-1gbit --nodes 1,2,4,8
    """
    wide = out
    if ranks is not None and nodes is not None:  # before parsing either list: the conflict is the news
        raise AutotunerError("--ranks and --nodes: give one (--ranks: ranks on one node; --nodes: node counts)")
    result = autotuner.scale(model, env, nodes=None if nodes is None else opt.int_list(nodes, "--nodes"),
                        ranks=None if ranks is None else opt.int_list(ranks, "--ranks"), gpus_per_node=gpus_per_node,
                        bandwidths_gbps=None if bandwidth_gbps is None else opt.float_list(bandwidth_gbps,
                                                                                           "--bandwidth-gbps"),
                        batch_size=batch_size, compute_ms=compute_ms, compression=str(compression),
                        backend=None if backend is None else str(backend), out_dir=out_dir, runs_dir=runs_dir,
                        model_dir=model_dir, reference_version=reference_version)
    res, files, trust, batch = result.scaling, result.files, result.trust, result.batch
    for w in result.warnings:
        err.print(f"warning: {w}", highlight=False, markup=False, soft_wrap=True)
    if as_json:
        print(json.dumps(result.to_dict(), allow_nan=False))
        return
    wide.print(f"trust: {res.scenario['env']}: {trust} (on its own shape; other shapes are what-ifs)", highlight=False,
               soft_wrap=True)
    s = res.scenario
    by_ranks = res.axis == "ranks"
    intra = (f"intra-node tier {s['intra_bandwidth_gbps']:.1f} Gbit/s (fitted)" if s["intra_bandwidth_gbps"]
             else "intra-node tier not measured in this env: the inter-node tier is used for it")
    lo, hi = res.table["compute_ms"].min(), res.table["compute_ms"].max()
    per = f"batch {batch} fixed" if batch else "batch unknown (--batch-size for samples/s)"
    compute = (f"per-GPU compute {s['compute_ms']:.1f} ms and {per} (weak scaling)"
               if hi - lo <= 1e-9 * hi else
               f"per-rank compute {lo:.1f}-{hi:.1f} ms (it changes with the ranks: ranks share the host's CPUs, or the "
               f"step's work is split over them), " + (f"batch {batch} per rank" if batch else per))
    be = f", backend {result.backend}" if result.backend else ""
    wide.print(f"[bold]{s['model']}[/] scaled from [bold]{s['env']}[/]" + (" over ranks on one node" if by_ranks else "")
               + f"{be}: {compute}; {intra}; {res.evaluations} configurations simulated "
               f"in {res.seconds:.1f} s", highlight=False, soft_wrap=True)
    thr_col = "samples/s" if batch else "GPU-steps/s"
    wall = "best_wall_time_s" in res.table
    cols = [("nodes", lambda r: str(r["nodes"])), ("GPUs", lambda r: str(r["ranks"]))] if not by_ranks else \
        [("ranks", lambda r: str(r["ranks"]))]
    if hi - lo > 1e-9 * hi:
        cols.append(("compute ms", lambda r: f"{r['compute_ms']:.1f}"))
    cols += [("best ms", lambda r: f"{r['best_step_time_ms']:.1f}"),
             (f"best {thr_col}", lambda r: f"{r['best_samples_per_s'] if batch else r['best_gpu_steps_per_s']:.1f}"),
             ("best eff.", lambda r: f"{r['best_efficiency']:.3f}")]
    cols += [("best wall s", lambda r: f"{r['best_wall_time_s']:.1f}")] if wall else []
    cols += [("default ms", lambda r: f"{r['default_step_time_ms']:.1f}"),
             ("default eff.", lambda r: f"{r['default_efficiency']:.3f}")]
    cols += [("default wall s", lambda r: f"{r['default_wall_time_s']:.1f}")] if wall else []
    cols += [("speed-up", lambda r: f"{r['speedup_vs_default']:.3f}x")]
    # the best knobs in a table of their own, keyed as the first: one table of both is ~110 columns wide, and an
    # 80-column terminal wraps each of its lines
    key = 1 if by_ranks else 2
    knob_cols = cols[:key] + [
        ("fusion MiB", lambda r: f"{r['best_fusion_threshold_mb']:g}"),
        ("within 1% MiB", lambda r: f"{r['near_threshold_lo_mb']:g}-{r['near_threshold_hi_mb']:g}"),
        ("cycle ms", lambda r: f"{r['best_cycle_time_ms']:g}"), ("cache", lambda r: "on" if r["best_cache"] else "off")]
    # hierarchical allreduce: not on one node, and not where it was never searched (a backend without it:
    # every row "no" and "-"; the finding line below says why)
    if not by_ranks and res.table["hier_gain_percent"].notna().any():
        knob_cols += [("hier.", lambda r: "yes" if r["best_hierarchical_allreduce"] else "no"),
                      ("hier. gain %", lambda r: "-" if r["hier_gain_percent"] != r["hier_gain_percent"]
                       else f"{r['hier_gain_percent']:+.1f}")]
    for bw, g in res.table.groupby("bandwidth_gbps", sort=True):
        where = f"one node ({bw:g} Gbit/s inter-node link)" if by_ranks else f"{bw:g} Gbit/s inter-node link"
        for title, cs in ((f"{where}: step time, best and Horovod's defaults", cols),
                          (f"{where}: the best knobs", knob_cols)):
            t = Table(title=title)
            for col, _ in cs:
                t.add_column(col, justify="right")
            for _, r in g.iterrows():
                t.add_row(*(f(r) for _, f in cs))
            render_table(wide, t)
    for f in res.findings:
        wide.print(f, highlight=False, soft_wrap=True)
    wide.print("efficiency = throughput(N) / (N/N0 x throughput(N0)), "
               + ("N = ranks, N0 = smallest rank count; " if by_ranks else "N0 = smallest node count; ")
               + f"defaults = Horovod {res.reference_version}'s ({res.reference.fusion_threshold_bytes / MIB:g} MiB, "
                 f"{res.reference.cycle_time_ms:g} ms, cache on, flat)", highlight=False, soft_wrap=True)
    if wall:
        run = result.run
        wide.print(f"wall s = predicted wall time of the whole run: {run.startup_s:g} s start-up + steps per rank x step "
                   f"({run.epochs} epoch(s) of {run.train_images} images in batches of {run.batch_size} per rank, "
                   "split over the ranks)", highlight=False, soft_wrap=True)
    wide.print("wrote " + ", ".join(str(f) for f in files), highlight=False, soft_wrap=True)


#: ``accuracy``'s mark on a row whose measured number the fit read (its error shows the fit, not a prediction)
USED_BY_FIT = "(used by the fit)"


@app.command("accuracy", short_help="every measured number beside its prediction")
def accuracy_cmd(env: Optional[str] = typer.Option(None, "--env", help="one environment (default: every one)"),
                 runs_dir: Optional[Path] = _runs_dir_opt(),
                 model_dir: Optional[Path] = _model_dir_opt(),
                 cost_model: Optional[str] = typer.Option(None, "--cost-model", help="predict the real trials with "
                                                          "this fitted env's cost model instead (e.g. a measure sweep)",
                                                          callback=opt.checked(opt.PlainName, "--cost-model")),
                 as_json: bool = typer.Option(False, "--json", help="print one JSON object")) -> None:
    """How much to trust the model: every measured number next to its prediction, and whether the fit used it.

    Example:

    \b
        autotuner accuracy --env local-gloo-1gbit
    """
    d = autotuner.accuracy_table(runs_dir, model_dir, env, cost_model=cost_model)
    if as_json:
        print(json.dumps(d, allow_nan=False))
        return
    wide = out
    for s in d["summary"]:  # the answer first: per env, the held-out predictions in brief
        if s["held_out"]:
            w = s["held_out_worst"]
            line = (f"{s['env']}: {s['held_out']} held-out prediction(s), mean |error| "
                    f"{s['held_out_mape_percent']:.1f}%, worst {w['error_percent']:+.1f}% ({w['quantity']}); "
                    f"{s['used_by_fit']} used by the fit")
            if s.get("held_out_other_job"):  # like with like: the production job's rows apart
                pw = s.get("as_predicted_worst")
                line += (f"; {s['held_out_other_job']} of them ran another job than the prediction's (Horovod's "
                         "timeline, or fp16 over zero gradients or the same values on every rank)" + ("" if pw is None else
                                            f"; the rest: {s['held_out_as_predicted']}, mean |error| "
                                            f"{s['as_predicted_mape_percent']:.1f}%, worst "
                                            f"{pw['error_percent']:+.1f}% ({pw['quantity']})"))
            wide.print(line, highlight=False, soft_wrap=True)
        else:
            wide.print(f"{s['env']}: no held-out prediction: every one of its {s['step_time_rows']} step times was "
                       "used by the fit, so they show the fit, not the prediction", highlight=False, soft_wrap=True)
    for n in d["notes"]:
        err.print(f"note: {n}", highlight=False, markup=False, soft_wrap=True)
    by_env: dict[str, list[dict]] = {}
    for c in d["cases"]:
        by_env.setdefault(c["env"], []).append(c)
    ranged = 0
    for env_name, rows in by_env.items():  # per env a heading, then a table per source file named in its title
        wide.print(f"predicted vs measured: {env_name}", highlight=False, markup=False, soft_wrap=True)
        by_file: dict[str, list[dict]] = {}  # (80 columns: neither the env nor the file repeated on every row)
        for c in rows:
            by_file.setdefault(c["file"], []).append(c)
        for file, frows in by_file.items():
            t = Table(title=file.removeprefix(f"{env_name}/"))
            for col in ("quantity", "measured", "predicted", "error", "from"):
                t.add_column(col, justify="left" if col == "quantity" else "right")
            for c in frows:
                pred = f"{c['predicted']:.2f}"
                lo, hi = c.get("predicted_range") or (c["predicted"], c["predicted"])
                if hi - lo > RANGE_SHOWN * c["predicted"]:  # the small-response price the phases leave open moves it
                    pred, ranged = pred + f"\n{lo:.0f}-{hi:.0f}", ranged + 1
                t.add_row(c["quantity"] + (f" {USED_BY_FIT}" if c["used_by_fit"] else ""), f"{c['measured']:.2f}",
                          pred, f"{c['error_percent']:+.1f}%", c["where"])
            render_table(wide, t)
    wide.print(f"{USED_BY_FIT}: the fit read this number, so its row shows the fit, not a prediction; every other row "
               "is held out", highlight=False, soft_wrap=True)
    if ranged:
        wide.print(f"{ranged} prediction(s) with a second line: the step time with a small response priced at either "
                   "of the env's burst and step phases (the step phase's charged; the price they leave open moves it "
                   "by more than 2 %; docs/accuracy.md, \"The small-response price the phases leave open\")",
                   highlight=False, soft_wrap=True)


env_app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                      help="Environments without a sweep: from published link figures.")
app.add_typer(env_app, name="env")


@env_app.command("new", short_help="an environment from published link figures")
def env_new_cmd(name: str = typer.Argument(..., help="environment name (a plain name)",
                                           callback=opt.checked(opt.PlainName, "NAME")),
                nodes: int = typer.Option(..., "--nodes", help="nodes", callback=opt.checked(opt.Count, "--nodes")),
                gpus_per_node: int = typer.Option(..., "--gpus-per-node", help="GPUs (ranks) per node",
                                                  callback=opt.checked(opt.GpusPerNode, "--gpus-per-node")),
                intra: Optional[str] = typer.Option(None, "--intra", help="intra-node link: nvlink2, nvlink3, "
                                                    "nvlink4, pcie3, pcie4, pcie5"),
                inter_gbit: Optional[float] = typer.Option(None, "--inter-gbit",
                                                           help="node link, Gbit/s (e.g. 100 for EDR InfiniBand, "
                                                                "200 for HDR, 25 for 25GbE)",
                                                           callback=opt.checked(opt.LinkGbit, "--inter-gbit")),
                backend: str = typer.Option("nccl", "--backend", help="nccl, mpi or gloo"),
                gpu: Optional[str] = typer.Option(None, "--gpu", help="GPU model: V100, T4, A100-40GB, A100-80GB, "
                                                  "H100-SXM, H100-PCIe, H200 (its datasheet memory bandwidth prices fp16's "
                                                  "casts and float16 sum; without it fp16 is not proposed)"),
                out_dir: Optional[Path] = typer.Option(None, "--out", show_default=False,
                                                       help="where <NAME>.json goes (default: the user's model "
                                                            "folder, as fit)"),
                model_dir: Optional[Path] = _model_dir_opt()) -> None:
    """Build an environment from published link figures: marked "from specs, never measured" everywhere.

    Example:

    \b
        autotuner env new dgx8 --nodes 8 --gpus-per-node 8 --intra nvlink3 --inter-gbit 100 --gpu A100
    """
    path = autotuner.env_new(name, nodes=nodes, gpus_per_node=gpus_per_node, intra=intra, inter_gbit=inter_gbit,
                   backend=backend, gpu=gpu, out=out_dir, model_dir=model_dir)
    out.print(f"wrote {path}: {name}, {nodes}x{gpus_per_node}" + (f" {gpu}" if gpu else "")
              + (f", {intra} inside" if intra else "") + (f", {inter_gbit:g} Gbit/s between nodes" if inter_gbit else "")
              + f", {backend}; from specs, never measured (autotuner measure --env {name} + fit replaces it)",
              highlight=False, soft_wrap=True)
    md = f" --model-dir {out_dir}" if out_dir is not None else ""  # a folder the search does not read by itself
    out.print(f"use it: autotuner suggest --model resnet50 --compute-ms 300 --env {name}{md}", highlight=False,
              soft_wrap=True)


ddp_app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                      help="PyTorch DistributedDataParallel: bucket caps, the gradient view, comm hooks (docs/ddp.md).")
app.add_typer(ddp_app, name="ddp", short_help="PyTorch DDP: buckets, view, hooks")


@ddp_app.command("measure", short_help="the DDP sweep: torch.distributed's allreduce under torchrun")
def ddp_measure_cmd(env: str = typer.Option(..., "--env", help="environment name: the sweep goes to "
                                            "<runs>/<env>/ddp-sweep.jsonl", callback=opt.checked(opt.PlainName, "--env")),
                    np_: int = _np_opt(),
                    bandwidth_gbit: Optional[float] = _testbed_bw_opt(),
                    testbed_hosts: Optional[int] = _testbed_opts()[0],
                    ranks_per_host: Optional[int] = _testbed_opts()[1],
                    link_gbit: Optional[float] = _testbed_opts()[2],
                    jobs: int = typer.Option(3, "--jobs", help="sweep jobs (each every size)",
                                             callback=opt.checked(opt.Count, "--jobs")),
                    repeats: int = typer.Option(7, "--repeats", help="timed allreduces per size and job",
                                                callback=opt.checked(opt.Count, "--repeats")),
                    burst_jobs: int = typer.Option(3, "--burst-jobs", help="jobs of the burst phase (allreduces "
                                                   "back to back against lone ones; 0 skips it)",
                                                   callback=opt.checked(opt.Index, "--burst-jobs")),
                    first_touch_jobs: int = typer.Option(1, "--first-touch-jobs", help="jobs of the first-touch "
                                                         "phase (fresh gradients held vs dropped, CPU ranks' page "
                                                         "faults; 0 skips it)",
                                                         callback=opt.checked(opt.Index, "--first-touch-jobs")),
                    cpu_jobs: int = typer.Option(1, "--cpu-jobs", help="jobs of the cpu phase (compute beside a "
                                                 "stream of allreduces and alone: the CPU a collective takes from "
                                                 "the ranks' compute; 0 skips it)",
                                                 callback=opt.checked(opt.Index, "--cpu-jobs")),
                    runs_dir: Optional[Path] = _runs_dir_opt("where the sweep goes (default: $AUTOTUNER_RUNS_DIR, "
                                                             "else ./runs when it holds environments, else the "
                                                             "user's runs folder)")) -> None:
    """Measure what DDP's buckets cost on this cluster: torch.distributed's Gloo allreduce of 4 KiB-128 MiB in
    float32 and float16 (what the fp16 hook sends), the copy into a bucket and the hook's casts, then the burst
    phase (allreduces launched back to back, as DDP launches buckets, against lone ones), the first-touch phase
    (what re-faulting fresh gradients held to the step's end costs a CPU rank) and the cpu phase (the CPU a
    collective in flight takes from the ranks' compute), under torchrun on --np
    ranks here, a shaped loopback (--bandwidth-gbit) or an emulated cluster (--testbed-hosts); resumable: run it
    again on a measured env to add a phase it lacks.
    NCCL with CUDA tensors is not measured here (no GPU): docs/ddp.md.

    Example:

    \b
        autotuner ddp measure --env myddp --np 2 --bandwidth-gbit 2
    """
    path = autotuner.ddp_measure(env, np=np_, bandwidth_gbit=bandwidth_gbit, testbed_hosts=testbed_hosts or 0,
                                 ranks_per_host=ranks_per_host or 1, link_gbit=link_gbit, jobs=jobs, repeats=repeats,
                                 burst_jobs=burst_jobs, first_touch_jobs=first_touch_jobs, cpu_jobs=cpu_jobs,
                                 runs_dir=runs_dir,
                                 say=lambda m: err.print(m, highlight=False, soft_wrap=True))
    out.print(f"wrote {path}; next: autotuner ddp suggest --env {env} --model resnet50", highlight=False,
              soft_wrap=True)


@ddp_app.command("validate", short_help="real DDP replays of bucket settings, against their predictions")
def ddp_validate_cmd(env: str = typer.Option(..., "--env", help="DDP environment (measured with ddp measure)",
                                             callback=opt.checked(opt.PlainName, "--env")),
                     model: str = typer.Option(..., "--model", help=MODEL_HELP + " (with your own script: its "
                                               "layout, from autotuner profile)"),
                     command: Optional[List[str]] = _command_arg(),
                     proposals: Optional[Path] = typer.Option(None, "--proposals", help="ddp suggest --json output "
                                                              "or a JSON list of DDP settings (default: 11 settings, "
                                                              "DDP's default, 1-200 MiB, a per-bucket list, the view, "
                                                              "the fp16 hook)"),
                     name: Optional[str] = typer.Option(None, "--name", help="record file name (default: the model)",
                                                        callback=opt.checked(opt.PlainName, "--name")),
                     compute_ms: Optional[float] = typer.Option(None, "--compute-ms", help="replay: forward+"
                                                                "backward per step, ms (default: a profiled "
                                                                "layout's measured times, else 100)",
                                                                callback=opt.checked(opt.Millis, "--compute-ms")),
                     steps: int = typer.Option(5, "--steps", help="measured steps per trial",
                                               callback=opt.checked(opt.Count, "--steps")),
                     warmup: int = typer.Option(3, "--warmup", help="warm-up steps per trial (the first rebuilds "
                                                "DDP's buckets)", callback=opt.checked(opt.Count, "--warmup")),
                     repeats: int = typer.Option(3, "--repeats", help="interleaved rounds of every setting",
                                                 callback=opt.checked(opt.Count, "--repeats")),
                     np_: int = _np_opt(),
                     bandwidth_gbit: Optional[float] = _testbed_bw_opt(),
                     testbed_hosts: Optional[int] = _testbed_opts()[0],
                     ranks_per_host: Optional[int] = _testbed_opts()[1],
                     link_gbit: Optional[float] = _testbed_opts()[2],
                     runs_dir: Optional[Path] = _runs_dir_opt(),
                     as_json: bool = typer.Option(False, "--json")) -> None:
    """Run real DDP (torchrun: the DDP replay workload, or your own script after --, which reads each setting from
    AUTOTUNER_DDP_* variables as examples/train_ddp.py does) for each setting, repeated and interleaved, no
    timeline; records appended trial by trial to <runs>/<env>/ddp-validation/<name>.jsonl (a killed run resumes);
    then each setting's measured step beside its prediction from the env's sweep alone.

    Example:

    \b
        autotuner ddp suggest --env myddp --model resnet50 --json > pick.json
        autotuner ddp validate --env myddp --model resnet50 --proposals pick.json --bandwidth-gbit 2
        autotuner ddp validate --env myddp --model my_layout.json -- python examples/train_ddp.py
    """
    r = autotuner.ddp_validate(env, model, proposals=proposals, name=name, compute_ms=compute_ms, steps=steps,
                               warmup=warmup, repeats=repeats, np=np_, bandwidth_gbit=bandwidth_gbit,
                               testbed_hosts=testbed_hosts or 0, ranks_per_host=ranks_per_host or 1,
                               link_gbit=link_gbit, command=command or None, runs_dir=runs_dir,
                               say=lambda m: err.print(m, highlight=False, soft_wrap=True))
    if as_json:
        out.print_json(json.dumps(r.to_dict()))
        return
    t = Table(title=f"{model}: measured against predicted (the env's sweep alone)")
    for col in ("setting", "trials", "measured ms (range)", "predicted ms", "error", "first step ms"):
        t.add_column(col, justify="left" if col == "setting" else "right")
    for row in r.rows:
        t.add_row(row.label, str(row.trials), f"{row.measured_ms:.1f} ({row.low_ms:.1f}-{row.high_ms:.1f})",
                  f"{row.predicted_ms:.1f}", f"{row.error_pct:+.1f} %",
                  ("n/a" if row.first_measured_ms != row.first_measured_ms else f"{row.first_measured_ms:.1f}")
                  + f" / {row.first_predicted_ms:.1f}")
    render_table(out, t)
    out.print(f"verdict: {r.verdict}", highlight=False, soft_wrap=True)
    out.print(f"records: {r.path}; report: {r.report}", highlight=False, soft_wrap=True)


@ddp_app.command("simulate", short_help="one DDP setting's step, bucket by bucket")
def ddp_simulate_cmd(model: str = typer.Option(..., "--model", help=MODEL_HELP),
                     env: str = typer.Option(..., "--env", help="DDP environment (a runs folder with ddp-sweep.jsonl)",
                                             callback=opt.checked(opt.PlainName, "--env")),
                     bucket_cap_mb: Optional[float] = typer.Option(None, "--bucket-cap-mb", help="DDP's bucket_cap_mb, "
                                                                   "MiB (default: DDP's 25 with a 1 MiB first bucket)"),
                     bucket_cap_mb_list: Optional[str] = typer.Option(None, "--bucket-cap-mb-list",
                                                                      help="per-bucket caps, MiB, comma-separated"),
                     gradient_as_bucket_view: bool = typer.Option(False, "--gradient-as-bucket-view"),
                     comm_hook: str = typer.Option("allreduce", "--comm-hook", help="allreduce or fp16_compress"),
                     compute_ms: Optional[float] = _compute_opt(),
                     runs_dir: Optional[Path] = _runs_dir_opt(),
                     as_json: bool = typer.Option(False, "--json")) -> None:
    """Simulate one DDP setting: the steady-state step (rebuilt buckets), the first iteration, and each bucket's
    bytes and times.

    Example:

    \b
        autotuner ddp simulate --env ddp-2gbit --model resnet50 --compute-ms 100 --bucket-cap-mb 4
    """
    try:
        caps = None if bucket_cap_mb_list is None else tuple(float(x) for x in bucket_cap_mb_list.split(","))
    except ValueError:
        raise autotuner.ScenarioError(f"--bucket-cap-mb-list {bucket_cap_mb_list!r}: give MiB, comma-separated") from None
    if comm_hook not in ("allreduce", "fp16_compress"):
        raise autotuner.ScenarioError(f"--comm-hook {comm_hook!r}: allreduce or fp16_compress (bf16 is not measured "
                                      "here, PowerSGD is lossy)")
    cfg = autotuner.DdpConfig(bucket_cap_mb, caps, gradient_as_bucket_view, comm_hook)  # a bad value: KnobError
    r = autotuner.ddp_simulate(model, env, cfg, compute_ms=compute_ms, runs_dir=runs_dir)
    d = r.to_dict()
    if as_json:
        out.print_json(json.dumps(d))
        return
    out.print(r.fit, highlight=False, soft_wrap=True)
    out.print(f"{r.model}, {r.compute_ms:g} ms compute, {cfg.label()}: step {d['step_time_ms']:.1f} ms "
              f"(first iteration {d['first_step_ms']:.1f} ms)", highlight=False, soft_wrap=True)
    t = Table(title="buckets in launch order (ms from the step's start)")
    for col in ("#", "tensors", "MiB", "ready", "allreduce start", "end"):
        t.add_column(col, justify="right")
    for i, b in enumerate(d["buckets"]):
        t.add_row(str(i), str(b["tensors"]), f"{b['bytes'] / MIB:.2f}", f"{b['ready_ms']:.1f}", f"{b['start_ms']:.1f}",
                  f"{b['end_ms']:.1f}")
    render_table(out, t)
    out.print(cfg.code(), highlight=False, markup=False, soft_wrap=True)
    out.print(f"trust: {r.trust}", highlight=False, soft_wrap=True)


@ddp_app.command("envs", short_help="the DDP environments: shape, link, fitted line, how far checked")
def ddp_envs_cmd(runs_dir: Optional[Path] = _runs_dir_opt(),
                 as_json: bool = typer.Option(False, "--json", help="print the list as JSON")) -> None:
    """Every DDP environment the ddp commands can use (a runs folder with ddp-sweep.jsonl): its shape and link, the
    allreduce line fitted from its own sweep, what a queued bucket saves (the burst phase), how far it was checked.

    Example:

    \b
        autotuner ddp envs
    """
    rows = autotuner.ddp_envs(runs_dir)
    if as_json:
        print(json.dumps(rows, allow_nan=False))
        return
    t = Table(title="DDP environments (torch.distributed Gloo, fitted from each env's own sweep)")
    for col in ("env", "shape", "link Gbit/s", "alpha µs", "busbw Gbit/s", "queued µs", CHECKED_HEADER):
        t.add_column(col, justify="left" if col in ("env", "shape") else "right")
    problems = []
    for r in rows:
        if "problem" in r:
            t.add_row(r["env"], "", "", "", "", "", "see below")
            problems.append(f"{r['env']}: {r['problem']}")
            continue
        t.add_row(r["env"], f"{r['nodes']}x{r['ranks_per_node']}", f"{r['link_gbit']:g}" if r["link_gbit"] else "",
                  f"{r['alpha_us']:.0f}", f"{r['busbw_gbps']:.2f}" if r["busbw_gbps"] else "",
                  "-" if r["queued_saving_us"] is None else f"{r['queued_saving_us']:.0f}", checked_cell(r["checked"]))
    render_table(out, t)
    for line in problems:
        err.print(f"warning: {line}", highlight=False, markup=False, soft_wrap=True)
    if rows:
        out.print(textwrap.fill("checked: each env's predictions against its real DDP runs, mean and worst error and "
                                "the trials (autotuner ddp envs --json gives each trust line whole); never: not "
                                "checked against a real DDP run", width=max(out.width, 40), break_long_words=False,
                                break_on_hyphens=False), highlight=False, soft_wrap=True)
    else:
        out.print("no DDP environment yet: autotuner ddp measure --env NAME --np 2", highlight=False)


@ddp_app.command("explore", short_help="the predicted step over bucket_cap_mb, measured replays beside it (a plot)")
def ddp_explore_cmd(model: str = typer.Option(..., "--model", help=MODEL_HELP),
                    env: str = typer.Option(..., "--env", help="DDP environment (a runs folder with ddp-sweep.jsonl)",
                                            callback=opt.checked(opt.PlainName, "--env")),
                    compute_ms: Optional[float] = typer.Option(None, "--compute-ms", help="forward + backward per "
                                                               "step, ms (default: the compute the env's replays of "
                                                               "this layout ran, else the layout's, else 300)"),
                    out_dir: Path = typer.Option(Path("explore"), "--out", help="folder for the PNG and SVG plot"),
                    runs_dir: Optional[Path] = _runs_dir_opt(),
                    as_json: bool = typer.Option(False, "--json")) -> None:
    """Predict the step for every bucket_cap_mb from 0.25 to 256 MiB, with and without the gradient view and the
    fp16 hook; plot the curves with the env's measured replays of the layout beside their predictions.

    Example:

    \b
        autotuner ddp explore --env ddp-2x1-3gbit --model resnet101
    """
    if compute_ms is not None and not compute_ms > 0:
        raise autotuner.ScenarioError(f"--compute-ms must be > 0 ms, got {compute_ms:g}")
    r = autotuner.ddp_explore(model, env, compute_ms=compute_ms, out_dir=out_dir, runs_dir=runs_dir)
    if as_json:
        out.print_json(json.dumps(r.to_dict()))
        return
    ex = r.exploration
    out.print(r.fit, highlight=False, soft_wrap=True)
    t = Table(title=f"{r.model}, {r.compute_ms:g} ms compute: predicted step (ms) per bucket_cap_mb")
    t.add_column("cap MiB", justify="right")
    for name in ex.curves:
        t.add_column(name, justify="right")
    for i, c in enumerate(ex.caps_mib):
        if i % 4 == 0 or i == len(ex.caps_mib) - 1:  # one row per octave: the plot has every cap
            t.add_row(f"{c:g}", *(f"{ys[i]:.1f}" for ys in ex.curves.values()))
    t.add_row("DDP's default", *(f"{ex.default[n]:.1f}" for n in ex.curves))
    render_table(out, t)
    if ex.measured:
        m = Table(title=f"measured on {r.env} (replays, {r.compute_ms:g} ms compute)")
        for col in ("setting", "measured ms (range)", "predicted", "error"):
            m.add_column(col, justify="left" if col == "setting" else "right")
        for lab, meas, lo, hi, pred, _ in ex.measured:
            m.add_row(lab, f"{meas:.1f} ({lo:.1f}-{hi:.1f})", f"{pred:.1f}", f"{(pred - meas) / meas * 100:+.1f} %")
        render_table(out, m)
    else:
        out.print(f"no replay of {r.model} at {r.compute_ms:g} ms compute on {r.env}: predictions only",
                  highlight=False, soft_wrap=True)
    out.print(f"trust: {r.trust}", highlight=False, soft_wrap=True)
    out.print("plot: " + ", ".join(r.files), highlight=False, soft_wrap=True)


@ddp_app.command("scale", short_help="DDP's defaults and the best setting per node count and link rate (a plot)")
def ddp_scale_cmd(model: str = typer.Option(..., "--model", help=MODEL_HELP),
                  env: str = typer.Option(..., "--env", help="DDP environment (a runs folder with ddp-sweep.jsonl)",
                                          callback=opt.checked(opt.PlainName, "--env")),
                  nodes: Optional[str] = typer.Option(None, "--nodes", help="comma-separated node counts (default "
                                                      "1,2,4,...,64), each with the env's ranks per node"),
                  link_gbit: Optional[str] = typer.Option(None, "--link-gbit", help="comma-separated link rates "
                                                          "between nodes, Gbit/s (default: the env's)"),
                  batch_size: Optional[int] = typer.Option(None, "--batch-size", help="samples per rank per step, "
                                                           "for samples/s (default: the layout's profiled batch)",
                                                           callback=opt.checked(opt.Count, "--batch-size")),
                  compute_ms: Optional[float] = _compute_opt(),
                  out_dir: Path = typer.Option(Path("scale"), "--out", help="folder for the PNG and SVG plot"),
                  runs_dir: Optional[Path] = _runs_dir_opt(),
                  as_json: bool = typer.Option(False, "--json")) -> None:
    """What-if at scale for DDP (weak scaling): per node count and link rate, DDP's defaults and the setting
    recommended there (suggest's rules and band), step time, throughput and scaling efficiency.

    Example:

    \b
        autotuner ddp scale --env ddp-2x1-3gbit --model resnet101 --link-gbit 3,10
    """
    r = autotuner.ddp_scale(model, env, nodes=None if nodes is None else opt.int_list(nodes, "--nodes"),
                            links_gbit=None if link_gbit is None else opt.float_list(link_gbit, "--link-gbit"),
                            batch_size=batch_size, compute_ms=compute_ms, out_dir=out_dir, runs_dir=runs_dir)
    if as_json:
        out.print_json(json.dumps(r.to_dict()))
        return
    sc = r.scaling
    out.print(r.fit, highlight=False, soft_wrap=True)
    t = Table(title=f"{r.model}, {sc.compute_ms:g} ms compute per rank and step")
    cols = ["Gbit/s", "nodes", "ranks", "defaults ms", "eff.", "recommended", "ms", "eff."]
    if sc.batch_per_rank:
        cols.append("samples/s")
    for col in cols:
        t.add_column(col, justify="left" if col == "recommended" else "right")
    for row in sc.rows:
        cells = [f"{row.link_gbps:g}", str(row.nodes), str(row.ranks), f"{row.default.step_time_ms:.1f}",
                 f"{row.default_efficiency * 100:.0f} %",
                 "(defaults)" if row.best.config == row.default.config else row.best.config.label(),
                 f"{row.best.step_time_ms:.1f}", f"{row.best_efficiency * 100:.0f} %"]
        if sc.batch_per_rank:
            cells.append(f"{row.best_samples_per_s:.0f}")
        t.add_row(*cells)
    render_table(out, t)
    out.print(f"recommended: faster than DDP's defaults by more than the band ({sc.band * 100:.1f} %, "
              f"{sc.band_source}), else the defaults; eff.: throughput at N nodes / (N / {sc.rows[0].nodes} x the "
              f"throughput at {sc.rows[0].nodes} node(s)), same link", highlight=False, soft_wrap=True)
    for n in sc.notes:
        out.print(f"note: {n}", highlight=False, soft_wrap=True)
    out.print(f"trust: {r.trust} (on its own shape; other shapes are what-ifs)", highlight=False, soft_wrap=True)
    out.print("plot: " + ", ".join(r.files), highlight=False, soft_wrap=True)


@ddp_app.command("tune", short_help="Bayesian optimisation of DDP's buckets on real runs, the simulator as prior")
def ddp_tune_cmd(env: str = typer.Option(..., "--env", help="DDP environment (measured with ddp measure)",
                                         callback=opt.checked(opt.PlainName, "--env")),
                 model: str = typer.Option(..., "--model", help=MODEL_HELP),
                 name: Optional[str] = typer.Option(None, "--name", help="record file name (default: the model)",
                                                    callback=opt.checked(opt.PlainName, "--name")),
                 compute_ms: float = typer.Option(100.0, "--compute-ms", help="replay: forward+backward per step, ms",
                                                  callback=opt.checked(opt.Millis, "--compute-ms")),
                 steps: int = typer.Option(5, "--steps", help="measured steps per trial",
                                           callback=opt.checked(opt.Count, "--steps")),
                 warmup: int = typer.Option(3, "--warmup", help="warm-up steps per trial",
                                            callback=opt.checked(opt.Count, "--warmup")),
                 budget_steps: int = typer.Option(160, "--budget-steps", help="steps (warm-up included) the tune may "
                                                  "spend", callback=opt.checked(opt.Count, "--budget-steps")),
                 np_: int = _np_opt(),
                 bandwidth_gbit: Optional[float] = _testbed_bw_opt(),
                 testbed_hosts: Optional[int] = _testbed_opts()[0],
                 ranks_per_host: Optional[int] = _testbed_opts()[1],
                 link_gbit: Optional[float] = _testbed_opts()[2],
                 runs_dir: Optional[Path] = _runs_dir_opt(),
                 as_json: bool = typer.Option(False, "--json")) -> None:
    """Real DDP replays chosen one at a time: the simulator's best first, then DDP's defaults, a repeat for the
    noise, then expected improvement on a Gaussian process of where real runs disagree with the simulator; stops
    when no candidate's improvement beats one trial's noise, or at the budget (docs/ddp.md). Records appended to
    <runs>/<env>/ddp-tune/<name>.jsonl (a killed tune resumes).

    Example:

    \b
        autotuner ddp tune --env myddp --model resnet50 --compute-ms 100 --bandwidth-gbit 2
    """
    r = autotuner.ddp_tune(env, model, name=name, compute_ms=compute_ms, steps=steps, warmup=warmup,
                           budget_steps=budget_steps, np=np_, bandwidth_gbit=bandwidth_gbit,
                           testbed_hosts=testbed_hosts or 0, ranks_per_host=ranks_per_host or 1, link_gbit=link_gbit,
                           runs_dir=runs_dir, say=lambda m: err.print(m, highlight=False, soft_wrap=True))
    if as_json:
        out.print_json(json.dumps(r.to_dict()))
        return
    out.print(f"stopped: {r.stop}; {len(r.trials)} trials, {r.steps} steps", highlight=False, soft_wrap=True)
    if r.final is not None:
        rng = f"{min(r.final_ms):.1f}-{max(r.final_ms):.1f}" if r.final_ms else "n/a"
        dflt = f"{min(r.default_ms):.1f}-{max(r.default_ms):.1f} ms" if r.default_ms else "not measured"
        out.print(f"final: {r.final.label()}: measured {rng} ms over {len(r.final_ms)} trial(s); DDP's defaults "
                  f"{dflt}", highlight=False, soft_wrap=True)
        out.print(r.final.code(), highlight=False, markup=False, soft_wrap=True)
    out.print(f"records: {r.path}", highlight=False, soft_wrap=True)


@ddp_app.command("suggest", short_help="the best DDP bucket setting, predicted, with the code to paste")
def ddp_suggest_cmd(model: str = typer.Option(..., "--model", help=MODEL_HELP),
                    env: str = typer.Option(..., "--env", help="DDP environment (a runs folder with ddp-sweep.jsonl)",
                                            callback=opt.checked(opt.PlainName, "--env")),
                    compute_ms: Optional[float] = _compute_opt(),
                    runs_dir: Optional[Path] = _runs_dir_opt(),
                    as_json: bool = typer.Option(False, "--json")) -> None:
    """Search DDP's bucket_cap_mb (DDP's default and 0.25-256 MiB), gradient_as_bucket_view, the fp16 hook and
    per-bucket caps (bucket_cap_mb_list) on the Reducer simulator; print DDP's defaults, the knob-only answer, fp16,
    the best per-bucket list, and the code to paste.

    Example:

    \b
        autotuner ddp suggest --env ddp-2gbit --model resnet50 --compute-ms 100
    """
    r = autotuner.ddp_suggest(model, env, compute_ms=compute_ms, runs_dir=runs_dir)
    if as_json:
        out.print_json(json.dumps(r.to_dict()))
        return
    s = r.suggestion
    out.print(r.fit, highlight=False, soft_wrap=True)
    t = Table(title=f"{r.model}, {r.compute_ms:g} ms compute per step")
    for col in ("setting", "buckets", "step ms", "first step ms", "speed-up"):
        t.add_column(col, justify="left" if col == "setting" else "right")
    rows = [("DDP's defaults", s.default), ("knob-only answer", s.knob_only)]
    if s.fp16 is not None:
        rows.append(("with the fp16 hook", s.fp16))
    rows.append(("best per-bucket list", s.per_bucket))
    for name, p in rows:
        t.add_row(f"{name}: {p.config.label()}", str(p.buckets), f"{p.step_time_ms:.1f}", f"{p.first_step_ms:.1f}",
                  f"{p.speedup_vs_default:.3f}x")
    render_table(out, t)
    if s.keep_defaults:
        out.print(f"keep DDP's defaults: nothing is predicted faster by more than the band ({s.band * 100:.1f} %, "
                  f"{s.band_source})", highlight=False, soft_wrap=True)
    else:
        out.print(f"recommended: {s.recommended.config.label()}, {s.recommended.step_time_ms:.1f} ms "
                  f"({s.recommended.speedup_vs_default:.3f}x; band {s.band * 100:.1f} %, {s.band_source}):",
                  highlight=False, soft_wrap=True)
        out.print(s.recommended.code, highlight=False, markup=False, soft_wrap=True)
    ko = s.knob_only
    if ko.step_time_ms >= s.default.step_time_ms * (1 - s.band):
        out.print(f"knob-only answer: keep DDP's defaults (the best setting without a hook, {ko.config.label()}, "
                  f"{ko.speedup_vs_default:.3f}x, is inside the {s.band * 100:.1f} % band)", highlight=False,
                  soft_wrap=True)
    else:
        out.print(f"knob-only answer: {ko.config.label()}, {ko.step_time_ms:.1f} ms ({ko.speedup_vs_default:.3f}x):",
                  highlight=False, soft_wrap=True)
        out.print(ko.code, highlight=False, markup=False, soft_wrap=True)
    if not s.per_bucket_proposed:
        out.print(f"per-bucket caps not proposed: the best list ({s.per_bucket.config.label()}) is not faster than "
                  f"the best single cap by more than the band", highlight=False, soft_wrap=True)
    out.print(f"trust: {r.trust}", highlight=False, soft_wrap=True)
    for n in s.notes:
        out.print(f"note: {n}", highlight=False, soft_wrap=True)


@app.command("envs", short_help="every environment: hardware, source, trust")
def envs_cmd(model_dir: Optional[Path] = _model_dir_opt(),
             as_json: bool = typer.Option(False, "--json", help="print the list as JSON")) -> None:
    """Every environment the commands can use: hardware, where its numbers come from, how far it was checked.

    Example:

    \b
        autotuner envs
    """
    rows = autotuner.envs(model_dir)
    if as_json:
        print(json.dumps(rows, allow_nan=False))
        return
    t = Table(title="environments")
    for col in ("env", "shape", "backend", "link Gbit/s", "source", "calibrated models", CHECKED_HEADER):
        t.add_column(col, justify="right" if col in ("link Gbit/s", CHECKED_HEADER) else "left")
    problems = []
    for r in rows:
        if "problem" in r:
            t.add_row(r["env"], "", "", "", "unreadable", "", "see below")
            problems.append(f"{r['env']}: {r['problem']}")
            continue
        gpu = str(r["gpu"] or "")
        t.add_row(r["env"] + (" (default)" if r["default"] else ""),
                  f"{r['nodes']}x{r['gpus_per_node']}" + (" CPU" if gpu.startswith("none") else f" {gpu}" if gpu else ""),
                  str(r["backend"] or "?"), f"{r['link_gbps']:g}" if r["link_gbps"] else "", r["source"],
                  ", ".join(r["models"]) or "-", checked_cell(r["checked"]))
    render_table(out, t)
    for line in problems:
        err.print(f"warning: {line}", highlight=False, markup=False, soft_wrap=True)
    out.print(textwrap.fill("checked: each env's predictions against its real trials, mean and worst error and the "
                            "trials (the trust line every prediction carries; autotuner envs --json gives it whole, "
                            "with the jobs left out); never: not checked against a real run; CPU: ranks without a "
                            "GPU. PyTorch DDP environments: autotuner ddp envs",
                            width=max(out.width, 40), break_long_words=False, break_on_hyphens=False),
              highlight=False, soft_wrap=True)


@app.command("profile", short_help="time your model's gradients: a layout JSON")
def profile_cmd(model: str = typer.Option(..., "--model", help="pkg.mod:factory, a function returning your torch.nn.Module (importable: on PYTHONPATH)"),
                input_shape: str = typer.Option(..., "--input-shape", help="one sample's input shape, e.g. 3,224,224 "
                                                "(the batch dimension comes from --batch-size)"),
                batch_size: int = typer.Option(32, "--batch-size", help="samples per step (per GPU / rank)",
                                               callback=opt.checked(opt.Count, "--batch-size")),
                device: ProfileDevice = typer.Option(ProfileDevice.cpu, "--device", help="where the model runs"),
                amp: bool = typer.Option(False, "--amp", help="autocast forward + loss: bfloat16 on CPU; on CUDA "
                                         "bfloat16 where the GPU supports it, else float16"),
                steps: int = typer.Option(10, "--steps", help="measured steps (medians are reported)",
                                          callback=opt.checked(opt.Count, "--steps")),
                warmup: int = typer.Option(3, "--warmup", help="warm-up steps, not measured",
                                           callback=opt.checked(opt.Index, "--warmup")),
                threads: Optional[int] = typer.Option(None, "--threads", help="CPU: torch threads per rank, as your "
                                                      "script sets them (default: torch's)",
                                                      callback=opt.checked(opt.Count, "--threads")),
                concurrent: int = typer.Option(1, "--concurrent", help="CPU: copies computing at once, as the ranks "
                                               "on one host do (e.g. 2 for horovodrun -np 2 on one host)",
                                               callback=opt.checked(opt.Count, "--concurrent")),
                out_file: Path = typer.Option(..., "--out", help="layout JSON to write (for --model FILE.json)"),
                as_json: bool = typer.Option(False, "--json", help="print a JSON summary")) -> None:
    """Measure your model's gradient readiness, forward and backward times; write a layout JSON that
    simulate, suggest, explore and validate take as --model FILE.json (no --compute-ms needed).

    Example:

    \b
        autotuner profile --model mypkg.models:build --input-shape 3,224,224 --batch-size 32 --out my_layout.json
    """
    d = autotuner.profile_model(model, out_file, input_shape=input_shape, batch_size=batch_size, device=device,
                      amp=amp, steps=steps, warmup=warmup, threads=threads, concurrent=concurrent)
    for w in d["warnings"]:
        err.print(f"warning: {w}", highlight=False, markup=False, soft_wrap=True)
    if as_json:
        print(json.dumps(d, allow_nan=False))
        return
    out.print(f"[bold]{model}[/] on {d['device']} ({d['device_name']}), {'autocast ' if d['amp'] else ''}{d['dtype']}, "
              f"batch {d['batch_size']} x {d['input_shape']}: forward {d['forward_ms']:.2f} ms, backward "
              f"{d['backward_ms']:.2f} ms (medians of {d['steps']} steps after {d['warmup']} warm-up"
              + (f"; {d['threads']} thread(s), {d['concurrent']} cop{'y' if d['concurrent'] == 1 else 'ies'} at once"
                 if d.get("threads") else "") + ")", highlight=False)
    out.print(f"{d['tensors']} gradients, {d['bytes'] / MIB:.2f} MiB; first ready {d['first_ready_ms']:.2f} ms, "
              f"last {d['last_ready_ms']:.2f} ms after the end of forward", highlight=False)
    out.print(f"wrote {d['out']}; use it as: autotuner simulate --model {d['out']}", highlight=False, soft_wrap=True)


@app.command("measure", short_help="measure this cluster with Horovod's allreduce")
def measure_cmd(env: str = typer.Option(..., "--env", help="environment name: the sweep goes to <runs-dir>/<env>/",
                                        callback=opt.checked(opt.PlainName, "--env")),
                np_: int = _np_opt(),
                hosts: str = _hosts_opt("; several hosts: the intra-node and inter-node tiers are measured apart"),
                bandwidth_gbit: Optional[float] = _testbed_bw_opt(),
                testbed_hosts: Optional[int] = _testbed_opts()[0],
                ranks_per_host: Optional[int] = _testbed_opts()[1],
                link_gbit: Optional[float] = _testbed_opts()[2],
                wait: str = typer.Option("spin", "--wait", help="spin (Horovod's own synchronize) or sleep (poll "
                                         "every 0.2 ms: emulated hosts sharing few cores, docs/validation.md)",
                                         callback=opt.checked(opt.ReplayWait, "--wait")),
                sizes: Optional[str] = typer.Option(None, "--sizes", help="message sizes: LO:HI doubling, or a comma "
                                                    "list; bytes or K/M/G (binary) [default: 1K:512M]"),
                repeats: int = typer.Option(5, "--repeats", help="timed samples per size",
                                            callback=opt.checked(opt.Count, "--repeats")),
                warmup: int = typer.Option(1, "--warmup", help="untimed samples per size first",
                                           callback=opt.checked(opt.Index, "--warmup")),
                timeout_s: float = typer.Option(900.0, "--timeout", help="seconds per horovodrun job before it is killed",
                                                callback=opt.checked(opt.Seconds, "--timeout")),
                cpu_repeats: int = typer.Option(5, "--cpu-repeats", help="rounds of the cpu phase (compute beside "
                                                "Horovod's cycles, collectives beside compute; 0 skips it)",
                                                callback=opt.checked(opt.Index, "--cpu-repeats")),
                trickle_repeats: int = typer.Option(2, "--trickle-repeats", help="rounds of the trickle phase "
                                                    "(tensors one per cycle, at 1 and 5 ms; 0 skips it)",
                                                    callback=opt.checked(opt.Index, "--trickle-repeats")),
                idle_repeats: int = typer.Option(3, "--idle-repeats", help="jobs of the idle phase (small responses "
                                                 "while the ranks sleep; 0 skips it)",
                                                 callback=opt.checked(opt.Index, "--idle-repeats")),
                burst_repeats: int = typer.Option(3, "--burst-repeats", help="jobs of the burst phase (small responses "
                                                  "1 and 32 at once, timed without the timeline; 0 skips it)",
                                                  callback=opt.checked(opt.Index, "--burst-repeats")),
                mid_repeats: int = typer.Option(3, "--mid-repeats", help="jobs of the mid-size burst phase "
                                                "(responses of 256 KiB-4 MiB, 1 and 8 at once, timed without the "
                                                "timeline; 0 skips it)",
                                                callback=opt.checked(opt.Index, "--mid-repeats")),
                step_repeats: int = typer.Option(5, "--step-repeats", help="rounds of the step phase (a replay of many "
                                                 "small gradients: defaults, fusion off, cache off at 100 ms of "
                                                 "compute, defaults and fusion off at 300 ms; no timeline; 0 skips "
                                                 "it)", callback=opt.checked(opt.Index, "--step-repeats")),
                fused_repeats: int = typer.Option(3, "--fused-repeats", help="jobs of the fused phase (fused responses "
                                                  "of 4-32 MiB against lone ones, timed without the timeline; 0 "
                                                  "skips it)", callback=opt.checked(opt.Index, "--fused-repeats")),
                fp16_repeats: int = typer.Option(3, "--fp16-repeats", help="jobs of the fp16 phase (float16 against "
                                                 "float32 allreduces, the casts; 0 skips it)",
                                                 callback=opt.checked(opt.Index, "--fp16-repeats")),
                as_json: bool = typer.Option(False, "--json", help="print the summary as JSON"),
                runs_dir: Optional[Path] = _runs_dir_opt("where the sweep goes (default: $AUTOTUNER_RUNS_DIR, else "
                                                         "./runs when it holds environments, else the user's runs folder)")
                ) -> None:
    """Measure this cluster with Horovod's own allreduce (size sweep, fusion copies, negotiation); resumable.

    Writes the records to <runs-dir>/<env>/ and fits nothing: its last line is the command to run next,
    autotuner fit <runs-dir> (docs/measure.md). Example:

    \b
        autotuner measure --env mycluster --hosts node1:4,node2:4
        autotuner fit runs/
    """

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, disable=as_json or not err.is_terminal) as bar:
        task = bar.add_task(f"measure {env}", total=None)
        summary = autotuner.measure(env=env, runs_dir=runs_dir, np=np_, hosts=hosts, bandwidth_gbit=bandwidth_gbit, sizes=sizes,
                          repeats=repeats, warmup=warmup, timeout_s=timeout_s, testbed_hosts=testbed_hosts,
                          ranks_per_host=ranks_per_host, link_gbit=link_gbit, wait=wait, cpu_repeats=cpu_repeats,
                          trickle_repeats=trickle_repeats, idle_repeats=idle_repeats, fp16_repeats=fp16_repeats,
                          burst_repeats=burst_repeats, step_repeats=step_repeats, mid_repeats=mid_repeats,
                          fused_repeats=fused_repeats,
                          on_total=lambda done, total: bar.update(task, completed=done, total=total),
                          on_item=lambda r: bar.update(task, advance=1,
                                                       description=f"{r['phase']} {r['bytes']} B: {r['median_ms']:.2f} ms"),
                          on_event=None if as_json else (lambda line: err.print(line, highlight=False, markup=False)))
    if as_json:
        out.print_json(json.dumps(summary))
        return
    big = summary["largest_allreduce"]
    out.print(f"{summary['items_new']} item(s) measured, {summary['items_recorded']} of {summary['items_total']} recorded "
              f"in {summary['records']} ({summary['wall_s']} s)", highlight=False)
    if big:
        out.print(f"largest allreduce: {big['mib']:g} MiB in {big['median_ms']:.1f} ms (algbw {big['algbw_gbit_s']:.3f} Gbit/s)",
                  highlight=False)
    for name in ("cpu", "trickle", "idle", "burst", "mid", "step", "fused", "fp16"):
        ph = summary.get(name)
        if ph:
            out.print(f"{'mid-size burst' if name == 'mid' else name} phase: {ph['jobs_new']} job(s) run, {ph['jobs_recorded']} recorded in {ph['records']}",
                      highlight=False)
    out.print(f"network: {summary['network']}", highlight=False)
    out.print(f"next: autotuner fit {summary['runs_dir']}", highlight=False)


def _one_line(msg: str) -> str:
    return " ".join(str(msg).split())


class _Discard:
    """A text stream that keeps nothing: ``sys.stderr`` once the user has pressed Ctrl-C (:func:`main`)."""

    def write(self, s: str) -> int:
        return len(s)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _say_interrupted() -> None:
    """The one line a Ctrl-C ends with, written to file descriptor 2 itself: ``sys.stderr`` is silenced from the
    signal on (:func:`main`)."""
    sys.stdout.flush()
    os.write(2, (INTERRUPTED + "\n").encode())


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status: 0, 2 for any user error (one line on stderr),
    130 after Ctrl-C (one line on stderr; typer turns KeyboardInterrupt into exit code 130)."""
    # Python drops an exception raised where it cannot propagate (a weakref or __del__ callback run
    # by the garbage collector) and prints it as "Exception ignored in ...". A Ctrl-C landing there
    # would be lost and leave a traceback on stderr: note every SIGINT, keep such a lost one off
    # stderr, and still end with the one line and 130 (the command ran on to its end).
    # From the Ctrl-C on, nothing but that line reaches stderr: a library's warning or a warning line of the command
    # printed while it winds down (3 lines at one of 10 moments of a fit on the CI machine kind, 2026-12-02) is not
    # news to a user who stopped it. ``sys.stderr`` is swapped for a sink (restored on return) and the line is
    # written to descriptor 2 directly.
    interrupted, done = [], []
    unraisable = sys.unraisablehook
    real_stderr = sys.stderr

    def on_sigint(signum, frame):
        interrupted.append(signum)
        if not done:  # once the command has ended, a late Ctrl-C changes nothing: its status stands
            sys.stderr = _Discard()
            raise KeyboardInterrupt

    def on_unraisable(u):
        if not (interrupted and isinstance(u.exc_value, KeyboardInterrupt)):
            unraisable(u)

    old = None
    if signal.getsignal(signal.SIGINT) in (signal.default_int_handler, _interrupted_while_loading):
        old = signal.signal(signal.SIGINT, on_sigint)
    sys.unraisablehook = on_unraisable
    try:
        try:
            rc = _run(argv, interrupted)
        except KeyboardInterrupt:  # landed after _run's own handlers, before it returned
            _say_interrupted()
            rc = 130
        done.append(True)
    finally:
        sys.unraisablehook = unraisable
        sys.stderr = real_stderr
        if old is not None:
            # as the program, a Ctrl-C from here to the process's end would kill it by the signal
            # (status -2, no line) while Python shuts down: the command has ended, so it is ignored
            signal.signal(signal.SIGINT, signal.SIG_IGN if old is _interrupted_while_loading
                          else signal.default_int_handler)
    if rc == 130 and interrupted and old is not None:
        # CPython ends the process by the signal (exit status -2) once a KeyboardInterrupt has crossed a
        # nested PyRun_* call, even one caught here: a Ctrl-C inside a lazily imported C extension
        # (scipy, matplotlib) does. The command owns the process's Ctrl-C: flush and end it with 130.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    return rc


def _run(argv: list[str] | None, interrupted: list) -> int:
    from typer._click.exceptions import (  # typer vendors click (typer 0.29)
        ClickException,
        NoArgsIsHelpError,
    )

    try:
        rv = app(args=argv, standalone_mode=False, prog_name="autotuner")
    except AutotunerError as e:
        err.print(f"error: {_one_line(e)}", highlight=False, markup=False, soft_wrap=True)
        return 2
    except NoArgsIsHelpError as e:
        e.show()
        return 0
    except ClickException as e:  # usage errors: unknown option, missing value, not a number
        cmd = e.ctx.command_path + ": " if getattr(e, "ctx", None) is not None else ""
        err.print(f"error: {cmd}{_one_line(e.format_message())}", highlight=False, markup=False, soft_wrap=True)
        return 2
    except (typer.Abort, KeyboardInterrupt):
        _say_interrupted()
        return 130
    except SystemExit as e:
        if interrupted:  # a Ctrl-C that something turned into an exit: still the one line and 130
            _say_interrupted()
            return 130
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    except BaseException:
        # Python wraps a KeyboardInterrupt raised where it cannot propagate as itself: inside a class
        # body's __set_name__ (3.11: "RuntimeError: Error calling __set_name__", seen in matplotlib's
        # import, issue 29), a codec, an import hook. After a Ctrl-C any such exception is the Ctrl-C.
        if interrupted:
            _say_interrupted()
            return 130
        raise
    if rv == 130 or interrupted:
        _say_interrupted()
        return 130
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":
    sys.exit(main())
