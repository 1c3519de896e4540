"""Ctrl-C while the ``autotuner`` program is still loading (before :func:`autotuner.cli.main` runs): one line
and exit status 130, nothing started yet. Installed by ``autotuner/__init__.py``, the program's first module,
only when the process is the ``autotuner`` program (never for a library user or a test importing it), and
only where the caller left SIGINT at Python's default."""
from __future__ import annotations

import os

INTERRUPTED = "interrupted (anything already recorded is kept; re-run the same command to resume)"


def interrupted_while_loading(signum, frame):  # noqa: ARG001 (a signal handler's signature)
    os.write(2, (INTERRUPTED + "\n").encode())
    os._exit(130)


def install_if_program(argv0: str) -> None:
    """Install :func:`interrupted_while_loading` when ``argv0`` is the ``autotuner`` program and SIGINT is
    still Python's default handler."""
    import signal

    if os.path.basename(argv0) == "autotuner" and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, interrupted_while_loading)
