"""Command line: ``autotuner fit | simulate | suggest | validate | tune | inspect | compare | explore | scale |
accuracy | envs | profile | measure | env new`` (Horovod) and ``autotuner ddp measure | validate | simulate | envs |
explore | scale | tune | suggest`` (PyTorch DDP).

Thin: parse (typer; the knob options are generated from :data:`autotuner.frameworks.horovod.knobs.KNOBS`, the
numeric options checked by :mod:`autotuner.options`), call the public API (``autotuner.__all__``), render (rich).
The commands live by framework and by job: :mod:`.horovod_predict`, :mod:`.horovod_envs`, :mod:`.horovod_realrun`,
:mod:`.ddp_predict`, :mod:`.ddp_realrun`; what they share (the app, the consoles, the option factories) in
:mod:`.common`. This module registers them in the order ``autotuner --help`` lists them and runs the program
(:func:`main`; ``python -m autotuner.cli`` runs :mod:`.__main__`).

Every error the tool can name is an :class:`~autotuner.errors.AutotunerError`: it prints one
line (``error: ...``) on stderr and exits with status 2. Ctrl-C prints one line and exits 130.
"""
from __future__ import annotations

import os
import signal
import sys

from .._sigint import INTERRUPTED  # noqa: E402
from .._sigint import interrupted_while_loading as _interrupted_while_loading  # noqa: E402


def _as_program() -> bool:
    """Whether this process is the ``autotuner`` program: the console script, or ``python -m autotuner.cli`` (while
    Python loads the package ``sys.argv[0]`` is ``-m``; a launcher may name the package's own file)."""
    argv0 = (getattr(sys, "argv", None) or [""])[0]
    here = os.path.dirname(os.path.abspath(__file__))
    return (os.path.basename(argv0) == "autotuner" or argv0 == "-m"
            or (argv0.endswith(".py") and os.path.dirname(os.path.abspath(argv0)) == here))


# only when run as the program (not imported by a test or a library user), and not when the caller ignores SIGINT;
# as the console script, autotuner/__init__.py has installed it already (the program's first module)
if _as_program() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, _interrupted_while_loading)

import typer  # noqa: E402

from autotuner import AutotunerError  # noqa: E402

from . import ddp_predict, ddp_realrun, environments, horovod_envs, horovod_predict, horovod_realrun  # noqa: E402,F401  (commands)
from .common import app, ddp_app, env_app, err, knob_options, out  # noqa: E402,F401

#: the commands in the order ``autotuner --help`` lists them (the groups ``env`` and ``ddp`` after them)
ORDER = ("fit", "simulate", "suggest", "validate", "tune", "inspect", "compare", "explore", "scale", "accuracy", "envs",
         "profile", "measure")
#: ``autotuner ddp --help``'s order
DDP_ORDER = ("measure", "validate", "simulate", "envs", "explore", "scale", "tune", "suggest")


def _command_name(c) -> str:
    return c.name or c.callback.__name__.replace("_", "-")


app.registered_commands.sort(key=lambda c: ORDER.index(_command_name(c)))
ddp_app.registered_commands.sort(key=lambda c: DDP_ORDER.index(_command_name(c)))

#: kept importable from here: a fit's form cut to a table cell, accuracy's mark on a row the fit read
short_form = horovod_envs.short_form
USED_BY_FIT = horovod_envs.USED_BY_FIT


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
    # printed while it winds down (3 lines at one of 10 moments of a fit on a 2-core machine) is not
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
        # import), a codec, an import hook. After a Ctrl-C any such exception is the Ctrl-C.
        if interrupted:
            _say_interrupted()
            return 130
        raise
    if rv == 130 or interrupted:
        _say_interrupted()
        return 130
    return rv if isinstance(rv, int) else 0

