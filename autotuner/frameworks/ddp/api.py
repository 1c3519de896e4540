"""DDP's public entry points (re-exported by :mod:`autotuner`): :func:`ddp_suggest`, :func:`ddp_simulate`,
:func:`ddp_explore`, :func:`ddp_scale`, :func:`ddp_measure`, :func:`ddp_validate`, :func:`ddp_tune`. Reads an environment's DDP records (its sweep; its replays for the error band), calls the
pure parts (:mod:`.fit`, :mod:`.suggest`) and the real runs (:mod:`.realrun`)."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from pathlib import Path

from ..._deprecated import link_rates, renamed_keywords
from ...errors import RunsError, ScenarioError
from .records import env_cost
from .suggest import DdpProposal, DdpSuggestion

#: the band where an env has no DDP replay to measure its error: this machine's run-to-run noise (~3 %)
DEFAULT_BAND = 0.03
#: a checked setting misses when its prediction is more than MISS_PCT % off its measured step (the median of its
#: trials) and also outside its trials' own range widened by RANGE_SLACK (a fraction) on either side: off by more
#: than the replays' own spread explains. An env whose settings miss on more than half is untrusted (:func:`_trust`)
MISS_PCT = 5.0
RANGE_SLACK = 0.03
#: forward + backward per step (ms) when neither the caller nor the layout (``autotuner profile``) gives it: every
#: command's ``--compute-ms`` default, Horovod's replay's too
DEFAULT_COMPUTE_MS = 300.0


@dataclass(frozen=True)
class DdpSuggestResult:
    """:func:`ddp_suggest`'s answer (a :class:`autotuner.results.SuggestAnswer`): the env and layout asked about, the fit's summary line (``fit``), the trust line
    (``trust``: how many real DDP replays the env's predictions were checked on, and their error), and the
    :class:`~autotuner.frameworks.ddp.suggest.DdpSuggestion`."""

    env: str
    model: str
    compute_ms: float
    fit: str
    trust: str
    suggestion: DdpSuggestion

    def to_dict(self) -> dict:
        return {"env": self.env, "model": self.model, "compute_ms": self.compute_ms, "fit": self.fit,
                "trust": self.trust, **self.suggestion.to_dict()}

    # the shape every framework's suggest answer has (autotuner.results.SuggestAnswer)
    @property
    def best(self) -> DdpProposal:
        """The recommendation: ``suggestion.recommended`` (DDP's defaults when ``keep_defaults``)."""
        return self.suggestion.recommended

    @property
    def baseline(self) -> DdpProposal:
        """DDP's defaults, the reference of every speed-up: ``suggestion.default``."""
        return self.suggestion.default

    @property
    def keep_defaults(self) -> bool:
        """No setting beats DDP's defaults by more than the band."""
        return self.suggestion.keep_defaults

    @property
    def band(self) -> float:
        """The error band a gain must beat (fraction of the step time)."""
        return self.suggestion.band

    @property
    def alternatives(self) -> tuple[DdpProposal, ...]:
        """The other settings shown, fastest first: the best without a compress hook, the best with the fp16
        hook (when searched) and the best per-bucket list, each once and none equal to :attr:`best`."""
        s = self.suggestion
        out: list[DdpProposal] = []
        for p in (s.knob_only, s.fp16, s.per_bucket):
            if p is not None and p.config != self.best.config and all(p.config != q.config for q in out):
                out.append(p)
        return tuple(sorted(out, key=lambda p: p.step_time_ms))


@dataclass(frozen=True)
class _Asked:
    """What a DDP question is asked of: the env's folder, its cost model (fit info, sweep records), its cluster,
    the layout and the emulated workload (forward 1/3, backward 2/3 of ``compute_ms``); ``model_env``: where the env
    is a model file from specs or nccl-tests (:class:`~autotuner.frameworks.ddp.model_env.ModelEnv`; ``folder`` is
    then its file, ``info`` and ``sweep`` empty), else None; ``host``: the Reducer's host work per gradient and per
    bucket (:class:`~autotuner.frameworks.ddp.hostcost.ReducerHostCost`: the env's host phase, or a model file's
    figure), None where the env has none (not charged: :func:`host_notes` says so)."""

    folder: Path
    cost: object
    info: dict
    sweep: list
    cluster: object
    layout: object
    compute_ms: float
    workload: object
    model_env: object = None
    host: object = None


def _asked(env: str, model: str, compute_ms: float | None, runs_dir: Path | None, default_ms: float,
           model_dir=None) -> _Asked:
    """Load env ``env`` (:func:`ddp_env_source`: fitted from its sweep, else a model file from specs or nccl-tests)
    and layout ``model``; ``compute_ms`` default: the layout's measured forward + backward, else ``default_ms``.
    Raises RunsError / ScenarioError (one line)."""
    from ...readers.layouts import load_layout
    from .records import cpu_phase_cores, env_cluster, fills_cores, replay_workload

    if compute_ms is not None and not compute_ms > 0:
        raise ScenarioError(f"--compute-ms must be > 0 ms, got {compute_ms!r}")
    src = ddp_env_source(env, runs_dir, model_dir)
    if isinstance(src, Path):
        folder, menv = src, None
        cost, info, sweep = env_cost(folder)
    else:  # a model file: its cost model and cluster; no sweep, no phase
        folder, menv, cost, info, sweep = src.path, src, src.cost, {}, []
    try:
        L = load_layout(model)
    except ValueError as e:
        raise ScenarioError(str(e).splitlines()[0]) from None
    if compute_ms is None:
        compute_ms = (L.forward_ms + L.backward_ms) if L.forward_ms is not None else default_ms
    cluster = env_cluster(sweep[0]["setup"]) if menv is None else menv.cluster
    wl = replay_workload({"compute_ms": compute_ms})
    # a CPU layout filling the host's cores (never on a model file's GPU ranks)
    if menv is None and fills_cores(L, cluster.gpus_per_node, cpu_phase_cores(folder)):
        wl = replace(wl, cpu_bound=True)
    host = info.get("host_cost") if menv is None else getattr(menv, "host", None)
    return _Asked(folder, cost, info, sweep, cluster, L, compute_ms, wl, menv, host)


def ddp_env_source(env: str, runs_dir: Path | None = None, model_dir=None):
    """Where DDP env ``env``'s costs come from: its folder (a measured DDP sweep, :func:`ddp_env_folder`, which
    always wins), else its model file from specs or nccl-tests on the model search path (``model_dir`` first, as
    Horovod's commands search it) as a :class:`~autotuner.frameworks.ddp.model_env.ModelEnv`. Raises RunsError
    (one line) when neither exists, or for a model file DDP cannot answer from."""
    from .model_env import find_model_file, read_model_env

    try:
        folder = ddp_env_folder(env, runs_dir)
    except RunsError as e:
        path = find_model_file(env, model_dir)
        if path is None:
            raise RunsError(f"{str(e).splitlines()[0]}; nor a model file {env}.json from specs or nccl-tests "
                            "(autotuner env new, autotuner fit)") from None
        return read_model_env(path, env)
    one = one_gpu_host(folder)
    if one is None:
        return folder
    path = find_model_file(env, model_dir)
    if path is None:
        raise RunsError(f"{env} was measured on one GPU (ddp measure --np 1: no wire): give its cluster's links "
                        f"under the same name (autotuner env new {env} ..., or fit its nccl-tests outputs), and its "
                        "host phase replaces the GPU prior there")
    return replace(read_model_env(path, env), host=one)


def _first_ranks(path: Path) -> int | None:
    """The ``ranks`` of a sweep file's first record, None where it cannot be read (:func:`env_cost` then says why,
    in one line)."""
    import json

    try:
        with path.open() as f:
            line = next((ln for ln in f if ln.strip()), "")
        return int(json.loads(line)["ranks"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def one_gpu_host(folder: Path):
    """The Reducer's host work measured by a one-rank DDP env in ``folder`` (``ddp measure --device cuda --np 1``:
    a sweep of 1 rank, so no wire to fit; :func:`~autotuner.frameworks.ddp.fit.host_cost` of its ``ddp-host.jsonl``
    at its sweep's copy rate, :func:`~autotuner.frameworks.ddp.fit.copy_rate`) as a
    :class:`~.hostcost.ReducerHostCost`, or None for a folder whose sweep has 2 ranks or more. Raises RunsError (one
    line) for a one-rank env without a host phase."""
    from .fit import copy_rate, host_cost, host_cost_term
    from .records import read_jsonl
    from .schemas import DdpHostRecord, DdpSweepRecord

    if _first_ranks(folder / "ddp-sweep.jsonl") != 1:  # the usual case answered from one line, not the whole file
        return None
    sweep = read_jsonl(folder / "ddp-sweep.jsonl", DdpSweepRecord)
    host_path = folder / "ddp-host.jsonl"
    recs = read_jsonl(host_path, DdpHostRecord) if host_path.exists() else []
    if not recs:
        raise RunsError(f"{folder.name} was measured on one rank but has no host phase ({host_path}): run autotuner "
                        "ddp measure --device cuda --np 1 --host-rounds 1 again")
    term = host_cost_term(host_cost(recs, copy_rate(sweep)))
    return replace(term, source=term.source.replace("the env's host phase", f"{folder.name}'s one-GPU host phase"))


def _trust_of(a: "_Asked", checked: list | None = None) -> tuple[str, float, str]:
    """:func:`_trust` of an env, or for a model file's env its trust line (never checked against a DDP step) with
    the default band (:data:`DEFAULT_BAND`, as any env without a DDP replay)."""
    if a.model_env is None:
        return _trust(a.folder, a.cost, checked, a.host)
    from .model_env import UNCHECKED_BAND_SOURCE

    return a.model_env.trust, DEFAULT_BAND, UNCHECKED_BAND_SOURCE


def ddp_env_folder(env: str, runs_dir: Path | None = None) -> Path:
    """The folder of DDP environment ``env``: the first of the runs search path holding ``<env>/ddp-sweep.jsonl``.
    Raises RunsError (one line, naming the DDP envs found) when none does."""
    from ...paths import runs_search_path

    dirs = runs_search_path(runs_dir)
    for d in dirs:
        if (d / env / "ddp-sweep.jsonl").is_file():
            return d / env
    known = sorted({p.parent.name for d in dirs if d.is_dir() for p in d.glob("*/ddp-sweep.jsonl")})
    raise RunsError(f"no DDP environment {env!r} (a folder with ddp-sweep.jsonl: autotuner ddp measure); "
                    f"known: {', '.join(known) or 'none'}")


def ddp_envs(runs_dir: Path | None = None, on_event=None, model_dir=None) -> list[dict]:
    """``autotuner ddp envs``: every DDP environment of the runs search path (a folder with ``ddp-sweep.jsonl``; the
    first folder holding a name wins) and every model file from specs or nccl-tests on the model search path
    (``model_dir`` first; :mod:`~autotuner.frameworks.ddp.model_env`) whose name has no DDP sweep, sorted by name,
    each with ``env``, ``source`` (``measured``: a DDP sweep; ``specs``; ``nccl-tests``), ``nodes``,
    ``ranks_per_node``, ``link_gbit`` (the sweep's link or shaped loopback, the model file's node link, Gbit/s),
    ``alpha_us``, ``busbw_gbps`` (a model file's: the ring over all ranks, its large-message segment where
    piecewise), ``queued_saving_us`` (None without a burst phase), ``fp16`` (the float16 allreduce measured, or
    priced from the GPU's datasheet), ``sweep_jobs`` (0 for a model file), ``path``, ``trust`` (its replays' line,
    or the model file's source) and ``checked`` (its figures: ``trials``, ``settings``, ``mean_error_pct``,
    ``worst_pct``, %, ``missed`` and ``untrusted``, :func:`_checked_figures`; None where never checked against a
    real DDP run) and ``fit`` (its fit line: where each figure comes from). An env whose records cannot be read or
    fitted is listed with ``problem`` (one line) instead. ``on_event(line)``: one line as each env is read."""
    from ...errors import AutotunerError
    from ...paths import runs_search_path
    from .model_env import model_envs, read_model_env
    from .records import env_cluster

    seen: dict[str, Path] = {}
    for d in runs_search_path(runs_dir):
        if d.is_dir():
            for p in sorted(d.glob("*/ddp-sweep.jsonl")):
                seen.setdefault(p.parent.name, p.parent)
    for name, path in model_envs(model_dir).items():  # a measured DDP sweep of the same name wins
        seen.setdefault(name, path)
    out = []
    for i, (name, folder) in enumerate(sorted(seen.items()), 1):
        (on_event or _quiet)(f"{name} ({i} of {len(seen)})")
        if folder.suffix == ".json":  # a model file from specs or nccl-tests
            try:
                m = read_model_env(folder, name)
            except AutotunerError as e:
                out.append({"env": name, "path": str(folder), "problem": str(e).splitlines()[0]})
                continue
            out.append({"env": name, "source": m.kind, "nodes": m.cluster.nodes,
                        "ranks_per_node": m.cluster.gpus_per_node, "link_gbit": m.info["link_gbit"],
                        "alpha_us": m.info["alpha_us"], "busbw_gbps": m.info["busbw_gbps"],
                        "queued_saving_us": None, "fp16": m.cost.fp16 is not None, "sweep_jobs": 0,
                        "path": str(folder), "trust": m.trust, "checked": None, "fit": m.fit})
            continue
        try:
            cost, info, sweep = env_cost(folder)
            setup = sweep[0]["setup"]
            cl = env_cluster(setup)
            q = info["queued"]
            out.append({"env": name, "source": "measured", "nodes": cl.nodes, "ranks_per_node": cl.gpus_per_node,
                        "link_gbit": setup.get("link_gbit") or setup.get("bandwidth_gbit"),
                        "alpha_us": info["alpha_us"], "busbw_gbps": info["busbw_gbps"],
                        "queued_saving_us": q["saving_us"] if q["jobs"] else None, "fp16": cost.fp16 is not None,
                        "sweep_jobs": len(sweep), "path": str(folder),
                        "trust": _trust(folder, cost, checked := _checked(folder, cost, info["host_cost"]))[0],
                        "checked": _checked_figures(checked), "fit": _fit_line(name, cl, info, sweep)})
        except AutotunerError as e:
            out.append({"env": name, "path": str(folder), "problem": str(e).splitlines()[0]})
    return out


def ddp_suggest(model: str, env: str, *, compute_ms: float | None = None, runs_dir: Path | None = None,
                model_dir=None) -> "DdpSuggestResult":
    """The best DDP bucket setting for layout ``model`` (a shipped name or a layout JSON) on DDP environment ``env``,
    its cost model fitted from the env's own sweep, else from its model file built from specs or fitted from
    nccl-tests (``model_dir`` searched first, :func:`ddp_env_source`); ``compute_ms``: forward + backward per step
    (ms; default the layout's measured times, else 300). Raises RunsError / ScenarioError (one line) for a missing
    env, a bad layout or a non-positive compute time."""
    from .suggest import suggest_ddp

    a = _asked(env, model, compute_ms, runs_dir, DEFAULT_COMPUTE_MS, model_dir)
    folder, cost, info, sweep, cluster, L, compute_ms, wl = (a.folder, a.cost, a.info, a.sweep, a.cluster, a.layout,
                                                             a.compute_ms, a.workload)
    trust, band, source = _trust_of(a)
    fit = _fit_of(a, env)
    ft = info.get("first_touch")
    refault = None if ft is None else (
        ft["refault_s_per_byte"] * float(sum(L.sizes_bytes)),
        f"the env's first-touch phase, {ft['ranks']} rank(s) writing at once: held {ft['held_ms']:.1f} ms against "
        f"dropped {ft['dropped_ms']:.1f} ms for {ft['bytes'] / 1e6:.0f} MB")
    s = suggest_ddp(L.sizes_bytes, L.ready_fraction, L.dtypes, wl, cost, cluster, band=band, band_source=source,
                    fp16=cost.fp16 is not None, refault=refault, notes_before=cpu_notes(a) + host_notes(a) + _assumed(a),
                    host=a.host)
    return DdpSuggestResult(env, L.name, compute_ms, fit, trust, s)


def host_notes(a: "_Asked") -> tuple[str, ...]:
    """One note on the Reducer's host work per gradient and per bucket (:class:`~.hostcost.ReducerHostCost`): what
    the step times charge and where the figure comes from, or that the env never measured it and nothing is
    charged."""
    h = a.host
    if h is None:
        return ("the Reducer's own host work per gradient and per bucket (its hooks, each bucket's launch) is not "
                "charged: this env has no host phase (no ddp-host.jsonl: run autotuner ddp measure again to add "
                "it)",) if a.model_env is None else ()
    rng = ""
    if h.per_tensor_range_s or h.per_bucket_range_s:
        t = h.per_tensor_range_s or (h.per_tensor_s, h.per_tensor_s)
        b = h.per_bucket_range_s or (h.per_bucket_s, h.per_bucket_s)
        rng = f" (range {t[0] * 1e6:.0f}-{t[1] * 1e6:.0f} us and {b[0] * 1e6:.0f}-{b[1] * 1e6:.0f} us)"
    return (f"the Reducer's own host work is charged on the backward's thread: {h.per_tensor_s * 1e6:.1f} us per "
            f"gradient and {h.per_bucket_s * 1e6:.1f} us per bucket{rng}, {h.source}",)


def cpu_notes(a: "_Asked") -> tuple[str, ...]:
    """What the step times charge for a CPU layout's compute beside the collectives (one note, or none for a layout
    that does not fill the host's cores or has no device)."""
    from .records import cpu_phase_cores

    if a.model_env is not None:  # GPU ranks: a layout's compute never fills the host's cores there
        return ()
    cpu, cores = a.info.get("cpu"), cpu_phase_cores(a.folder)
    if a.workload.cpu_bound and cpu is not None:
        return (f"this CPU layout's {a.cluster.gpus_per_node} rank(s) per host fill the host's {cores} core(s): each "
                f"collective in flight takes {cpu['per_collective_us'] / 1e3:.2f} ms + {cpu['per_byte_ns']:.2f} ns "
                f"per byte of CPU from the backward (the env's cpu phase, {cpu['jobs']} job(s)), charged in the step "
                f"times above; the collectives themselves ran {cpu['slowdown']:.2f}x longer beside the compute there, "
                "which is not charged",)
    dev = getattr(a.layout, "device", None)
    if cores is None and dev and str(dev).lower().startswith("cpu"):
        return ("where this CPU layout's ranks fill their host's cores, the collectives take CPU from its compute: "
                "this env never measured that (no ddp-cpu.jsonl: run autotuner ddp measure again to add the cpu "
                "phase), so the step times above charge nothing for it",)
    return ()


def _fit_of(a: "_Asked", env: str) -> str:
    """The env's fit line: :func:`_fit_line` of its sweep, or its model file's line (where each figure comes
    from)."""
    return a.model_env.fit if a.model_env is not None else _fit_line(env, a.cluster, a.info, a.sweep)


def _assumed(a: "_Asked") -> tuple[str, ...]:
    """The notes naming every figure a model file's env assumes (none for a measured env)."""
    return () if a.model_env is None else tuple(f"assumed: {x}" for x in a.model_env.assumed)


def _fit_line(env: str, cluster, info: dict, sweep: list) -> str:
    """One line on what the env's fit says and where each figure comes from."""
    q = info["queued"]
    queued = (f"a bucket queued behind another {q['saving_us']:.0f} us cheaper ({q['jobs']} burst job(s))"
              if q["jobs"] else "no burst phase (a queued bucket priced as a lone allreduce)")
    return (f"{env}: {cluster.nodes}x{cluster.gpus_per_node} ranks, torch.distributed Gloo allreduce: alpha "
            f"{info['alpha_us']:.0f} us, busbw {info['busbw_gbps']:.2f} Gbit/s; bucket copy {info['copy_GBps']:.1f} "
            f"GB/s (from {len(sweep)} sweep job(s)); {queued}")


@renamed_keywords(jobs="sweep_rounds", burst_jobs="burst_rounds", first_touch_jobs="first_touch_rounds",
                  cpu_jobs="cpu_rounds", say="on_event")
def ddp_measure(env: str, *, np: int = 2, link_gbit: float | None = None, loopback_gbit: float | None = None,
                testbed_hosts: int = 0, ranks_per_host: int = 1, sweep_rounds: int = 3, repeats: int = 7,
                burst_rounds: int = 3, first_touch_rounds: int = 1, cpu_rounds: int = 1, host_rounds: int = 1,
                runs_dir: Path | None = None, on_event=None, bandwidth_gbit: float | None = None, hosts: str = "",
                rsh: str = "ssh", device: str = "cpu", print_launch: str | None = None,
                from_output: Path | None = None) -> Path | str:
    """Measure DDP environment ``env``'s sweep, burst phase, first-touch phase, cpu phase and host phase
    (:func:`autotuner.frameworks.ddp.realrun.measure_ddp`; each ``<phase>_rounds`` rounds of one torchrun job, 0
    skips a phase) into ``<runs>/<env>/ddp-sweep.jsonl``, ``ddp-burst.jsonl``, ``ddp-first-touch.jsonl``,
    ``ddp-cpu.jsonl`` and ``ddp-host.jsonl`` (``runs_dir``, else the runs output folder); resumable. The network (root only; default
    unshaped): ``link_gbit`` (Gbit/s) between the ranks, one shaped loopback or, with ``testbed_hosts`` x
    ``ranks_per_host`` emulated hosts, each host's link; ``loopback_gbit`` each emulated host's loopback
    (:func:`autotuner._deprecated.link_rates`). ``on_event(line)``: one line per job. Old keyword names
    (DeprecationWarning): ``bandwidth_gbit``, ``jobs``, ``burst_jobs``, ``first_touch_jobs``, ``cpu_jobs``, ``say``.
    A real cluster instead: ``hosts`` (horovodrun's ``-H``, ``h1:8,h2:8``; replaces ``np``), one torchrun per host
    started through the remote shell ``rsh`` (``ssh``; ``{host}`` in it stands for the host, else the host is
    appended). ``device`` "cuda": NCCL, one GPU per rank, ``np`` 1 allowed (no wire), the CPU ranks' phases skipped
    (:func:`~autotuner.frameworks.ddp.realrun.measure_ddp`). ``print_launch`` ("commands" or "sbatch"): run nothing
    and return the launch as text (:func:`~autotuner.frameworks.ddp.realrun.launch_text`). ``from_output``: run
    nothing, append the results in that file (the output of ``print_launch="sbatch"``'s batch job), recorded with
    this call's ``hosts``/``np`` and ``device`` (:func:`~autotuner.frameworks.ddp.realrun.import_output`).
    Returns the sweep's file (or the launch's text).
    Raises ValidationError / ScenarioError (one line) for a testbed that cannot be built, a host that cannot be
    reached or has too few GPUs or no NCCL, a failed host, a malformed ``hosts``, or bad counts."""
    from ...paths import runs_output_dir
    from .realrun import Launch, measure_ddp

    bandwidth_gbit, link_gbit = link_rates(link_gbit, loopback_gbit, bandwidth_gbit, bool(testbed_hosts), "ddp_measure")
    if hosts and testbed_hosts:
        raise ScenarioError("--hosts (real hosts) and --testbed-hosts (emulated ones) exclude each other")
    if (np < (1 if device == "cuda" else 2) and not (testbed_hosts or hosts) or sweep_rounds < 1 or repeats < 1
            or ranks_per_host < 1 or burst_rounds < 0 or first_touch_rounds < 0 or cpu_rounds < 0 or host_rounds < 0):
        raise ScenarioError("a DDP sweep needs >= 2 ranks (1 with --device cuda), >= 1 round and >= 1 repeat")
    return measure_ddp(runs_output_dir(runs_dir) / env, np_=np, bandwidth_gbit=bandwidth_gbit,
                       testbed_hosts=testbed_hosts, ranks_per_host=ranks_per_host, link_gbit=link_gbit,
                       jobs=sweep_rounds, repeats=repeats, burst_jobs=burst_rounds,
                       first_touch_jobs=first_touch_rounds, cpu_jobs=cpu_rounds, host_jobs=host_rounds,
                       say=on_event or _quiet, launch=Launch(hosts, rsh, device), print_launch=print_launch,
                       from_output=from_output)


def _quiet(line: str) -> None:
    """No ``on_event`` given: the lines go nowhere."""


@dataclass(frozen=True)
class DdpValidateResult:
    """:func:`ddp_validate`'s answer: the records file, each setting's row (measured median and range, predicted
    from the env's sweep alone, error, first iteration, whether DDP's own buckets are the simulator's), the verdict
    (one line, :func:`verdict`) and the Markdown report written beside the records."""

    path: Path
    rows: tuple
    verdict: str = ""
    report: Path | None = None

    def to_dict(self) -> dict:
        return {"path": str(self.path), "verdict": self.verdict,
                "report": None if self.report is None else str(self.report), "rows": [
            {"label": r.label, "trials": r.trials, "measured_ms": r.measured_ms, "low_ms": r.low_ms,
             "high_ms": r.high_ms, "predicted_ms": r.predicted_ms, "error_percent": r.error_pct,
             "first_measured_ms": None if r.first_measured_ms != r.first_measured_ms else r.first_measured_ms,
             "first_predicted_ms": r.first_predicted_ms,
             "buckets_as_ddps": None if r.buckets is None else list(r.buckets) == list(r.predicted_buckets),
             "stages": r.stages or None,
             "stage_overrun_ms": None if r.overrun_ms != r.overrun_ms else r.overrun_ms}
            for r in self.rows]}


def load_ddp_proposals(path: Path) -> list:
    """DDP settings from ``ddp suggest --json`` output (its default, recommended, knob-only, fp16 and per-bucket
    entries, each once) or a JSON list of knob dicts (:meth:`DdpConfig.from_dict`). Raises ScenarioError (one
    line) for an unreadable file or a bad entry."""
    from ...errors import KnobError
    from ...readers.files import read_json
    from .knobs import DdpConfig

    d = read_json(path, ScenarioError, f"proposals {path}")
    if isinstance(d, dict):
        items = [d.get(k) for k in ("default", "recommended", "knob_only", "fp16", "per_bucket")]
        items = [it["config"] for it in items if isinstance(it, dict) and isinstance(it.get("config"), dict)]
    elif isinstance(d, list):
        items = d
    else:
        raise ScenarioError(f"{path}: expected ddp suggest --json output or a list of DDP settings")
    out: list = []
    for i, it in enumerate(items, 1):
        if not isinstance(it, dict):
            raise ScenarioError(f"{path}: setting {i} is not an object")
        try:
            cfg = DdpConfig.from_dict({k: tuple(v) if isinstance(v, list) else v for k, v in it.items()})
        except (KnobError, TypeError) as e:
            raise ScenarioError(f"{path}: setting {i}: {str(e).splitlines()[0]}") from None
        if cfg not in out:
            out.append(cfg)
    if not out:
        raise ScenarioError(f"{path}: no DDP setting in it")
    return out


@renamed_keywords(say="on_event")
def ddp_validate(env: str, model: str, *, proposals: Path | None = None, name: str | None = None,
                 compute_ms: float | None = None, steps: int = 5, warmup: int = 3, repeats: int = 3, np: int = 2,
                 link_gbit: float | None = None, loopback_gbit: float | None = None, testbed_hosts: int = 0,
                 ranks_per_host: int = 1, command: list[str] | None = None, runs_dir: Path | None = None,
                 on_event=None, bandwidth_gbit: float | None = None, hosts: str = "", rsh: str = "ssh",
                 device: str = "cpu", print_launch: str | None = None,
                 model_dir=None) -> "DdpValidateResult | str":
    """Real DDP runs (:func:`autotuner.frameworks.ddp.realrun.validate_ddp`: the replay workload of layout
    ``model``, or the user's ``command``, ``python script.py args``, with ``model`` its layout) of ``proposals`` (a
    ``ddp suggest --json`` file or a list of settings; default
    :data:`~autotuner.frameworks.ddp.realrun.DEFAULT_SETTINGS`), with DDP's defaults always among them, then each
    setting predicted from the env's sweep alone (``compute_ms`` default: a profiled layout's measured forward +
    backward, else :data:`DEFAULT_COMPUTE_MS`). The network as :func:`ddp_measure`; ``on_event(line)``: one line per
    trial (old names ``say``, ``bandwidth_gbit``: DeprecationWarning); ``hosts``, ``rsh``, ``device`` and
    ``print_launch`` (then the launch's text is returned, nothing run, no env needed) as :func:`ddp_measure`. The
    env is its DDP sweep (``ddp_measure``), else its model file from specs or nccl-tests (``model_dir`` searched
    first, :func:`ddp_env_source`; the trials then go to the runs output folder). Raises RunsError / ScenarioError / ValidationError (one line)."""
    from ...readers.layouts import load_layout
    from ...writers.atomic import atomic_write_text
    from .knobs import DdpConfig
    from .realrun import DEFAULT_SETTINGS, Launch, validate_ddp
    from .records import rows

    if (compute_ms is not None and compute_ms <= 0) or steps < 1 or warmup < 1 or repeats < 1:
        raise ScenarioError("--compute-ms must be > 0, --steps >= 1, --warmup >= 1 (the first step rebuilds DDP's "
                            "buckets), --repeats >= 1")
    try:
        L = load_layout(model)
    except ValueError as e:
        raise ScenarioError(str(e).splitlines()[0]) from None
    if compute_ms is None:  # a profiled layout's measured forward + backward, else the default
        compute_ms = (L.forward_ms + L.backward_ms) if L.forward_ms is not None else DEFAULT_COMPUTE_MS
    bandwidth_gbit, link_gbit = link_rates(link_gbit, loopback_gbit, bandwidth_gbit, bool(testbed_hosts), "ddp_validate")
    if hosts and testbed_hosts:
        raise ScenarioError("--hosts (real hosts) and --testbed-hosts (emulated ones) exclude each other")
    settings = list(DEFAULT_SETTINGS) if proposals is None else load_ddp_proposals(proposals)
    if DdpConfig() not in settings:
        settings.insert(0, DdpConfig())
    launch = Launch(hosts, rsh, device)
    if print_launch:
        from ...paths import runs_output_dir

        return validate_ddp(runs_output_dir(runs_dir) / env, model, settings, name=name, compute_ms=compute_ms,
                            steps=steps, warmup=warmup, repeats=repeats, np_=np, bandwidth_gbit=bandwidth_gbit,
                            testbed_hosts=testbed_hosts, ranks_per_host=ranks_per_host, link_gbit=link_gbit,
                            command=command, launch=launch, print_launch=print_launch)
    src = ddp_env_source(env, runs_dir, model_dir)
    if isinstance(src, Path):
        folder = src
        cost, vinfo, _ = env_cost(folder)
        host = vinfo["host_cost"]
    else:  # a model file from specs or nccl-tests: the trials go to the runs output folder
        from ...paths import runs_output_dir

        folder, cost, host = runs_output_dir(runs_dir) / env, src.cost, src.host
    path = validate_ddp(folder, model, settings, name=name, compute_ms=compute_ms, steps=steps, warmup=warmup,
                        repeats=repeats, np_=np, bandwidth_gbit=bandwidth_gbit, testbed_hosts=testbed_hosts,
                        ranks_per_host=ranks_per_host, link_gbit=link_gbit, command=command, say=on_event or _quiet,
                        launch=launch)
    rs = tuple(rows(folder, cost, files=[path], host=host))
    v = verdict(rs)
    report = atomic_write_text(path.with_suffix(".md"), report_markdown(env, model, rs, v, path))
    return DdpValidateResult(path, rs, v, report)


#: a replay whose stages overran their compute by more than this share of the backward is named in the verdict
OVERRUN_SHARE = 0.05


def verdict(rs) -> str:
    """One line on a validation's rows: the fastest measured setting against DDP's defaults (measured, and whether
    the simulator ranks it first too), how far the predictions were off (mean and worst error), and the settings
    whose emulated backward overran its compute by more than :data:`OVERRUN_SHARE` of it (the replay's
    ``stage_overrun_ms``)."""
    if not rs:
        return "no setting measured"
    by = {r.label: r for r in rs}
    best = min(rs, key=lambda r: r.measured_ms)
    d = by.get("25 MiB (default, first 1 MiB)")
    pred_best = min(rs, key=lambda r: r.predicted_ms)
    errs = [abs(r.error_pct) for r in rs]
    worst = max(rs, key=lambda r: abs(r.error_pct))
    head = (f"fastest measured: {best.label}, {best.measured_ms:.1f} ms" +
            (f" against DDP's defaults' {d.measured_ms:.1f} ms ({d.measured_ms / best.measured_ms:.2f}x)" if d else ""))
    rank = ("the simulator ranks it first too" if pred_best is best
            else f"the simulator ranked {pred_best.label} first (measured {pred_best.measured_ms:.1f} ms)")
    over = [r for r in rs if r.overrun_ms == r.overrun_ms and r.overrun_ms > OVERRUN_SHARE * r.compute_ms * 2 / 3]
    tail = "" if not over else (
        f"; in {len(over)} of {len(rs)} settings the emulated backward ran "
        f"{min(r.overrun_ms for r in over):.0f}-{max(r.overrun_ms for r in over):.0f} ms past its "
        f"{over[0].compute_ms * 2 / 3:.0f} ms (writing the gradients took longer than the compute asked for: those steps "
        "time this host's memory as well)")
    return (f"{head}; {rank}; predictions off by {statistics.mean(errs):.1f} % on average, worst {worst.error_pct:+.1f} % "
            f"({worst.label}){tail}")


def report_markdown(env: str, model: str, rs, v: str, path: Path) -> str:
    """The validation's Markdown report: the verdict, then every setting measured against its prediction."""
    lines = [f"# DDP validation: {model} on {env}", "", f"Records: `{path.name}`. Predictions from the env's own DDP "
             "sweep alone (no replay enters the fit); measured without any timeline, as a training job runs."
             + "".join(f" The replay's emulated backward: {st} stages (autotuner/frameworks/ddp/replay.py)."
                       for st in sorted({r.stages for r in rs if r.stages})), "",
             f"**Verdict:** {v}", "",
             "| setting | trials | measured ms (range) | predicted ms | error | first step: measured / predicted ms "
             "| DDP's buckets = simulator's | stages overran, ms |", "|---|---:|---:|---:|---:|---:|---|---:|"]
    for r in rs:
        first = "n/a" if r.first_measured_ms != r.first_measured_ms else f"{r.first_measured_ms:.1f}"
        same = "n/a" if r.buckets is None else ("yes" if list(r.buckets) == list(r.predicted_buckets) else "no")
        lines.append(f"| {r.label} | {r.trials} | {r.measured_ms:.1f} ({r.low_ms:.1f}-{r.high_ms:.1f}) | "
                     f"{r.predicted_ms:.1f} | {r.error_pct:+.1f} % | {first} / {r.first_predicted_ms:.1f} | {same} | "
                     + ("n/a" if r.overrun_ms != r.overrun_ms else f"{r.overrun_ms:.1f}") + " |")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class DdpSimulateResult:
    """:func:`ddp_simulate`'s answer (a :class:`autotuner.results.SimulateAnswer`): the setting, the env's fit line and trust line, and the simulated step
    (:class:`~autotuner.frameworks.ddp.reducer.DdpStepResult`: steady state, first iteration, each bucket's times);
    ``host``: the Reducer's host work the step charges (:class:`~autotuner.frameworks.ddp.hostcost.ReducerHostCost`,
    None: not charged) and ``notes`` (one line each: what is and is not charged)."""

    env: str
    model: str
    compute_ms: float
    config: "object"
    fit: str
    trust: str
    step: "object"
    host: "object" = None
    notes: tuple[str, ...] = ()

    @property
    def step_time_ms(self) -> float:
        """The predicted steady-state step (ms): ``step.step_time_ms``."""
        return self.step.step_time_ms

    def to_dict(self) -> dict:
        s = self.step
        return {"env": self.env, "model": self.model, "compute_ms": self.compute_ms, "config": self.config.to_dict(),
                "label": self.config.label(), "code": self.config.code(), "fit": self.fit, "trust": self.trust,
                "reducer_host": None if self.host is None else self.host.to_dict(), "notes": list(self.notes),
                "step_time_ms": s.step_time_s * 1e3, "first_step_ms": s.first_step_time_s * 1e3,
                "backward_end_ms": s.backward_end_s * 1e3, "comm_end_ms": s.comm_end_s * 1e3,
                "copy_ms": s.copy_s * 1e3, "cast_ms": s.cast_s * 1e3,
                "buckets": [{"tensors": len(b.tensors), "bytes": b.nbytes, "cap_bytes": b.cap_bytes,
                             "ready_ms": b.ready_s * 1e3, "start_ms": b.start_s * 1e3, "end_ms": b.end_s * 1e3}
                            for b in s.buckets]}


def ddp_simulate(model: str, env: str, config, *, compute_ms: float | None = None,
                 runs_dir: Path | None = None, model_dir=None) -> DdpSimulateResult:
    """One DDP setting (``config``: a :class:`~autotuner.frameworks.ddp.knobs.DdpConfig`) of layout ``model`` on DDP
    environment ``env`` (its cost model fitted from its own sweep, else its model file from specs or nccl-tests:
    :func:`ddp_env_source`): the reference simulator's step. Raises RunsError / ScenarioError (one line)."""
    from .reducer import simulate_ddp_step

    a = _asked(env, model, compute_ms, runs_dir, DEFAULT_COMPUTE_MS, model_dir)
    folder, cost, info, sweep, cluster, L, compute_ms = (a.folder, a.cost, a.info, a.sweep, a.cluster, a.layout,
                                                         a.compute_ms)
    if config.comm_hook != "allreduce" and cost.fp16 is None:
        raise ScenarioError(f"{env} measured no float16 allreduce: the {config.comm_hook} hook cannot be priced")
    step = simulate_ddp_step(L.sizes_bytes, L.ready_fraction, a.workload, config, cost, cluster, L.dtypes,
                             host=a.host)
    fit = _fit_of(a, env)
    notes = host_notes(a)
    h = a.host
    if h is not None and (h.per_tensor_range_s or h.per_bucket_range_s):
        lo, hi = (simulate_ddp_step(L.sizes_bytes, L.ready_fraction, a.workload, config, cost, cluster, L.dtypes,
                                    host=h.at(end)).step_time_s * 1e3 for end in ("low", "high"))
        notes += (f"with the Reducer's host work at the low and the high end of its range, the step takes "
                  f"{lo:.1f}-{hi:.1f} ms",)
    return DdpSimulateResult(env, L.name, compute_ms, config, fit, _trust_of(a)[0], step, a.host, notes)


def _checked(folder: Path, cost, host=None) -> list:
    """Every replay of the env with its prediction (:func:`autotuner.frameworks.ddp.records.rows`; ``host``: the
    env's Reducer host work, None: not charged), [] for none."""
    from .records import rows

    return rows(folder, cost, host=host) if (folder / "ddp-validation").is_dir() else []


def _missed(r) -> bool:
    """A checked setting (a :class:`~autotuner.frameworks.ddp.records.DdpRow`) missed: predicted more than
    :data:`MISS_PCT` % off its measured step and outside its trials' range widened by :data:`RANGE_SLACK`."""
    return abs(r.error_pct) > MISS_PCT and not (
        r.low_ms * (1 - RANGE_SLACK) <= r.predicted_ms <= r.high_ms * (1 + RANGE_SLACK))


def _trust(folder: Path, cost, checked: list | None = None, host=None) -> tuple[str, float, str]:
    """(trust line, band, band source) of a DDP env from its replays (``checked``, else :func:`_checked`), or the
    default band. An env whose replays miss on most of their settings (:func:`_checked_figures` ``untrusted``: more
    than half of its checked settings missed, :func:`_missed`) has a trust line that starts ``untrusted:`` and says
    how many; its predictions and its band are computed as for any other env."""
    checked = _checked(folder, cost, host) if checked is None else checked
    fig = _checked_figures(checked)
    if fig is None:
        return ("never checked against a real DDP run", DEFAULT_BAND,
                "this machine's run-to-run noise (no DDP replay on this env)")
    n_lay = len({r.model for r in checked})
    scripts = sum(r.trials for r in checked if r.command)
    total = fig["trials"]
    what = "real DDP replays" if not scripts else "runs of a user's DDP script" if scripts == total else "real DDP runs"
    mixed = f", {scripts} of them a user's script" if 0 < scripts < total else ""
    line = (f"checked on {total} {what} ({len(checked)} settings, {n_lay} layout{'s' if n_lay != 1 else ''}{mixed}): "
            f"mean error {fig['mean_error_pct']:.1f} %, worst {fig['worst_pct']:+.1f} %")
    if fig["untrusted"]:
        line = (f"untrusted: {line}; {fig['missed']} of {fig['settings']} settings missed (over {MISS_PCT:g} % off "
                "and outside their trials' range)")
    return line, fig["mean_error_pct"] / 100, "the env's mean error on its real DDP runs"


def _checked_figures(checked: list) -> dict | None:
    """A DDP env's checked figures from its replays (:func:`_checked`'s rows): ``trials``, ``settings``,
    ``mean_error_pct`` (mean absolute error, %), ``worst_pct`` (signed, %), ``missed`` (settings that missed,
    :func:`_missed`) and ``untrusted`` (``missed`` more than half of ``settings``: the env's replays miss on most
    of what they checked); None where there are none."""
    if not checked:
        return None
    missed = sum(1 for r in checked if _missed(r))
    return {"trials": sum(r.trials for r in checked), "settings": len(checked),
            "mean_error_pct": statistics.mean(abs(r.error_pct) for r in checked),
            "worst_pct": max(checked, key=lambda r: abs(r.error_pct)).error_pct,
            "missed": missed, "untrusted": bool(missed > len(checked) / 2)}


@renamed_keywords(say="on_event")
def ddp_tune(env: str, model: str, *, name: str | None = None, compute_ms: float | None = None, steps: int = 5,
             warmup: int = 3, budget_steps: int = 160, np: int = 2, link_gbit: float | None = None,
             loopback_gbit: float | None = None, testbed_hosts: int = 0, ranks_per_host: int = 1,
             runs_dir: Path | None = None, on_event=None, bandwidth_gbit: float | None = None,
             command: list[str] | None = None, hosts: str = "", rsh: str = "ssh", device: str = "cpu",
             print_launch: str | None = None):
    """Tune layout ``model``'s DDP setting on real replays (:func:`autotuner.frameworks.ddp.tune.tune_ddp`), the
    prior from the env's sweep alone and its error band. ``compute_ms`` (forward + backward per step) default: a
    profiled layout's measured times, else :data:`DEFAULT_COMPUTE_MS`. The network as :func:`ddp_measure`;
    ``on_event(line)``: one line per trial (old names ``say``, ``bandwidth_gbit``: DeprecationWarning). ``command``:
    the user's ``python script.py args`` instead of the replay (``model`` its layout; it reads each setting as
    ``examples/train_ddp.py`` does); ``hosts``, ``rsh``, ``device`` and ``print_launch`` (then the launch's text is
    returned, nothing run, no env needed) as :func:`ddp_measure`. Returns a
    :class:`~autotuner.frameworks.ddp.tune.DdpTuneResult`. Raises RunsError / ScenarioError / ValidationError (one
    line)."""
    from ...readers.layouts import load_layout
    from .realrun import Launch
    from .records import env_cluster
    from .tune import tune_ddp

    if (compute_ms is not None and compute_ms <= 0) or steps < 1 or warmup < 1 or budget_steps < steps + warmup:
        raise ScenarioError("--compute-ms must be > 0, --steps and --warmup >= 1, --budget-steps at least one trial")
    try:
        L = load_layout(model)
    except ValueError as e:
        raise ScenarioError(str(e).splitlines()[0]) from None
    if compute_ms is None:
        compute_ms = (L.forward_ms + L.backward_ms) if L.forward_ms is not None else DEFAULT_COMPUTE_MS
    bandwidth_gbit, link_gbit = link_rates(link_gbit, loopback_gbit, bandwidth_gbit, bool(testbed_hosts), "ddp_tune")
    if hosts and testbed_hosts:
        raise ScenarioError("--hosts (real hosts) and --testbed-hosts (emulated ones) exclude each other")
    launch = Launch(hosts, rsh, device)
    if print_launch:
        from ...paths import runs_output_dir

        return tune_ddp(runs_output_dir(runs_dir) / env, model, None, None, band=0.0, name=name,
                        compute_ms=compute_ms, steps=steps, warmup=warmup, budget_steps=budget_steps, np_=np,
                        bandwidth_gbit=bandwidth_gbit, testbed_hosts=testbed_hosts, ranks_per_host=ranks_per_host,
                        link_gbit=link_gbit, command=command, launch=launch, print_launch=print_launch)
    folder = ddp_env_folder(env, runs_dir)
    cost, tinfo, sweep = env_cost(folder)
    _, band, _ = _trust(folder, cost, host=tinfo["host_cost"])
    return tune_ddp(folder, model, cost, env_cluster(sweep[0]["setup"]), band=band, name=name, compute_ms=compute_ms,
                    steps=steps, warmup=warmup, budget_steps=budget_steps, np_=np, bandwidth_gbit=bandwidth_gbit,
                    testbed_hosts=testbed_hosts, ranks_per_host=ranks_per_host, link_gbit=link_gbit,
                    say=on_event or _quiet, command=command, launch=launch, host=tinfo["host_cost"])


@dataclass(frozen=True)
class DdpExploreResult:
    """:func:`ddp_explore`'s answer: env, layout, compute per step (ms), the fit line, the trust line, the
    :class:`~autotuner.frameworks.ddp.scale.DdpExploration` and the plot's files (PNG, SVG)."""

    env: str
    model: str
    compute_ms: float
    fit: str
    trust: str
    exploration: "object"
    files: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"env": self.env, "model": self.model, "compute_ms": self.compute_ms, "fit": self.fit,
                "trust": self.trust, **self.exploration.to_dict(), "files": list(self.files)}


def ddp_explore(model: str, env: str, *, compute_ms: float | None = None, out_dir: Path = Path("explore"),
                runs_dir: Path | None = None, on_event=None, model_dir=None) -> DdpExploreResult:
    """DDP's ``bucket_cap_mb`` explored for layout ``model`` on DDP env ``env``
    (:func:`autotuner.frameworks.ddp.scale.explore_ddp`): the predicted step per cap, view and hook, with the env's
    measured replays of this layout at the same compute beside their predictions; the plot written to ``out_dir``
    (``ddp-explore-<env>-<layout>.png`` and ``.svg``). ``compute_ms`` default: the compute the env's replays of this
    layout ran, else the layout's measured forward + backward, else 300 ms. ``on_event(line)``: one line as each
    stage starts (the env's replays, the caps, the plot). ``env`` and ``model_dir`` as :func:`ddp_suggest`. Raises
    RunsError / ScenarioError / ValidationError (one line)."""

    from ...writers.atomic import check_output_dir
    from .plots import explore_plot
    from .records import replay_workload
    from .scale import explore_ddp

    say = on_event or _quiet
    check_output_dir(Path(out_dir), "--out")
    a = _asked(env, model, compute_ms, runs_dir, DEFAULT_COMPUTE_MS, model_dir)
    name = a.layout.name
    say(f"the replays measured on {env}")
    checked = _checked(a.folder, a.cost, a.host)
    replays = [r for r in checked if (Path(r.model).stem == name or r.model == name) and not r.command]
    if compute_ms is None and replays:  # the compute the env's replays of this layout ran
        a = replace(a, compute_ms=replays[0].compute_ms, workload=replay_workload({"compute_ms": replays[0].compute_ms}))
    # a second record file of the layout (a longer replay, say) is named in its rows' shown label
    measured = [(r.label if r.source in (name, Path(r.model).stem) else f"{r.source}: {r.label}", r.measured_ms,
                 r.low_ms, r.high_ms, r.predicted_ms, r.label) for r in replays
                if abs(r.compute_ms - a.compute_ms) < 1e-9]
    say("the step per bucket cap, view and hook")
    ex = explore_ddp(a.layout.sizes_bytes, a.layout.ready_fraction, a.layout.dtypes, a.workload, a.cost, a.cluster,
                     measured=measured, fp16=a.cost.fp16 is not None, host=a.host)
    title = (f"{name} on {env} ({a.cluster.nodes}x{a.cluster.gpus_per_node} ranks), {a.compute_ms:g} ms compute: "
             "predicted step per bucket_cap_mb")
    say("the plot")
    files = explore_plot(ex, Path(out_dir) / f"ddp-explore-{env}-{name}", title)
    return DdpExploreResult(env, name, a.compute_ms, _fit_of(a, env), _trust_of(a, checked)[0], ex,
                            tuple(str(f) for f in files))


@dataclass(frozen=True)
class DdpScaleResult:
    """:func:`ddp_scale`'s answer: env, layout, the fit and trust lines, the
    :class:`~autotuner.frameworks.ddp.scale.DdpScaling` and the plot's files (PNG, SVG)."""

    env: str
    model: str
    fit: str
    trust: str
    scaling: "object"
    files: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"env": self.env, "model": self.model, "fit": self.fit, "trust": self.trust,
                **self.scaling.to_dict(), "files": list(self.files)}


def ddp_scale(model: str, env: str, *, nodes=None, links_gbit=None, batch_size: int | None = None,
              compute_ms: float | None = None, out_dir: Path = Path("scale"),
              runs_dir: Path | None = None, on_event=None, model_dir=None) -> DdpScaleResult:
    """DDP at scale for layout ``model`` on DDP env ``env`` (:func:`autotuner.frameworks.ddp.scale.scale_ddp`): per
    node count (``nodes``, default 1-64) and link rate (``links_gbit``, Gbit/s; default the env's), DDP's defaults
    and the recommended setting, with step time, throughput (``batch_size`` samples per rank, else the layout's
    profiled batch, else none) and scaling efficiency; the plot written to ``out_dir``
    (``ddp-scale-<env>-<layout>.png`` and ``.svg``). ``compute_ms``, ``env`` and ``model_dir`` as
    :func:`ddp_suggest`. ``on_event(line)``: one line as each stage starts. Raises RunsError / ScenarioError /
    ValidationError (one line)."""
    from ...writers.atomic import check_output_dir
    from .plots import scale_plot
    from .scale import scale_ddp

    say = on_event or _quiet
    check_output_dir(Path(out_dir), "--out")
    a = _asked(env, model, compute_ms, runs_dir, DEFAULT_COMPUTE_MS, model_dir)
    say(f"the replays measured on {env}")
    trust, band, source = _trust_of(a)
    batch = batch_size or a.layout.batch_size
    say("DDP's defaults and the best setting per node count and link rate")
    sc = scale_ddp(a.layout.sizes_bytes, a.layout.ready_fraction, a.layout.dtypes, a.workload, a.cost, a.cluster,
                   nodes=nodes, links_gbps=links_gbit, batch_per_rank=batch, band=band, band_source=source,
                   fp16=a.cost.fp16 is not None, host=a.host)
    if a.model_env is not None:
        sc = replace(sc, notes=tuple(sc.notes) + _assumed(a))
    title = (f"{a.layout.name} on {env}: {a.cluster.gpus_per_node} rank(s) per node, {a.compute_ms:g} ms compute per "
             "rank and step (weak scaling)")
    say("the plot")
    files = scale_plot(sc, Path(out_dir) / f"ddp-scale-{env}-{a.layout.name}", title)
    return DdpScaleResult(env, a.layout.name, _fit_of(a, env), trust, sc,
                          tuple(str(f) for f in files))
