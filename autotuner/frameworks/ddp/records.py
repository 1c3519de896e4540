"""Reading a DDP environment's records (``research/scripts/ddp_env.py``): its sweep and its replays, and predicting each
replay with the Reducer simulator from the env's own sweep (held out: no fit reads a replay).

``runs/<env>/ddp-burst.jsonl``: one record per burst-phase job (:mod:`autotuner.frameworks.ddp.burstprobe`).
``runs/<env>/ddp-sweep.jsonl``: one record per sweep job (:mod:`autotuner.frameworks.ddp.sweepprobe`'s output plus
``setup``). ``runs/<env>/ddp-validation/<model>.jsonl``: one record per trial (``label``, ``repeat``, ``ddp``: the
knobs, ``status``, ``measured_step_time_ms``: the median of its measured steps, ``first_step_ms``, ``buckets``:
DDP's rebuilt bucket sizes from its logging data, ``setup``: model, compute_ms, np, shape).
"""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, replace
from pathlib import Path

from ...errors import RunsError
from ...model.costmodel import Cluster
from ...model.workload import Workload
from .knobs import DdpConfig


def env_cost(folder: Path):
    """(cost model, fit info, sweep records) of the DDP env in ``folder``: its ``ddp-sweep.jsonl`` and, where
    measured, its ``ddp-burst.jsonl``, checked by their schemas and fitted
    (:func:`autotuner.frameworks.ddp.fit.cost_model_from_sweep`); the info's ``first_touch`` is its
    ``ddp-first-touch.jsonl`` summed up (:func:`autotuner.frameworks.ddp.fit.first_touch`; None where not measured);
    its ``ddp-cpu.jsonl`` gives the model's ``collective_cpu`` and the info's ``cpu``
    (:func:`autotuner.frameworks.ddp.fit.cpu_share`); its ``ddp-host.jsonl`` the info's ``host`` (the host phase's
    fit, :func:`autotuner.frameworks.ddp.fit.host_cost`, at the env's copy rate) and ``host_cost`` (its
    :class:`~.hostcost.ReducerHostCost`); both None where the phase never ran. Raises RunsError (one line) for a
    missing, empty or damaged file, FitError for records that give no line."""
    from .schemas import DdpBurstRecord, DdpCpuRecord, DdpFirstTouchRecord, DdpHostRecord, DdpSweepRecord
    from .fit import cost_model_from_sweep, first_touch, host_cost, host_cost_term

    sweep = read_jsonl(folder / "ddp-sweep.jsonl", DdpSweepRecord)
    if not sweep:
        raise RunsError(f"{folder / 'ddp-sweep.jsonl'} holds no sweep job")
    burst_path = folder / "ddp-burst.jsonl"
    burst = read_jsonl(burst_path, DdpBurstRecord) if burst_path.exists() else []
    touch_path = folder / "ddp-first-touch.jsonl"
    touch = read_jsonl(touch_path, DdpFirstTouchRecord) if touch_path.exists() else []
    cpu_path = folder / "ddp-cpu.jsonl"
    cpu = read_jsonl(cpu_path, DdpCpuRecord) if cpu_path.exists() else []
    if int(sweep[0]["ranks"]) < 2:
        raise RunsError(f"{folder.name} was measured on one rank (no wire to fit): its host phase serves the model "
                        f"file of the same name (autotuner env new {folder.name} ..., or an nccl-tests fit)")
    setup = sweep[0]["setup"]
    link = setup.get("link_gbit") or setup.get("bandwidth_gbit") or 10.0
    cost, info = cost_model_from_sweep(sweep, link_gbps=float(link), cluster=env_cluster(setup), burst=burst, cpu=cpu)
    info["first_touch"] = first_touch(touch)
    host_path = folder / "ddp-host.jsonl"
    host = read_jsonl(host_path, DdpHostRecord) if host_path.exists() else []
    info["host"] = host_cost(host, cost.memcpy_Bps) if host else None
    info["host_cost"] = host_cost_term(info["host"])
    return cost, info, sweep


