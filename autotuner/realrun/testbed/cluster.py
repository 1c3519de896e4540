"""An emulated cluster: one network namespace per host, joined by a switch (:func:`emulated_cluster`)."""
from __future__ import annotations

import os
import signal
import socket
import sys
from contextlib import contextmanager
from typing import Callable, Iterator
from .process import _TRAPPED, _trap_signals
from .bed import CLUSTER_IFACE, CLUSTER_SUBNET, MAX_HOSTS, Host
from .bed import Testbed
from .netns import (
    ETC_NETNS,
    NETNS_PREFIX,
    _COUNTER,
    _delete,
    _hosts_file,
    _remove_hosts_file,
    _step,
    cleanup_stale,
    htb_rate,
    why_not_shaped,
)


class TestbedError(RuntimeError):
    """An emulated cluster cannot be built (not root, no iproute2, a failed ``ip``/``tc`` step): one line."""

    __test__ = False


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
    :mod:`autotuner.frameworks.horovod.hostlaunch` (Horovod's Gloo launcher starting each rank in its host's
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
        launcher = (sys.executable, "-m", "autotuner.frameworks.horovod.hostlaunch",
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
