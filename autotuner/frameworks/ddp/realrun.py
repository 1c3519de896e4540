"""DDP's real runs: ``measure`` (the DDP sweep, :mod:`.sweepprobe`) and ``validate`` (real DDP replays of bucket
settings, :mod:`.replay`), both under torchrun (:mod:`.launch`) on this host, a shaped loopback or an emulated
cluster (:func:`autotuner.realrun.launcher.testbed_for`). Records are appended one line at a time and fsynced; a
killed run resumes where it stopped (the sweep by job, a validation by setting and repeat).

Records: ``<runs>/<env>/ddp-sweep.jsonl`` (one per sweep job: the probe's output, ``setup``, ``testbed``, the exit
statuses) and ``<runs>/<env>/ddp-validation/<name>.jsonl`` (one per trial: ``label``, ``repeat``, ``ddp`` (the
knobs), ``status``, ``measured_step_time_ms`` (median of the measured steps), ``step_times_ms``, ``first_step_ms``,
``buckets`` (DDP's own rebuilt bucket sizes), ``gradients``, the replay's ``minor_faults_per_step``,
``malloc_env``, ``stages`` and ``stage_overrun_ms`` where it reports them, ``exit``, ``setup``, ``testbed``, ``wall_s``).
A trial's result is rank 0's result line: a rank aborting at teardown after it (2 of 5 runs on a 2-core machine) leaves a
non-zero exit status in ``exit`` and the trial ``ok``; no result line is a failed trial, with the last stderr.
"""
from __future__ import annotations

import json
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ...errors import ValidationError
from .knobs import DdpConfig

#: the sweep's sizes: 4 KiB .. 128 MiB, doubling (DDP's buckets: 1 MiB first, 25 MiB default, up to hundreds)
SWEEP_SIZES = tuple(1 << k for k in range(12, 28))
#: the bucket settings a validation replays by default (at least 10): DDP's default, single caps from 1 to
#: 200 MiB, 25 MiB set explicitly (its first bucket 25 MiB, not 1: the first-bucket effect), a per-bucket list,
#: the gradient view, the fp16 hook
#: the burst phase's file and default job count (:mod:`.burstprobe`)
BURST_RECORDS, BURST_JOBS = "ddp-burst.jsonl", 3
#: the first-touch phase's file and default job count (:mod:`.firsttouchprobe`)
FIRST_TOUCH_RECORDS, FIRST_TOUCH_JOBS = "ddp-first-touch.jsonl", 1
#: the cpu phase's file and default job count (:mod:`.cpuprobe`)
CPU_RECORDS, CPU_JOBS = "ddp-cpu.jsonl", 1
#: the host phase's file and default job count (:mod:`.hostprobe`)
HOST_RECORDS, HOST_JOBS = "ddp-host.jsonl", 1
#: the label of a validation's trial of the replay without DDP (``ddp`` None in its record): the compute as it ran
NO_DDP_LABEL = "no DDP (compute)"
DEFAULT_SETTINGS = (DdpConfig(), DdpConfig(bucket_cap_mb=1), DdpConfig(bucket_cap_mb=4), DdpConfig(bucket_cap_mb=10),
                    DdpConfig(bucket_cap_mb=25), DdpConfig(bucket_cap_mb=50), DdpConfig(bucket_cap_mb=100),
                    DdpConfig(bucket_cap_mb=200), DdpConfig(bucket_cap_mb_list=(1, 4, 25)),
                    DdpConfig(gradient_as_bucket_view=True), DdpConfig(comm_hook="fp16_compress"))


def _shape(setup: dict) -> str:
    if setup.get("hosts"):
        return f"hosts {setup['hosts']}" + (f" ({setup['device']})" if setup.get("device") else "")
    if setup.get("testbed_hosts"):
        return f"{setup['testbed_hosts']} emulated hosts x {setup.get('ranks_per_host')} at {setup.get('link_gbit')} Gbit/s"
    bw = setup.get("bandwidth_gbit")
    return f"{setup.get('np')} ranks on this host" + (f" at {bw} Gbit/s" if bw else "")


