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
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from autotuner import KNOBS, AutotunerError, Compression

from .. import options as opt  # the command line's own option checks

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Predict and tune Horovod's knobs (and PyTorch DDP's: autotuner ddp) from measured "
                       "bandwidth data.\n\n"
                       "First hour (docs/getting-started/horovod.md): autotuner measure --env NAME; "
                       "autotuner fit runs/; "
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
    (docs/getting-started/horovod.md).
    """


env_app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                      help="Environments without a sweep: from published link figures.")
app.add_typer(env_app, name="env")

ddp_app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                      help="PyTorch DistributedDataParallel: bucket caps, the gradient view, comm hooks "
                           "(docs/getting-started/ddp.md).")
app.add_typer(ddp_app, name="ddp", short_help="PyTorch DDP: buckets, view, hooks")


class Activity:
    """What a command running under :func:`progress` reports: ``event(line)`` (the API's ``on_event``) and
    ``update(done, total)`` (its counts)."""

    def __init__(self, prog: Progress, task, title: str, echo: bool):
        self._prog, self._task, self._title, self._echo = prog, task, title, echo

    def event(self, line: str) -> None:
        """One line from the API: the display's description; with ``echo`` also a line of its own on stderr."""
        if self._echo:
            err.print(line, highlight=False, markup=False, soft_wrap=True)
        width = max(20, err.width - 60)  # the bar, the counts and the time keep their room
        text = " ".join(str(line).split())
        self._prog.update(self._task, description=f"{self._title}: "
                          + (text if len(text) <= width else text[:width - 1] + "…"))

    def update(self, done: float, total: float | None = None, description: str | None = None) -> None:
        """``done`` of ``total`` (None: unchanged); ``description`` replaces the title's words."""
        self._prog.update(self._task, completed=done, **({} if total is None else {"total": total}),
                          **({} if description is None else {"description": description}))

    def advance(self, description: str | None = None) -> None:
        self._prog.update(self._task, advance=1, **({} if description is None else {"description": description}))


@contextmanager
def progress(title: str, *, quiet: bool, total: float | None = None, counts: bool = False, echo: bool = False):
    """What a command shows on stderr while it runs for seconds: a spinner, ``title`` and the API's last event, a
    bar and ``done/total`` where it counts (``counts``, ``total``), the time so far; gone when the command ends.
    Nothing is drawn with ``quiet`` (``--json``) or when stdout or stderr is not a terminal (a pipe, a file, CI):
    there the output is the command's alone. ``echo``: the API's events are also lines of their own on stderr
    (the real runs' log of their jobs and trials), unless ``quiet``. Yields an :class:`Activity`."""
    live = not quiet and out.is_terminal and err.is_terminal
    columns = [SpinnerColumn(), TextColumn("{task.description}")]
    if counts or total is not None:
        columns += [BarColumn(), MofNCompleteColumn()]
    with Progress(*columns, TimeElapsedColumn(), console=err, transient=True, disable=not live) as prog:
        yield Activity(prog, prog.add_task(title, total=total), title, echo and not quiet)


#: required: an option the command cannot run without (typer's ``...``)
REQUIRED = ...


@dataclass(frozen=True)
class Concept:
    """One concept of the command line and its one visible option name, across every command of both frameworks
    (``tests/test_option_names.py`` walks every command against :data:`CONCEPTS`).

    ``old``: spellings the option had before (hidden options that still work and print one deprecation line,
    :func:`old_names`); ``help``: what every command's help for it begins with (None: each command says its own,
    the concept being a command's own count, file or folder); ``default``: the default every command gives it, but
    ``defaults`` (command path -> default) where the job sets it (each framework's steps, repeats, rounds);
    ``lists``: the commands that take a comma-separated list of it (``scale``'s node counts and link rates)."""

    option: str
    old: tuple[str, ...] = ()
    help: str | None = None
    default: Any = None
    defaults: Mapping[str, Any] = field(default_factory=dict)
    lists: tuple[str, ...] = ()

    def default_for(self, command: str) -> Any:
        """The default of this option in ``command`` (a path such as ``ddp measure``)."""
        return self.defaults.get(command, self.default)


MODEL_HELP = "vgg16, resnet50, ..., a layout .json, or pkg.mod:factory"
ENV_HELP = "fitted environment (default: the one marked default)"
#: one default everywhere: the model's measured compute, else 300 ms (the replay workloads' and DDP's simulator's)
COMPUTE_HELP = ("forward + backward compute per step, ms (default: the model's measured compute, from its calibration "
                "in the env or a profiled layout; else 300, but simulate, suggest, explore and scale ask for it)")
LINK_HELP = "link rate between nodes, Gbit/s"
LOOPBACK_HELP = "each emulated host's loopback, Gbit/s (with --testbed-hosts; root only)"
WAIT_HELP = ("how the ranks wait for their allreduces: spin (Horovod's own synchronize) or sleep (poll every 0.2 ms: "
             "emulated hosts sharing few cores, docs/how-to/validate.md)")
PROPOSALS_HELP = "suggest --json output (ddp suggest --json for DDP) or a JSON list of settings"
JSON_HELP = "print the result as JSON"
MODEL_DIR_HELP = ("fitted models searched first (then $AUTOTUNER_MODEL_DIR, the user's folder, the shipped "
                  "models; the first holding <env>.json wins)")
RUNS_DIR_HELP = ("runs searched first (then $AUTOTUNER_RUNS_DIR, ./runs, the user's folder, the shipped runs)")
#: real runs: where their records go
RUNS_OUT_HELP = ("where results go (default: $AUTOTUNER_RUNS_DIR, else ./runs when it holds environments, else the "
                 "user's runs folder)")
HOSTS_HELP = "horovodrun -H (default localhost:<np>)"
NP_HELP = "ranks"
TESTBED_HOSTS_HELP = ("emulate H hosts, one network namespace each, joined by a switch (root only; replaces "
                      "--np/--hosts)")
RANKS_PER_HOST_HELP = "ranks on each emulated host"
RSH_HELP = ("the remote shell that runs a command on a host of --hosts, given the host's name after it ({host} in "
            "it stands for the name): ssh, 'ssh -p 2222'")
PRINT_LAUNCH_HELP = ("print the launch and exit, running nothing: commands (each host's torchrun line, exactly what "
                     "would run) or sbatch (a SLURM batch script)")

_H, _D = "", "ddp "  # command paths: Horovod's at the top level, DDP's under ``autotuner ddp``
_PHASE = "rounds of the {} phase"

#: concept -> its one option; tests/test_option_names.py holds every command to it
CONCEPTS: dict[str, Concept] = {
    "link rate": Concept("--link-gbit", ("--bandwidth-gbps", "--bandwidth-gbit", "--inter-gbit"), LINK_HELP,
                         lists=("scale", "ddp scale")),
    "emulated loopback": Concept("--loopback-gbit", (), LOOPBACK_HELP),
    "wait": Concept("--wait", ("--replay-wait",), WAIT_HELP, "spin"),
    "compute": Concept("--compute-ms", (), COMPUTE_HELP),
    "saved proposals": Concept("--proposals", ("--pick",), PROPOSALS_HELP),
    "json": Concept("--json", (), JSON_HELP, False),
    "simulated timeline file": Concept("--timeline-filename", ("--timeline",)),
    "trial timelines": Concept("--timeline"),  # validate: record Horovod's timeline in the trials
    "model dir": Concept("--model-dir", (), MODEL_DIR_HELP),
    "runs dir": Concept("--runs-dir"),
    "hosts": Concept("--hosts", (), HOSTS_HELP, ""),
    "ranks": Concept("--np", (), NP_HELP, 2),
    "emulated hosts": Concept("--testbed-hosts", (), TESTBED_HOSTS_HELP),
    "ranks per emulated host": Concept("--ranks-per-host", (), RANKS_PER_HOST_HELP),
    "remote shell": Concept("--rsh", (), RSH_HELP, "ssh"),
    "print launch": Concept("--print-launch", (), PRINT_LAUNCH_HELP),
    "device": Concept("--device", (), None, "cpu"),  # profile: where the model runs; ddp: where the ranks run
    "env": Concept("--env", default=REQUIRED, defaults={c: None for c in ("simulate", "suggest", "explore", "scale",
                                                                          "accuracy")}),
    "model": Concept("--model", default=REQUIRED, defaults={"inspect": None}),
    "nodes": Concept("--nodes", lists=("scale", "ddp scale"), defaults={"env new": REQUIRED}),
    "gpus per node": Concept("--gpus-per-node", defaults={"env new": REQUIRED}),
    "backend": Concept("--backend", defaults={"env new": "nccl"}),
    "compression": Concept("--compression", default=Compression.none, defaults={"suggest": None, "tune": "none"},
                           lists=("tune",)),
    "reference version": Concept("--reference-version"),
    "record name": Concept("--name"),
    "output": Concept("--out", defaults={"explore": Path("explore"), "ddp explore": Path("explore"),
                                         "scale": Path("scale"), "ddp scale": Path("scale"), "profile": REQUIRED}),
    "batch size": Concept("--batch-size", defaults={"profile": 32}),
    "steps": Concept("--steps", defaults={"validate": 6, "tune": 6, "profile": 10, "ddp validate": 5,
                                          "ddp tune": 5}),
    "warm-up": Concept("--warmup", defaults={"validate": 2, "tune": 2, "profile": 3, "measure": 1,
                                             "ddp validate": 3, "ddp tune": 3}),
    "repeats": Concept("--repeats", defaults={"validate": 3, "tune": 3, "measure": 5, "ddp measure": 7,
                                              "ddp validate": 3}),
    "budget": Concept("--budget-steps", defaults={"tune": 240, "ddp tune": 160}),
    "timeout": Concept("--timeout", defaults={"validate": 600.0, "tune": 600.0, "measure": 900.0}),
    "top": Concept("--top", defaults={"suggest": 3, "validate": 1, "compare": 10}),
    "sweep rounds": Concept("--sweep-rounds", ("--jobs",), "rounds of the sweep", 3),
    "cpu rounds": Concept("--cpu-rounds", ("--cpu-repeats", "--cpu-jobs"), _PHASE.format("cpu"),
                          defaults={"measure": 5, "ddp measure": 1}),
    "burst rounds": Concept("--burst-rounds", ("--burst-repeats", "--burst-jobs"), _PHASE.format("burst"), 3),
    "first-touch rounds": Concept("--first-touch-rounds", ("--first-touch-jobs",), _PHASE.format("first-touch"), 1),
    "host rounds": Concept("--host-rounds", (), _PHASE.format("host"), 1),
    "trickle rounds": Concept("--trickle-rounds", ("--trickle-repeats",), _PHASE.format("trickle"), 2),
    "idle rounds": Concept("--idle-rounds", ("--idle-repeats",), _PHASE.format("idle"), 3),
    "mid rounds": Concept("--mid-rounds", ("--mid-repeats",), _PHASE.format("mid-size burst"), 3),
    "step rounds": Concept("--step-rounds", ("--step-repeats",), _PHASE.format("step"), 5),
    "fused rounds": Concept("--fused-rounds", ("--fused-repeats",), _PHASE.format("fused"), 3),
    "fp16 rounds": Concept("--fp16-rounds", ("--fp16-repeats",), _PHASE.format("fp16"), 3),
    **{f"knob {k.param}": Concept(k.flag, (), k.doc) for k in KNOBS},
}
#: option name -> its concept
BY_OPTION = {c.option: c for c in CONCEPTS.values()}


def deprecated(old: str, new: str) -> None:
    """The one line an old spelling prints on stderr (it still works)."""
    err.print(f"warning: {old} is deprecated; use {new}", highlight=False, markup=False, soft_wrap=True)


def _renamed_check(callback: Callable | None, new: str, old: str) -> Callable | None:
    """``callback`` (the new option's check) naming ``old`` in its one-line error."""
    if callback is None:
        return None

    def check(value):
        try:
            return callback(value)
        except AutotunerError as e:
            raise AutotunerError(str(e).replace(new, old, 1)) from None
    return check


def old_names(**params: str):
    """Decorator: for each ``param="--old-spelling"`` (several: a tuple), a hidden option of that spelling which
    sets ``param``, whose option (:data:`CONCEPTS`) is the new spelling, and prints ``warning: --old is deprecated;
    use --new`` on stderr. Giving both spellings is a one-line error."""
    def deco(fn):
        sig = _inspect.signature(fn)
        hints = typing.get_type_hints(fn)
        params_ = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in sig.parameters.values()]
        by_name = {p.name: p for p in params_}
        aliases = {}  # hidden parameter -> (parameter, old spelling, new spelling, the new one's default)
        for param, olds in params.items():
            info = by_name[param].default
            new = info.param_decls[0]
            for old in (olds,) if isinstance(olds, str) else olds:
                if old not in BY_OPTION[new].old:
                    raise ValueError(f"{old} is not an old name of {new} in CONCEPTS")
                hidden = f"{param}__{old[2:].replace('-', '_')}"
                o = typer.Option(None, old, hidden=True, show_default=False,
                                 callback=_renamed_check(info.callback, new, old))
                ann = by_name[param].annotation
                params_.append(_inspect.Parameter(hidden, _inspect.Parameter.KEYWORD_ONLY, default=o,
                                                  annotation=ann if str(ann).startswith("typing.Optional")
                                                  else Optional[ann]))
                aliases[hidden] = (param, old, new, None if info.default is ... else info.default)

        @functools.wraps(fn)
        def wrapper(**kw):
            for hidden, (param, old, new, default) in aliases.items():
                value = kw.pop(hidden)
                if value is None:
                    continue
                if kw[param] != default:
                    raise AutotunerError(f"{new} and {old} (its old name): give one")
                deprecated(old, new)
                kw[param] = value
            return fn(**kw)

        wrapper.__signature__ = sig.replace(parameters=params_)
        wrapper.__annotations__ = {p.name: p.annotation for p in params_} | {"return": None}
        del wrapper.__wrapped__  # typer must read the generated signature, not fn's
        return wrapper
    return deco


