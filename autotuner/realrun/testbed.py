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
import socket
import subprocess
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

NETNS_PREFIX = "autotuner"
#: ``autotuner-<pid>-<n>`` (one shaped loopback) or ``autotuner-<pid>-<n>-<role>`` (a cluster's ``sw``, ``h0``, ...)
_NAME_RE = re.compile(rf"^{NETNS_PREFIX}-(\d+)-(\d+)(?:-([a-z0-9]+))?$")
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
    #: a cluster's hosts (:func:`emulated_cluster`), first = where the launcher runs; () for one loopback
    hosts: tuple["Host", ...] = ()
    #: argv that replaces ``horovodrun`` for a cluster (:mod:`autotuner.realrun.hostlaunch`), else ()
    launcher: tuple[str, ...] = ()
    #: the intra-node (loopback) HTB rate of a cluster's hosts in Gbit/s, None = unshaped
    intra_gbit: float | None = None

    def wrap(self, argv: list[str] | tuple[str, ...]) -> list[str]:
        """``argv`` prefixed so that it runs inside this testbed (a cluster: on its first host)."""
        return [*self.prefix, *argv]

    def hosts_arg(self, ranks_per_host: int, n_hosts: int | None = None) -> str:
        """horovodrun's ``-H`` for ``ranks_per_host`` slots on the first ``n_hosts`` hosts (default all):
        ``10.77.0.1:2,10.77.0.2:2``.  Raises ValueError for a plain testbed or too many hosts."""
        n = len(self.hosts) if n_hosts is None else n_hosts
        if not self.hosts or not 1 <= n <= len(self.hosts):
            raise ValueError(f"{n} host(s) x {ranks_per_host} asked of a testbed with {len(self.hosts)} host(s)")
        return cluster_hosts(n, ranks_per_host)


def cluster_hosts(n_hosts: int, ranks_per_host: int) -> str:
    """horovodrun's ``-H`` of an :func:`emulated_cluster` of ``n_hosts`` hosts with ``ranks_per_host``
    slots each (the addresses are fixed: host i is ``10.77.0.<i+1>``). Raises ValueError for counts < 1
    or more than :data:`MAX_HOSTS` hosts."""
    if not (1 <= n_hosts <= MAX_HOSTS) or ranks_per_host < 1:
        raise ValueError(f"{n_hosts} host(s) x {ranks_per_host} rank(s): need 1..{MAX_HOSTS} hosts and >= 1 rank each")
    return ",".join(f"{CLUSTER_SUBNET}.{i + 1}:{ranks_per_host}" for i in range(n_hosts))


@dataclass(frozen=True)
class Host:
    """One emulated host of :func:`emulated_cluster`: its namespace, its address on the cluster's
    bridge (``eth0`` inside the namespace, :data:`CLUSTER_IFACE`)."""

    netns: str
    address: str


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
    for name in os.listdir(ETC_NETNS) if os.path.isdir(ETC_NETNS) else []:  # a SIGKILLed cluster's hosts files
        m = _NAME_RE.match(name)
        if m and not _pid_alive(int(m.group(1))):
            _remove_hosts_file(name)
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


class TestbedError(RuntimeError):
    """An emulated cluster cannot be built (not root, no iproute2, a failed ``ip``/``tc`` step): one line."""

    __test__ = False


#: the interface name of every emulated host's link (the same in each namespace, so that one
#: ``HOROVOD_GLOO_IFACE`` / ``--network-interface`` serves all hosts, as on a uniform cluster)
CLUSTER_IFACE = "eth0"
#: the cluster's subnet: host i has ``10.77.0.<i+1>/24``; it exists only inside the namespaces created here
CLUSTER_SUBNET = "10.77.0"
MAX_HOSTS = 16
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


