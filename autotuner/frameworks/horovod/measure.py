"""``autotuner measure``: measure a cluster with Horovod's own allreduce, resumably.

The sweep workload (:mod:`autotuner.frameworks.horovod.sweepprobe`) runs under real ``horovodrun``, in the
emulated network of :mod:`autotuner.realrun.testbed` when a bandwidth is asked. Per tier
(:func:`tiers`) three jobs run (:data:`JOBS`): ``main``, with Horovod's defaults (response cache
on, 64 MiB fusion threshold), doing the allreduce, fusion and negotiation phases;
``fusion-off`` (fusion threshold 0) doing the unfused phase; ``cache-off``
(response cache capacity 0) doing the negotiation phase again. Each job records its timeline (``--timeline-mark-cycles``).

Files, under ``runs/<env>/``:

- ``env.toml`` (``format = "sweep"``), written once, atomically, when absent;
- ``sweep.jsonl``: one :class:`autotuner.schemas.SweepRecord` per measured item, appended as
  soon as the item finishes (one ``write`` + ``fsync`` per line,
  :class:`autotuner.frameworks.horovod.validation.TrialStore`), with the wall-time samples and their mean,
  median, interquartile range and count (ms) and the sweep's ``setup``;
- ``timelines/<tier>-<job>-<k>.json.gz``: each job's raw Horovod timeline, gzipped
  when the job ends (also when it is interrupted: the reader takes a cut timeline; one left
  by a SIGKILL is gzipped by the next run).

A re-run with the same setup measures only the items not yet recorded, so a killed sweep
resumes where it stopped. Another setup (ranks, hosts, bandwidth, repeats) in the same
environment is refused: one environment is one measured cluster.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ...errors import ValidationError
from .knobs import DEFAULTS_0_28, MIB
from .readers.sweep import (parse_burst_records, parse_cpu_records, parse_fp16_records, parse_fused_records,
                             parse_idle_records,
                             parse_step_records, parse_sweep_records,
                             parse_trickle_records)
from .sweepprobe import FUSION_SPLIT
from .validation import TrialStore

RECORDS = "sweep.jsonl"
#: the ``cpu`` phase's records (:mod:`autotuner.frameworks.horovod.cpuprobe`)
CPU_RECORDS = "cpu.jsonl"
#: interleaved rounds of the ``cpu`` phase (idle 1 ms, idle 100 ms, each stream)
CPU_REPEATS = 5
#: the cpu phase's stream timelines (apart from ``timelines/``: the sweep's fit pools those)
CPU_TIMELINES = "cpu-timelines"
#: the ``trickle`` phase's records and timelines (:mod:`autotuner.frameworks.horovod.trickleprobe`), rounds of it
TRICKLE_RECORDS, TRICKLE_TIMELINES, TRICKLE_REPEATS = "trickle.jsonl", "trickle-timelines", 2
_TRICKLE_LINE = re.compile(rb"AUTOTUNER_TRICKLE (\{.*\})")
#: the ``idle`` phase's records and timelines (:mod:`autotuner.frameworks.horovod.idleprobe`), jobs of it (each
#: job samples the host's idle regime once more: it changes between jobs)
IDLE_RECORDS, IDLE_TIMELINES, IDLE_REPEATS = "idle.jsonl", "idle-timelines", 3
_IDLE_LINE = re.compile(rb"AUTOTUNER_IDLE (\{.*\})")
#: the ``burst`` phase's records (:mod:`autotuner.frameworks.horovod.burstprobe`: small responses timed by the wall clock,
#: no timeline), jobs of it
BURST_RECORDS, BURST_REPEATS = "burst.jsonl", 3
#: the mid-size burst phase (the same probe, :func:`run_burst_phase`): responses of 256 KiB, 1 MiB, 2.25 MiB and
#: 4 MiB (bytes), 1 and 8 at once, no timeline; records and jobs of it. Read by the fit
#: (:func:`autotuner.frameworks.horovod.fit.phase_small.mid_response`: what the line above the tier's knee charges for a
#: queued response, against the wall clock; research/notes/accuracy.md, "Mid-size responses back to back")
MID_RECORDS, MID_REPEATS = "burst-mid.jsonl", 3
MID_SIZES, MID_COUNTS = (262144, 1048576, 2359296, 4194304), (1, 8)
_BURST_LINE = re.compile(rb"AUTOTUNER_BURST (\{.*\})")
#: the ``step`` phase's records (:mod:`autotuner.frameworks.horovod.stepprobe`: replay jobs of a synthetic layout,
#: no timeline) and its rounds (each: Horovod's defaults, fusion off, cache off)
STEP_RECORDS, STEP_REPEATS = "step.jsonl", 5
#: the line the replay prints its result on (:data:`autotuner.frameworks.horovod.replay.RESULT_TAG`)
_STEP_LINE = re.compile(rb"AUTOTUNER_RESULT (\{.*\})")
#: the ``fp16`` phase's records (:mod:`autotuner.frameworks.horovod.fp16probe`) and its jobs (each a full size sweep)
FP16_RECORDS, FP16_REPEATS = "fp16.jsonl", 3
_FP16_LINE = re.compile(rb"AUTOTUNER_FP16 (\{.*\})")
_CPU_LINE = re.compile(rb"AUTOTUNER_CPU (\{.*\})")
#: the ``fused`` phase (:func:`run_fused_phase`): its records, jobs and sizes (bytes): a fused response against a lone one
#: of the same bytes, no timeline. Read by the fit (:func:`autotuner.frameworks.horovod.fit.phase_fused.fused_copy`: the
#: fusion buffer's copies by the wall clock; research/notes/accuracy.md, "Fused responses without the timeline")
FUSED_RECORDS, FUSED_REPEATS, FUSED_SIZES = "fused.jsonl", 3, (4 * MIB, 16 * MIB, 32 * MIB)
_FUSED_LINE = re.compile(rb"AUTOTUNER_FUSED (\{.*\})")
#: the default message sizes: 1 KiB to 512 MiB, doubling (bytes)
DEFAULT_SIZES = tuple(1024 * 2**i for i in range(20))
#: fused responses measured by the fusion phase (bytes): 64 KiB to Horovod's default fusion threshold, 64 MiB
DEFAULT_FUSION_SIZES = tuple(65536 * 2**i for i in range(11))
#: tensors per batch in the negotiation phase
DEFAULT_TINY_COUNTS = (1, 4, 16, 64, 256)
#: tensor sizes of the unfused phase (bytes): 1 KiB to 4 MiB, 16 per batch
DEFAULT_UNFUSED_SIZES = tuple(1024 * 4**i for i in range(7))
UNFUSED_COUNT = 16
#: seconds per item after which the sweep stops sampling it (at least 2 timed samples): keeps the
#: default sweep under 3 minutes at 1 Gbit/s, where one 512 MiB allreduce takes ~9 s
BUDGET_S = 15.0
#: the jobs per tier and their knobs (None: Horovod's defaults)
JOBS = {"main": None, "fusion-off": replace(DEFAULTS_0_28, fusion_threshold_bytes=0),
        "cache-off": replace(DEFAULTS_0_28, cache_capacity=0)}
_LINE = re.compile(rb"AUTOTUNER_SWEEP (\{.*\})")


@dataclass(frozen=True)
class Tier:
    """One group of ranks to measure: ``name`` (``single``: every rank on one host; ``intra``:
    the ranks of one host; ``inter``: one rank per host), ``np`` ranks, horovodrun ``-H`` hosts."""

    name: str
    np: int
    hosts: str


def parse_hosts(hosts: str, np: int) -> list[tuple[str, int]]:
    """``-H`` value as (host, slots) pairs; empty means ``localhost:np``. Raises ValidationError
    for a malformed entry or fewer slots than ``np``."""
    if not hosts:
        return [("localhost", np)]
    out = []
    for part in hosts.split(","):
        name, _, slots = part.strip().partition(":")
        if not name or (slots and not slots.isdigit()) or (slots and int(slots) < 1):
            raise ValidationError(f"--hosts: {part!r}: expected host or host:slots (slots >= 1)")
        out.append((name, int(slots) if slots else 1))
    if len({h for h, _ in out}) != len(out):
        raise ValidationError(f"--hosts: {hosts!r}: a host is listed twice")
    if sum(s for _, s in out) < np:
        raise ValidationError(f"--hosts: {hosts!r}: {sum(s for _, s in out)} slot(s) for --np {np}")
    return out


def tiers(np: int, hosts: str) -> list[Tier]:
    """The jobs a sweep runs: one host → one tier of ``np`` ranks; several hosts → the
    intra-node tier (as many ranks as the first host's slots, all on it; skipped with one slot)
    and the inter-node tier (one rank per host). Raises ValidationError as :func:`parse_hosts`."""
    hs = parse_hosts(hosts, np)
    if len(hs) == 1:
        return [Tier("single", np, hosts or f"localhost:{np}")]
    out = []
    h0, s0 = hs[0]
    if s0 > 1:
        out.append(Tier("intra", s0, f"{h0}:{s0}"))
    out.append(Tier("inter", len(hs), ",".join(f"{h}:1" for h, _ in hs)))
    return out


def stats(times_ms: list[float]) -> dict[str, float]:
    """Mean, median, interquartile range (ms) and count of wall-time samples."""
    a = np.asarray(times_ms, float)
    q1, med, q3 = np.percentile(a, [25, 50, 75])
    return {"mean_ms": round(float(a.mean()), 4), "median_ms": round(float(med), 4),
            "iqr_ms": round(float(q3 - q1), 4), "n": int(a.size)}


def item_key(r: dict[str, Any]) -> tuple:
    return (r["tier"], r["job"], r["phase"], int(r["bytes"]), int(r["tensors"]))


@dataclass(frozen=True)
class SweepSetup:
    """What makes two sweeps the same measurement (the records carry it as ``setup``)."""

    np: int
    hosts: str
    bandwidth_gbit: float | None
    repeats: int
    warmup: int
    #: an emulated cluster (:func:`autotuner.realrun.testbed.emulated_cluster`): hosts, ranks per
    #: host, host-link HTB rate (Gbit/s; ``bandwidth_gbit`` then shapes each host's loopback)
    testbed_hosts: int | None = None
    ranks_per_host: int | None = None
    link_gbit: float | None = None
    #: the sweep workload's ``--wait`` (``spin``: Horovod's synchronize; ``sleep``: poll first)
    wait: str = "spin"
    #: where the sweep's tensors live (the workload's ``--device``): ``cpu``, or ``cuda`` (each rank's GPU, Horovod's
    #: NCCL collectives)
    device: str = "cpu"

    @property
    def topology(self) -> tuple[int, int] | None:
        return None if self.testbed_hosts is None else (self.testbed_hosts, self.ranks_per_host)

    def to_dict(self) -> dict[str, Any]:
        d = {"np": self.np, "hosts": self.hosts, "bandwidth_gbit": self.bandwidth_gbit,
             "repeats": self.repeats, "warmup": self.warmup}
        if self.testbed_hosts is not None:  # left out otherwise: sweeps recorded before stay comparable
            d.update(testbed_hosts=self.testbed_hosts, ranks_per_host=self.ranks_per_host, link_gbit=self.link_gbit)
        if self.wait != "spin":
            d["wait"] = self.wait
        if self.device != "cpu":  # left out on CPU ranks: sweeps recorded before stay comparable
            d["device"] = self.device
        return d


def parse_sizes(spec: str) -> tuple[int, ...]:
    """``LO:HI`` (doubling from LO up to HI) or a comma list; each a byte count with an optional
    binary unit ``K``, ``M``, ``G`` (KiB, MiB, GiB), e.g. ``1K:512M``. Sizes must be multiples
    of 4 bytes (float32 elements), from 4 bytes to 4 GiB. Raises ValidationError."""
    def one(t: str) -> int:
        m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(?:i?B)?\s*", t, re.IGNORECASE)
        if not m:
            raise ValidationError(f"--sizes: {t!r}: expected a byte count like 4096, 64K or 512M")
        v = int(m.group(1)) * {"": 1, "K": 1024, "M": MIB, "G": 1024 * MIB}[m.group(2).upper()]
        if not (4 <= v <= 4 * 1024 * MIB) or v % 4:
            raise ValidationError(f"--sizes: {t!r}: must be a multiple of 4 bytes from 4 B to 4 GiB")
        return v
    if ":" in spec:
        lo, _, hi = spec.partition(":")
        a, b = one(lo), one(hi)
        if a > b:
            raise ValidationError(f"--sizes: {spec!r}: LO is larger than HI")
        out = []
        while a <= b:
            out.append(a)
            a *= 2
        return tuple(out)
    vals = tuple(sorted({one(t) for t in spec.split(",")}))
    if not vals:
        raise ValidationError("--sizes: empty")
    return vals


def _fusion_bytes(s: int) -> int:
    """The fused response the sweep's fusion phase makes of ``s`` bytes (tensors of s/FUSION_SPLIT bytes)."""
    return max(s // FUSION_SPLIT, 8) * FUSION_SPLIT


def _expected(tier: Tier, job: str, sizes, fusion_sizes, tiny, unfused) -> list[tuple]:
    """Item keys (:func:`item_key`) one job measures, in its order."""
    if job == "main":
        return ([(tier.name, job, "allreduce", n, 1) for n in sizes]
                + [(tier.name, job, "fusion", _fusion_bytes(s), 2 * FUSION_SPLIT) for s in fusion_sizes]
                + [(tier.name, job, "negotiation", 4 * k, k) for k in tiny])
    if job == "fusion-off":
        return [(tier.name, job, "unfused", n, UNFUSED_COUNT) for n in unfused]
    return [(tier.name, job, "negotiation", 4 * k, k) for k in tiny]


def sweep_command(todo: list[tuple], repeats: int, warmup: int, wait: str = "spin",
                  device: str = "cpu") -> tuple[str, ...]:
    """The sweep workload's command line (:mod:`autotuner.frameworks.horovod.sweepprobe`) for the item keys ``todo``
    (the fusion phase is asked by its fused size, 8 tensors of size/8 bytes per dtype) on ``device``."""
    def j(phase: str, i: int = 3) -> str:
        return ",".join(str(int(k[i])) for k in todo if k[2] == phase)
    return (sys.executable, "-m", "autotuner.frameworks.horovod.sweepprobe", "--sizes", j("allreduce"),
            "--fusion-sizes", j("fusion"), "--unfused-sizes", j("unfused"),
            "--unfused-count", str(UNFUSED_COUNT), "--tiny-counts", j("negotiation", 4),
            "--repeats", str(repeats), "--warmup", str(warmup), "--budget-s", f"{BUDGET_S:g}") + (
            ("--wait", wait) if wait != "spin" else ()) + (("--device", device) if device != "cpu" else ())


def cores_per_host() -> int:
    """CPU cores this process may run on (``os.sched_getaffinity``; ``os.cpu_count`` where it is
    missing): the cores a host's ranks share, recorded in env.toml as ``cores_per_host``."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def host_cores(machine_cores: int, testbed_hosts: int | None) -> int:
    """The cores one host's ranks really have: all of ``machine_cores`` on a real host; on an emulated
    cluster of ``testbed_hosts`` network namespaces, which all run on this machine's cores, their
    share ``machine_cores // testbed_hosts`` (at least 1). 2 emulated hosts on 2 cores have 1 core
    each: counted as 2 each, the CPU terms of a CPU layout would be skipped there."""
    return max(1, machine_cores // max(1, testbed_hosts or 1))


def cpu_model() -> str:
    """This machine's CPU model (``/proc/cpuinfo``'s first ``model name``; ``platform.processor()`` elsewhere;
    "unknown CPU" when neither says)."""
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            if line.startswith("model name") and ":" in line:
                return line.split(":", 1)[1].strip() or "unknown CPU"
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine_stack(horovod_version: str) -> str:
    """env.toml's ``stack``: the machine ``measure`` ran on (host name, CPU model, the cores it may use) and the
    software its ranks ran (Horovod + Gloo, torch), e.g. ``"node1: AMD EPYC, 2 cores; Horovod 0.28.1 + Gloo; torch
    2.13.0"``. On an emulated cluster every rank ran on this machine. The fit borrows across envs of one stack what
    one env's phase cannot pin (:func:`autotuner.fit.collective.borrow_fp16_sum`)."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    try:
        torch = version("torch")
    except PackageNotFoundError:
        torch = "not installed"
    host = platform.node() or "unknown host"
    return f"{host}: {cpu_model()}, {cores_per_host()} cores; Horovod {horovod_version} + Gloo; torch {torch}"


def _gpu_here() -> str:
    """This machine's first GPU as torch names it (``torch.cuda.get_device_name(0)``), for a ``--device cuda``
    env's ``gpu``; "CUDA GPU (name unknown)" where torch cannot say."""
    try:
        import torch

        return torch.cuda.get_device_name(0)
    except Exception:  # noqa: BLE001 - no torch, no CUDA, no driver: the name is unknown, not an error
        return "CUDA GPU (name unknown)"


def env_toml(name: str, setup: SweepSetup, cluster: tuple[int, int], link_gbps: float, note: str,
             horovod_version: str) -> str:
    """The env.toml of a sweep environment (keys: :class:`autotuner.schemas.SweepEnv`)."""
    nodes, gpn = cluster
    machine = cores_per_host()
    cpu = setup.device == "cpu"
    if setup.testbed_hosts:
        cores_note = (f"# this machine gave the ranks {machine} cores (os.sched_getaffinity), shared by its "
                      f"{setup.testbed_hosts} emulated hosts: {machine} // {setup.testbed_hosts} each")
    else:
        cores_note = "# the CPU cores this machine gave the ranks (os.sched_getaffinity)"
    return "\n".join([
        f"# Measured by `autotuner measure --env {name}` with real Horovod {horovod_version} "
        f"({'Gloo' if cpu else 'NCCL, GPU tensors'}): an allreduce",
        "# sweep (autotuner.frameworks.horovod.sweepprobe) under horovodrun; raw timelines in timelines/, one record per item in",
        f"# {RECORDS}. Network: {note}.",
        f'name = "{name}"',
        f'source = "{RECORDS}"',
        'format = "sweep"',
        'gpu = "none (CPU ranks)"' if cpu else f"gpu = {json.dumps(_gpu_here())}",
        f"nodes = {nodes}",
        f"gpus_per_node = {gpn}",
        f"link_gbps = {link_gbps:g}",
        cores_note,
        f"cores_per_host = {host_cores(machine, setup.testbed_hosts)}",
        'backend = "gloo"' if cpu else 'backend = "nccl"',
        f'horovod_version = "{horovod_version}"',
        "# the machine and software the ranks ran on: envs of one stack measured in one sitting lend each other what",
        "# one env's phase cannot pin (the float16 sum)",
        f"stack = {json.dumps(machine_stack(horovod_version) + ('' if cpu else '; CUDA tensors, NCCL'))}",
        ""])


def _gzip_into(src: Path, dst_dir: Path, stem: str) -> Path:
    """Gzip ``src`` to ``dst_dir/<stem>-<k>.json.gz`` (first free k), then remove ``src``."""
    dst_dir.mkdir(parents=True, exist_ok=True)
    k = 0
    while (dst_dir / f"{stem}-{k}.json.gz").exists():
        k += 1
    dst = dst_dir / f"{stem}-{k}.json.gz"
    tmp = dst.with_suffix(".gz.tmp")
    with open(src, "rb") as f, gzip.open(tmp, "wb") as g:
        shutil.copyfileobj(f, g)
    tmp.replace(dst)
    src.unlink()
    return dst


def _busy() -> str | None:
    """A warning when other work loads this machine: the sweep's timings (and the fit) follow the
    CPU time Horovod's threads get. Measured here: under a 1-minute load average of 5-7 on 2 cores
    the default sweep took 153-181 s instead of 120 s and its fit predicted 4-6 % slower steps."""
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load > 0.5 * cores:
        return (f"warning: load average {load:.1f} on {cores} core(s): other work is running; the sweep "
                "measures the CPU time Horovod gets, so measure on a quiet machine (each record keeps load_avg_1m)")
    return None


def run_measure(env_dir: Path, setup: SweepSetup, *, sizes=DEFAULT_SIZES, fusion_sizes=DEFAULT_FUSION_SIZES,
                tiny_counts=DEFAULT_TINY_COUNTS, unfused_sizes=DEFAULT_UNFUSED_SIZES, timeout_s: float = 900.0,
                cpu_repeats: int = CPU_REPEATS, trickle_repeats: int = TRICKLE_REPEATS,
                idle_repeats: int = IDLE_REPEATS, fp16_repeats: int = FP16_REPEATS,
                burst_repeats: int = BURST_REPEATS, step_repeats: int = STEP_REPEATS,
                mid_repeats: int = MID_REPEATS, fused_repeats: int = FUSED_REPEATS,
                on_total: Callable[[int, int], None] | None = None,
                on_item: Callable[[dict[str, Any]], None] | None = None,
                on_event: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run (or resume) the sweep of ``setup`` into ``env_dir`` (see the module docstring).

    ``cpu_repeats``: rounds of the ``cpu`` phase (:func:`run_cpu_phase`, after the sweep's
    jobs; 0 skips it); ``trickle_repeats``: rounds of the ``trickle`` phase
    (:func:`run_trickle_phase`; 0 skips it); ``idle_repeats``: jobs of the ``idle`` phase
    (:func:`run_idle_phase`; 0 skips it); ``burst_repeats``: jobs of the ``burst`` phase (:func:`run_burst_phase`,
    no timeline; 0 skips it); ``mid_repeats``: jobs of the mid-size burst phase (:func:`run_burst_phase` with
    :data:`MID_SIZES` and :data:`MID_COUNTS`, records :data:`MID_RECORDS`, no timeline; 0 skips it);
    ``step_repeats``: rounds of the ``step`` phase (:func:`run_step_phase`, no
    timeline; 0 skips it); ``fused_repeats``: jobs of the ``fused`` phase (:func:`run_fused_phase`, no timeline; 0
    skips it); ``fp16_repeats``: jobs of the ``fp16`` phase (:func:`run_fp16_phase`,
    last; 0 skips it). ``on_total(done, total)`` is called once with the item counts,
    ``on_item(record)`` per item recorded, ``on_event(line)`` per job started or finished.
    Returns a JSON-ready summary.
    Raises ValidationError (horovodrun missing, another setup already recorded, a job that
    failed before measuring anything, hosts malformed).
    """
    from ...realrun.launcher import OwnedProcess, testbed_for
    from .launch import Job, horovodrun_path
    from ...realrun.testbed import measure_bandwidth_gbit

    say = on_event or (lambda s: None)
    if horovodrun_path() is None:
        raise ValidationError("horovodrun not found: install Horovod with scripts/install_horovod.sh")
    plan = tiers(setup.np, setup.hosts)
    store = TrialStore(env_dir / RECORDS, parse=parse_sweep_records)
    old = store.records()
    others = {json.dumps(r.get("setup"), sort_keys=True) for r in old} - {json.dumps(setup.to_dict(), sort_keys=True)}
    if others:
        raise ValidationError(f"{store.path}: holds a sweep with another setup ({sorted(others)[0]}); "
                              f"measure this one into another --env")
    done = {item_key(r) for r in old}
    jobs = [(t, j, _expected(t, j, sizes, fusion_sizes, tiny_counts, unfused_sizes)) for t in plan for j in JOBS]
    total = sum(len(k) for _, _, k in jobs)
    if on_total:
        on_total(sum(1 for _, _, ks in jobs for k in ks if k in done), total)
    scratch = env_dir / ".scratch"
    for left in sorted(scratch.glob("*.json")) if scratch.exists() else []:  # a SIGKILLed run's timeline
        _gzip_into(left, env_dir / "timelines", left.stem.rsplit("-", 1)[0])
    t0 = time.monotonic()
    new = 0
    busy = _busy()
    if busy:
        say(busy)
    with testbed_for(setup.topology, setup.bandwidth_gbit, setup.link_gbit) as (tb, net_note):
        say(net_note)
        link = (setup.bandwidth_gbit if tb.shaped else None) if not tb.hosts else setup.link_gbit
        if not (env_dir / "env.toml").exists():
            from importlib.metadata import PackageNotFoundError, version

            from ...writers.atomic import atomic_write_text
            try:
                hv = version("horovod")
            except PackageNotFoundError:
                hv = "0.28.1"
            if link is None:
                m = re.search(r"measured ([0-9.]+) Gbit/s", net_note)
                link = float(m.group(1)) if m else round(measure_bandwidth_gbit(tb), 2)
            hs = parse_hosts(setup.hosts, setup.np)
            nodes, gpn = (1, setup.np) if len(hs) == 1 else (len(hs), max(s for _, s in hs))
            atomic_write_text(env_dir / "env.toml", env_toml(env_dir.name, setup, (nodes, gpn), link,
                                                                net_note + ("" if setup.wait == "spin" else
                                                                            "; ranks wait by polling (--wait sleep)"),
                                                                hv))
        for tier, jname, keys in jobs:
            todo = [k for k in keys if k not in done]
            if not todo:
                continue
            cmd = sweep_command(todo, setup.repeats, setup.warmup, setup.wait, setup.device)
            scratch.mkdir(parents=True, exist_ok=True)
            stem = f"{tier.name}-{jname}"
            tl = scratch / f"{stem}-{time.time_ns()}.json"
            cfg = JOBS[jname]
            job = Job(np=tier.np, hosts=tier.hosts, command=cmd, timeline=tl, prefix=tb.prefix, config=cfg,
                      launcher=tb.launcher)
            say(f"{stem}: {len(todo)} item(s) on {tier.np} rank(s) ({tier.hosts})")
            got = 0
            try:
                with OwnedProcess(job.argv(), env=job.env()) as proc:
                    seen = 0
                    deadline = time.monotonic() + timeout_s
                    while True:
                        ended = proc.proc.poll() is not None
                        buf = proc.stdout_so_far()
                        lines = buf.split(b"\n")
                        complete = lines if ended else lines[:-1]
                        for line in complete[seen:]:
                            m = _LINE.search(line)
                            if not m:
                                continue
                            d = json.loads(m.group(1))
                            rec = {"phase": d["phase"], "tier": tier.name, "job": jname,
                                   "cache": cfg is None or cfg.cache_capacity > 0, "bytes": int(d["bytes"]),
                                   "tensors": int(d["tensors"]), "ranks": int(d["ranks"]), "times_ms": d["times_ms"],
                                   **stats(d["times_ms"]), "part": stem, "setup": setup.to_dict(),
                                   "testbed": net_note, **({"topology": {"hosts": setup.testbed_hosts,
                                                                         "ranks_per_host": setup.ranks_per_host}}
                                                           if setup.topology else {}),
                                   "load_avg_1m": round(os.getloadavg()[0], 2),
                                   "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
                            if item_key(rec) in done:
                                continue
                            store.append(rec)
                            done.add(item_key(rec))
                            got += 1
                            new += 1
                            if on_item:
                                on_item(rec)
                        seen = len(complete)
                        if ended:
                            break
                        if time.monotonic() > deadline:
                            raise ValidationError(f"{stem}: killed after the {timeout_s:.0f} s timeout "
                                                  f"({got} item(s) recorded; re-run to resume)")
                        time.sleep(0.05)
                    proc.stop()
                    out, err = proc.output()
                rc = proc.proc.returncode
            except FileNotFoundError as e:
                raise ValidationError(f"cannot start horovodrun ({e.strerror})") from None
            finally:
                if tl.exists() and tl.stat().st_size > 0:
                    _gzip_into(tl, env_dir / "timelines", stem)
            if rc != 0 and got < len(todo):
                raise ValidationError(f"{stem}: horovodrun exit {rc} after {got} of {len(todo)} item(s): "
                                      f"{_last_error(err + out)}")
            say(f"{stem}: done ({got} item(s))")
        if setup.device != "cpu":  # their probes time CPU tensors: nothing of a GPU rank's collectives
            cpu_repeats = trickle_repeats = idle_repeats = burst_repeats = mid_repeats = step_repeats = 0
            fp16_repeats = 0
            say(f"--device {setup.device}: the sweep and the fused phase only (the cpu, trickle, idle, burst, "
                "mid-size burst, step and fp16 phases time CPU tensors)")
        cpu = run_cpu_phase(env_dir, setup, plan[0], tb, cpu_repeats, timeout_s, say)
        # the fitted tier's ranks (the fit's "single" or "inter"): the responses a step's collectives are
        trickle = run_trickle_phase(env_dir, setup, plan[-1], tb, trickle_repeats, timeout_s, say)
        idle = run_idle_phase(env_dir, setup, plan[-1], tb, idle_repeats, timeout_s, say)
        burst = run_burst_phase(env_dir, setup, plan[-1], tb, burst_repeats, timeout_s, say)
        mid = run_burst_phase(env_dir, setup, plan[-1], tb, mid_repeats, timeout_s, say, sizes=MID_SIZES,
                              counts=MID_COUNTS, records=MID_RECORDS)
        step = run_step_phase(env_dir, setup, plan[-1], tb, step_repeats, timeout_s, say)
        fused = run_fused_phase(env_dir, setup, plan[-1], tb, fused_repeats, timeout_s, say)
        fp16 = run_fp16_phase(env_dir, setup, plan[-1], tb, fp16_repeats, timeout_s, say)
    shutil.rmtree(scratch, ignore_errors=True)
    recs = store.records()
    big = [r for r in recs if r["phase"] == "allreduce" and r["tier"] != "intra"]  # the cluster's link, not a host's lo
    top = max(big, key=lambda r: r["bytes"], default=None)
    return {"env": env_dir.name, "records": str(store.path), "items_total": total, "items_recorded": len(recs),
            "items_new": new, "wall_s": round(time.monotonic() - t0, 1), "network": net_note,
            "largest_allreduce": None if top is None else {
                "mib": top["bytes"] / MIB, "median_ms": top["median_ms"],
                "algbw_gbit_s": round(top["bytes"] * 8 / (top["median_ms"] * 1e-3) / 1e9, 3)},
            "timelines": sorted(str(p.relative_to(env_dir)) for p in (env_dir / "timelines").glob("*.json.gz")),
            "cpu": cpu, "trickle": trickle, "idle": idle, "burst": burst, "mid": mid, "step": step,
            "fused": fused, "fp16": fp16, "dropped": store.dropped}


@dataclass(frozen=True)
class ProbeJob:
    """One job of a probe phase (``cpu``, ``trickle``): ``key`` names it in the records (resume),
    ``fields`` go into its record, ``module`` (``python -m``) with ``args`` runs on every rank
    under ``cfg``; ``timeline``: record the job's timeline (kept gzipped); ``what``: progress text."""

    key: tuple
    fields: dict
    module: str
    args: tuple
    cfg: Any
    timeline: bool
    what: str


def _last_error(text: str) -> str:
    """What a failed horovodrun job says: a rank's last one-line refusal (``error: ...``, as the workloads print
    it; horovodrun prefixes it with the rank) where there is one, else the last line (at most 300 characters)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    said = [ln[ln.index("error: "):] for ln in lines if "error: " in ln]
    return (said or lines or ["no output"])[-1][-300:]


def _run_probe_jobs(env_dir: Path, setup: SweepSetup, tier: Tier, tb, timeout_s: float, say: Callable[[str], None],
                    *, phase: str, records: str, parse, timelines: str, line: re.Pattern, jobs: list[ProbeJob],
                    key_of: Callable[[dict], tuple]) -> dict[str, Any]:
    """Run the ``jobs`` not yet in ``env_dir/records`` (``key_of(record)`` against each job's key),
    in order, on ``tier``'s host; append one record per job (its ``line`` JSON, the job's fields,
    its kept timeline under ``timelines/``). Raises ValidationError for a job that failed or
    printed no result."""
    from .launch import Job, run_job

    store = TrialStore(env_dir / records, parse=parse)
    done = {key_of(r) for r in store.records()}
    new = 0
    for pj in jobs:
        if pj.key in done:
            continue
        tl = None
        if pj.timeline:
            (env_dir / ".scratch").mkdir(parents=True, exist_ok=True)
            tl = env_dir / ".scratch" / f"{phase}-{time.time_ns()}.json"
        job = Job(np=tier.np, hosts=tier.hosts, command=(sys.executable, "-m", pj.module, *pj.args), prefix=tb.prefix,
                  config=pj.cfg, launcher=tb.launcher, timeline=tl)
        say(f"{tier.name}-{phase}: {pj.what}")
        try:
            res = run_job(job, timeout_s)
        finally:
            stem = "-".join([tier.name, *(str(k) for k in pj.key[1:])])
            kept = (_gzip_into(tl, env_dir / timelines, stem)
                    if tl is not None and tl.exists() and tl.stat().st_size > 0 else None)
        m = line.search(res.stdout.encode())
        if res.returncode != 0 or not m:
            raise ValidationError(f"{tier.name}-{phase}: horovodrun exit {res.returncode}"
                                  f"{' (timed out)' if res.timed_out else ''}: {_last_error(res.stderr + res.stdout)}")
        store.append({"phase": phase, "tier": tier.name, **pj.fields, **json.loads(m.group(1)),
                      **({} if kept is None else {"timeline": str(kept.relative_to(env_dir))}),
                      "part": f"{tier.name}-{phase}", "setup": setup.to_dict(),
                      "load_avg_1m": round(os.getloadavg()[0], 2), "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
        new += 1
    return {"records": str(store.path), "jobs_new": new, "jobs_recorded": len(store.records())}


def run_cpu_phase(env_dir: Path, setup: SweepSetup, tier: Tier, tb, repeats: int, timeout_s: float,
                  say: Callable[[str], None]) -> dict[str, Any]:
    """The ``cpu`` phase (:mod:`autotuner.frameworks.horovod.cpuprobe`): ``repeats`` rounds of jobs on
    ``tier``'s host, interleaved: idle cycles of 1 ms, then of 100 ms
    (:data:`autotuner.frameworks.horovod.cpuprobe.CYCLES_MS`), then each stream of
    :data:`autotuner.frameworks.horovod.cpuprobe.STREAMS` at 1 ms with fusion off, beside compute and alone
    (its timeline kept in ``cpu-timelines/``); one :class:`autotuner.schemas.CpuProbeRecord`
    appended to ``cpu.jsonl`` per job (resumable: recorded (cycle, stream, repeat) jobs are not
    run again). ``tb``: the open testbed. Returns ``{"records": path, "jobs_new": n,
    "jobs_recorded": n}``. Raises ValidationError for a job that failed or printed no result."""
    from .cpuprobe import CYCLES_MS, STREAMS

    jobs = []
    for k in range(repeats):
        for c in CYCLES_MS:
            jobs.append(ProbeJob((tier.name, c, "idle", k), {"cycle_time_ms": c, "stream": "idle", "repeat": k},
                                 "autotuner.frameworks.horovod.cpuprobe", (), replace(DEFAULTS_0_28, cycle_time_ms=c), False,
                                 f"compute beside idle cycles of {c:g} ms (round {k + 1} of {repeats})"))
        for name, spec in STREAMS.items():  # fusion off: each tensor of a batch is a response of its own
            for alone in (False, True):
                stream = f"{name}-alone" if alone else name
                jobs.append(ProbeJob(
                    (tier.name, CYCLES_MS[0], stream, k), {"cycle_time_ms": CYCLES_MS[0], "stream": stream, "repeat": k},
                    "autotuner.frameworks.horovod.cpuprobe", ("--stream", ",".join(map(str, spec))) + (("--no-compute",) if alone else ()),
                    replace(DEFAULTS_0_28, cycle_time_ms=CYCLES_MS[0], fusion_threshold_bytes=0), True,
                    f"a stream of {name} allreduces {'alone' if alone else 'beside compute'} (round {k + 1} of {repeats})"))
    return _run_probe_jobs(env_dir, setup, tier, tb, timeout_s, say, phase="cpu", records=CPU_RECORDS,
                           parse=parse_cpu_records, timelines=CPU_TIMELINES, line=_CPU_LINE, jobs=jobs,
                           key_of=lambda r: (r["tier"], float(r["cycle_time_ms"]), r.get("stream", "idle"),
                                             int(r["repeat"])))


def run_trickle_phase(env_dir: Path, setup: SweepSetup, tier: Tier, tb, repeats: int, timeout_s: float,
                      say: Callable[[str], None]) -> dict[str, Any]:
    """The ``trickle`` phase (:mod:`autotuner.frameworks.horovod.trickleprobe`): ``repeats`` rounds of one job
    per cycle time of :data:`autotuner.frameworks.horovod.trickleprobe.CYCLES_MS`, fusion off, tensors
    enqueued 1.5 cycle times apart and then all at once; timelines kept in ``trickle-timelines/``,
    one :class:`autotuner.schemas.TrickleRecord` per job in ``trickle.jsonl`` (resumable). Returns
    and raises as :func:`run_cpu_phase`."""
    from .trickleprobe import CYCLES_MS

    jobs = [ProbeJob((tier.name, c, k), {"cycle_time_ms": c, "repeat": k}, "autotuner.frameworks.horovod.trickleprobe",
                     ("--gap-ms", f"{1.5 * c:g}"), replace(DEFAULTS_0_28, cycle_time_ms=c, fusion_threshold_bytes=0),
                     True, f"tensors one per cycle of {c:g} ms, then all at once (round {k + 1} of {repeats})")
            for k in range(repeats) for c in CYCLES_MS]
    return _run_probe_jobs(env_dir, setup, tier, tb, timeout_s, say, phase="trickle", records=TRICKLE_RECORDS,
                           parse=parse_trickle_records, timelines=TRICKLE_TIMELINES, line=_TRICKLE_LINE, jobs=jobs,
                           key_of=lambda r: (r["tier"], float(r["cycle_time_ms"]), int(r["repeat"])))


def run_idle_phase(env_dir: Path, setup: SweepSetup, tier: Tier, tb, repeats: int, timeout_s: float,
                   say: Callable[[str], None]) -> dict[str, Any]:
    """The ``idle`` phase (:mod:`autotuner.frameworks.horovod.idleprobe`): ``repeats`` jobs on ``tier``'s
    ranks, fusion off, 1 ms cycle, small tensors enqueued at once while the main threads sleep;
    timelines kept in ``idle-timelines/``, one :class:`autotuner.schemas.IdleRecord` per job in
    ``idle.jsonl`` (resumable). Returns and raises as :func:`run_cpu_phase`."""
    jobs = [ProbeJob((tier.name, k), {"repeat": k}, "autotuner.frameworks.horovod.idleprobe", (),
                     replace(DEFAULTS_0_28, fusion_threshold_bytes=0), True,
                     f"small responses while the ranks sleep (job {k + 1} of {repeats})")
            for k in range(repeats)]
    return _run_probe_jobs(env_dir, setup, tier, tb, timeout_s, say, phase="idle", records=IDLE_RECORDS,
                           parse=parse_idle_records, timelines=IDLE_TIMELINES, line=_IDLE_LINE, jobs=jobs,
                           key_of=lambda r: (r["tier"], int(r["repeat"])))


def run_burst_phase(env_dir: Path, setup: SweepSetup, tier: Tier, tb, repeats: int, timeout_s: float,
                    say: Callable[[str], None], *, sizes: tuple[int, ...] | None = None,
                    counts: tuple[int, ...] | None = None, timelines: tuple[bool, ...] = (False,),
                    records: str = BURST_RECORDS) -> dict[str, Any]:
    """The ``burst`` phase (:mod:`autotuner.frameworks.horovod.burstprobe`): ``repeats`` jobs on ``tier``'s ranks,
    fusion off, 1 ms cycle, no timeline: rounds of 1 and of 32 small tensors enqueued at once, waited for
    as the env's ranks wait (``setup.wait``), timed by the wall clock; one
    :class:`autotuner.schemas.BurstRecord` per job in ``burst.jsonl`` (resumable). ``sizes`` (bytes) and ``counts``:
    the probe's others (None: its own); ``timelines``: per round, one job per entry, with Horovod's timeline where
    True (kept gzipped in ``burst-timelines/``, or beside another ``records`` file as ``<its stem>-timelines/``; the
    record's ``timeline_recorded``); ``records``: the file under ``env_dir`` (an experiment's, e.g.
    :data:`MID_RECORDS`). Returns and raises as :func:`run_cpu_phase`."""
    args = ("--wait", setup.wait, *(("--sizes", ",".join(map(str, sizes))) if sizes else ()),
            *(("--counts", ",".join(map(str, counts))) if counts else ()))
    jobs = [ProbeJob((tier.name, k, tl), {"repeat": k, **({"timeline_recorded": tl} if len(timelines) > 1 else {})},
                     "autotuner.frameworks.horovod.burstprobe", args,
                     replace(DEFAULTS_0_28, fusion_threshold_bytes=0), tl,
                     f"{'mid-size ' if sizes == MID_SIZES else '' if sizes else 'small '}responses in bursts, {'with' if tl else 'no'} timeline "
                     f"(job {k + 1} of {repeats})")
            for k in range(repeats) for tl in timelines]
    kept = "burst-timelines" if records == BURST_RECORDS else records.removesuffix(".jsonl") + "-timelines"
    return _run_probe_jobs(env_dir, setup, tier, tb, timeout_s, say, phase="burst", records=records,
                           parse=parse_burst_records, timelines=kept, line=_BURST_LINE, jobs=jobs,
                           key_of=lambda r: (r["tier"], int(r["repeat"]), bool(r.get("timeline_recorded", False))))


def run_step_phase(env_dir: Path, setup: SweepSetup, tier: Tier, tb, repeats: int, timeout_s: float,
                   say: Callable[[str], None]) -> dict[str, Any]:
    """The ``step`` phase (:mod:`autotuner.frameworks.horovod.stepprobe`): ``repeats`` rounds on ``tier``'s ranks, each
    round one replay job (:mod:`autotuner.frameworks.horovod.replay`) of the phase's synthetic layout per job of
    :data:`autotuner.frameworks.horovod.stepprobe.JOBS` (Horovod's defaults, fusion off, cache off) at
    ``COMPUTE_MS``, then defaults and fusion off at ``LONG_COMPUTE_MS`` (100 and 300 ms), waiting as the
    env's ranks wait (``setup.wait``), no timeline; one :class:`autotuner.schemas.StepRecord` per job in
    ``step.jsonl`` (resumable). Returns and raises as :func:`run_cpu_phase`."""
    from ...writers.atomic import atomic_write_text
    from .stepprobe import COMPUTE_MS, JOBS, LAYOUT, LAYOUT_NAME, LONG_COMPUTE_MS, LONG_JOBS, STEPS, WARMUP

    path = env_dir / ".scratch" / "step-probe-layout.json"  # the replay reads the layout from a file
    if repeats > 0:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(LAYOUT))
    runs = [(COMPUTE_MS, name) for name in JOBS] + [(LONG_COMPUTE_MS, name) for name in LONG_JOBS]
    jobs = [ProbeJob((tier.name, name, k, c), {"repeat": k, "job": name, "layout": LAYOUT_NAME,
                                               "config": JOBS[name].to_dict()},
                     "autotuner.frameworks.horovod.replay",
                     ("--model", str(path.resolve()), "--compute-ms", f"{c:g}", "--steps", str(STEPS),
                      "--warmup", str(WARMUP), "--wait", setup.wait), JOBS[name], False,
                     f"a replay step of many small gradients, {name}, {c:g} ms of compute, no timeline "
                     f"(round {k + 1} of {repeats})")
            for k in range(repeats) for c, name in runs]
    return _run_probe_jobs(env_dir, setup, tier, tb, timeout_s, say, phase="step", records=STEP_RECORDS,
                           parse=parse_step_records, timelines="step-timelines", line=_STEP_LINE, jobs=jobs,
                           key_of=lambda r: (r["tier"], r["job"], int(r["repeat"]), float(r["compute_ms"])))


def run_fused_phase(env_dir: Path, setup: SweepSetup, tier: Tier, tb, repeats: int, timeout_s: float,
                    say: Callable[[str], None], *, sizes: tuple[int, ...] = FUSED_SIZES,
                    records: str = FUSED_RECORDS) -> dict[str, Any]:
    """The ``fused`` phase (:mod:`autotuner.frameworks.horovod.sweepprobe` ``--one-line``): ``repeats`` jobs on
    ``tier``'s ranks at Horovod's defaults, no timeline, waited for as the env's ranks wait (``setup.wait``); each
    times, per size of :data:`FUSED_SIZES`, one tensor of S bytes allreduced alone and 8 float32 + 8 float64 tensors of
    S/8 bytes enqueued together (two fused responses of S back to back: Horovod fuses one dtype at a time); one
    :class:`autotuner.schemas.FusedRecord` per job in ``fused.jsonl`` (resumable). The sweep's timelines time the
    fusion buffer's copies with the timeline's writer on the same cores; this times what a fused response costs
    over a lone one by the wall clock. ``sizes`` (bytes, each a multiple of 64) and ``records`` (the file under
    ``env_dir``): an experiment's others (``research/scripts/fused_large.py``). Returns and raises as :func:`run_cpu_phase`."""
    arg = ",".join(map(str, sizes))
    jobs = [ProbeJob((tier.name, k), {"repeat": k}, "autotuner.frameworks.horovod.sweepprobe",
                     ("--sizes", arg, "--fusion-sizes", arg, "--repeats", "5", "--warmup", "1", "--wait",
                      setup.wait, "--one-line", *(("--device", setup.device) if setup.device != "cpu" else ())),
                     DEFAULTS_0_28, False,
                     f"fused responses against lone ones, no timeline (job {k + 1} of {repeats})")
            for k in range(repeats)]
    return _run_probe_jobs(env_dir, setup, tier, tb, timeout_s, say, phase="fused", records=records,
                           parse=parse_fused_records, timelines="fused-timelines", line=_FUSED_LINE, jobs=jobs,
                           key_of=lambda r: (r["tier"], int(r["repeat"])))


def run_fp16_phase(env_dir: Path, setup: SweepSetup, tier: Tier, tb, repeats: int, timeout_s: float,
                   say: Callable[[str], None]) -> dict[str, Any]:
    """The ``fp16`` phase (:mod:`autotuner.frameworks.horovod.fp16probe`): ``repeats`` jobs on ``tier``'s ranks, each
    timing float32 and float16 allreduces of the same bytes and the two casts; one
    :class:`autotuner.schemas.Fp16Record` per job in ``fp16.jsonl`` (resumable), no timeline (its writer would
    be in the times). Returns and raises as :func:`run_cpu_phase`."""
    jobs = [ProbeJob((tier.name, k), {"repeat": k}, "autotuner.frameworks.horovod.fp16probe", ("--wait", setup.wait),
                     DEFAULTS_0_28, False,
                     f"float16 against float32 allreduces, and the casts (job {k + 1} of {repeats})")
            for k in range(repeats)]
    return _run_probe_jobs(env_dir, setup, tier, tb, timeout_s, say, phase="fp16", records=FP16_RECORDS,
                           parse=parse_fp16_records, timelines="fp16-timelines", line=_FP16_LINE, jobs=jobs,
                           key_of=lambda r: (r["tier"], int(r["repeat"])))