def append_record(path: Path, rec: dict) -> None:
    """Append one JSON line to ``path`` and fsync it (nothing measured is lost on a kill)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps(rec, separators=(",", ":")) + "\n")
        f.flush()
        os.fsync(f.fileno())


@dataclass(frozen=True)
class Launch:
    """Where a real run's torchrun jobs start beside the emulated testbed's options: ``hosts`` (horovodrun's
    ``-H``, ``h1:8,h2:8``: one torchrun per host through the remote shell ``rsh``,
    :func:`autotuner.frameworks.ddp.launch.parse_hosts`; empty: this host or the emulated testbed) and ``device``
    ("cpu": Gloo on CPU tensors; "cuda": NCCL on one GPU per rank, ``--device cuda`` to every rank-side module)."""

    hosts: str = ""
    rsh: str = "ssh"
    device: str = "cpu"

    def nodes(self):
        """The hosts as :class:`~autotuner.frameworks.ddp.launch.Node` s, or None without ``hosts``. Raises
        ValidationError (one line) for a malformed ``hosts``/``rsh`` or an unknown device."""
        from .launch import parse_hosts

        if self.device not in ("cpu", "cuda"):
            raise ValidationError(f"--device must be cpu or cuda, got {self.device!r}")
        if not self.hosts:
            return None
        try:
            return parse_hosts(self.hosts, self.rsh)
        except ValueError as e:
            raise ValidationError(str(e)) from None

    @property
    def device_args(self) -> list[str]:
        """What every rank-side module is given for the device: ``--device cuda`` with CUDA, else nothing."""
        return ["--device", "cuda"] if self.device == "cuda" else []


def _setup(np_: int, bandwidth_gbit, testbed_hosts, ranks_per_host, link_gbit, launch: Launch | None = None) -> dict:
    topo = bool(testbed_hosts)
    s = {"np": testbed_hosts * ranks_per_host if topo else np_, "bandwidth_gbit": bandwidth_gbit,
         "testbed_hosts": testbed_hosts or None, "ranks_per_host": ranks_per_host if topo else None,
         "link_gbit": link_gbit, "launcher": "torchrun", "backend": "gloo"}
    nodes = launch.nodes() if launch else None
    if nodes:  # a real cluster: its hosts and shape
        s.update(np=len(nodes) * nodes[0].slots, ranks_per_host=nodes[0].slots, hosts=launch.hosts, nodes=len(nodes))
    if launch and launch.device == "cuda":
        s.update(backend="nccl", device="cuda")
    return s


#: the setup keys a resumed or added phase must share with the env's first record
SAME_SETUP = ("np", "bandwidth_gbit", "testbed_hosts", "ranks_per_host", "link_gbit", "hosts", "device")


@contextmanager
def where_to_run(topo, bandwidth_gbit, link_gbit, launch: Launch | None, local_ranks: int):
    """Yield ``(testbed or None, nodes or None, note)``: the hosts of ``launch`` (checked first:
    :func:`autotuner.frameworks.ddp.launch.check_hosts`), else the testbed of
    :func:`autotuner.realrun.launcher.testbed_for` (its emulated hosts checked alike). Raises ValidationError (one
    line) for a host that cannot be reached or cannot run ``launch.device``'s ranks, or a testbed that cannot be
    built."""
    from ...realrun.launcher import testbed_for
    from .launch import LaunchRefused, check_hosts, emulated_nodes

    launch = launch or Launch()
    nodes = launch.nodes()
    if nodes:
        try:
            check_hosts(nodes, launch.device)
        except LaunchRefused as e:
            raise ValidationError(str(e)) from None
        yield None, nodes, (f"{len(nodes)} host(s) x {nodes[0].slots} rank(s) ({launch.hosts}) through "
                            f"{launch.rsh}, {launch.device}")
        return
    with testbed_for(topo, bandwidth_gbit, link_gbit) as (tb, note):
        try:
            check_hosts(emulated_nodes(tb, local_ranks) if len(tb.hosts) > 1 else None, launch.device, local_ranks)
        except LaunchRefused as e:
            raise ValidationError(str(e)) from None
        yield tb, None, note


def _result(stdout: str, tag: str) -> dict | None:
    line = next((x for x in stdout.splitlines() if f"{tag} " in x), None)
    return json.loads(line.split(f"{tag} ", 1)[1]) if line else None


def replay_args(model: str, compute_ms: float, steps: int, warmup: int, cfg: DdpConfig) -> list[str]:
    """The DDP replay's arguments (:mod:`.replay`) for one setting."""
    a = ["--model", model, "--compute-ms", f"{compute_ms:g}", "--steps", str(steps), "--warmup", str(warmup)]
    if cfg.bucket_cap_mb_list is not None:
        a += ["--bucket-cap-mb-list", ",".join(f"{c:g}" for c in cfg.bucket_cap_mb_list)]
    elif cfg.bucket_cap_mb is not None:
        a += ["--bucket-cap-mb", f"{cfg.bucket_cap_mb:g}"]
    if cfg.gradient_as_bucket_view:
        a += ["--gradient-as-bucket-view"]
    if cfg.static_graph:
        a += ["--static-graph"]
    if cfg.comm_hook != "allreduce":
        a += ["--comm-hook", cfg.comm_hook]
    return a


