"""Horovod's environments and what they were measured against: ``fit``, ``envs``, ``env new``, ``accuracy``,
``inspect`` (an autotune log), ``compare`` (a real timeline against a simulated one)."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

import autotuner  # the public API: everything the commands do
from autotuner import Backend

from .. import options as opt
from ..render import CHECKED_HEADER, MIB, RANGE_SHOWN, checked_cell, fit_regime_lines, fmt_num, render_table
from .common import app, env_app, err, json_opt, link_opt, model_dir_opt, old_names, out, progress, runs_dir_opt


@app.command(short_help="fit a cost model per environment under RUNS_DIR")
def fit(runs_dir: Path = typer.Argument(..., help="folder of environments (each with env.toml), or one environment's "
                                         "folder"),
        model_dir: Optional[Path] = typer.Option(None, "--out", show_default=False,
                                                 help="where <env>.json goes (default: $AUTOTUNER_MODEL_DIR, else "
                                                      "the user's model folder)"),
        as_json: bool = json_opt("per env its model file, plot, form and fitted figures; the input problems")
        ) -> None:
    """Fit a cost model per environment under RUNS_DIR; write <env>.json and a plot (they win over shipped models).

    Example:

    \b
        autotuner fit runs/
    """
    with progress("fit", quiet=as_json) as act:
        res = autotuner.fit_environments(runs_dir, model_dir, on_event=act.event)
    fitted, problems = res.fitted, res.problems
    for p in problems:
        err.print(f"warning: {p}", highlight=False, markup=False, soft_wrap=True)
    if as_json:
        print(json.dumps({"fitted": [_fitted_row(d, path, png) for d, path, png in fitted], "problems": list(problems),
                          "model_dir": str(res.model_dir)}, allow_nan=False))
        return
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


def _fitted_row(d: dict, path, png) -> dict:
    """``fit --json``: one fitted env as the table shows it (the model file holds the rest)."""
    f, inter = d["fit"], d["cost_model"]["inter"]
    return {"env": d["env"], "model_file": str(path), "plot": None if png is None else str(png), "form": f["form"],
            "alpha_us": inter["alpha_us"], "busbw_gbps": inter.get("large_bandwidth_gbps", inter["bandwidth_gbps"]),
            "r2": f.get("r2_with_comm_scale", f.get("r2")),
            "mape_percent": f.get("mape_percent_with_comm_scale", f.get("mape_percent")),
            "models": {m: {"compute_ms": w["forward_ms"] + w["backward_ms"], "comm_scale": w.get("comm_scale", 1.0)}
                       for m, w in d["workloads"].items()}}


def short_form(form: str) -> str:
    """A fit's ``form`` (the model file's ``fit.form``, one sentence) cut to a table cell: an alpha-beta form fitted
    on an allreduce sweep is ``sweep``, on step times ``steps``, otherwise ``alpha-beta``; the others keep their
    first words (``wall time``, ``global work``). The fit's own words are printed once under the table."""
    if form.startswith("alpha-beta"):
        return "sweep" if "sweep" in form else "steps" if "step times" in form else "alpha-beta"
    return "wall time" if form.startswith("wall =") else "global work" if form.startswith("global work") else form



