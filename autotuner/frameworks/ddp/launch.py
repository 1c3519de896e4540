"""Launch a DDP job with ``torchrun`` (torch 2.13's own launcher, ``torch/distributed/run.py``): on this host
(``--standalone``), or one ``torchrun`` per host of a cluster (:class:`Node`), each started through its host's remote
shell, as torchrun's documentation prescribes for several nodes (``torch/distributed/run.py``'s docstring,
"Multi-node multi-worker": "Start torchrun with the same arguments on all the nodes participating in training";
"Note on rendezvous backend": ``--rdzv-id`` a unique job id shared by all nodes, ``--rdzv-backend c10d``,
``--rdzv-endpoint host:port``): ``--nnodes N --nproc-per-node <slots> --rdzv-backend c10d --rdzv-endpoint
<first host>:29531 --rdzv-id <unique id>``.

A real cluster's hosts (``--hosts h1:8,h2:8``, :func:`parse_hosts`) are reached by ``ssh`` or the user's ``--rsh``;
an emulated cluster's (:func:`autotuner.realrun.testbed.emulated_cluster`, :func:`emulated_nodes`) by ``ip netns
exec <netns> sh -c``: the same code path, the same per-node command (:func:`node_command`: ``cd <cwd> && exec env
VAR=... <torchrun> ...``, this process's working directory and interpreter, which every host must have).

Nothing is left running when :func:`run_ddp` returns or raises (Ctrl-C and a timeout included): every local process
is an :class:`autotuner.realrun.launcher.OwnedProcess`, and each host also gets a kill through its remote shell
(:func:`kill_argv`: every process carrying the job's mark ``AUTOTUNER_DDP_JOB=<id>`` in its environment, torchrun and
its ranks; killing the local ``ssh`` alone leaves the remote processes running). A host whose torchrun exits non-zero
while others still run stops the job after :data:`FAIL_GRACE_S` seconds and is named in
:attr:`DdpJobResult.failed`.

A job's result is what rank 0 printed: a rank that aborts at exit after its steps were measured (``terminate called
without an active exception``, seen in 2 of 5 torchrun runs on a 2-core machine) gives a non-zero exit status but
keeps the printed result: :class:`DdpJobResult` says both, and the readers decide by the result line, never by the
exit status alone.
"""
from __future__ import annotations

import os
import secrets
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

#: the c10d rendezvous port on the first host
RDZV_PORT = 29531
#: the environment variable that marks every process of one multi-host job on every host (its value: the job's
#: ``--rdzv-id``), found and killed by :func:`kill_argv`
JOB_VAR = "AUTOTUNER_DDP_JOB"
#: seconds a host's remote shell has to run ``true`` before the host counts as unreachable
REACH_TIMEOUT_S = 10.0
#: seconds the other hosts get after one host's torchrun exited non-zero (their rank 0 may still be printing)
FAIL_GRACE_S = 5.0
#: seconds between SIGTERM and SIGKILL of a host's leftovers (:func:`kill_argv`)
KILL_GRACE_S = 5.0
#: variables of this process's environment a remote host's torchrun gets too (the network's and torch's settings)
FORWARDED_PREFIXES = ("NCCL_", "GLOO_", "TORCH_")


def torchrun_path() -> str:
    """``torchrun`` beside this interpreter (the venv's), else on PATH, else ``python -m torch.distributed.run``."""
    here = Path(sys.executable).with_name("torchrun")
    if here.exists():
        return str(here)
    return shutil.which("torchrun") or ""


