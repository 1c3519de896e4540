"""One shaped loopback in a network namespace (:func:`shaped_network`), and namespace bookkeeping."""
from __future__ import annotations

import itertools
import math
import os
import re
import shutil
import signal
import subprocess
from contextlib import contextmanager
from typing import Callable, Iterator
from .bed import Testbed
from .process import _TRAPPED, _pid_alive, _run, _trap_signals



NETNS_PREFIX = "autotuner"
#: ``autotuner-<pid>-<n>`` (one shaped loopback) or ``autotuner-<pid>-<n>-<role>`` (a cluster's ``sw``, ``h0``, ...)
_NAME_RE = re.compile(rf"^{NETNS_PREFIX}-(\d+)-(\d+)(?:-([a-z0-9]+))?$")
_VALID_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_COUNTER = itertools.count()


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


def list_namespaces() -> list[str]:
    """Names from ``ip netns list`` (lines look like ``name (id: 3)``).  Raises CalledProcessError if ip fails."""
    return [line.split()[0] for line in _run(["ip", "netns", "list"]).stdout.splitlines() if line.strip()]


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
    for name in os.listdir(ETC_NETNS) if os.path.isdir(ETC_NETNS) else []:  # a SIGKILLed cluster's hosts files
        m = _NAME_RE.match(name)
        if m and not _pid_alive(int(m.group(1))):
            _remove_hosts_file(name)
    return deleted


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


def leftovers() -> dict[str, list[str]]:
    """What an emulated cluster could leave behind, as this process sees it: this process's
    ``autotuner-<pid>-*`` namespaces and, in the namespace it runs in, veth and bridge
    interfaces (``ip -o link show type veth|bridge``). Used by tests to assert cleanup."""
    mine = [n for n in list_namespaces() if (m := _NAME_RE.match(n)) and int(m.group(1)) == os.getpid()]
    etc = [n for n in (os.listdir(ETC_NETNS) if os.path.isdir(ETC_NETNS) else []) if n.startswith(NETNS_PREFIX)]
    links = {kind: [ln.split(":")[1].strip().split("@")[0]
                    for ln in _run(["ip", "-o", "link", "show", "type", kind]).stdout.splitlines() if ln.strip()]
             for kind in ("veth", "bridge")}
    return {"netns": mine, "etc_netns": etc, **links}


#: ip-netns(8): ``ip netns exec NS`` bind-mounts ``/etc/netns/NS/<file>`` over ``/etc/<file>``
ETC_NETNS = "/etc/netns"


def _hosts_file(ns: str, address: str, hostname: str) -> None:
    """Write ``/etc/netns/<ns>/hosts`` so that this machine's hostname resolves to ``address`` inside ``ns``.

    Needed because Horovod 0.28.1's per-process-set Gloo context (which carries every collective)
    creates its device with the *new* context's ``gloo_iface_``, never set (empty), instead of
    ``HOROVOD_GLOO_IFACE`` (horovod/common/gloo/gloo_context.cc ``InitializeForProcessSet``,
    L281-284; the member is set only in ``Initialize``, L142): Gloo then binds to the address of
    ``gethostname()`` (gloo/transport/tcp/device.cc). On a real cluster that is the node's own
    address; every emulated host shares this machine's hostname, so each namespace gets its own
    hosts file (ip netns exec bind-mounts it over /etc/hosts for the ranks it starts)."""
    d = os.path.join(ETC_NETNS, ns)
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, ".hosts.tmp")
    with open(tmp, "w") as f:
        f.write(f"127.0.0.1 localhost\n::1 localhost\n{address} {hostname}\n")
    os.replace(tmp, os.path.join(d, "hosts"))


def _remove_hosts_file(ns: str) -> None:
    """Remove ``/etc/netns/<ns>`` (and ``/etc/netns`` itself once empty); missing is not an error."""
    shutil.rmtree(os.path.join(ETC_NETNS, ns), ignore_errors=True)
    try:
        os.rmdir(ETC_NETNS)
    except OSError:
        pass
