"""Process hygiene for the testbed's commands: parent-death signals, signal traps, running one command."""
from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import threading
from typing import Callable


_CMD_TIMEOUT_S = 10.0
_TRAPPED = (signal.SIGTERM, signal.SIGHUP)


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


@functools.lru_cache(maxsize=1)
def _prctl():
    """libc's ``prctl`` through ctypes on Linux, else None (looked up once, on first use)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        fn = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    fn.restype = ctypes.c_int
    return fn


def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A ``preexec_fn`` for :class:`subprocess.Popen` that makes the child get ``sig`` when its parent dies.

    Linux only (prctl(2) ``PR_SET_PDEATHSIG``; kept across execve(2) of a binary that is not set-user-ID);
    None elsewhere.  The signal comes when the *thread* that started the child exits, so start children from a
    thread that outlives them (the main thread does).  If the parent is already gone when the child runs the
    hook, the child sends ``sig`` to itself.  Defined here because this module must stay stdlib-only and
    importable alone (stdlib only; tests/test_testbed.py's children); :mod:`autotuner.realrun.launcher` uses it too.
    """
    prctl, parent = _prctl(), os.getpid()
    if prctl is None:
        return None

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the parent died between fork and prctl: nobody else will send it
            os.kill(os.getpid(), sig)

    return preexec


def _run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=check, capture_output=True, text=True, timeout=_CMD_TIMEOUT_S,
                          preexec_fn=die_with_parent())


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _raise_exit(signum, frame):
    raise SystemExit(128 + signum)


def _trap_signals() -> dict:
    """Make SIGTERM/SIGHUP raise SystemExit (main thread only; ignored signals stay ignored).  Returns old handlers."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    old = {}
    for sig in _TRAPPED:
        prev = signal.getsignal(sig)
        if prev is not signal.SIG_IGN:
            old[sig] = signal.signal(sig, _raise_exit)
    return old