def torchrun_argv(module: str, args: list[str], nproc: int, *, nnodes: int = 1, node_rank: int | None = None,
                  endpoint: str | None = None, local_addr: str | None = None, rdzv_id: str = "autotuner",
                  head: list[str] | None = None) -> list[str]:
    """The ``torchrun`` command of ``python -m module args`` (or, ``module`` ending in ``.py``, of that script) on
    ``nproc`` ranks per node. One node: standalone rendezvous; several: c10d at ``endpoint`` (``host:port``) under
    job id ``rdzv_id``, the same arguments on every node (c10d assigns the node ranks; ``node_rank``, where given,
    is passed as ``--node-rank``), this node reachable at ``local_addr`` (``--local-addr``: the address the other
    nodes reach its store and ranks at; without it torchrun uses the host name, which every emulated host shares).
    ``head``: the launcher's own argv (default :func:`torchrun_path`, else ``python -m torch.distributed.run``).
    Raises ValueError for counts below 1 or several nodes without an endpoint."""
    if nproc < 1 or nnodes < 1 or (node_rank is not None and not 0 <= node_rank < nnodes):
        raise ValueError(f"torchrun needs nproc >= 1 and 0 <= node_rank < nnodes, got {nproc}, {node_rank}, {nnodes}")
    if head is None:
        run = torchrun_path()
        head = [run] if run else [sys.executable, "-m", "torch.distributed.run"]
    if nnodes == 1:
        rdzv = ["--standalone"]
    else:
        if not endpoint:
            raise ValueError("several nodes need a rendezvous endpoint")
        rdzv = ["--nnodes", str(nnodes)] + (["--node-rank", str(node_rank)] if node_rank is not None else []) + [
            "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--rdzv-id", rdzv_id]
        if local_addr:
            rdzv += ["--local-addr", local_addr]
    target = [module] if module.endswith(".py") else ["-m", module]
    return [*head, *rdzv, "--nproc-per-node", str(nproc), "--max-restarts", "0", *target, *args]


@dataclass(frozen=True)
class Node:
    """One host of a multi-host job: ``name`` (as the user wrote it; messages name the host by it), ``address``
    (where the other hosts reach it: the first host's is the rendezvous endpoint), ``slots`` (ranks on it,
    ``--nproc-per-node``), ``rsh`` (the argv that runs one shell command line, appended as its last argument, on
    the host: ``("ssh", "h1")``, ``("ip", "netns", "exec", "<netns>", "sh", "-c")``) and ``local_addr`` (passed as
    torchrun's ``--local-addr``, for hosts that share one host name; None: torchrun's own, the host name)."""

    name: str
    address: str
    slots: int
    rsh: tuple[str, ...]
    local_addr: str | None = None


def rsh_prefix(rsh: str, host: str) -> tuple[str, ...]:
    """The argv prefix that runs a command line on ``host`` with remote shell ``rsh`` (a command line: ``ssh``,
    ``ssh -p 2222``): ``rsh``'s words then the host, or ``{host}`` in ``rsh`` replaced by it (``ip netns exec {host}
    sh -c``). Raises ValueError (one line) for an empty or unparsable ``rsh``."""
    try:
        words = shlex.split(rsh)
    except ValueError as e:
        raise ValueError(f"--rsh {rsh!r}: {e}") from None
    if not words:
        raise ValueError("--rsh is empty: give the command that runs a command on a host, e.g. ssh")
    if any("{host}" in w for w in words):
        return tuple(w.replace("{host}", host) for w in words)
    return (*words, host)


def parse_hosts(spec: str, rsh: str = "ssh") -> tuple[Node, ...]:
    """horovodrun's ``-H/--hosts`` (``h1:8,h2:8``: host name or address, a colon, its slots) as :class:`Node` s
    reached through ``rsh`` (:func:`rsh_prefix`), first host first (the rendezvous runs there). Every host needs the
    same slots (the cost model's ranks per node). Raises ValueError (one line) for a malformed list: an empty entry,
    no or a non-positive slot count, a host twice, unequal slots."""
    entries = [e.strip() for e in spec.split(",")]
    nodes: list[Node] = []
    for e in entries:
        name, sep, slots = e.rpartition(":")
        if not e or not sep or not name or any(c.isspace() for c in name) or not slots.isdigit() or int(slots) < 1:
            raise ValueError(f"--hosts {spec!r}: each entry must be host:slots with slots >= 1 (h1:8,h2:8), "
                             f"got {e!r}")
        if any(n.name == name for n in nodes):
            raise ValueError(f"--hosts {spec!r}: host {name} given twice")
        nodes.append(Node(name, name, int(slots), rsh_prefix(rsh, name)))
    if len({n.slots for n in nodes}) > 1:
        raise ValueError(f"--hosts {spec!r}: every host needs the same slots (ranks per host)")
    return tuple(nodes)