def model_dir_opt(help: str = MODEL_DIR_HELP):
    return typer.Option(None, "--model-dir", help=help, show_default=False)


def runs_dir_opt(help: str = RUNS_DIR_HELP):
    return typer.Option(None, "--runs-dir", help=help, show_default=False)


def device_opt(help: str):
    """``--device``: cpu or cuda (:class:`autotuner.ProfileDevice`, default cpu); ``help``: what runs there."""
    from autotuner import ProfileDevice

    return typer.Option(ProfileDevice.cpu, "--device", help=help)


def np_opt():
    return typer.Option(2, "--np", help=NP_HELP, callback=opt.checked(opt.Count, "--np"))


def trained_model_opt():
    return typer.Option(..., "--model", help="layout the replay workload (or your command) trains")


def command_arg():
    return typer.Argument(None, help="after --: your own training command (prints 'AUTOTUNER_STEP_TIME_MS <ms>' "
                                     "per step)")


def hosts_opt(more: str = ""):
    return typer.Option("", "--hosts", help=HOSTS_HELP + more)


def json_opt(what: str = ""):
    """``--json``; ``what``: the result's parts, said after the concept's help."""
    return typer.Option(False, "--json", help=JSON_HELP + (f": {what}" if what else "")
                        + " (nothing else on stdout; no progress)")


