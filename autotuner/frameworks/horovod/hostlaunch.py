"""horovodrun for an emulated cluster: Horovod's own Gloo launcher, each rank started in its host's namespace.

Usage (what :class:`autotuner.frameworks.horovod.launch.Job` runs for a :func:`autotuner.realrun.testbed.emulated_cluster`;
it runs inside the first host's namespace, as horovodrun runs on a cluster's first node)::

    ip netns exec <base>-h0 python -m autotuner.frameworks.horovod.hostlaunch \\
        --host 10.77.0.1=<base>-h0 --host 10.77.0.2=<base>-h1 -- \\
        -np 4 -H 10.77.0.1:2,10.77.0.2:2 --gloo <knob flags> python train.py

Everything after ``--`` is horovodrun's own command line, parsed by horovodrun's own parser
(``horovod.runner.launch.parse_args``, Horovod 0.28.1) and turned into ``HOROVOD_*`` variables by
horovodrun's own ``config_parser.set_env_from_args``, so every knob flag means exactly what it
means to horovodrun. The ranks are then started by ``horovod.runner.gloo_run.launch_gloo``
(horovod/runner/gloo_run.py): Horovod's rendezvous server (``RendezvousServer``, on the first
host's address), Horovod's host assignment (``get_host_assignments``: rank, local rank, cross
rank in ``-H`` order) and Horovod's per-slot environment (``HOROVOD_RANK``, ``HOROVOD_LOCAL_RANK``,
``HOROVOD_CROSS_RANK``, ... and ``HOROVOD_GLOO_IFACE=eth0``). Only ``exec_command``, the function
``launch_gloo`` calls to start one rank, is ours: it prefixes the rank's command with
``ip netns exec <its host's namespace>``.

Why not horovodrun itself: for any host that is not one of this machine's addresses horovodrun
first checks ssh (launch.py ``_check_all_hosts_ssh_successful``), then starts a task service on
every host over ssh to find the common interfaces (runner/driver/driver_service.py
``get_common_interfaces``), and Gloo's default ``exec_command`` (gloo_run.py ``_exec_command_fn``)
wraps each remote rank in ``ssh`` (runner/util/remote.py). The namespaces run no sshd, and an ssh
stand-in would be a home-made remote shell; the interface is known (every host's link is
``eth0``), so the interface discovery is skipped and ``--network-interface eth0`` is implied.

Exit status: 0 when every rank exits 0; 1 (with Horovod's one-paragraph message on stderr) when a
rank fails; 2 for a bad command line (one line).
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
import threading
import time

IFACE = "eth0"  # autotuner.realrun.testbed.CLUSTER_IFACE (not imported: this module starts light)


def _parse(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    p = argparse.ArgumentParser(prog="python -m autotuner.frameworks.horovod.hostlaunch",
                                description="Horovod's Gloo launcher over emulated hosts (network namespaces).")
    p.add_argument("--host", action="append", required=True, metavar="ADDRESS=NETNS",
                   help="one emulated host: the address used in -H and its network namespace")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="-- then horovodrun's arguments")
    a = p.parse_args(argv)
    hosts = {}
    for h in a.host:
        addr, sep, ns = h.partition("=")
        if not sep or not addr or not ns:
            p.error(f"--host {h!r}: expected ADDRESS=NETNS")
        hosts[addr] = ns
    rest = a.rest[1:] if a.rest[:1] == ["--"] else a.rest
    if not rest:
        p.error("no horovodrun arguments after --")
    return hosts, rest


def exec_in_namespace(netns: dict[str, str], settings):
    """The ``exec_command(command, slot_info, events)`` for ``launch_gloo``: runs the rank's
    command (a shell string built by Horovod: ``env HOROVOD_RANK=... <command>``) under
    ``ip netns exec <netns of slot_info.hostname>`` with Horovod's ``safe_shell_exec.execute``;
    the first failing rank stops the others (as gloo_run.py ``_exec_command_fn`` does for a
    non-elastic run). Returns ``(exit code, time.time())`` as Horovod's does."""
    from horovod.runner.common.util import safe_shell_exec

    terminate_all = threading.Event()

    def _exec(command, slot_info, events):
        ns = netns[slot_info.hostname]
        full = f"ip netns exec {shlex.quote(ns)} {command}"
        if settings.verbose:
            print(full, flush=True)
        evs = [*(events or []), terminate_all]
        try:
            code = safe_shell_exec.execute(full, index=slot_info.rank, events=evs,
                                           prefix_output_with_timestamp=settings.prefix_output_with_timestamp)
        except Exception as e:  # noqa: BLE001 - Horovod's own launcher reports and goes on the same way
            print(f"Exception happened during safe_shell_exec, exception message: {e}", flush=True)
            code = 1
        if code != 0:
            terminate_all.set()
        return code, time.time()

    return _exec


def main(argv: list[str] | None = None) -> int:
    hosts, rest = _parse(sys.argv[1:] if argv is None else argv)
    from horovod.runner import launch
    from horovod.runner.common.util import config_parser, secret
    from horovod.runner.common.util import settings as hvd_settings
    from horovod.runner.common.util import timeout as hvd_timeout
    from horovod.runner.common.util.hosts import parse_hosts_and_slots
    from horovod.runner.gloo_run import launch_gloo

    saved = sys.argv
    sys.argv = ["horovodrun", *rest]
    try:
        args = launch.parse_args()
    finally:
        sys.argv = saved
    if not args.hosts:
        print(f"hostlaunch: -H is required (hosts: {', '.join(hosts)})", file=sys.stderr)
        return 2
    names, _ = parse_hosts_and_slots(args.hosts)
    unknown = [n for n in names if n not in hosts]
    if unknown:
        print(f"hostlaunch: -H names {', '.join(unknown)}, not an emulated host ({', '.join(hosts)})", file=sys.stderr)
        return 2
    if not args.command:
        print("hostlaunch: no training command", file=sys.stderr)
        return 2
    start = int(args.start_timeout or os.getenv("HOROVOD_START_TIMEOUT", "30"))
    settings = hvd_settings.Settings(
        verbose=2 if args.verbose else 0, key=secret.make_secret_key(),
        start_timeout=hvd_timeout.Timeout(start, message="Timed out waiting for {activity}."),
        num_proc=args.num_proc, hosts=args.hosts, output_filename=args.output_filename, nics={IFACE},
        prefix_output_with_timestamp=args.prefix_output_with_timestamp)
    env = os.environ.copy()
    config_parser.set_env_from_args(env, args)  # the knob flags -> HOROVOD_* exactly as horovodrun does
    server_ip = names[0]  # the first host: where this launcher (and Horovod's rendezvous server) runs
    try:
        launch_gloo(args.command, exec_in_namespace(hosts, settings), settings, [IFACE], env, server_ip)
    except RuntimeError as e:
        print(str(e).strip(), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
