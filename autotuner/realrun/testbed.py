"""An emulated slow network on this machine: a network namespace whose loopback is HTB-shaped.

Recipe (as root)::

    ip netns add autotuner-<pid>-<n>
    ip netns exec autotuner-<pid>-<n> ip link set lo up
    ip netns exec autotuner-<pid>-<n> tc qdisc add dev lo root handle 1: htb default 10
    ip netns exec autotuner-<pid>-<n> tc class add dev lo parent 1: classid 1:10 htb rate 1000mbit ceil 1000mbit

after which ``ip netns exec autotuner-<pid>-<n> horovodrun ...`` runs every rank on a loopback that carries at
most the HTB rate (measured here: 0.97 Gbit/s at ``rate 1000mbit``).  ``tbf`` and ``netem`` are not built into
this kernel, so HTB is the only shaper used; it limits bandwidth only (no added latency or loss).  Measured here
with :func:`measure_bandwidth_gbit`: 0.1 -> 0.10, 0.5 -> 0.50, 1 -> 0.98, 2 -> 1.9, 5 -> 4.4, 10 -> 7.6 Gbit/s;
above ~2 Gbit/s tc's default HTB burst falls short, so report the measured figure, not the asked one.

Units: bandwidth is in Gbit/s, 1 Gbit/s = 1e9 bit/s.  tc(8) reads ``mbit`` as 1e6 bit/s and ``kbit`` as 1e3 bit/s
(SI, not 1024-based), so 1 Gbit/s is written ``rate 1000mbit`` and 0.5 Gbit/s ``rate 500mbit``.  ``ceil`` equals
``rate`` so the class cannot borrow above it (tc-htb(8), iproute2).

Cleanup: the namespace is deleted on every exit from :func:`shaped_network` (normal end, exception, Ctrl-C, and
SIGTERM/SIGHUP, which inside the context raise ``SystemExit(128 + signal)`` so that ``finally`` runs).  A SIGKILL
cannot be caught; :func:`cleanup_stale`, called on every entry, deletes ``autotuner-<pid>-*`` namespaces whose
pid is gone.  Processes still running inside a deleted namespace keep it alive until they exit (ip-netns(8)).
Every command started here gets a parent-death SIGKILL on Linux (:func:`die_with_parent`).

Nothing here does I/O at import time; every command is an argument list, never a shell string.
"""
from __future__ import annotations

import functools
import itertools
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

NETNS_PREFIX = "autotuner"
_NAME_RE = re.compile(rf"^{NETNS_PREFIX}-(\d+)-(\d+)$")
_VALID_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_COUNTER = itertools.count()
_CMD_TIMEOUT_S = 10.0
_TRAPPED = (signal.SIGTERM, signal.SIGHUP)


@dataclass(frozen=True)
class Testbed:
    """Where to run a command.

    prefix: argv to put in front of a command (``("ip", "netns", "exec", name)``), or ``()`` for plain loopback.
    bandwidth_gbit: the HTB rate in Gbit/s (1e9 bit/s) when shaped, else None.
    shaped: True only if the namespace and its HTB class were really created.
    note: one human sentence for reports (what was set up, or why not).
    netns: the namespace name, or None.
    """

    __test__ = False  # not a pytest test class despite the name

    prefix: tuple[str, ...]
    bandwidth_gbit: float | None
    shaped: bool
    note: str
    netns: str | None = None

    def wrap(self, argv: list[str] | tuple[str, ...]) -> list[str]:
        """``argv`` prefixed so that it runs inside this testbed."""
        return [*self.prefix, *argv]


def why_not_shaped() -> str | None:
    """None if this process can build a shaped testbed, else the reason in a few words.

    Needs root (``ip netns add`` mounts under /run/netns) and the iproute2 binaries ``ip`` and ``tc`` on PATH.
    """
    if os.geteuid() != 0:
        return f"not root (euid {os.geteuid()})"
    missing = [tool for tool in ("ip", "tc") if shutil.which(tool) is None]
    if missing:
        return f"no {' or '.join(missing)} binary on PATH"
    return None


