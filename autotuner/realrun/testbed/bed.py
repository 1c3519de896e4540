"""The testbed's data: :class:`Testbed` (where to run a command), the emulated hosts and their addresses."""
from __future__ import annotations

from dataclasses import dataclass


#: the interface name of every emulated host's link (the same in each namespace, so that one
#: ``HOROVOD_GLOO_IFACE`` / ``--network-interface`` serves all hosts, as on a uniform cluster)
CLUSTER_IFACE = "eth0"
#: the cluster's subnet: host i has ``10.77.0.<i+1>/24``; it exists only inside the namespaces created here
CLUSTER_SUBNET = "10.77.0"
MAX_HOSTS = 16
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
    #: argv that replaces ``horovodrun`` for a cluster (:mod:`autotuner.frameworks.horovod.hostlaunch`), else ()
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