def read_jsonl(path: Path, schema=None) -> list[dict]:
    """The JSON lines of ``path``, each checked as ``schema`` when given (a pydantic model of
    :mod:`autotuner.schemas.ddp`; the dict is returned as read). Raises RunsError (one line) for an unreadable
    file, a line that is not a JSON object, or one ``schema`` rejects."""
    try:
        text = path.read_text()
    except OSError as e:
        raise RunsError(f"cannot read {path}: {e.strerror or e}") from None
    out = []
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except json.JSONDecodeError as e:
            raise RunsError(f"{path}:{no}: not JSON ({e.msg})") from None
        if not isinstance(d, dict):
            raise RunsError(f"{path}:{no}: not a JSON object")
        if schema is not None:
            from ...schemas import check

            check(schema, d, f"{path}:{no}", RunsError)
        out.append(d)
    return out


def env_cluster(setup: dict) -> Cluster:
    """The (nodes, ranks per node) a record's setup ran on: emulated hosts, real ones (``--hosts``), or this host."""
    if setup.get("testbed_hosts"):
        return Cluster(int(setup["testbed_hosts"]), int(setup["ranks_per_host"]))
    if setup.get("nodes"):
        return Cluster(int(setup["nodes"]), int(setup["ranks_per_host"]))
    return Cluster(1, int(setup["np"]))


def cpu_phase_cores(env_dir: Path) -> int | None:
    """The cores one host's ranks share, as the env's cpu phase recorded them (``ddp-cpu.jsonl``'s first job), or
    None where the phase never ran (or its file is unreadable: :func:`env_cost` reports that)."""
    try:
        line = next((ln for ln in (env_dir / "ddp-cpu.jsonl").read_text().splitlines() if ln.strip()), "")
        return int(json.loads(line)["cores_per_host"]) if line else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def fills_cores(layout, ranks_per_host: int, cores: int | None) -> bool:
    """Whether a layout profiled on the CPU (``device`` "cpu...": ``autotuner profile --device cpu``) runs with at
    least as many ranks per host as the host's ``cores``: its compute then fills them, and every collective in flight
    takes CPU from it (``Workload.cpu_bound``). False for a layout with no device (written from published shapes)
    or no core count."""
    dev = getattr(layout, "device", None)
    return bool(dev) and str(dev).lower().startswith("cpu") and bool(cores) and ranks_per_host >= int(cores)


def replay_workload(setup: dict) -> Workload:
    """The DDP replay's emulated compute (:mod:`autotuner.frameworks.ddp.replay`): forward 1/3 and backward 2/3 of
    ``compute_ms``, no update."""
    c = float(setup["compute_ms"]) / 1e3
    return Workload(forward_s=c / 3, backward_s=2 * c / 3)


@dataclass(frozen=True)
class DdpRow:
    """One bucket setting of one validation file: measured (median over its trials' medians, and their range, ms),
    predicted step and first step (ms), DDP's rebuilt bucket sizes and the simulator's (bytes), the command (a
    user's script; () for the replay workload)."""

    env: str
    model: str
    label: str
    trials: int
    measured_ms: float
    low_ms: float
    high_ms: float
    predicted_ms: float
    first_measured_ms: float
    first_predicted_ms: float
    buckets: tuple[int, ...] | None
    predicted_buckets: tuple[int, ...]
    #: the user's command the trials ran (``ddp validate -- python script.py``), () for the replay workload
    command: tuple[str, ...] = ()
    #: the emulated compute per step the trials ran (ms; the replay workload's ``--compute-ms``)
    compute_ms: float = float("nan")
    #: the record file's name without ``.jsonl`` (``ddp validate --name``; default the layout's name): two files of
    #: one layout (e.g. a longer replay) are two sets of rows
    source: str = ""
    #: the replay's emulated backward: "duration" or "deadline" stages (:mod:`.replay`; records without the field
    #: ran deadlines), "" for a user's script
    stages: str = ""
    #: the median over trials of how long the replay's stages ran past their compute share (ms per step: writing the
    #: gradients took longer than the compute asked for); nan where not recorded
    overrun_ms: float = float("nan")
    #: the compute the prediction took (ms per step): the median step of the file's trials of the replay without DDP
    #: (``ddp validate``'s compute trials) where it has them, else ``compute_ms``
    predicted_compute_ms: float = float("nan")

    @property
    def error_pct(self) -> float:
        return (self.predicted_ms - self.measured_ms) / self.measured_ms * 100