@env_app.command("new", short_help="an environment from published link figures")
@old_names(link_gbit="--inter-gbit")
def env_new_cmd(name: str = typer.Argument(..., help="environment name (a plain name)",
                                           callback=opt.checked(opt.PlainName, "NAME")),
                nodes: int = typer.Option(..., "--nodes", help="nodes", callback=opt.checked(opt.Count, "--nodes")),
                gpus_per_node: int = typer.Option(..., "--gpus-per-node", help="GPUs (ranks) per node",
                                                  callback=opt.checked(opt.GpusPerNode, "--gpus-per-node")),
                intra: Optional[str] = typer.Option(None, "--intra", help="intra-node link: nvlink2, nvlink3, "
                                                    "nvlink4, pcie3, pcie4, pcie5"),
                link_gbit: Optional[float] = link_opt("the node link (e.g. 100 for EDR InfiniBand, 200 for HDR, "
                                                      "25 for 25GbE)"),
                backend: Backend = typer.Option(Backend.nccl, "--backend", help="the collective backend"),
                gpu: Optional[str] = typer.Option(None, "--gpu", help="GPU model: V100, T4, A100-40GB, A100-80GB, "
                                                  "H100-SXM, H100-PCIe, H200 (its datasheet memory bandwidth prices fp16's "
                                                  "casts and float16 sum; without it fp16 is not proposed)"),
                out_dir: Optional[Path] = typer.Option(None, "--out", show_default=False,
                                                       help="where <NAME>.json goes (default: the user's model "
                                                            "folder, as fit)"),
                model_dir: Optional[Path] = model_dir_opt(),
                as_json: bool = json_opt("the file written and the figures it was built from")) -> None:
    """Build an environment from published link figures: marked "from specs, never measured" everywhere.

    Example:

    \b
        autotuner env new dgx8 --nodes 8 --gpus-per-node 8 --intra nvlink3 --link-gbit 100 --gpu A100
    """
    path = autotuner.env_new(name, nodes=nodes, gpus_per_node=gpus_per_node, intra=intra, link_gbit=link_gbit,
                             backend=str(backend), gpu=gpu, out=out_dir, model_dir=model_dir)
    if as_json:
        print(json.dumps({"env": name, "path": str(path), "nodes": nodes, "gpus_per_node": gpus_per_node,
                          "intra": intra, "link_gbit": link_gbit, "backend": str(backend), "gpu": gpu,
                          "source": "specs"}))
        return
    out.print(f"wrote {path}: {name}, {nodes}x{gpus_per_node}" + (f" {gpu}" if gpu else "")
              + (f", {intra} inside" if intra else "") + (f", {link_gbit:g} Gbit/s between nodes" if link_gbit else "")
              + f", {backend!s}; from specs, never measured (a measured sweep of the same name replaces it: autotuner "
              f"measure --env {name} + fit, or autotuner ddp measure --env {name})",
              highlight=False, soft_wrap=True)
    md = f" --model-dir {out_dir}" if out_dir is not None else ""  # a folder the search does not read by itself
    out.print(f"use it: autotuner suggest --model resnet50 --compute-ms 300 --env {name}{md}", highlight=False,
              soft_wrap=True)
    out.print(f"  DDP:  autotuner ddp suggest --model resnet50 --compute-ms 300 --env {name}{md}", highlight=False,
              soft_wrap=True)



#: ``accuracy``'s mark on a row whose measured number the fit read (its error shows the fit, not a prediction)
USED_BY_FIT = "(used by the fit)"


@app.command("accuracy", short_help="every measured number beside its prediction")
def accuracy_cmd(env: Optional[str] = typer.Option(None, "--env", help="one environment (default: every one)"),
                 runs_dir: Optional[Path] = runs_dir_opt(),
                 model_dir: Optional[Path] = model_dir_opt(),
                 cost_model: Optional[str] = typer.Option(None, "--cost-model", help="predict the real trials with "
                                                          "this fitted env's cost model instead (e.g. a measure sweep)",
                                                          callback=opt.checked(opt.PlainName, "--cost-model")),
                 as_json: bool = json_opt()) -> None:
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
                   "by more than 2 %; research/notes/accuracy.md, \"The small-response price the phases leave open\")",
                   highlight=False, soft_wrap=True)



@app.command(short_help="explain a Horovod autotune log")
def inspect(path: Path = typer.Argument(..., help="a Horovod autotune log CSV (--autotune-log-file)"),
            model: Optional[str] = typer.Option(None, "--model", help="layout, to turn the score into a time per step"),
            as_json: bool = json_opt("the log and its explanation, one line each")) -> None:
    """Explain a Horovod autotune log: trials, best row, whether tuning finished, the score.

    Example:

    \b
        autotuner inspect autotune_log.csv
    """
    lines = autotuner.inspect_log(path, model)
    if as_json:
        print(json.dumps({"log": str(path), "model": model, "lines": list(lines)}))
        return
    for line in lines:
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
            as_json: bool = json_opt()) -> None:
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