def _htb(ns: str, dev: str, rate: str) -> list[list[str]]:
    """The tc commands that cap ``dev``'s egress in netns ``ns`` at ``rate`` (one HTB class, ceil = rate)."""
    pre = ["ip", "netns", "exec", ns, "tc"]
    return [[*pre, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10"],
            [*pre, "class", "add", "dev", dev, "parent", "1:", "classid", "1:10", "htb", "rate", rate, "ceil", rate]]


def cluster_commands(base: str, n_hosts: int, link_rate: str | None, intra_rate: str | None) -> list[list[str]]:
    """Every command that builds the cluster ``base`` (names ``<base>-sw``, ``<base>-h<i>``), in order.

    A switch namespace holds a bridge ``br0``; host i's namespace holds ``lo`` and ``eth0``, one end
    of a veth pair whose other end ``p<i>`` is a bridge port. Each veth pair is created directly
    between the two namespaces (``ip -n SW link add p<i> type veth peer name eth0 netns H<i>``), so
    no interface ever exists in the namespace this process runs in. ``link_rate`` caps both
    directions of every host's link (HTB on ``eth0`` egress = upload, on ``p<i>`` egress =
    download: a full-duplex link to a switch); ``intra_rate`` caps each host's ``lo`` (the
    intra-node tier: ranks of one host reach each other's ``eth0`` address over ``lo``).
    """
    sw = f"{base}-sw"
    cmds = [["ip", "netns", "add", sw], ["ip", "-n", sw, "link", "set", "lo", "up"],
            ["ip", "-n", sw, "link", "add", "br0", "type", "bridge"], ["ip", "-n", sw, "link", "set", "br0", "up"]]
    for i in range(n_hosts):
        h = f"{base}-h{i}"
        cmds += [["ip", "netns", "add", h], ["ip", "-n", h, "link", "set", "lo", "up"],
                 ["ip", "-n", sw, "link", "add", f"p{i}", "type", "veth", "peer", "name", CLUSTER_IFACE, "netns", h],
                 ["ip", "-n", sw, "link", "set", f"p{i}", "master", "br0"], ["ip", "-n", sw, "link", "set", f"p{i}", "up"],
                 ["ip", "-n", h, "addr", "add", f"{CLUSTER_SUBNET}.{i + 1}/24", "dev", CLUSTER_IFACE],
                 ["ip", "-n", h, "link", "set", CLUSTER_IFACE, "up"]]
        if link_rate:
            cmds += _htb(h, CLUSTER_IFACE, link_rate) + _htb(sw, f"p{i}", link_rate)
        if intra_rate:
            cmds += _htb(h, "lo", intra_rate)
    return cmds


@contextmanager
def emulated_cluster(n_hosts: int, link_gbit: float | None, *, intra_gbit: float | None = None,
                     check: Callable[[], str | None] = why_not_shaped) -> Iterator[Testbed]:
    """Yield a :class:`Testbed` of ``n_hosts`` emulated hosts (1..:data:`MAX_HOSTS`) joined by a switch.

    One network namespace per host (``autotuner-<pid>-<n>-h<i>``, address ``10.77.0.<i+1>`` on
    ``eth0``) and one for the switch (``-sw``, a bridge); recipe in :func:`cluster_commands`.
    ``link_gbit``: every host link's HTB rate in Gbit/s (1e9 bit/s), both directions; None leaves the
    veth links unshaped. ``intra_gbit``: HTB on each host's loopback (the intra-node tier), None =
    unshaped. The testbed's ``prefix`` enters the first host, ``launcher`` is
    :mod:`autotuner.realrun.hostlaunch` (Horovod's Gloo launcher starting each rank in its host's
    namespace) and :meth:`Testbed.hosts_arg` gives horovodrun's ``-H``.

    Raises TestbedError (one line) when ``check()`` gives a reason or a step fails (a cluster cannot
    fall back to one loopback: the topology is the point), ValueError for bad arguments. Every
    namespace is deleted on every exit path as for :func:`shaped_network` (the veth pairs and the
    bridge go with them); stale ones of a SIGKILLed owner by :func:`cleanup_stale`.
    """
    if not (isinstance(n_hosts, int) and 1 <= n_hosts <= MAX_HOSTS):
        raise ValueError(f"n_hosts must be an integer from 1 to {MAX_HOSTS}, got {n_hosts!r}")
    link_rate = htb_rate(link_gbit) if link_gbit is not None else None
    intra_rate = htb_rate(intra_gbit) if intra_gbit is not None else None
    reason = check()
    if reason is not None:
        raise TestbedError(f"cannot build an emulated cluster: {reason}")
    cleanup_stale()
    base = f"{NETNS_PREFIX}-{os.getpid()}-{next(_COUNTER)}"
    created: list[str] = []
    old_handlers = _trap_signals()
    try:
        for argv in cluster_commands(base, n_hosts, link_rate, intra_rate):
            if argv[:3] == ["ip", "netns", "add"]:
                created.append(argv[3])  # before the call: a Ctrl-C inside `ip netns add` still cleans it
            error = _step(argv)
            if error is not None:
                raise TestbedError(f"cannot build the emulated cluster: {error}")
        hosts = tuple(Host(f"{base}-h{i}", f"{CLUSTER_SUBNET}.{i + 1}") for i in range(n_hosts))
        try:
            for h in hosts:
                _hosts_file(h.netns, h.address, socket.gethostname())
        except OSError as e:
            raise TestbedError(f"cannot write {ETC_NETNS}/<netns>/hosts: {e.strerror or e}") from None
        launcher = (sys.executable, "-m", "autotuner.realrun.hostlaunch",
                    *[a for h in hosts for a in ("--host", f"{h.address}={h.netns}")], "--")
        link = f"{link_gbit:g} Gbit/s HTB links (both directions)" if link_gbit else "unshaped veth links"
        intra = f"{intra_gbit:g} Gbit/s HTB on each host's lo" if intra_gbit else "unshaped lo inside each host"
        yield Testbed(("ip", "netns", "exec", hosts[0].netns), link_gbit, link_gbit is not None,
                      f"{n_hosts} emulated host(s) (netns {base}-h*), bridge in {base}-sw, {link}; {intra}",
                      f"{base}-sw", hosts, launcher, intra_gbit)
    finally:
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, *_TRAPPED})
        try:
            for name in reversed(created):
                _delete(name)
                _remove_hosts_file(name)
        finally:
            for sig, prev in old_handlers.items():
                signal.signal(sig, signal.SIG_DFL if prev is None else prev)
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


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


