"""``autotuner envs``: every environment, with the frameworks that answer for it (both frameworks' commands read
the same list, :func:`autotuner.envs`)."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

import autotuner  # the public API: everything the commands do

from ..render import CHECKED_HEADER, checked_cell, render_table
from .common import app, err, json_opt, model_dir_opt, out, progress, runs_dir_opt

FRAMEWORK_CHOICES = ("horovod", "ddp")


def _row(r: dict) -> tuple[str, ...] | None:
    """One table row of an :func:`autotuner.envs` entry: its Horovod row where it has one (its model file tells the
    GPU and backend), else its DDP row; None where neither could be read."""
    hv, dd = r["horovod"], r["ddp"]
    if hv is not None and "problem" not in hv:
        gpu = str(hv["gpu"] or "")
        short = gpu.replace("-", " ").split()[0] if gpu.strip() else ""  # "A100-SXM4-40GB": A100 (JSON: whole)
        shape = f"{hv['nodes']}x{hv['gpus_per_node']}" + (" CPU" if gpu.startswith("none") else f" {short}" if short else "")
        return (hv["env"] + (" (default)" if hv["default"] else ""), " ".join(r["frameworks"]), shape,
                str(hv["backend"] or "?"), f"{hv['link_gbps']:g}" if hv["link_gbps"] else "", hv["source"],
                checked_cell(hv["checked"]))
    if dd is not None and "problem" not in dd:
        return (dd["env"], " ".join(r["frameworks"]), f"{dd['nodes']}x{dd['ranks_per_node']} CPU", "gloo",
                f"{dd['link_gbit']:g}" if dd["link_gbit"] else "", "measured", checked_cell(dd["checked"]))
    return None


@app.command("envs", short_help="every environment: frameworks, hardware, source, trust")
def envs_cmd(framework: Optional[str] = typer.Option(None, "--framework", help="only the environments this framework "
                                                     "answers for: horovod or ddp (default: every one)",
                                                     show_default=False),
             model_dir: Optional[Path] = model_dir_opt(),
             runs_dir: Optional[Path] = runs_dir_opt(),
             as_json: bool = json_opt("the list: per env its frameworks, shape, link, trust per framework, and each "
                                      "framework's own row")) -> None:
    """Every environment the commands can use, with the frameworks that answer for it (horovod: a fitted model file;
    ddp: a DDP sweep, or a model file from specs or nccl-tests): hardware, where its numbers come from, how far it
    was checked.

    Example:

    \b
        autotuner envs
        autotuner envs --framework ddp
    """
    if framework is not None and framework not in FRAMEWORK_CHOICES:
        raise autotuner.ScenarioError(f"--framework {framework!r}: use one of {', '.join(FRAMEWORK_CHOICES)}")
    with progress("envs", quiet=as_json) as act:
        rows = autotuner.envs(model_dir, runs_dir, on_event=act.event)
    if framework is not None:
        rows = [r for r in rows if framework in r["frameworks"]]
    if as_json:
        print(json.dumps(rows, allow_nan=False))
        return
    t = Table(title="environments")
    for col in ("env", "answers", "shape", "backend", "link Gbit/s", "source", CHECKED_HEADER):
        t.add_column(col, justify="right" if col in ("link Gbit/s", CHECKED_HEADER) else "left")
    problems, calibrated = [], []
    for r in rows:
        cells = _row(r)
        if cells is None:
            t.add_row(r["env"], " ".join(r["frameworks"]), "", "", "", "unreadable", "see below")
        else:
            t.add_row(*cells)
        problems += [f"{r['env']} ({f}): {r[f]['problem']}" for f in r["frameworks"] if "problem" in r[f]]
        if r["horovod"] and r["horovod"].get("models"):
            calibrated.append(f"{r['env']}: {', '.join(r['horovod']['models'])}")
    render_table(out, t)
    for line in problems:
        err.print(f"warning: {line}", highlight=False, markup=False, soft_wrap=True)
    if calibrated:
        out.print(textwrap.fill("models calibrated on real training runs (their compute comes with them): "
                                + "; ".join(calibrated), width=max(out.width, 40), break_long_words=False,
                                break_on_hyphens=False, subsequent_indent="    "), highlight=False, soft_wrap=True)
    out.print(textwrap.fill("answers: the frameworks whose commands answer for the env (horovod: its fitted model; "
                            "ddp: its DDP sweep, or its model file from specs or nccl-tests, with autotuner ddp ...). checked: each env's predictions against its "
                            "real runs, mean and worst error and the trials (the trust line every prediction carries; "
                            "autotuner envs --json gives it whole); untrusted: its real runs missed on more than half of "
                            "its checked settings; never: not checked against a real run; CPU: ranks "
                            "without a GPU. A DDP env's fitted line and queued-bucket saving: autotuner ddp envs",
                            width=max(out.width, 40), break_long_words=False, break_on_hyphens=False),
              highlight=False, soft_wrap=True)