def htb_rate(bandwidth_gbit: float) -> str:
    """The tc rate string for ``bandwidth_gbit`` Gbit/s: ``1000mbit`` for 1.0, ``500mbit`` for 0.5, else kbit.

    Raises ValueError unless 0 < bandwidth_gbit < inf, or if it rounds to less than 1 kbit/s.
    """
    if not (isinstance(bandwidth_gbit, (int, float)) and math.isfinite(bandwidth_gbit) and bandwidth_gbit > 0):
        raise ValueError(f"bandwidth_gbit must be a positive finite number of Gbit/s, got {bandwidth_gbit!r}")
    mbit = bandwidth_gbit * 1000
    if mbit == round(mbit):
        return f"{round(mbit)}mbit"
    kbit = round(bandwidth_gbit * 1e6)
    if kbit < 1:
        raise ValueError(f"bandwidth_gbit={bandwidth_gbit!r} is below 1 kbit/s")
    return f"{kbit}kbit"


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
    loadable by path (tests/test_testbed.py); :mod:`autotuner.realrun.launcher` uses it too.
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


def list_namespaces() -> list[str]:
    """Names from ``ip netns list`` (lines look like ``name (id: 3)``).  Raises CalledProcessError if ip fails."""
    return [line.split()[0] for line in _run(["ip", "netns", "list"]).stdout.splitlines() if line.strip()]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def cleanup_stale() -> list[str]:
    """Delete ``autotuner-<pid>-<n>`` namespaces whose pid no longer runs (left by a SIGKILLed run).

    Returns the names deleted.  Needs root; without it (or without ``ip``) it deletes nothing and returns [].
    """
    if why_not_shaped() is not None:
        return []
    deleted = []
    for name in list_namespaces():
        m = _NAME_RE.match(name)
        if m and not _pid_alive(int(m.group(1))) and _run(["ip", "netns", "delete", name], check=False).returncode == 0:
            deleted.append(name)
    return deleted


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


def _step(argv: list[str]) -> str | None:
    """Run one setup command; None on success, else the error (one line)."""
    try:
        proc = _run(argv, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"`{' '.join(argv)}` failed: {e}"
    if proc.returncode != 0:
        return f"`{' '.join(argv)}` failed: {' '.join(proc.stderr.split()) or f'exit status {proc.returncode}'}"
    return None


def _shape(name: str, rate: str) -> str | None:
    """Bring up lo in netns ``name`` and put one HTB class of ``rate`` on it; None on success, else the error."""
    ns = ["ip", "netns", "exec", name]
    for argv in ([*ns, "ip", "link", "set", "lo", "up"],
                 [*ns, "tc", "qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb", "default", "10"],
                 [*ns, "tc", "class", "add", "dev", "lo", "parent", "1:", "classid", "1:10", "htb",
                  "rate", rate, "ceil", rate]):
        error = _step(argv)
        if error is not None:
            return error
    return None


@contextmanager
def shaped_network(bandwidth_gbit: float | None, *, name: str | None = None,
                   check: Callable[[], str | None] = why_not_shaped) -> Iterator[Testbed]:
    """Yield a :class:`Testbed` whose loopback carries at most ``bandwidth_gbit`` Gbit/s (1e9 bit/s).

    ``bandwidth_gbit=None`` gives plain loopback (no namespace).  If ``check()`` returns a reason (default:
    :func:`why_not_shaped`: not root, or no ``ip``/``tc``) or building the namespace fails, the testbed falls back
    to plain loopback with ``shaped=False`` and the reason in ``note``; nothing is raised for that.
    ``name`` overrides the namespace name (default ``autotuner-<pid>-<n>``).

    Raises ValueError for a non-positive/non-finite bandwidth or a name ip(8) would not take.  The namespace is
    deleted on every exit path (see module docstring); SIGTERM/SIGHUP handlers are swapped in only for the
    duration of the context, only in the main thread, and the previous handlers restored after.
    """
    if bandwidth_gbit is None:
        yield Testbed((), None, False, "plain loopback, no shaping (no bandwidth asked)")
        return
    rate = htb_rate(bandwidth_gbit)
    if name is not None and not _VALID_NAME.match(name):
        raise ValueError(f"namespace name {name!r} must match {_VALID_NAME.pattern}")
    reason = check()
    if reason is not None:
        yield Testbed((), None, False, f"{reason}: plain loopback, no shaping ({bandwidth_gbit:g} Gbit/s asked)")
        return

    cleanup_stale()
    owned = name is None  # an auto name is ours alone, even if Ctrl-C lands in the middle of `ip netns add`
    name = name or f"{NETNS_PREFIX}-{os.getpid()}-{next(_COUNTER)}"
    old_handlers = _trap_signals()
    try:
        error = _step(["ip", "netns", "add", name])
        if error is None:
            owned = True
            error = _shape(name, rate)
        if error is None:
            yield Testbed(("ip", "netns", "exec", name), float(bandwidth_gbit), True,
                          f"{bandwidth_gbit:g} Gbit/s HTB (rate {rate}) on lo in netns {name}", name)
        else:
            if owned:
                _delete(name)
                owned = False
            yield Testbed((), None, False, f"could not build netns {name} ({error}): plain loopback, no shaping")
    finally:
        # Hold off SIGINT/SIGTERM/SIGHUP while deleting, so a second Ctrl-C cannot cut the cleanup short.
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, *_TRAPPED})
        try:
            if owned:
                _delete(name)
        finally:
            for sig, prev in old_handlers.items():
                signal.signal(sig, signal.SIG_DFL if prev is None else prev)
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def _delete(name: str) -> None:
    """``ip netns delete name``; a missing namespace is not an error."""
    try:
        _run(["ip", "netns", "delete", name], check=False)
    except (OSError, subprocess.TimeoutExpired):
        pass