# Runs in host B: listen on its address, print the port, time what arrives (Gbit/s).
_RECV = r"""
import socket, sys, time
srv = socket.create_server((sys.argv[1], 0))
print(srv.getsockname()[1], flush=True)
srv.settimeout(10)
rx, _ = srv.accept()
rx.settimeout(5)
max_s = float(sys.argv[2])
buf = bytearray(1 << 20)
got = rx.recv_into(buf)
t0 = time.perf_counter()
first, now = got, t0
while now - t0 < max_s:
    n = rx.recv_into(buf)
    if not n:
        break
    got += n
    now = time.perf_counter()
print((got - first) * 8 / max(now - t0, 1e-9) / 1e9, flush=True)
"""
_SEND = r"""
import socket, sys
tx = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
chunk = memoryview(b"\0" * (1 << 20))
try:
    for _ in range(int(sys.argv[3]) >> 20):
        tx.sendall(chunk)
except OSError:
    pass
"""


def _flows(testbed: Testbed, pairs: list[tuple[int, int]], nbytes: int, max_seconds: float) -> list[float]:
    """TCP throughput in Gbit/s of one connection per (sender host, receiver host) index pair, all at
    once: a receiver in each target namespace (:data:`_RECV`, about ``max_seconds`` of transfer), then the
    senders (:data:`_SEND`, up to ``nbytes``). Raises RuntimeError if a probe fails."""
    hs, rxs, ports = testbed.hosts, [], []
    try:
        for _, j in pairs:
            rx = subprocess.Popen(["ip", "netns", "exec", hs[j].netns, sys.executable, "-I", "-c", _RECV,
                                   hs[j].address, str(float(max_seconds))], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, preexec_fn=die_with_parent())
            rxs.append(rx)
            port = rx.stdout.readline().strip()
            if not port.isdigit():
                raise RuntimeError(f"link probe receiver failed: {' '.join(rx.stderr.read().split())[-300:]}")
            ports.append(port)
        txs = [subprocess.Popen(["ip", "netns", "exec", hs[i].netns, sys.executable, "-I", "-c", _SEND,
                                 hs[j].address, port, str(int(nbytes))],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent())
               for (i, j), port in zip(pairs, ports)]
        outs = [rx.communicate(timeout=max_seconds + 30) for rx in rxs]
        for tx in txs:
            tx.kill()
            tx.wait()
    finally:
        for rx in rxs:
            if rx.poll() is None:
                rx.kill()
                rx.wait()
    try:
        return [float(out.strip().splitlines()[-1]) for out, _ in outs]
    except (ValueError, IndexError):
        errs = " ".join(" ".join(err.split()) for _, err in outs)
        raise RuntimeError(f"link probe failed: a receiver printed no rate ({errs[-300:]})") from None


def measure_ring_gbit(testbed: Testbed, *, nbytes: int = 400_000_000, max_seconds: float = 2.0) -> list[float]:
    """Measured TCP throughput in Gbit/s of each flow when every host ``i`` of a cluster sends to host
    ``i+1`` (mod H) at the same time, as a ring allreduce does: one number per flow, in host order.
    On a real switch each flow gets its own link's rate; here every packet also crosses this
    machine's software bridge, so the sum shows what the emulation itself can carry. Raises
    ValueError for fewer than 2 hosts, RuntimeError if a probe fails."""
    n = len(testbed.hosts)
    if n < 2:
        raise ValueError("measure_ring_gbit needs an emulated cluster of at least 2 hosts")
    return _flows(testbed, [(i, (i + 1) % n) for i in range(n)], nbytes, max_seconds)


def measure_link_gbit(testbed: Testbed, *, nbytes: int = 200_000_000, max_seconds: float = 1.0) -> float:
    """Measured TCP throughput in Gbit/s from a cluster's first host to its second (one connection
    through the bridge, about ``max_seconds`` of transfer). Raises ValueError for a testbed with
    fewer than 2 hosts, RuntimeError if the probe fails."""
    if len(testbed.hosts) < 2:
        raise ValueError("measure_link_gbit needs an emulated cluster of at least 2 hosts")
    return _flows(testbed, [(0, 1)], nbytes, max_seconds)[0]
