"""Launch a DDP job with ``torchrun`` (torch 2.13's own launcher, ``torch/distributed/run.py``): on this host
(``--standalone``), or on an emulated cluster (:func:`autotuner.realrun.testbed.emulated_cluster`) as on a real one,
one ``torchrun`` per host in its network namespace, joined by c10d rendezvous at the first host
(``--rdzv-backend c10d --rdzv-endpoint 10.77.0.1:<port>``) and Gloo bound to the cluster's interface
(``GLOO_SOCKET_IFNAME``).

Every process is an :class:`autotuner.realrun.launcher.OwnedProcess`: nothing is left running when
:func:`run_ddp` returns or raises. A job's result is what rank 0 printed: a rank that aborts at exit after its
steps were measured (``terminate called without an active exception``, seen in 2 of 5 torchrun runs on a
2-core machine) gives a non-zero exit status but keeps the printed result: :class:`DdpJobResult` says both, and
the readers decide by the result line, never by the exit status alone.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

#: the c10d rendezvous port on the first emulated host
RDZV_PORT = 29531


def torchrun_path() -> str:
    """``torchrun`` beside this interpreter (the venv's), else on PATH, else ``python -m torch.distributed.run``."""
    here = Path(sys.executable).with_name("torchrun")
    if here.exists():
        return str(here)
    return shutil.which("torchrun") or ""


def torchrun_argv(module: str, args: list[str], nproc: int, *, nnodes: int = 1, node_rank: int = 0,
                  endpoint: str | None = None, local_addr: str | None = None) -> list[str]:
    """The ``torchrun`` command of ``python -m module args`` (or, ``module`` ending in ``.py``, of that script) on
    ``nproc`` ranks per node. One node: standalone rendezvous; several: c10d at ``endpoint`` (``host:port``), this
    node being ``node_rank``, reachable at ``local_addr`` (``--local-addr``: the address the other nodes reach its
    store and ranks at; without it torchrun uses the host name, which every emulated host shares). Raises
    ValueError for counts below 1 or several nodes without an endpoint."""
    if nproc < 1 or nnodes < 1 or not 0 <= node_rank < nnodes:
        raise ValueError(f"torchrun needs nproc >= 1 and 0 <= node_rank < nnodes, got {nproc}, {node_rank}, {nnodes}")
    run = torchrun_path()
    head = [run] if run else [sys.executable, "-m", "torch.distributed.run"]
    if nnodes == 1:
        rdzv = ["--standalone"]
    else:
        if not endpoint:
            raise ValueError("several nodes need a rendezvous endpoint")
        rdzv = ["--nnodes", str(nnodes), "--node-rank", str(node_rank), "--rdzv-backend", "c10d",
                "--rdzv-endpoint", endpoint, "--rdzv-id", "autotuner"]
        if local_addr:
            rdzv += ["--local-addr", local_addr]
    target = [module] if module.endswith(".py") else ["-m", module]
    return [*head, *rdzv, "--nproc-per-node", str(nproc), "--max-restarts", "0", *target, *args]


@dataclass(frozen=True)
class DdpJobResult:
    """What a DDP job left: ``stdout``/``stderr`` of every host's torchrun, first host first (rank 0's output is in
    it: c10d rendezvous places rank 0 on any host), every host's exit status (``returncodes``), ``wall_s``,
    ``timed_out``."""

    stdout: str
    stderr: str
    returncodes: tuple[int | None, ...]
    wall_s: float
    timed_out: bool


def run_ddp(module: str, args: list[str], *, ranks_per_host: int, testbed=None, timeout_s: float = 900.0,
            env: dict[str, str] | None = None) -> DdpJobResult:
    """Run ``python -m module args`` (or the script ``module``, a ``.py`` path) under torchrun: ``ranks_per_host`` ranks on this host (``testbed`` None or a
    plain :class:`~autotuner.realrun.testbed.Testbed`, whose prefix it runs under), or on each host of an emulated
    cluster. Kills everything at ``timeout_s``. Raises FileNotFoundError when neither torchrun nor
    ``torch.distributed.run`` can start."""
    import os

    from ...realrun.launcher import OwnedProcess

    base = dict(os.environ if env is None else env)
    base.setdefault("PYTHONUNBUFFERED", "1")
    base.setdefault("OMP_NUM_THREADS", "1")
    hosts = list(getattr(testbed, "hosts", ()) or ())
    if len(hosts) > 1:
        endpoint = f"{hosts[0].address}:{RDZV_PORT}"
        argvs = [["ip", "netns", "exec", h.netns,
                  *torchrun_argv(module, args, ranks_per_host, nnodes=len(hosts), node_rank=i, endpoint=endpoint,
                                 local_addr=h.address)]
                 for i, h in enumerate(hosts)]
        base["GLOO_SOCKET_IFNAME"] = "eth0"
    else:
        prefix = list(getattr(testbed, "prefix", ()) or ())
        argvs = [[*prefix, *torchrun_argv(module, args, ranks_per_host)]]
    t0 = time.monotonic()
    jobs: list[OwnedProcess] = []
    timed_out = False
    try:
        for argv in argvs:
            jobs.append(OwnedProcess(argv, env=base))
        deadline = t0 + timeout_s
        for j in jobs:
            try:
                j.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
                break
    finally:
        for j in jobs:
            j.stop()
    outs = [j.output() for j in jobs]
    for j in jobs:
        j.__exit__(None, None, None)
    # every host's stdout: c10d rendezvous ignores --node-rank, so rank 0 (which prints the result) may run on any
    return DdpJobResult("\n".join(o[0] for o in outs), "\n".join(o[1] for o in outs),
                        tuple(j.proc.returncode for j in jobs), time.monotonic() - t0, timed_out)