def measure_ddp(env_dir: Path, *, np_: int = 2, bandwidth_gbit: float | None = None, testbed_hosts: int = 0,
                ranks_per_host: int = 1, link_gbit: float | None = None, jobs: int = 3, repeats: int = 7,
                burst_jobs: int = BURST_JOBS, first_touch_jobs: int = FIRST_TOUCH_JOBS, cpu_jobs: int = CPU_JOBS,
                host_jobs: int = HOST_JOBS, timeout_s: float = 600.0, say: Callable[[str], None] = print, launch: Launch | None = None,
                print_launch: str | None = None, from_output: Path | None = None) -> Path | str:
    """The DDP sweep of an environment: ``jobs`` sweep jobs (:mod:`.sweepprobe`, :data:`SWEEP_SIZES`, ``repeats``
    timed allreduces per size after 2 warm-ups) appended to ``env_dir/ddp-sweep.jsonl``, then ``burst_jobs`` jobs
    of the burst phase (:mod:`.burstprobe`: allreduces back to back against lone ones) appended to
    ``env_dir/ddp-burst.jsonl`` (0 skips it), then ``first_touch_jobs`` jobs of the first-touch phase
    (:mod:`.firsttouchprobe`: fresh gradients held to the step's end against dropped after their copy, every rank of a
    host at once) appended to ``env_dir/ddp-first-touch.jsonl`` (0 skips it), then ``cpu_jobs`` jobs of the cpu phase
    (:mod:`.cpuprobe`: compute beside a stream of allreduces and alone, every rank at once) appended to
    ``env_dir/ddp-cpu.jsonl`` (0 skips it), then ``host_jobs`` jobs of the host phase (:mod:`.hostprobe`: what DDP's
    Reducer adds per gradient and per bucket, every rank at once, each over its own one-rank group) appended to
    ``env_dir/ddp-host.jsonl`` (0 skips it), each resuming after the jobs already there. Returns the sweep's file.
    ``launch``: real hosts and the device (:class:`Launch`); with ``device`` "cuda" every probe gets ``--device
    cuda`` and the first-touch and cpu phases (what CPU ranks' page faults and compute cost) are skipped, saying so.
    ``print_launch`` ("commands" or "sbatch"): run nothing, return the launch (:func:`launch_text`) of every job.
    ``from_output``: run nothing, append the results in that file (a batch job's output, ``print_launch`` "sbatch")
    instead (:func:`import_output`). Raises ValidationError (one line) when a job gives no result (naming a host that
    failed), a host cannot be reached or run the device's ranks, or the testbed cannot be built."""
    from .launch import run_ddp
    from .records import read_jsonl

    launch = launch or Launch()
    cuda = launch.device == "cuda"
    out = env_dir / "ddp-sweep.jsonl"
    burst = env_dir / BURST_RECORDS
    done = read_jsonl(out) if out.exists() else []
    have = len(done)
    have_b = len(read_jsonl(burst)) if burst.exists() else 0
    touch = env_dir / FIRST_TOUCH_RECORDS
    have_f = len(read_jsonl(touch)) if touch.exists() else 0
    cpu = env_dir / CPU_RECORDS
    have_c = len(read_jsonl(cpu)) if cpu.exists() else 0
    host = env_dir / HOST_RECORDS
    have_h = len(read_jsonl(host)) if host.exists() else 0
    if cuda:  # phases of CPU ranks only
        first_touch_jobs = cpu_jobs = 0
    if (have >= jobs and have_b >= burst_jobs and have_f >= first_touch_jobs and have_c >= cpu_jobs
            and have_h >= host_jobs and not print_launch and from_output is None):
        say(f"{out}: {have} sweep job(s) already there; {have_b} burst job(s); {have_f} first-touch job(s); "
            f"{have_c} cpu job(s); {have_h} host job(s)")
        return out
    topo = (testbed_hosts, ranks_per_host) if testbed_hosts else None
    setup = _setup(np_, bandwidth_gbit, testbed_hosts, ranks_per_host, link_gbit, launch)
    if have and not print_launch:  # the env's own setup: a resumed or added phase runs where the sweep ran
        first = done[0].get("setup") or {}
        if {k: first.get(k) for k in SAME_SETUP} != {k: setup.get(k) for k in SAME_SETUP}:
            raise ValidationError(f"{out} was measured with {_shape(first)}; this run asks for {_shape(setup)}: "
                                  "give the env's own shape and link, or a new --env")
    sweep_args = ["--sizes", ",".join(map(str, SWEEP_SIZES)), "--repeats", str(repeats), "--warmup", "2"]
    nproc = ranks_per_host if topo else np_
    if from_output is not None:
        return import_output(env_dir, Path(from_output), setup, say)
    if print_launch:
        phases = [(f"autotuner.frameworks.ddp.{m}", a + launch.device_args, f"the {w} phase, {n} round(s)", n, {})
                  for m, a, w, n in (("sweepprobe", sweep_args, "sweep", jobs), ("burstprobe", [], "burst", burst_jobs),
                                     ("firsttouchprobe", [], "first-touch", first_touch_jobs),
                                     ("cpuprobe", ["--hosts", str(testbed_hosts or 1)], "cpu", cpu_jobs),
                                     ("hostprobe", [], "host", host_jobs)) if n]
        return launch_text(print_launch, phases, launch, nproc, topo, bandwidth_gbit, link_gbit,
                           f"ddp measure --env {env_dir.name}", env_dir)
    with where_to_run(topo, bandwidth_gbit, link_gbit, launch, nproc) as (tb, nodes, note):
        say(note)
        if cuda:
            say("--device cuda: the first-touch and cpu phases are skipped (they measure CPU ranks' page faults and "
                "compute)")
        for module, args, tag, path, start, n, what in (
                ("sweepprobe", sweep_args, "AUTOTUNER_DDP_SWEEP", out, have, jobs, "sweep"),
                ("burstprobe", [], "AUTOTUNER_DDP_BURST", burst, have_b, burst_jobs, "burst"),
                ("firsttouchprobe", [], "AUTOTUNER_DDP_FIRST_TOUCH", touch, have_f, first_touch_jobs, "first-touch"),
                ("cpuprobe", ["--hosts", str(testbed_hosts or 1)], "AUTOTUNER_DDP_CPU", cpu, have_c, cpu_jobs, "cpu"),
                ("hostprobe", [], "AUTOTUNER_DDP_HOST", host, have_h, host_jobs, "host")):
            for k in range(start, n):
                r = run_ddp(f"autotuner.frameworks.ddp.{module}", args + launch.device_args, ranks_per_host=nproc,
                            testbed=tb, nodes=nodes, timeout_s=timeout_s)
                rec = _result(r.stdout, tag)
                if rec is None:
                    if r.failed:
                        raise ValidationError(f"DDP {what} job {k + 1}: {r.failed}")
                    last = (r.stderr.strip().splitlines() or ["(no output)"])[-1][:200]
                    raise ValidationError(f"DDP {what} job {k + 1} gave no result (exit {list(r.returncodes)}): {last}")
                append_record(path, {"phase": f"ddp-{what}", "repeat": k, **rec, "setup": setup, "testbed": note,
                                     "exit": list(r.returncodes), "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
                say(f"DDP {what} job {k + 1} of {n}: done")
    return out


#: each measure phase's result tag (rank 0's stdout) and records file
PHASE_TAGS = {"sweep": ("AUTOTUNER_DDP_SWEEP", "ddp-sweep.jsonl"), "burst": ("AUTOTUNER_DDP_BURST", BURST_RECORDS),
              "first-touch": ("AUTOTUNER_DDP_FIRST_TOUCH", FIRST_TOUCH_RECORDS),
              "cpu": ("AUTOTUNER_DDP_CPU", CPU_RECORDS), "host": ("AUTOTUNER_DDP_HOST", HOST_RECORDS)}


def import_output(env_dir: Path, output: Path, setup: dict, say: Callable[[str], None] = print) -> Path:
    """Append the measure results in ``output`` (the output of jobs launched elsewhere, e.g. the batch script of
    :func:`launch_text`: each result is rank 0's line ``AUTOTUNER_DDP_<PHASE> {json}``) to ``env_dir``'s phase files
    as :func:`measure_ddp` writes them, in order, each after the rounds already there; ``setup`` as the launch that
    ran them. Each record names its source (``imported_from``: file name and line), and a line imported before is
    skipped. ``finished_at`` is the file's modification time. Returns the sweep's file. Raises ValidationError (one
    line) for an unreadable file, a damaged result line, or no result in it."""
    from .records import read_jsonl

    try:
        lines = output.read_text(errors="replace").splitlines()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(output.stat().st_mtime))
    except OSError as e:
        raise ValidationError(f"cannot read {output}: {e.strerror or e}") from None
    new = 0
    for what, (tag, fname) in PHASE_TAGS.items():
        path = env_dir / fname
        old = read_jsonl(path) if path.exists() else []
        seen = {r.get("imported_from") for r in old}
        k = len(old)
        for i, line in enumerate(lines, 1):
            if f"{tag} " not in line:
                continue
            src = f"{output.name}:{i}"
            if src in seen:
                continue
            try:
                rec = json.loads(line.split(f"{tag} ", 1)[1])
                if not isinstance(rec, dict):
                    raise ValueError("not an object")
            except ValueError as e:
                raise ValidationError(f"{output}:{i}: a damaged {tag} line ({e})") from None
            append_record(path, {"phase": f"ddp-{what}", "repeat": k, **rec, "setup": setup,
                                 "testbed": f"jobs launched elsewhere, their output {output.name}", "exit": [],
                                 "finished_at": stamp, "imported_from": src})
            k += 1
            new += 1
            say(f"DDP {what} round {k}: imported from {src}")
    if not new and not any(f"{t} " in x for t, _ in PHASE_TAGS.values() for x in lines):
        raise ValidationError(f"{output}: no DDP measure result in it (AUTOTUNER_DDP_<PHASE> lines)")
    return env_dir / "ddp-sweep.jsonl"


#: ``--print-launch``'s kinds: each host's command lines, or a SLURM batch script
LAUNCH_KINDS = ("commands", "sbatch")
#: the rsh that runs a command on one node of a SLURM allocation (in the printed batch scripts' comments)
SRUN_RSH = "srun --nodes=1 --ntasks=1 --overlap -w {host} bash -c"


def launch_text(kind: str, jobs, launch: Launch, nproc: int, topo, bandwidth_gbit, link_gbit, title: str,
                env_dir: Path) -> str:
    """What ``--print-launch`` prints, running nothing. ``jobs``: ``(module or script, args, what, rounds, env)``
    (``env``: the variables the job adds). ``kind`` "commands": each job's per-host command lines, exactly what
    :func:`autotuner.frameworks.ddp.launch.run_ddp` starts (one per host, all at once; a fresh ``--rdzv-id`` each
    run); "sbatch": a SLURM batch script (``#SBATCH --nodes``, ``--ntasks-per-node=1``, ``--gpus-per-node`` with
    CUDA; ``srun torchrun ... --rdzv-endpoint $head:<port>``, the head the allocation's first node, ``scontrol show
    hostnames $SLURM_JOB_NODELIST | head -n1``, as torch/distributed/run.py's docstring prescribes for several
    nodes), for clusters where the tool cannot reach the hosts itself. Raises ValidationError (one line) for an
    emulated or shaped testbed (its namespaces exist only while it runs) or an unknown ``kind``."""
    import shlex
    import sys

    from .launch import RDZV_PORT, new_job_id, node_argvs, remote_env, torchrun_argv

    if kind not in LAUNCH_KINDS:
        raise ValidationError(f"--print-launch must be one of {', '.join(LAUNCH_KINDS)}, got {kind!r}")
    if topo or bandwidth_gbit is not None or link_gbit is not None:
        raise ValidationError("--print-launch shows a launch on real hosts (--hosts) or this host: an emulated or "
                              "shaped testbed (--testbed-hosts, --link-gbit, --loopback-gbit) exists only while it runs")
    nodes = launch.nodes()
    n_nodes, slots = (len(nodes), nodes[0].slots) if nodes else (1, nproc)
    cwd = os.getcwd()
    if kind == "commands":
        lines = [f"# autotuner {title}: {n_nodes} host(s) x {slots} rank(s), {launch.device}"
                 + (f"; every host through `{launch.rsh}`, in {cwd} with {shlex.quote(sys.executable)}'s torchrun"
                    if nodes else " on this host")]
        for target, args, what, rounds, env in jobs:
            lines.append(f"# {what}: each round runs "
                         + ("these lines at once (one torchrun per host)" if nodes else "this line"))
            if nodes:
                lines += [shlex.join(a) for a in node_argvs(target, args, nodes, job_id=new_job_id(),
                                                             env={**os.environ, **env})]
            else:
                lines.append(shlex.join(["env", *(f"{k}={v}" for k, v in sorted(remote_env({**os.environ, **env})
                                                                              .items())),
                                         *torchrun_argv(target, args, nproc)]))
        return "\n".join(lines) + "\n"
    name = env_dir.name
    head = f"#!/bin/bash\n# autotuner {title} as a SLURM batch job: one torchrun per node (srun, one task per node), " \
        f"c10d rendezvous on the allocation's first node,\n# as torch/distributed/run.py's docstring prescribes " \
        "(\"Multi-node multi-worker\"). Submit it from any folder: sbatch <this file>.\n"
    if title.startswith("ddp measure"):
        head += (f"# Records: each job's result is one line of rank 0's stdout (AUTOTUNER_DDP_<PHASE> {{...}}), which "
                 f"lands in the job's output file\n# ({cwd}/autotuner-{name}-<job id>.out, written on the node "
                 f"that runs this script, the allocation's first). Bring it back\n# and append its records to "
                 f"runs/{name}/ with the same command and --from-output:\n#   autotuner {title} "
                 + (f"--hosts {launch.hosts} " if nodes else f"--np {nproc} ")
                 + (f"--device {launch.device} " if launch.device != "cpu" else "")
                 + f"--from-output autotuner-{name}-<job id>.out\n")
    else:
        head += ("# Each trial's step times are lines of rank 0's stdout in the job's output file "
                 f"({cwd}/autotuner-{name}-<job id>.out);\n# autotuner reads back a measure's output only. To "
                 "record and compare the trials, run the command itself inside\n# an allocation (salloc or a "
                 "batch script), one torchrun per node through srun as its remote shell:\n"
                 f"#   autotuner {title} --hosts <node1>:{slots},<node2>:{slots},... --rsh {shlex.quote(SRUN_RSH)}\n"
                 "# Its records are written where it runs (the allocation's first node), in runs/ of its folder.\n")
    head += (f"#SBATCH --job-name=autotuner-{name}\n#SBATCH --nodes={n_nodes}\n#SBATCH --ntasks-per-node=1\n"
             + (f"#SBATCH --gpus-per-node={slots}\n" if launch.device == "cuda" else "")
             + f"#SBATCH --output={cwd}/autotuner-{name}-%j.out\n")
    body = ['head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)', f"cd {shlex.quote(cwd)}"]
    base = remote_env(dict(os.environ))
    body += [f"export {k}={shlex.quote(v)}" for k, v in sorted(base.items())]
    k = 0
    for target, args, what, rounds, env in jobs:
        body.append(f"# {what}")
        extra = {a: b for a, b in remote_env({**os.environ, **env}).items() if base.get(a) != b}
        for r in range(rounds):
            k += 1
            argv = torchrun_argv(target, args, slots, nnodes=n_nodes, endpoint="HEAD", rdzv_id="RDZV")
            words = [shlex.quote(w) for w in argv]
            words = [f'"$head:{RDZV_PORT}"' if w == "HEAD" else f'"autotuner-$SLURM_JOB_ID-{k}"' if w == "RDZV"
                     else w for w in words]
            envs = ["env", *(shlex.quote(f"{a}={b}") for a, b in sorted(extra.items()))] if extra else []
            body.append(f"srun --nodes={n_nodes} --ntasks-per-node=1 " + " ".join(envs + words))
    return head + "\n".join(body) + "\n"


def knob_env(cfg: DdpConfig, steps: int, warmup: int) -> dict[str, str]:
    """The environment a user's script reads a trial's setting from (``examples/train_ddp.py``):
    ``AUTOTUNER_DDP_BUCKET_CAP_MB`` or ``..._BUCKET_CAP_MB_LIST`` (MiB), ``..._GRADIENT_AS_BUCKET_VIEW`` (0/1),
    ``..._COMM_HOOK``, and the step counts (``AUTOTUNER_STEPS``, ``AUTOTUNER_WARMUP``)."""
    e = {"AUTOTUNER_STEPS": str(steps), "AUTOTUNER_WARMUP": str(warmup),
         "AUTOTUNER_DDP_GRADIENT_AS_BUCKET_VIEW": "1" if cfg.gradient_as_bucket_view else "0",
         "AUTOTUNER_DDP_COMM_HOOK": cfg.comm_hook}
    if cfg.bucket_cap_mb_list is not None:
        e["AUTOTUNER_DDP_BUCKET_CAP_MB_LIST"] = ",".join(f"{c:g}" for c in cfg.bucket_cap_mb_list)
    elif cfg.bucket_cap_mb is not None:
        e["AUTOTUNER_DDP_BUCKET_CAP_MB"] = f"{cfg.bucket_cap_mb:g}"
    return e


def script_of(command: list[str]) -> tuple[str, list[str]]:
    """(script path, its arguments) of a user's ``python script.py args`` (torchrun runs the script itself).
    Raises ValidationError (one line) for a command that is not a Python script."""
    import sys

    rest = list(command)
    while rest and (Path(rest[0]).name.startswith("python") or rest[0] == sys.executable):
        rest = rest[1:]
    if not rest or not rest[0].endswith(".py"):
        raise ValidationError(f"the command must be `python your_script.py [args]` (torchrun runs the script), got "
                              f"{' '.join(command)!r}")
    if not Path(rest[0]).is_file():
        raise ValidationError(f"no script {rest[0]}")
    return str(Path(rest[0]).resolve()), rest[1:]


def trial_job(cfg: DdpConfig, model: str, compute_ms: float, steps: int, warmup: int,
              script: tuple[str, list[str]] | None = None, device_args: list[str] | None = None):
    """A trial's torchrun job: (module or script, its arguments, the variables it adds to the environment).
    ``cfg`` None: the replay without DDP (``--no-ddp``; the replay workload only)."""
    if script is None:
        return ("autotuner.frameworks.ddp.replay", replay_args(model, compute_ms, steps, warmup, cfg or DdpConfig())
                + (["--no-ddp"] if cfg is None else []) + list(device_args or []), {})
    return script[0], list(script[1]), knob_env(cfg, steps, warmup)


def run_trial(cfg: DdpConfig, model: str, compute_ms: float, steps: int, warmup: int, ranks: int, tb,
              timeout_s: float, script: tuple[str, list[str]] | None = None, *, nodes=None,
              device_args: list[str] | None = None):
    """One real DDP trial of ``cfg`` under torchrun on ``ranks`` ranks per host of testbed ``tb`` (or on the real
    hosts ``nodes``): the replay workload of layout ``model`` (given ``device_args``, ``--device cuda``), or the
    user's ``script`` (path, arguments; it reads :func:`knob_env`). Returns
    (result or None when no step time came back, the :class:`~.launch.DdpJobResult`); the result has the replay's
    keys (``median_step_time_ms``, ``step_times_ms``, ``first_step_ms``, ``buckets``, ``gradients``)."""
    import statistics

    from ...errors import ReplayOutputError
    from ...readers.replay_output import parse_output
    from .launch import run_ddp

    target, args, env = trial_job(cfg, model, compute_ms, steps, warmup, script, device_args)
    if script is None:
        r = run_ddp(target, args, ranks_per_host=ranks, testbed=tb, nodes=nodes, timeout_s=timeout_s)
        return _result(r.stdout, "AUTOTUNER_RESULT"), r
    r = run_ddp(target, args, ranks_per_host=ranks, testbed=tb, nodes=nodes, timeout_s=timeout_s,
                env={**os.environ, **env})
    try:
        times = list(parse_output(r.stdout).step_times_ms)
    except ReplayOutputError:
        times = []
    res = None if not times else {"median_step_time_ms": round(statistics.median(times), 3), "step_times_ms": times,
                                  "first_step_ms": None, "buckets": None, "gradients": "the script's own"}
    return res, r


def trial_fields(cfg: DdpConfig, res: dict | None, r, setup: dict, note: str) -> dict:
    """The record fields every DDP trial carries (module docstring), from :func:`run_trial`'s answer."""
    return {"ddp": None if cfg is None else cfg.to_dict(), "status": "ok" if res else ("timeout" if r.timed_out else "failed"),
            "measured_step_time_ms": res["median_step_time_ms"] if res else None,
            "step_times_ms": res["step_times_ms"] if res else [],
            "first_step_ms": res["first_step_ms"] if res else None,
            "buckets": res["buckets"] if res else None, "gradients": res["gradients"] if res else None,
            **{k: res[k] for k in ("minor_faults_per_step", "malloc_env", "stages", "stage_overrun_ms") if res and k in res},
            "exit": list(r.returncodes), "error": "" if res else (getattr(r, "failed", "") or r.stderr[-300:]),
            "setup": setup, "testbed": note,
            "wall_s": round(r.wall_s, 2), "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def validate_ddp(env_dir: Path, model: str, settings, *, name: str | None = None, compute_ms: float = 100.0,
                 steps: int = 5, warmup: int = 3, repeats: int = 3, np_: int = 2, bandwidth_gbit: float | None = None,
                 testbed_hosts: int = 0, ranks_per_host: int = 1, link_gbit: float | None = None,
                 command: list[str] | None = None, timeout_s: float = 600.0,
                 say: Callable[[str], None] = print, launch: Launch | None = None,
                 print_launch: str | None = None, compute_trial: bool = True) -> Path | str:
    """Real DDP runs for each of ``settings`` (:class:`DdpConfig`), ``repeats`` rounds, interleaved (round r runs
    every setting once), appended to ``env_dir/ddp-validation/<name>.jsonl`` (``name`` default: the layout's name),
    resuming after the (setting, repeat) pairs already there: the replay workload of layout ``model``, or the user's
    ``command`` (``python script.py args``: it reads the setting from :func:`knob_env`'s variables and prints
    ``AUTOTUNER_STEP_TIME_MS`` lines). With ``compute_trial`` (the replay workload only) each round first runs the
    replay without DDP (label :data:`NO_DDP_LABEL`, ``ddp`` None): the compute as it ran, autograd's own work
    included, which :func:`~.records.rows` predicts every setting from. Returns the file. ``launch``: real hosts and the device as
    :func:`measure_ddp`; ``print_launch``: run nothing, return each setting's launch (:func:`launch_text`). Raises
    ValidationError (one line) when the testbed cannot be built, a host cannot be reached or run the device's
    ranks, or the command is not a script; a trial whose host failed is recorded as failed, naming the host."""
    from ...readers.layouts import load_layout
    from .records import read_jsonl

    layout_name = load_layout(model).name
    out = env_dir / "ddp-validation" / f"{name or layout_name}.jsonl"
    recorded = model
    if model.endswith(".json") and Path(model).is_file() and not print_launch:  # records keep their layout beside them
        from ...writers.atomic import atomic_write_text

        copy = out.with_suffix(".layout.json")
        if not copy.exists():
            atomic_write_text(copy, Path(model).read_text())
        recorded = str(copy.relative_to(env_dir))
    done = {(r.get("label"), r.get("repeat")) for r in (read_jsonl(out) if out.exists() else [])}
    topo = (testbed_hosts, ranks_per_host) if testbed_hosts else None
    script = script_of(command) if command else None
    launch = launch or Launch()
    setup = {**_setup(np_, bandwidth_gbit, testbed_hosts, ranks_per_host, link_gbit, launch), "model": recorded,
             "compute_ms": compute_ms, "steps": steps, "warmup": warmup, "command": list(command or [])}
    ranks = ranks_per_host if topo else np_
    if print_launch:
        jobs = [(*trial_job(cfg, model, compute_ms, steps, warmup, script, launch.device_args)[:2],
                 f"{cfg.label()}, {repeats} round(s)", repeats,
                 trial_job(cfg, model, compute_ms, steps, warmup, script)[2]) for cfg in settings]
        return launch_text(print_launch, jobs, launch, ranks, topo, bandwidth_gbit, link_gbit,
                           f"ddp validate --env {env_dir.name} --model {model}", env_dir)
    with where_to_run(topo, bandwidth_gbit, link_gbit, launch, ranks) as (tb, nodes, note):
        say(note)
        for rep in range(repeats):
            for cfg in ([None] if compute_trial and script is None else []) + list(settings):
                label = NO_DDP_LABEL if cfg is None else cfg.label()
                if (label, rep) in done:
                    continue
                res, r = run_trial(cfg, model, compute_ms, steps, warmup, ranks, tb, timeout_s, script, nodes=nodes,
                                   device_args=launch.device_args)
                rec = {"trial": f"{label}/r{rep}", "label": label, "repeat": rep,
                       **trial_fields(cfg, res, r, setup, note)}
                append_record(out, rec)
                say(f"{layout_name} {label} r{rep}: {rec['status']}" + (f" ({r.failed})" if r.failed and not res else "")
                    + (f", {rec['measured_step_time_ms']:.1f} ms/step" if res else "")
                    + (f" (first {rec['first_step_ms']:.1f})" if res and rec["first_step_ms"] else ""))
    return out
