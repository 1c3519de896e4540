"""Horovod's predictions: ``simulate``, ``suggest``, ``explore``, ``scale`` (what the fitted cost model and the
simulator of Horovod's background loop say, nothing run)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

import autotuner  # the public API: everything the commands do
from autotuner import AutotunerError, Backend, Compression, SearchStrategy

from .. import options as opt
from ..render import MIB, render_table
from .common import (ENV_HELP, MODEL_HELP, app, backend_opt, compression_opt, compute_opt, err, gpus_opt, json_opt,
                     knob_options, link_opt, model_dir_opt, nodes_opt, old_names, out, progress, proposals_opt,
                     runs_dir_opt, what_if_link_opt)


@app.command(short_help="predict one configuration's step time")
@knob_options("the configuration to simulate")
@old_names(link_gbit="--bandwidth-gbps", timeline_filename="--timeline")
def simulate(model: str = typer.Option(..., "--model", help=MODEL_HELP),
             env: Optional[str] = typer.Option(None, "--env", help=ENV_HELP),
             nodes: Optional[int] = nodes_opt(),
             gpus_per_node: Optional[int] = gpus_opt(),
             link_gbit: Optional[float] = what_if_link_opt(),
             compression: Compression = compression_opt(),
             compute_ms: Optional[float] = compute_opt(),
             backend: Optional[Backend] = backend_opt(),
             model_dir: Optional[Path] = model_dir_opt(),
             timeline_filename: Optional[Path] = typer.Option(None, "--timeline-filename",
                                                     help="also write the simulated steps as a Horovod timeline "
                                                          "(Chrome trace JSON; .gz = gzipped)"),
             timeline_steps: int = typer.Option(2, "--timeline-steps", help="steady-state steps in the timeline",
                                                callback=opt.checked(opt.Count, "--timeline-steps")),
             as_json: bool = json_opt(),
             reference_version: Optional[str] = typer.Option(
                 None, "--reference-version", show_default=False,
                 help="the Horovod release whose defaults the unset knobs take (default: the env's own, from its "
                      "env.toml; 0.20.x: 64 MiB / 5 ms, 0.21 on: 128 MiB / 1 ms)",
                 callback=opt.horovod_release("--reference-version")),
             knobs: dict = None) -> None:
    """Simulate one configuration (unset knobs take the defaults of the env's own Horovod release).

    Example:

    \b
        autotuner simulate --model resnet50 --env local-gloo-1gbit --timeline-filename sim.json
    """
    import autotuner

    r = autotuner.simulate(model, env, config=knobs, compression=str(compression), nodes=nodes,
                           gpus_per_node=gpus_per_node, link_gbit=link_gbit, compute_ms=compute_ms,
                           backend=None if backend is None else str(backend), model_dir=model_dir,
                           timeline_filename=timeline_filename, timeline_steps=timeline_steps, reference_version=reference_version)
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
@old_names(link_gbit="--bandwidth-gbps")
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
            nodes: Optional[int] = nodes_opt(),
            gpus_per_node: Optional[int] = gpus_opt(),
            link_gbit: Optional[float] = what_if_link_opt(),
            compression: Optional[Compression] = typer.Option(
                None, "--compression", show_default=False,
                help="pin the gradient compression (default: search none and fp16, Horovod 0.28.1's; "
                     "int8 is lossy and never proposed)"),
            compute_ms: Optional[float] = compute_opt(),
            backend: Optional[Backend] = backend_opt(),
            reference_version: Optional[str] = typer.Option(
                None, "--reference-version", show_default=False,
                help="compare with this Horovod release's defaults, e.g. 0.28.1 (128 MiB, 1 ms) or 0.20.3 "
                     "(64 MiB, 5 ms) (default: the env's own Horovod version)",
                callback=opt.horovod_release("--reference-version")),
            model_dir: Optional[Path] = model_dir_opt(),
            as_json: bool = json_opt(),
            knobs: dict = None) -> None:
    """Search the knobs (and the gradient compression, none or fp16); print the best settings and their flags.

    The exact grid on the fast simulator (~10^5-10^6 configurations, under a second);
    --strategy bayes pools a Bayesian search's trials with it. Example:

    \b
        autotuner suggest --model resnet50 --env local-gloo-1gbit --compute-ms 300
    """
    import autotuner

    search = autotuner.BayesStrategy(n_calls=n_calls, seed=seed) if strategy == SearchStrategy.bayes else None
    with progress("searching", quiet=as_json, total=1 if compression else 2) as act:
        r = autotuner.suggest(model, env, fixed=knobs, compression=None if compression is None else str(compression),
                              strategy=search, top=top, nodes=nodes, gpus_per_node=gpus_per_node,
                              link_gbit=link_gbit, compute_ms=compute_ms,
                              backend=None if backend is None else str(backend), model_dir=model_dir,
                              progress=act.update,
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



@app.command("explore", short_help="step time over threshold x cycle time; plots")
@knob_options("a configuration to mark, instead of suggest's pick")
@old_names(link_gbit="--bandwidth-gbps", proposals="--pick")
def explore_cmd(model: str = typer.Option(..., "--model", help=MODEL_HELP),
                env: Optional[str] = typer.Option(None, "--env", help=ENV_HELP),
                compute_ms: Optional[float] = compute_opt(),
                out_dir: Path = typer.Option(Path("explore"), "--out", help="folder for the PNG and SVG plots"),
                resolution: int = typer.Option(64, "--resolution", help="points per axis (threshold and cycle time)",
                                               callback=opt.checked(opt.Resolution, "--resolution")),
                suggest_pick: bool = typer.Option(True, "--suggest/--no-suggest", help="run suggest and mark its pick"),
                proposals: Optional[Path] = proposals_opt("mark its first instead of running suggest"),
                nodes: Optional[int] = nodes_opt(),
                gpus_per_node: Optional[int] = gpus_opt(),
                link_gbit: Optional[float] = what_if_link_opt(),
                compression: Compression = compression_opt(),
                backend: Optional[Backend] = backend_opt(),
                runs_dir: Optional[Path] = runs_dir_opt("measured validations <runs>/<env>/validation, searched "
                                                         "first (then $AUTOTUNER_RUNS_DIR, ./runs, the user's and "
                                                         "the shipped runs)"),
                model_dir: Optional[Path] = model_dir_opt(),
                as_json: bool = json_opt("the grid, marks and measured points"),
                knobs: dict = None) -> None:
    """Predicted step time over fusion threshold x cycle time per on/off combination; heatmaps + sensitivity.

    Example:

    \b
        autotuner explore --model resnet50 --env local-gloo-1gbit --out explore/
    """
    wide = out
    with progress("explore", quiet=as_json) as act:
        r = autotuner.explore(model, env, config=knobs or None, proposals=proposals, suggest_pick=suggest_pick,
                              resolution=resolution, nodes=nodes, gpus_per_node=gpus_per_node, link_gbit=link_gbit,
                              compression=str(compression), compute_ms=compute_ms,
                              backend=None if backend is None else str(backend), out_dir=out_dir, runs_dir=runs_dir,
                              model_dir=model_dir, on_event=act.event)
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
@old_names(link_gbit="--bandwidth-gbps")
def scale_cmd(model: str = typer.Option(..., "--model", help=MODEL_HELP),
              nodes: Optional[str] = typer.Option(None, "--nodes", show_default=False,
                                                  help="comma-separated node counts (default "
                                                       f"{','.join(map(str, autotuner.SCALE_NODES))})"),
              ranks: Optional[str] = typer.Option(None, "--ranks", show_default=False,
                                                  help="comma-separated rank counts on one node (single-server "
                                                       "scaling), instead of --nodes and --gpus-per-node"),
              gpus_per_node: Optional[int] = gpus_opt("GPUs (ranks) per node (default: the env's)"),
              env: Optional[str] = typer.Option(None, "--env", help=ENV_HELP),
              link_gbit: Optional[str] = link_opt("what-ifs (default: the env's)", list_form=True),
              batch_size: Optional[int] = typer.Option(None, "--batch-size", help="samples per GPU per step (default: runs/<env>/env.toml batch_size)",
                                                       callback=opt.checked(opt.Count, "--batch-size")),
              compute_ms: Optional[float] = compute_opt(),
              compression: Compression = compression_opt(),
              backend: Optional[Backend] = backend_opt(),
              out_dir: Path = typer.Option(Path("scale"), "--out", help="folder for the PNG and SVG plot"),
              runs_dir: Optional[Path] = runs_dir_opt("<runs>/<env>/env.toml for the batch size, searched first "
                                                       "(then $AUTOTUNER_RUNS_DIR, ./runs, the user's and the "
                                                       "shipped runs)"),
              model_dir: Optional[Path] = model_dir_opt(),
              reference_version: Optional[str] = typer.Option(
                  None, "--reference-version", show_default=False,
                  help="the defaults compared: this Horovod release's, e.g. 0.28.1 (128 MiB, 1 ms) or 0.20.3 "
                       "(64 MiB, 5 ms) (default: the env's own Horovod version)",
                  callback=opt.horovod_release("--reference-version")),
              as_json: bool = json_opt("the table")) -> None:
    """What-if at scale: step time, throughput, scaling efficiency per node count, or per rank count on one
    node (--ranks); best config and defaults; the whole run's wall time (s) where the env has its run shape.

    Example:

    \b
        autotuner scale --model resnet50 --env local-gloo-1gbit --nodes 1,2,4,8
    """
    wide = out
    if ranks is not None and nodes is not None:  # before parsing either list: the conflict is the news
        raise AutotunerError("--ranks and --nodes: give one (--ranks: ranks on one node; --nodes: node counts)")
    node_counts = None if nodes is None else opt.int_list(nodes, "--nodes")
    rank_counts = None if ranks is None else opt.int_list(ranks, "--ranks")
    links = None if link_gbit is None else opt.float_list(link_gbit, "--link-gbit")
    with progress("scale", quiet=as_json) as act:
        result = autotuner.scale(model, env, nodes=node_counts, ranks=rank_counts, gpus_per_node=gpus_per_node,
                                 links_gbit=links, batch_size=batch_size, compute_ms=compute_ms,
                                 compression=str(compression), backend=None if backend is None else str(backend),
                                 out_dir=out_dir, runs_dir=runs_dir, model_dir=model_dir,
                                 reference_version=reference_version, on_event=act.event)
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

