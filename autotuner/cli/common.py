"""What the commands share: the ``autotuner`` app and its ``env`` and ``ddp`` groups, the two consoles (stdout,
stderr), the option factories with their help texts, and the knob options generated from
:data:`autotuner.frameworks.horovod.knobs.KNOBS`.

The commands themselves live by framework and by job (:mod:`.horovod_predict`, :mod:`.horovod_envs`,
:mod:`.horovod_realrun`, :mod:`.ddp_predict`, :mod:`.ddp_realrun`); :mod:`autotuner.cli` registers them in the
order ``autotuner --help`` lists them.
"""
from __future__ import annotations

import functools
import inspect as _inspect
import typing
from typing import Optional

import typer
from rich.console import Console

from autotuner import KNOBS, Compression

from .. import options as opt  # the command line's own option checks

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


env_app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                      help="Environments without a sweep: from published link figures.")
app.add_typer(env_app, name="env")

ddp_app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                      help="PyTorch DistributedDataParallel: bucket caps, the gradient view, comm hooks (docs/ddp.md).")
app.add_typer(ddp_app, name="ddp", short_help="PyTorch DDP: buckets, view, hooks")


#: no --model-dir / --runs-dir given: the search of :mod:`autotuner.paths` (--model-dir X searches X first)
DEFAULT_MODEL_DIR = None
MODEL_DIR_HELP = ("fitted models searched first (then $AUTOTUNER_MODEL_DIR, the user's folder, the shipped "
                  "models; the first holding <env>.json wins)")
RUNS_DIR_HELP = ("runs searched first (then $AUTOTUNER_RUNS_DIR, ./runs, the user's folder, the shipped runs)")


def model_dir_opt(help: str = MODEL_DIR_HELP):
    return typer.Option(DEFAULT_MODEL_DIR, "--model-dir", help=help, show_default=False)


def runs_dir_opt(help: str = RUNS_DIR_HELP):
    return typer.Option(None, "--runs-dir", help=help, show_default=False)


def np_opt():
    return typer.Option(2, "--np", help="ranks", callback=opt.checked(opt.Count, "--np"))


def trained_model_opt():
    return typer.Option(..., "--model", help="layout the replay workload (or your command) trains")


def command_arg():
    return typer.Argument(None, help="after --: your own training command (prints 'AUTOTUNER_STEP_TIME_MS <ms>' "
                                     "per step)")


def hosts_opt(more: str = ""):
    return typer.Option("", "--hosts", help="horovodrun -H (default localhost:<np>)" + more)


def testbed_bw_opt():
    return typer.Option(None, "--bandwidth-gbit", help="emulated link, Gbit/s (root only; else plain loopback)",
                        callback=opt.checked(opt.LinkGbit, "--bandwidth-gbit"))


def testbed_opts():
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


def nodes_opt():
    return typer.Option(None, "--nodes", help="what-if node count", callback=opt.checked(opt.Count, "--nodes"))


def gpus_opt(help: str = "what-if GPUs (ranks) per node"):
    return typer.Option(None, "--gpus-per-node", help=help, callback=opt.checked(opt.GpusPerNode, "--gpus-per-node"))


def bw_opt():
    return typer.Option(None, "--bandwidth-gbps", help="what-if link rate, Gbit/s",
                        callback=opt.checked(opt.LinkGbit, "--bandwidth-gbps"))


def compression_opt():
    return typer.Option(Compression.none, "--compression", help="gradient compression")


def compute_opt():
    return typer.Option(None, "--compute-ms", help=COMPUTE_HELP, callback=opt.checked(opt.Millis, "--compute-ms"))


def backend_opt():
    return typer.Option(None, "--backend", show_default=False,
                        help="what-if collective backend: its fitted intra-node tier (default: the env's own)")