def emulated_nodes(testbed, ranks_per_host: int) -> tuple[Node, ...]:
    """The hosts of an emulated cluster (:func:`autotuner.realrun.testbed.emulated_cluster`) as :class:`Node` s:
    each named by its address (``10.77.0.<i+1>``), reached by ``ip netns exec <netns> sh -c``, with
    ``--local-addr`` its address (every emulated host shares this machine's host name)."""
    return tuple(Node(h.address, h.address, ranks_per_host, ("ip", "netns", "exec", h.netns, "sh", "-c"), h.address)
                 for h in testbed.hosts)


def new_job_id() -> str:
    """A unique ``--rdzv-id``: ``autotuner-<pid>-<16 hex digits>``."""
    return f"autotuner-{os.getpid()}-{secrets.token_hex(8)}"


def remote_env(env: dict[str, str] | None, job_id: str | None = None) -> dict[str, str]:
    """The variables every host's torchrun is started with (written into its command line: a remote shell does not
    carry this process's environment): what the caller's ``env`` sets or changes against this process's
    environment, :data:`FORWARDED_PREFIXES` variables, ``PYTHONUNBUFFERED=1`` and ``OMP_NUM_THREADS`` (1 unless
    set), and :data:`JOB_VAR` = ``job_id``."""
    from ...realrun.launcher import JOB_TOKEN_VAR

    here = dict(os.environ)
    env = here if env is None else env
    out = {k: v for k, v in here.items() if k.startswith(FORWARDED_PREFIXES)}
    out.update({k: v for k, v in env.items() if here.get(k) != v})
    out.setdefault("PYTHONUNBUFFERED", env.get("PYTHONUNBUFFERED", "1"))
    out.setdefault("OMP_NUM_THREADS", env.get("OMP_NUM_THREADS", "1"))
    out.pop(JOB_TOKEN_VAR, None)
    if job_id:
        out[JOB_VAR] = job_id
    return out


def node_command(node: Node, nodes: tuple[Node, ...], module: str, args: list[str], *, job_id: str,
                 env: dict[str, str], cwd: str | None = None, endpoint_host: str | None = None) -> str:
    """The shell command line that runs ``node``'s torchrun of a job on ``nodes`` (:func:`torchrun_argv`; one
    node: standalone): ``cd <cwd> && exec env VAR=... <torchrun> ...``, every word quoted. ``env``: the variables
    (:func:`remote_env`); ``cwd``: default this process's; ``endpoint_host``: the rendezvous host (default the
    first node's address; ``$head`` in an sbatch script)."""
    endpoint = f"{endpoint_host or nodes[0].address}:{RDZV_PORT}"
    argv = torchrun_argv(module, args, node.slots, nnodes=len(nodes), endpoint=endpoint, local_addr=node.local_addr,
                         rdzv_id=job_id)
    words = ["env", *(f"{k}={v}" for k, v in sorted(env.items())), *argv]
    return f"cd {shlex.quote(cwd or os.getcwd())} && exec " + " ".join(shlex.quote(w) for w in words)


def node_argvs(module: str, args: list[str], nodes: tuple[Node, ...], *, job_id: str,
               env: dict[str, str] | None = None, cwd: str | None = None) -> list[list[str]]:
    """Each node's local argv (its remote shell, then :func:`node_command`): exactly what :func:`run_ddp` starts,
    first node first."""
    renv = remote_env(env, job_id)
    return [[*n.rsh, node_command(n, nodes, module, args, job_id=job_id, env=renv, cwd=cwd)] for n in nodes]


# Kills every process whose environment holds argv[1] (``AUTOTUNER_DDP_JOB=<id>``): SIGTERM, then SIGKILL to what
# is left after argv[2] seconds, then waits (at most 2 s) until they are gone. Run on each host through its remote
# shell (Linux /proc; stdlib only, -I -S).
_KILL = r"""
import os, signal, sys, time
mark, grace, me = os.fsencode(sys.argv[1]), float(sys.argv[2]), os.getpid()
def members():
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open("/proc/" + name + "/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X"):
                    continue
            with open("/proc/" + name + "/environ", "rb") as f:
                if mark in f.read().split(b"\0"):
                    found.append(int(name))
        except (OSError, IndexError):
            pass
    return found
def send(sig):
    pids = members()
    for pid in pids if sig else ():
        try:
            os.kill(pid, sig)
        except OSError:
            pass
    return bool(pids)
if send(signal.SIGTERM):
    deadline, killed = time.monotonic() + grace, False
    while send(0):
        if time.monotonic() > deadline:
            if killed:
                break
            send(signal.SIGKILL)
            deadline, killed = time.monotonic() + 2.0, True
        time.sleep(0.05)
"""


