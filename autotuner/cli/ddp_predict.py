"""PyTorch DDP's predictions: ``ddp simulate``, ``ddp suggest``, ``ddp explore``, ``ddp scale``, ``ddp envs``
(the Reducer simulator on each env's fitted sweep, nothing run)."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

import autotuner  # the public API: everything the commands do

from .. import options as opt
from ..render import CHECKED_HEADER, MIB, checked_cell, render_table
from .common import (MODEL_HELP, compute_opt, ddp_app, err, json_opt, link_opt, model_dir_opt, out, progress,
                     runs_dir_opt)


#: what ``--env`` names for the predicting commands (autotuner.frameworks.ddp.api.ddp_env_source)
DDP_ENV_HELP = ("DDP environment: a runs folder with ddp-sweep.jsonl (it wins), else a model file from specs or "
            "nccl-tests (autotuner env new, autotuner fit)")


@ddp_app.command("simulate", short_help="one DDP setting's step, bucket by bucket")
def ddp_simulate_cmd(model: str = typer.Option(..., "--model", help=MODEL_HELP),
                     env: str = typer.Option(..., "--env", help=DDP_ENV_HELP,
                                             callback=opt.checked(opt.PlainName, "--env")),
                     bucket_cap_mb: Optional[float] = typer.Option(None, "--bucket-cap-mb", help="DDP's bucket_cap_mb, "
                                                                   "MiB (default: DDP's 25 with a 1 MiB first bucket)"),
                     bucket_cap_mb_list: Optional[str] = typer.Option(None, "--bucket-cap-mb-list",
                                                                      help="per-bucket caps, MiB, comma-separated"),
                     gradient_as_bucket_view: bool = typer.Option(False, "--gradient-as-bucket-view"),
                     comm_hook: str = typer.Option("allreduce", "--comm-hook", help="allreduce or fp16_compress"),
                     compute_ms: Optional[float] = compute_opt(),
                     runs_dir: Optional[Path] = runs_dir_opt(),
                     model_dir: Optional[Path] = model_dir_opt(),
                     as_json: bool = json_opt()) -> None:
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
    r = autotuner.ddp_simulate(model, env, cfg, compute_ms=compute_ms, runs_dir=runs_dir, model_dir=model_dir)
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
    for n in r.notes:
        out.print(f"note: {n}", highlight=False, soft_wrap=True)


@ddp_app.command("envs", short_help="the DDP environments: shape, link, fitted line, how far checked")
def ddp_envs_cmd(runs_dir: Optional[Path] = runs_dir_opt(),
                 model_dir: Optional[Path] = model_dir_opt(),
                 as_json: bool = json_opt("the list")) -> None:
    """Every DDP environment the ddp commands can use (a runs folder with ddp-sweep.jsonl, or a model file from
    specs or nccl-tests): its shape and link, the allreduce line (fitted from its own sweep, or the model file's),
    what a queued bucket saves (the burst phase), how far it was checked.

    Example:

    \b
        autotuner ddp envs
    """
    with progress("ddp envs", quiet=as_json) as act:
        rows = autotuner.ddp_envs(runs_dir, on_event=act.event, model_dir=model_dir)
    if as_json:
        print(json.dumps(rows, allow_nan=False))
        return
    t = Table(title="DDP environments (a DDP sweep, or a model file from specs or nccl-tests)")
    for col in ("env", "shape", "link Gbit/s", "alpha µs", "busbw Gbit/s", "queued µs", CHECKED_HEADER):
        t.add_column(col, justify="left" if col in ("env", "shape") else "right")
    problems = []
    for r in rows:
        if "problem" in r:
            t.add_row(r["env"], "", "", "", "", "", "see below")
            problems.append(f"{r['env']}: {r['problem']}")
            continue
        measured = r.get("source", "measured") == "measured"
        t.add_row(r["env"], f"{r['nodes']}x{r['ranks_per_node']}",
                  f"{r['link_gbit']:g}" if r["link_gbit"] else "", f"{r['alpha_us']:.1f}" if r["alpha_us"] < 10
                  else f"{r['alpha_us']:.0f}", (f"{r['busbw_gbps']:.2f}" if r["busbw_gbps"] < 100 else f"{r['busbw_gbps']:.0f}") if r["busbw_gbps"] else "",
                  "-" if r["queued_saving_us"] is None else f"{r['queued_saving_us']:.0f}",
                  checked_cell(r["checked"]) if measured else f"never ({r['source']})")
    render_table(out, t)
    for line in problems:
        err.print(f"warning: {line}", highlight=False, markup=False, soft_wrap=True)
    if rows:
        out.print(textwrap.fill("checked: each env's predictions against its real DDP runs, mean and worst error and "
                                "the trials (autotuner ddp envs --json gives each trust line and fit line whole); "
                                "untrusted: its replays missed on more than half of its checked settings; never: not "
                                "checked against a real DDP run. Each env's line is fitted from its own DDP sweep "
                                "(torch.distributed Gloo), except never (specs): a model file from specs, never "
                                "measured, and never (nccl-tests): NCCL's allreduce fitted from all_reduce_perf", width=max(out.width, 40), break_long_words=False,
                                break_on_hyphens=False), highlight=False, soft_wrap=True)
    else:
        out.print("no DDP environment yet: autotuner ddp measure --env NAME --np 2", highlight=False)


@ddp_app.command("explore", short_help="the predicted step over bucket_cap_mb, measured replays beside it (a plot)")
def ddp_explore_cmd(model: str = typer.Option(..., "--model", help=MODEL_HELP),
                    env: str = typer.Option(..., "--env", help=DDP_ENV_HELP,
                                            callback=opt.checked(opt.PlainName, "--env")),
                    compute_ms: Optional[float] = compute_opt(),
                    out_dir: Path = typer.Option(Path("explore"), "--out", help="folder for the PNG and SVG plot"),
                    runs_dir: Optional[Path] = runs_dir_opt(),
                    model_dir: Optional[Path] = model_dir_opt(),
                    as_json: bool = json_opt()) -> None:
    """Predict the step for every bucket_cap_mb from 0.25 to 256 MiB, with and without the gradient view and the
    fp16 hook; plot the curves with the env's measured replays of the layout beside their predictions.

    Example:

    \b
        autotuner ddp explore --env ddp-2x1-3gbit --model resnet101
    """
    with progress("ddp explore", quiet=as_json) as act:
        r = autotuner.ddp_explore(model, env, compute_ms=compute_ms, out_dir=out_dir, runs_dir=runs_dir,
                                  on_event=act.event, model_dir=model_dir)
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
                  env: str = typer.Option(..., "--env", help=DDP_ENV_HELP,
                                          callback=opt.checked(opt.PlainName, "--env")),
                  nodes: Optional[str] = typer.Option(None, "--nodes", help="comma-separated node counts (default "
                                                      "1,2,4,...,64), each with the env's ranks per node"),
                  link_gbit: Optional[str] = link_opt("what-ifs (default: the env's)", list_form=True),
                  batch_size: Optional[int] = typer.Option(None, "--batch-size", help="samples per rank per step, "
                                                           "for samples/s (default: the layout's profiled batch)",
                                                           callback=opt.checked(opt.Count, "--batch-size")),
                  compute_ms: Optional[float] = compute_opt(),
                  out_dir: Path = typer.Option(Path("scale"), "--out", help="folder for the PNG and SVG plot"),
                  runs_dir: Optional[Path] = runs_dir_opt(),
                  model_dir: Optional[Path] = model_dir_opt(),
                  as_json: bool = json_opt()) -> None:
    """What-if at scale for DDP (weak scaling): per node count and link rate, DDP's defaults and the setting
    recommended there (suggest's rules and band), step time, throughput and scaling efficiency.

    Example:

    \b
        autotuner ddp scale --env ddp-2x1-3gbit --model resnet101 --link-gbit 3,10
    """
    node_counts = None if nodes is None else opt.int_list(nodes, "--nodes")
    links = None if link_gbit is None else opt.float_list(link_gbit, "--link-gbit")
    with progress("ddp scale", quiet=as_json) as act:
        r = autotuner.ddp_scale(model, env, nodes=node_counts, links_gbit=links, batch_size=batch_size,
                                compute_ms=compute_ms, out_dir=out_dir, runs_dir=runs_dir, on_event=act.event,
                                model_dir=model_dir)
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



@ddp_app.command("suggest", short_help="the best DDP bucket setting, predicted, with the code to paste")
def ddp_suggest_cmd(model: str = typer.Option(..., "--model", help=MODEL_HELP),
                    env: str = typer.Option(..., "--env", help=DDP_ENV_HELP,
                                            callback=opt.checked(opt.PlainName, "--env")),
                    compute_ms: Optional[float] = compute_opt(),
                    runs_dir: Optional[Path] = runs_dir_opt(),
                    model_dir: Optional[Path] = model_dir_opt(),
                    as_json: bool = json_opt()) -> None:
    """Search DDP's bucket_cap_mb (DDP's default and 0.25-256 MiB), gradient_as_bucket_view, the fp16 hook and
    per-bucket caps (bucket_cap_mb_list) on the Reducer simulator; print DDP's defaults, the knob-only answer, fp16,
    the best per-bucket list, and the code to paste.

    Example:

    \b
        autotuner ddp suggest --env ddp-2gbit --model resnet50 --compute-ms 100
    """
    r = autotuner.ddp_suggest(model, env, compute_ms=compute_ms, runs_dir=runs_dir, model_dir=model_dir)
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