def link_opt(more: str, list_form: bool = False):
    """``--link-gbit``: the link rate between nodes, Gbit/s; ``list_form``: a comma-separated list (what-ifs at
    several rates). ``more``: what it means in this command."""
    if list_form:
        return typer.Option(None, "--link-gbit", help=f"{LINK_HELP}, comma-separated: {more}", show_default=False)
    return typer.Option(None, "--link-gbit", help=f"{LINK_HELP}: {more}", show_default=False,
                        callback=opt.checked(opt.LinkGbit, "--link-gbit"))


#: the real runs' network, in their help
EMULATED_LINK = ("emulated (root only): one shaped loopback, or with --testbed-hosts each emulated host's link, both "
                 "directions (HTB) (default: unshaped)")


def testbed_opts():
    """``--testbed-hosts H --ranks-per-host L --link-gbit G --loopback-gbit B`` and the hidden old
    ``--bandwidth-gbit``: the real runs' emulated network (root only), :func:`network`."""
    return (typer.Option(None, "--testbed-hosts", help=TESTBED_HOSTS_HELP,
                         callback=opt.checked(opt.Count, "--testbed-hosts")),
            typer.Option(None, "--ranks-per-host", help=RANKS_PER_HOST_HELP,
                         callback=opt.checked(opt.Count, "--ranks-per-host")),
            link_opt(EMULATED_LINK),
            typer.Option(None, "--loopback-gbit", help=LOOPBACK_HELP,
                         callback=opt.checked(opt.LinkGbit, "--loopback-gbit")),
            typer.Option(None, "--bandwidth-gbit", hidden=True, callback=opt.checked(opt.LinkGbit, "--bandwidth-gbit")))