def kill_argv(node: Node, job_id: str, grace_s: float = KILL_GRACE_S) -> list[str]:
    """The argv that ends every process of job ``job_id`` on ``node`` through its remote shell (SIGTERM, SIGKILL
    after ``grace_s`` seconds), with this process's interpreter."""
    line = " ".join(shlex.quote(w) for w in (sys.executable, "-I", "-S", "-c", _KILL, f"{JOB_VAR}={job_id}",
                                                 f"{grace_s:g}"))
    return [*node.rsh, line]


def _kill_everywhere(nodes: tuple[Node, ...], job_id: str) -> None:
    """:func:`kill_argv` on every node at once; waits for them (at most the grace and 15 s more)."""
    from ...realrun.testbed import die_with_parent

    procs = []
    for n in nodes:
        try:
            procs.append(subprocess.Popen(kill_argv(n, job_id), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL, start_new_session=True,
                                          preexec_fn=die_with_parent()))
        except OSError:
            pass
    deadline = time.monotonic() + KILL_GRACE_S + 15
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class LaunchRefused(ValueError):
    """A job cannot start where it was asked to (:func:`check_hosts`): one line naming the host and the reason."""


#: prints "<visible CUDA devices> <NCCL available 0/1>" (torch.cuda.device_count(), torch.distributed.is_nccl_available())
_GPU_PROBE = ("import torch, torch.distributed as d; "
              "print(torch.cuda.device_count(), int(d.is_available() and d.is_nccl_available()))")


def _probe(argv: list[str], timeout_s: float) -> tuple[int | None, str]:
    """(exit status or None on a timeout, stdout + stderr's last line) of ``argv``, nothing left running."""
    from ...realrun.launcher import OwnedProcess

    try:
        with OwnedProcess(argv, grace_s=1.0, stdin=subprocess.DEVNULL) as job:
            try:
                rc = job.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                rc = None
            job.stop()
            out, err = job.output()
    except OSError as e:
        return 127, str(e)
    tail = (out.strip().splitlines() or err.strip().splitlines() or [""])[-1]
    return rc, tail.strip()


def check_hosts(nodes: tuple[Node, ...] | None, device: str = "cpu", local_ranks: int = 1) -> None:
    """Refuse a job that cannot start: a host whose remote shell cannot run ``true`` within
    :data:`REACH_TIMEOUT_S` s; with ``device`` "cuda", a host (``nodes``, else this host running ``local_ranks``
    ranks) whose torch has no NCCL (``torch.distributed.is_nccl_available()`` false) or fewer visible GPUs
    (``torch.cuda.device_count()``) than its ranks, asked with this process's interpreter through the host's remote
    shell. Raises :class:`LaunchRefused` (one line naming the host)."""
    import shlex as _shlex

    for n in nodes or ():
        rc, tail = _probe([*n.rsh, "true"], REACH_TIMEOUT_S)
        if rc != 0:
            why = f"no answer within {REACH_TIMEOUT_S:g} s" if rc is None else f"exit {rc}" + (f": {tail}" if tail else "")
            raise LaunchRefused(f"host {n.name} cannot be reached: `{_shlex.join([*n.rsh, 'true'])}` gave {why}")
    if device != "cuda":
        return
    line = " ".join(_shlex.quote(w) for w in (sys.executable, "-c", _GPU_PROBE))
    asks = [(f"host {n.name}", n.slots, [*n.rsh, line]) for n in nodes] if nodes else \
        [("this host", local_ranks, [sys.executable, "-c", _GPU_PROBE])]
    for name, ranks, argv in asks:
        rc, tail = _probe(argv, 60.0)
        try:
            gpus, nccl = (int(x) for x in tail.split())
        except ValueError:
            raise LaunchRefused(f"{name}: cannot ask its torch for GPUs and NCCL ({sys.executable}: "
                                f"{'no answer' if rc is None else tail or f'exit {rc}'})") from None
        if not nccl:
            raise LaunchRefused(f"{name}: its torch has no NCCL (torch.distributed.is_nccl_available() is "
                                "false): --device cuda needs a CUDA build of torch there")
        if ranks > gpus:
            raise LaunchRefused(f"{name}: {ranks} rank(s) asked, {gpus} GPU(s) visible "
                                "(torch.cuda.device_count()); one rank per GPU")


