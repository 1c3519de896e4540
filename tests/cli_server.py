"""The tests' ``autotuner`` launcher: one Python interpreter that imports autotuner's modules (and numpy, scipy,
pandas, pydantic, typer, rich, matplotlib's pyplot) once, then forks one child per command, and each child runs
``python -m autotuner.cli ARGS`` exactly as that command line does (``runpy`` runs the module as ``__main__``:
the package's own Ctrl-C handler, its consoles made from the child's environment, ``sys.exit(main())``).

Why: on this project's CI machines (2 cores) a fresh ``python -m autotuner.cli`` spends 2-3 s importing before it
does anything, and the suite starts about a thousand of them (``tests/cli_helpers.py``). A forked child starts
with those imports done; everything else is the real program in its own process: its own exit status, stdout and
stderr (files, as a pipe would be: not a terminal), working directory, environment (the caller's, whole) and
stdin (``/dev/null``, as in CI). Nothing here imports torch (its OpenMP pool does not survive a fork): the
commands that need torch import it in the child, as the program does.

What an interpreter reads from its environment only as it starts cannot follow a request: ``$PYTHONPATH`` is
applied to each child's ``sys.path``; a request whose environment differs from this process's in any other such
variable (:data:`STARTUP_VARS` and every ``PYTHON*``) is run by ``tests/cli_helpers.py`` as a fresh interpreter.

Protocol (stdin/stdout of this process, one JSON object per line): a request ``{"args": [...], "cwd": str,
"env": {...}, "stdout": path, "stderr": path, "timeout": seconds}``; the reply ``{"rc": int | null}``, ``null``
when the child ran past its timeout (it is killed with its process group).
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time


#: read once, as an interpreter or a library this process has imported starts (BLAS thread pools, matplotlib's backend)
STARTUP_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "MPLBACKEND", "MPLCONFIGDIR",
                "LD_PRELOAD", "LD_LIBRARY_PATH")


def startup_env(env: dict) -> dict:
    """The part of ``env`` that a child of this process cannot take on: :data:`STARTUP_VARS` and ``PYTHON*`` but
    ``PYTHONPATH``."""
    return {k: v for k, v in env.items()
            if k in STARTUP_VARS or (k.startswith("PYTHON") and k != "PYTHONPATH")}


def _preload() -> None:
    import autotuner

    for name in autotuner.__all__:  # autotuner imports its modules on first use: use each once
        getattr(autotuner, name)
    import importlib

    for mod in ("autotuner.options", "autotuner.render", "typer", "rich.console", "rich.table", "rich.progress",
                "pandas", "skopt", "scipy.optimize", "scipy.stats",
                # the plotting modules select the Agg backend as they load (autotuner/views/plots.py)
                "autotuner.views.plots", "autotuner.frameworks.horovod.views.plots_explore",
                "autotuner.frameworks.ddp.plots", "matplotlib.pyplot"):
        importlib.import_module(mod)
    assert "torch" not in sys.modules, "the launcher must not import torch (it would fork torch's thread pools)"


def _pythonpath(env: dict) -> list[str]:
    return [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]


#: this interpreter's import path without its script's folder and its own $PYTHONPATH entries
_BASE_PATH = [p for p in sys.path[1:] if p not in _pythonpath(dict(os.environ))]


def _child(req: dict) -> None:
    rc = 1
    try:
        os.setpgid(0, 0)  # its own process group: a timeout kills what it started too
        fd_in = os.open(os.devnull, os.O_RDONLY)
        fd_out = os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        fd_err = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        for fd, target in ((fd_in, 0), (fd_out, 1), (fd_err, 2)):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        import importlib.util
        import runpy

        sys.argv = [importlib.util.find_spec("autotuner.cli").origin, *req["args"]]
        # as the interpreter starts: the working directory (``python -m``), then $PYTHONPATH, then the rest
        sys.path[:] = [os.getcwd(), *_pythonpath(req["env"]), *_BASE_PATH]
        try:
            runpy.run_module("autotuner.cli", run_name="__main__", alter_sys=True)
            rc = 0
        except SystemExit as e:
            if e.code is None:
                rc = 0
            elif isinstance(e.code, int):
                rc = e.code
            else:  # as Python does with sys.exit("message")
                print(e.code, file=sys.stderr)
                rc = 1
        except BaseException:  # noqa: BLE001 - as the interpreter does with an uncaught exception
            sys.excepthook(*sys.exc_info())
            rc = 1
        import atexit

        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(rc & 0xFF if rc >= 0 else 1)


def _wait(pid: int, timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    delay = 0.002
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            return None
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def main() -> None:
    _preload()
    proto_in, proto_out = sys.stdin, sys.stdout
    for line in proto_in:
        if not line.strip():
            continue
        req = json.loads(line)
        proto_out.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(req)
        rc = _wait(pid, float(req.get("timeout", 300)))
        proto_out.write(json.dumps({"rc": rc}) + "\n")
        proto_out.flush()


if __name__ == "__main__":
    main()