# Runs in a child under the testbed prefix: a TCP pair on 127.0.0.1, receiver times the bytes that arrive.
_PROBE = r"""
import socket, sys, threading, time
nbytes, max_s = int(sys.argv[1]), float(sys.argv[2])
srv = socket.create_server(("127.0.0.1", 0))
tx = socket.create_connection(srv.getsockname())
rx, _ = srv.accept()
rx.settimeout(5)
def send():
    chunk = memoryview(b"\0" * (1 << 20))
    left = nbytes
    try:
        while left > 0:
            left -= tx.send(chunk[:min(left, len(chunk))])
    except OSError:
        pass
threading.Thread(target=send, daemon=True).start()
buf = bytearray(1 << 20)
got = rx.recv_into(buf)
t0 = time.perf_counter()
first, now = got, t0
while got < nbytes and now - t0 < max_s:
    n = rx.recv_into(buf)
    if not n:
        break
    got += n
    now = time.perf_counter()
print((got - first) * 8 / max(now - t0, 1e-9) / 1e9)
"""


def measure_bandwidth_gbit(testbed: Testbed, nbytes: int = 200_000_000, *, max_seconds: float = 1.0) -> float:
    """Measured TCP throughput in Gbit/s (1e9 bit/s) between two sockets on 127.0.0.1 inside ``testbed``.

    A child ``python`` runs under ``testbed.prefix`` and pushes up to ``nbytes`` bytes through one connection,
    stopping after ``max_seconds`` of transfer, so a call takes about max_seconds + 0.1 s at most.  The clock
    starts at the first received chunk, so connection setup is not counted.
    Raises RuntimeError if the probe fails, subprocess.TimeoutExpired if it hangs (> max_seconds + 10 s).
    """
    argv = testbed.wrap([sys.executable, "-I", "-c", _PROBE, str(int(nbytes)), str(float(max_seconds))])
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=max_seconds + 10, preexec_fn=die_with_parent())
    if proc.returncode != 0:
        raise RuntimeError(f"bandwidth probe failed (exit {proc.returncode}): {' '.join(proc.stderr.split())[-300:]}")
    return float(proc.stdout.strip())