def network(link_gbit: float | None, loopback_gbit: float | None, bandwidth_gbit: float | None,
            testbed_hosts: int | None) -> tuple[float | None, float | None]:
    """``(link_gbit, loopback_gbit)`` for the API: the old ``--bandwidth-gbit`` shaped the loopback, which on one
    host is the link (``--link-gbit``) and on an emulated cluster each host's loopback (``--loopback-gbit``)."""
    if bandwidth_gbit is None:
        return link_gbit, loopback_gbit
    new = "--loopback-gbit" if testbed_hosts else "--link-gbit"
    if (loopback_gbit if testbed_hosts else link_gbit) is not None:
        raise AutotunerError(f"{new} and --bandwidth-gbit (its old name): give one")
    deprecated("--bandwidth-gbit", new)
    return (link_gbit, bandwidth_gbit) if testbed_hosts else (bandwidth_gbit, loopback_gbit)


def rounds_opt(concept: str, what: str, command: str):
    """``--<phase>-rounds``: how many rounds of a measure phase run (0 skips it); ``what`` says what one round is
    in ``command``, after the concept's help."""
    c = CONCEPTS[concept]
    return typer.Option(c.default_for(command), c.option, help=f"{c.help} ({what}; 0 skips it)",
                        callback=opt.checked(opt.Index, c.option))


def wait_opt():
    return typer.Option("spin", "--wait", help=WAIT_HELP, callback=opt.checked(opt.ReplayWait, "--wait"))


def proposals_opt(more: str):
    return typer.Option(None, "--proposals", help=f"{PROPOSALS_HELP}: {more}", show_default=False)


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


def nodes_opt():
    return typer.Option(None, "--nodes", help="what-if node count", callback=opt.checked(opt.Count, "--nodes"))


def gpus_opt(help: str = "what-if GPUs (ranks) per node"):
    return typer.Option(None, "--gpus-per-node", help=help, callback=opt.checked(opt.GpusPerNode, "--gpus-per-node"))


def what_if_link_opt():
    return link_opt("a what-if (default: the env's)")


def compression_opt():
    return typer.Option(Compression.none, "--compression", help="gradient compression")


def compute_opt():
    return typer.Option(None, "--compute-ms", help=COMPUTE_HELP, show_default=False,
                        callback=opt.checked(opt.Millis, "--compute-ms"))


def backend_opt():
    return typer.Option(None, "--backend", show_default=False,
                        help="what-if collective backend: its fitted intra-node tier (default: the env's own)")