def rows(env_dir: Path, cost, model_file_cluster: Cluster | None = None, files: list[Path] | None = None,
         host=None) -> list[DdpRow]:
    """Every bucket setting replayed under ``env_dir/ddp-validation/`` (or in ``files``), predicted from ``cost``
    (the env's :class:`~autotuner.model.costmodel.CostModel` fitted from its sweep alone) and ``host`` (the
    Reducer's host work, :class:`~.hostcost.ReducerHostCost`; None: not charged). A file's trials of the replay
    without DDP (``ddp`` None: ``ddp validate``'s compute trials) are no setting: the median of their steps is the
    compute every setting of the file is predicted from (forward 1/3, backward 2/3, as :func:`replay_workload`);
    a file without them is predicted from its ``compute_ms``."""
    from ...readers.layouts import load_recorded_layout
    from .reducer import simulate_ddp_step

    from ...errors import KnobError
    from .schemas import DdpTrialRecord

    out = []
    cores = cpu_phase_cores(env_dir)
    for f in files if files is not None else sorted((env_dir / "ddp-validation").glob("*.jsonl")):
        groups: dict[str, list[dict]] = {}
        plain: list[float] = []
        for r in read_jsonl(f, DdpTrialRecord):
            if r.get("status") == "ok" and r.get("measured_step_time_ms"):
                if r["ddp"] is None:
                    plain.append(float(r["measured_step_time_ms"]))
                else:
                    groups.setdefault(r["label"], []).append(r)
        for label, rs in groups.items():
            setup = rs[0]["setup"]
            # a shipped name, or a layout copied beside the records (ddp validate --model file.json)
            L = load_recorded_layout(setup["model"], env_dir, f"{f.name}: setup.model")
            try:
                cfg = DdpConfig.from_dict({k: tuple(v) if isinstance(v, list) else v for k, v in rs[0]["ddp"].items()})
            except (KnobError, TypeError) as e:
                raise RunsError(f"{f}: {label}: ddp: {str(e).splitlines()[0]}") from None
            cluster = model_file_cluster or env_cluster(setup)
            compute = statistics.median(plain) if plain else float(setup["compute_ms"])
            wl = replay_workload({"compute_ms": compute})
            if setup.get("command") and fills_cores(L, cluster.gpus_per_node, cores):  # a user's real CPU compute
                wl = replace(wl, cpu_bound=True)
            sim = simulate_ddp_step(L.sizes_bytes, L.ready_fraction, wl, cfg, cost, cluster, L.dtypes, host=host)
            meds = [float(r["measured_step_time_ms"]) for r in rs]
            firsts = [float(r["first_step_ms"]) for r in rs if r.get("first_step_ms")]
            over = [float(r["stage_overrun_ms"]) for r in rs if r.get("stage_overrun_ms") is not None]
            stages = "" if setup.get("command") else rs[0].get("stages", "deadline")
            out.append(DdpRow(env_dir.name, setup["model"], label, len(rs), statistics.median(meds), min(meds),
                              max(meds), sim.step_time_ms, statistics.median(firsts) if firsts else float("nan"),
                              sim.first_step_time_s * 1e3,
                              tuple(rs[0]["buckets"]) if rs[0].get("buckets") else None,
                              tuple(b.nbytes for b in sim.buckets), tuple(setup.get("command") or ()),
                              float(setup["compute_ms"]), f.stem, stages,
                              statistics.median(over) if over else float("nan"), compute))
    return out
