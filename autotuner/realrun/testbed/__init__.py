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

One module per job: :mod:`.process` (parent-death signals, signal traps, running a command),
:mod:`.netns` (a shaped loopback, namespace bookkeeping and cleanup), :mod:`.cluster` (emulated
hosts joined by a switch), :mod:`.probes` (TCP throughput probes). Every name is importable from here.
"""
from __future__ import annotations

from .bed import (  # noqa: F401
    CLUSTER_IFACE,
    CLUSTER_SUBNET,
    MAX_HOSTS,
    Host,
    Testbed,
    cluster_hosts,
)
from .process import (  # noqa: F401
    _CMD_TIMEOUT_S,
    _PR_SET_PDEATHSIG,
    _TRAPPED,
    _pid_alive,
    _prctl,
    _raise_exit,
    _run,
    _trap_signals,
    die_with_parent,
)
from .netns import (  # noqa: F401
    ETC_NETNS,
    NETNS_PREFIX,
    _COUNTER,
    _NAME_RE,
    _VALID_NAME,
    _delete,
    _hosts_file,
    _remove_hosts_file,
    _shape,
    _step,
    cleanup_stale,
    htb_rate,
    leftovers,
    list_namespaces,
    shaped_network,
    why_not_shaped,
)
from .cluster import (  # noqa: F401
    TestbedError,
    _htb,
    cluster_commands,
    emulated_cluster,
)
from .probes import (  # noqa: F401
    _PROBE,
    _RECV,
    _SEND,
    _flows,
    measure_bandwidth_gbit,
    measure_link_gbit,
    measure_ring_gbit,
)