@dataclass(frozen=True)
class DdpJobResult:
    """What a DDP job left: ``stdout``/``stderr`` of every host's torchrun, first host first (rank 0's output is in
    it: c10d rendezvous places rank 0 on any host), every host's exit status (``returncodes``), ``wall_s``,
    ``timed_out``, and ``failed``: one line naming the host whose torchrun failed while the others ran (they were
    stopped after :data:`FAIL_GRACE_S` s), else empty."""

    stdout: str
    stderr: str
    returncodes: tuple[int | None, ...]
    wall_s: float
    timed_out: bool
    failed: str = ""


def run_ddp(module: str, args: list[str], *, ranks_per_host: int, testbed=None, nodes: tuple[Node, ...] | None = None,
            timeout_s: float = 900.0, env: dict[str, str] | None = None) -> DdpJobResult:
    """Run ``python -m module args`` (or the script ``module``, a ``.py`` path) under torchrun: on ``nodes``
    (:func:`parse_hosts`, one torchrun per node through its remote shell, :func:`node_argvs`), on each host of an
    emulated cluster ``testbed`` (the same path, :func:`emulated_nodes`, ``ranks_per_host`` each), or
    ``ranks_per_host`` ranks on this host (``testbed`` None or a plain
    :class:`~autotuner.realrun.testbed.Testbed`, whose prefix it runs under). Kills everything at ``timeout_s``, and
    the other hosts :data:`FAIL_GRACE_S` s after one host's torchrun failed. Raises FileNotFoundError when neither
    torchrun nor ``torch.distributed.run`` (or a host's remote shell) can start."""
    from ...realrun.launcher import OwnedProcess

    base = dict(os.environ if env is None else env)
    base.setdefault("PYTHONUNBUFFERED", "1")
    base.setdefault("OMP_NUM_THREADS", "1")
    if nodes is None and len(getattr(testbed, "hosts", ()) or ()) > 1:
        nodes = emulated_nodes(testbed, ranks_per_host)
        base["GLOO_SOCKET_IFNAME"] = "eth0"
    job_id = new_job_id() if nodes else ""
    if nodes:
        argvs = node_argvs(module, args, nodes, job_id=job_id, env=base)
        names = [n.name for n in nodes]
    else:
        prefix = list(getattr(testbed, "prefix", ()) or ())
        argvs = [[*prefix, *torchrun_argv(module, args, ranks_per_host)]]
        names = ["this host"]
    t0 = time.monotonic()
    jobs: list[OwnedProcess] = []
    timed_out, failed = False, ""
    try:
        for argv in argvs:  # a remote shell reads no terminal (ssh would forward the user's keys)
            jobs.append(OwnedProcess(argv, env=base, stdin=subprocess.DEVNULL if nodes else None))
        deadline = t0 + timeout_s
        first_fail: float | None = None
        while True:
            codes = [j.proc.poll() for j in jobs]
            if all(c is not None for c in codes):
                break
            now = time.monotonic()
            if first_fail is None:
                bad = next((i for i, c in enumerate(codes) if c not in (None, 0)), None)
                if bad is not None and len(jobs) > 1:
                    first_fail = now
                    failed = f"host {names[bad]} failed (torchrun exit {codes[bad]})"
            elif now - first_fail > FAIL_GRACE_S:
                failed += f"; the other host(s) stopped after {FAIL_GRACE_S:g} s"
                break
            if now > deadline:
                timed_out = True
                break
            time.sleep(0.05)
    finally:
        try:
            if nodes:
                _kill_everywhere(nodes, job_id)
        finally:
            for j in jobs:
                j.stop()
    outs = [j.output() for j in jobs]
    for j in jobs:
        j.__exit__(None, None, None)
    # every host's stdout: c10d rendezvous places rank 0 (which prints the result) on any host
    return DdpJobResult("\n".join(o[0] for o in outs), "\n".join(o[1] for o in outs),
                        tuple(j.proc.returncode for j in jobs), time.monotonic() - t0, timed_out, failed)
