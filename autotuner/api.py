"""Public operations behind the CLI: build a scenario, simulate it, fit a runs tree.

A :class:`Scenario` binds a fitted environment, a model's layout and workload and the
what-ifs (nodes, GPUs per node, link rate, compression); :func:`simulate` runs the pure
simulator on it.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import Any, Mapping, Sequence

from .errors import AutotunerError, KnobError, ScenarioError
from .fit.store import FittedEnv, load_env, write_model
from .knobs import (
    DEFAULTS_0_28,
    KNOB_BY_FIELD,
    LAST_RELEASE,
    Config,
    check_horovod_version,
    defaults_for,
    hierarchical_allreduce_note,
    horovod_env,
    horovodrun_flags,
    pin_unsupported_off,
)
from .model.costmodel import Cluster, CostModelError
from .model.scenario import (  # noqa: F401 (Compression, LOSSY, COMPRESSION_NUMERICS: for the CLI)
    COMPRESSION_CODE,
    COMPRESSION_NUMERICS,
    COMPRESSION_RATIO,
    HOROVOD_COMPRESSIONS,
    LOSSY,
    Compression,
    Scenario,
)
from .model.simulator import StepResult
from .model.workload import Workload
from .readers.layouts import load_layout
from .writers.atomic import check_output_dir


def make_scenario(model_dir: Path | Sequence[Path] | None, env: str | None, model: str, *, nodes: int | None = None,
                  gpus_per_node: int | None = None, bandwidth_gbps: float | None = None,
                  compression: str = "none", compute_ms: float | None = None,
                  backend: str | None = None) -> tuple[Scenario, FittedEnv]:
    """Build a scenario from ``<env>.json`` in ``model_dir`` (one folder, or several searched in
    order; None: :func:`autotuner.paths.model_search_path`) and a model name/path/factory.

    A model calibrated in the env uses its workload (and the layout its run used); another
    layout needs ``compute_ms`` (forward+backward, split 1/3 : 2/3), unless it carries measured
    times (``autotuner profile``): then forward and backward are the measured ones, or with
    ``compute_ms`` that total split in the measured forward : backward ratio, and readiness is
    the measured ``ready_ms`` (:attr:`autotuner.model.layout.Layout.ready_fraction`). fp16 compression's cost
    besides the bytes is the env's measured one (its fp16 phase), else, where the model file's ``cluster.gpu`` is
    in :data:`autotuner.specs.GPUS`, that GPU's from its datasheet (:func:`autotuner.specs.gpu_fp16_cost`).

    What-ifs besides the shape and link rate: ``backend`` (``mpi``, ``gloo``, ``nccl``: that
    backend's fitted intra-node tier, :meth:`~autotuner.model.costmodel.CostModel.with_backend`).
    An env with compute contention (CPU ranks sharing a host) multiplies a calibrated model's
    compute by :meth:`~autotuner.model.contention.Contention.slowdown` of the ranks per node; a
    model whose step is a fixed global amount of work (``work_per_step = global``) has it split
    over the ranks. Raises ScenarioError, ModelStoreError, LayoutError, CostModelError with
    one-line messages.
    """
    if model_dir is None:
        from .paths import model_search_path

        model_dir = model_search_path()
    fenv = load_env(model_dir, env)
    if compression not in COMPRESSION_RATIO:
        raise ScenarioError(f"unknown compression {compression!r}; use one of {', '.join(COMPRESSION_RATIO)}")
    if model in fenv.workloads and compute_ms is None:
        wl = fenv.workloads[model][1]
        layout = fenv.layout_for(model)  # a shipped layout or a file beside the model: never code
    else:
        layout = load_layout(model)
        if compute_ms is None and not layout.measured:
            have = (f"calibrated: {', '.join(sorted(fenv.workloads))}" if fenv.workloads
                    else "it has no trained model: a sweep, nccl-tests or timelines without a layout")
            raise ScenarioError(f"model {model!r} has no calibrated compute time in env {fenv.name!r} "
                                f"({have}); pass --compute-ms or a profiled layout (autotuner profile)")
        if compute_ms is not None and not compute_ms > 0:
            raise ScenarioError(f"compute time must be > 0 ms, got {compute_ms}")
        # no host-side backward measured for this model: hooks at device readiness; collectives
        # asynchronous when the env's fitted workloads are (NCCL backend); an env fitted with no
        # workload (nccl-tests) says it by its backend
        is_async = (any(w.async_collectives for _, w in fenv.workloads.values()) if fenv.workloads
                    else str((fenv.raw.get("cluster") or {}).get("backend") or "").lower() == "nccl")
        if layout.measured:  # `autotuner profile`: measured forward/backward (compute_ms rescales them)
            fwd_ms, bwd_ms = layout.measured_split(compute_ms)
            wl = Workload(forward_s=fwd_ms / 1e3, backward_s=bwd_ms / 1e3, async_collectives=is_async)
        else:
            wl = Workload(forward_s=compute_ms / 3e3, backward_s=compute_ms * 2 / 3e3, async_collectives=is_async)
    try:
        cluster = Cluster(nodes or fenv.cluster.nodes, gpus_per_node or fenv.cluster.gpus_per_node)
    except CostModelError as e:
        raise ScenarioError(str(e)) from None
    base = fenv.cost_for(cluster)  # more ranks on a host than cores: the host-local tier at their share
    if base.fp16 is None:  # a GPU env without an fp16 phase: the casts and float16 sum from its datasheet (specs.GPUS)
        from .specs import gpu_fp16_cost

        dev = gpu_fp16_cost((fenv.raw.get("cluster") or {}).get("gpu"))
        base = base if dev is None else replace(base, fp16=dev)
    cost = base if bandwidth_gbps is None else base.with_bandwidth(bandwidth_gbps)
    if backend is not None:
        try:
            cost = cost.with_backend(str(backend).lower())
        except CostModelError as e:
            measured = str((fenv.raw.get("cluster") or {}).get("backend") or "").lower()
            if not cost.backends and measured:
                raise ScenarioError(f"env {fenv.name!r} was measured with {measured} only: it has no {backend} tier to "
                                    f"simulate (measure the cluster with {backend}, or describe it: autotuner env new)"
                                    ) from None
            raise ScenarioError(f"env {fenv.name!r}: {e}") from None
    calibrated = model in fenv.workloads and compute_ms is None
    run = fenv.run_shapes.get(model) if calibrated else None
    # a calibrated model's compute was measured inside its Horovod job: the CPU sharing is already in it
    cycle_cpu = not calibrated and _cpu_fills_cores(layout, cluster.gpus_per_node, fenv.cores_per_host)
    return Scenario(fenv.name, model, layout, wl, cost, cluster, compression, run=run,
                    backend=None if backend is None else str(backend).lower(),
                    contention=fenv.contention if calibrated else None,
                    global_work=calibrated and model in fenv.global_work,
                    env_backend=str((fenv.raw.get("cluster") or {}).get("backend") or "").lower() or None,
                    cycle_cpu=cycle_cpu), fenv


def write_simulated_timeline(sc: Scenario, fenv: FittedEnv, config: Config, path: Path, *,
                             steps: int = 2) -> tuple[Path, StepResult]:
    """Simulate ``steps`` measured steps of ``sc`` with a trace and write them as a Horovod
    timeline (:mod:`autotuner.views.timeline_export`; gzip when ``path`` ends in ``.gz``).

    The collective activity follows the env's backend (``cluster.backend`` in the model file).
    Returns (path, traced result). Raises ScenarioError for ``steps`` < 1, OutputError when the
    file cannot be written.
    """
    from .views.timeline_export import collective_activity, timeline_events
    from .writers.timeline import write_timeline

    if steps < 1:
        raise ScenarioError(f"timeline steps must be >= 1, got {steps}")
    r = sc.simulate(config, trace=True, measure_steps=steps)
    backend = (fenv.raw.get("cluster") or {}).get("backend")
    events = timeline_events(r, sc.layout, collective=collective_activity(backend),
                             compression_ratio=COMPRESSION_RATIO[sc.compression])
    return write_timeline(path, events), r


def compare_timelines(real: Path, sim: Path, *, skip_real: int = 1, skip_sim: int = 0, top: int = 10) -> dict:
    """Read two timelines (plain or gzipped) and compare them (:func:`autotuner.views.timeline_compare.compare`).

    Raises TimelineError (one line) for an unreadable file, a non-timeline or no complete step.
    """
    from .readers.timeline import read_timeline
    from .views.timeline_compare import compare

    if skip_real < 0 or skip_sim < 0 or top < 0:
        raise ScenarioError("--skip-real, --skip-sim and --top must be >= 0")
    tr, ts = read_timeline(real), read_timeline(sim)
    d = compare(tr, ts, skip_real=skip_real, skip_sim=skip_sim, top=top)
    d["notes"] = [*tr.problems, *ts.problems, *d.get("notes", [])]  # what the reader dropped, named
    return d


def fit_runs(runs_dir: Path, model_dir: Path) -> tuple[list[tuple[dict, Path, Path | None]], list[str]]:
    """Fit every environment under ``runs_dir``; write model JSON + bandwidth PNG per env.

    Returns ([(model dict, json path, png path or None)], problems). ``problems`` names every
    environment, run, row, record or timeline left out, and each environment that could not be
    fitted ("not fitted": a fit error, or a model :func:`autotuner.fit.store.write_model`
    refuses, e.g. one holding a non-finite number); the others are still fitted. Files are
    written only inside ``model_dir``. Raises RunsError when nothing can be read, FitError (one
    line naming every problem) when no environment could be fitted, OutputError when a file
    cannot be written.
    """
    from .errors import FitError, OutputError
    from .views.plots import (
        bandwidth_plot,  # matplotlib: imported only when plotting (keeps `suggest` start fast)
    )

    from .fit.fitters import fit_env
    from .readers.runs import read_runs

    envs, problems = read_runs(runs_dir)
    fitted = []
    for env in envs:
        try:
            d = fit_env(env)
            path = write_model(model_dir, d)
        except OutputError:
            raise
        except (ValueError, ArithmeticError) as e:  # AutotunerError; numbers the fit cannot handle
            problems += env.problems
            problems.append(f"{env.name}: not fitted ({e if isinstance(e, ValueError) else type(e).__name__})")
            continue
        problems += env.problems
        png = bandwidth_plot(d, model_dir / f"{d['env']}-bandwidth.png")
        fitted.append((d, path, png))
    from .views.accuracy import trust_of

    for d, path, _ in fitted:  # every model written first: trust_of predicts with the new fits
        d["trust"] = trust_of(runs_dir, model_dir, d["env"])
        write_model(model_dir, d)
    if not fitted:  # one line, naming every problem, and nothing written
        raise FitError(f"no environment could be fitted: {'; '.join(problems)}")
    return fitted, problems


def suggest_configs(sc: Scenario, *, top: int = 3, n_calls: int = 24, seed: int = 0,
                    progress=None, fixed: Mapping[str, Any] | None = None, strategy=None) -> tuple[list, list]:
    """Search ``sc`` with ``strategy`` (a :class:`autotuner.search.ranking.Strategy`; default: Bayesian
    optimization refined on the batch simulator, :class:`autotuner.search.bayes.BayesStrategy` with
    ``n_calls``, ``seed`` and ``progress``); returns (all trials, top distinct by
    :func:`autotuner.search.ranking.top_distinct`). ``suggest`` itself answers from the exact grid
    (:func:`suggest_scenario`).

    ``fixed``: knobs the search keeps (field name -> value, internal units); the reference the
    proposals are ranked against is then Horovod's defaults with those knobs applied. Knobs the
    scenario's backend ignores are pinned off (:func:`autotuner.knobs.pin_unsupported_off`:
    hierarchical allreduce on ``gloo`` and ``mpi``), so no trial has them on.
    """
    from .search.ranking import top_distinct

    fixed = pin_unsupported_off(fixed or {}, sc.effective_backend)
    ref = replace(DEFAULTS_0_28, **fixed)
    if strategy is None:
        from .search.bayes import BayesStrategy

        strategy = BayesStrategy(n_calls=n_calls, seed=seed, progress=progress)
    trials = strategy.trials(sc, ref, fixed)
    return trials, top_distinct(trials, top, ref)


def _trials_table(trials) -> dict[str, Any]:
    """Trials as a :func:`autotuner.search.grid.grid_table`-form table (column -> array)."""
    import numpy as np

    from .search.grid import COLUMNS

    rows = [{**{k: v for k, v in t.config.to_dict().items() if k in COLUMNS}, "step_time_ms": t.step_time_s * 1e3}
            for t in trials]
    return {k: np.array([r[k] for r in rows]) for k in COLUMNS}


def error_band(model_dir: Path | Sequence[Path], fenv) -> dict[str, Any]:
    """The error band ``suggest`` holds a predicted gain against, and the trust line every
    prediction carries (issue 20).

    Where ``fenv`` (a :class:`autotuner.fit.store.FittedEnv`) has been checked against real
    trials (its model file's ``trust``, written by ``fit``: :func:`autotuner.views.accuracy.trust_of`),
    the band is its own: the larger of its held-out mean error and its repeat spread. Otherwise it
    is borrowed: the median band of the checked environments measured on the same backend in
    ``model_dir`` (every folder searched), or of all checked environments when none shares the
    backend, and ``source`` gives their range. Returns ``band`` (a fraction, >= :data:`autotuner.search.ranking.MIN_GAIN`),
    ``source`` (one line: whose band and why), ``line`` (the trust line: "checked on N real
    trials, mean error X %, worst Y %" or "never checked against a real run") and ``trust``."""
    from .fit.store import find_models, model_dirs
    from .readers.files import read_json
    from .search.ranking import MIN_GAIN

    t = fenv.raw.get("trust") or {}
    if t.get("configurations"):
        line = (f"checked on {t['trials']} real trials ({t['configurations']} configurations): mean error "
                f"{t['mean_error_pct']:.1f} %, worst {t['worst_pct']:+.1f} %")
        spread = t.get("repeat_spread_pct")
        src = (f"its own: mean error {t['mean_error_pct']:.1f} %"
               + (f", repeat spread {spread:.1f} %" if spread is not None else ""))
        return {"band": max(float(t["band"]), MIN_GAIN), "source": src, "line": line, "trust": t}
    backend = str((fenv.raw.get("cluster") or {}).get("backend") or "").lower()
    same, other = [], []
    for name, path in find_models(model_dirs(model_dir)).items():
        if name == fenv.name:
            continue
        try:
            d = read_json(path, ScenarioError, str(path))
        except ScenarioError:
            continue
        tt = d.get("trust") if isinstance(d, dict) else None
        cl = d.get("cluster") if isinstance(d, dict) else None
        if not isinstance(tt, dict) or not tt.get("configurations") or tt.get("band") is None:
            continue  # a sibling never checked, or a damaged file: nothing to borrow
        try:
            band = float(tt["band"])
        except (TypeError, ValueError):
            continue
        if not 0 <= band <= 1:
            continue
        b = str((cl if isinstance(cl, dict) else {}).get("backend") or "").lower()
        (same if b == backend else other).append((band, name))
    pool = sorted(same or other)
    from .specs import NEVER_MEASURED, is_spec

    line = (f"{NEVER_MEASURED} (published link figures: {fenv.name}.json fit.figures); never checked against a "
            "real run" if is_spec(fenv.raw) else "never checked against a real run")
    if not pool:
        return {"band": MIN_GAIN, "source": f"no checked environment to borrow from: the {MIN_GAIN:.1%} tie rule",
                "line": line, "trust": t}
    import statistics

    band = statistics.median(b for b, _ in pool)
    why = f"same backend, {backend}" if same else "none shares its backend"
    return {"band": max(band, MIN_GAIN), "line": line, "trust": t, "range": (pool[0][0], pool[-1][0]),
            "source": (f"borrowed: the median of {len(pool)} checked environment(s) ({why}), whose bands span "
                       f"{pool[0][0]:.1%} ({pool[0][1]}) to {pool[-1][0]:.1%} ({pool[-1][1]})")}


def _cpu_ranks(gpu: str) -> bool:
    """Whether a model file's ``cluster.gpu`` says the env ran CPU ranks ("none (CPU ranks)", "cpu", ...)."""
    return gpu.lower().startswith("none") or "cpu" in gpu.lower()


def _cpu_fills_cores(layout, ranks_per_host: int, cores: int | None) -> bool:
    """Whether a layout profiled on the CPU runs with as many ranks per host as the host's ``cores``
    or more (no spare core: compute and Horovod's threads share them). False without a device or a
    core count."""
    return (layout.device is not None and layout.device.lower().startswith("cpu") and bool(cores)
            and ranks_per_host >= cores)


def layout_warnings(sc: Scenario, fenv, env_batch: int | None = None) -> list[str]:
    """One line per way a profiled layout differs from the environment it is predicted in
    (issue 20): its ``device`` against the env's ranks (the model file's ``cluster.gpu``:
    "none (CPU ranks)" for an env measured with CPU ranks, a GPU's name otherwise) and its
    ``batch_size`` against the env's (``env_batch``: :func:`env_batch_size`, or the timed run's),
    and a CPU layout whose ranks fill the host's ``cores_per_host`` (compute and Horovod's threads
    share the cores: the cycles are charged where ``measure``'s cpu phase ran, the rest is not),
    and a what-if with several ranks per node on an env without an intra-node tier (the
    inter-node tier stands in for it). [] when none applies."""
    out = []
    L = sc.layout
    gpu = str((fenv.raw.get("cluster") or {}).get("gpu") or "")
    cpu_env = _cpu_ranks(gpu)
    if L.device is not None and gpu:
        cpu_layout = L.device.lower().startswith("cpu")
        if cpu_layout != cpu_env:
            out.append(f"layout {L.name!r} was profiled on {L.device}, env {fenv.name!r} ran its ranks on "
                       f"{gpu}: its compute times and readiness are the {L.device}'s")
    cores = fenv.cores_per_host
    if _cpu_fills_cores(L, sc.cluster.gpus_per_node, cores):
        cpu, delay = sc.cost.negotiation.cpu_s, sc.cost.compute_delay
        if sc.cycle_cpu and cpu is not None:
            charged = (f"charged from measure's cpu phase: {cpu * 1e6:.0f} µs of compute per Horovod cycle"
                       + (f", {delay.per_response_s * 1e3:.1f} ms more per response during the backward"
                          if delay is not None else ""))
        else:
            charged = ("Horovod's thread and Gloo take CPU from the compute and the compute slows the "
                       "collectives, not modelled here (no cpu phase: re-run autotuner measure)")
        rk, cs = sc.cluster.gpus_per_node, cores
        out.append(f"layout {L.name!r} computes on the CPU with {rk} rank{'s' * (rk != 1)} on each host's "
                   f"{cs} core{'s' * (cs != 1)}: {charged}; checked on one CPU script, -7 to -2 % "
                   f"(docs/fresh-environments.md, section 8)")
    if sc.cost.intra is None and sc.cluster.nodes > 1 and sc.cluster.gpus_per_node > 1:
        out.append(f"env {fenv.name!r} measured no intra-node tier: the {sc.cluster.gpus_per_node} ranks inside "
                   "each node are simulated on its inter-node tier (measure with several ranks per host, or "
                   "autotuner env new --intra)")
    batch = env_batch or (sc.run.batch_size if sc.run else None)
    if L.batch_size is not None and batch is not None and L.batch_size != batch:
        out.append(f"layout {L.name!r} was profiled at batch {L.batch_size} per rank, env {fenv.name!r} "
                   f"trained batch {batch}: the compute differs from the env's")
    return out


class Backend(StrEnum):
    """Collective backends the ``--backend`` what-if names (an env fits some of them:
    :meth:`autotuner.model.costmodel.CostModel.with_backend`)."""

    mpi = "mpi"
    gloo = "gloo"
    nccl = "nccl"


class SearchStrategy(StrEnum):
    """The search strategies ``suggest`` offers (:class:`autotuner.search.ranking.Strategy`)."""

    bayes = "bayes"
    grid = "grid"


class ProfileDevice(StrEnum):
    """Where ``autotuner profile`` runs the model."""

    cpu = "cpu"
    cuda = "cuda"


def profile_model(spec: str, out: Path, *, input_shape: str, batch_size: int, device: str = "cpu",
                  amp: bool = False, steps: int = 10, warmup: int = 3, threads: int | None = None,
                  concurrent: int = 1) -> dict[str, Any]:
    """``autotuner profile``: run the ``torch.nn.Module`` of ``spec`` (``pkg.mod:factory``) forward
    and backward, time each gradient's readiness (:mod:`autotuner.realrun.profile`; torch is
    imported only here), write the measured layout JSON to ``out`` atomically. CPU: ``threads``
    torch threads, ``concurrent`` copies computing at once (the ranks of one host).

    Returns the JSON-ready summary (``profile --json``): ``out`` (the path written), the layout's
    name, device, dtype, amp, batch size, input shape, steps, forward/backward ms, ``tensors``,
    ``bytes``, first/last ready ms, ``warnings``. Raises ProfileError / LayoutError / OutputError
    (one line) for a bad spec, shape or device, a model that fails, or an unwritable file.
    """
    import json

    from .readers.layouts import layout_from_dict
    from .realrun.profile import profile_layout
    from .writers.atomic import atomic_write_text

    check_output_dir(Path(out).parent, "--out")  # before minutes of profiling
    d, warnings = profile_layout(spec, input_shape=input_shape, batch_size=batch_size, device=str(device),
                                 amp=amp, steps=steps, warmup=warmup, threads=threads, concurrent=concurrent)
    path = atomic_write_text(Path(out), json.dumps(d, indent=1, allow_nan=False) + "\n")
    ts = d["tensors"]
    return {"model": spec, "out": str(path), **{k: d[k] for k in (
                "name", "device", "device_name", "dtype", "amp", "batch_size", "input_shape", "steps", "warmup",
                "forward_ms", "backward_ms")}, "threads": d.get("threads"), "concurrent": d.get("concurrent"),
            "tensors": len(ts), "bytes": layout_from_dict(d, str(path)).total_bytes,
            "first_ready_ms": ts[0]["ready_ms"], "last_ready_ms": ts[-1]["ready_ms"], "warnings": warnings}


#: most gradient tensors ``suggest`` searches: time and memory grow about linearly with the tensor
#: count (docs/benchmarks.md: 20,000 tensors ~9 s and ~430 MB), so 50,000 stays within a minute
MAX_SEARCH_TENSORS = 50_000


def suggest_scenario(sc: Scenario, *, top: int = 3, strategy=None, progress=None, gpu: str | None = None,
                     fixed: Mapping[str, Any] | None = None,
                     compressions: Sequence[str] | None = None, band: Mapping[str, Any] | None = None,
                     reference_version: str | None = None) -> dict[str, Any]:
    """``autotuner suggest`` on a built scenario (:func:`suggest` is the typed entry point): search, then the reference and the top proposals with their
    predicted step time (ms), speed-up over the reference, autotune score, ``horovodrun`` flags,
    ``HOROVOD_*`` variables and gradient ``compression`` (with ``compression_code``: the
    ``hvd.DistributedOptimizer`` argument that sets it, not a horovodrun flag).
    ``keep_defaults`` is True when no proposal is predicted faster than the reference by more
    than :data:`autotuner.search.ranking.MIN_GAIN` (the tie rule: then the first proposal is the
    reference itself). ``search_seconds``: wall time (s). ``strategy``: a
    :class:`autotuner.search.ranking.Strategy` object; None (default) answers from the exact grid
    on the fast simulator (:func:`autotuner.search.grid.neighbourhood`, ~10^5-10^6 configurations
    in a fraction of a second), which the noise-aware choice reads anyway; a
    :class:`autotuner.search.bayes.BayesStrategy` adds its ~30 simulations + batch refinement.
    ``progress(done, total)`` is called once per compression searched.

    ``compressions``: the gradient compressions searched (None: Horovod 0.28.1's,
    :data:`~autotuner.model.scenario.HOROVOD_COMPRESSIONS`: none and fp16; one value pins it).
    The knobs are searched for each one on ``sc`` with that compression. The reference is the
    defaults without compression (with the first one given when ``none`` is not among them). A
    proposal with another compression is kept only when it is predicted faster than the best
    proposal of the reference's compression by more than ``MIN_GAIN``: compression changes
    numerics (:data:`~autotuner.model.scenario.COMPRESSION_NUMERICS`, in ``compression_notes``)
    and is not worth a tie. ``best_by_compression``: the best predicted step (ms) of each.
    Hierarchical allreduce is never searched nor proposed where the scenario's backend has none
    (:attr:`~autotuner.model.scenario.Scenario.has_hierarchical_allreduce`); a fixed
    ``hierarchical_allreduce`` on is then kept off and ``notes`` says why (one line each).
    ``reference_version``: the Horovod release whose defaults are the reference
    (:func:`autotuner.knobs.defaults_for`: 64 MiB / 5 ms before 0.21.0, else 128 MiB / 1 ms; None: the last
    release, :data:`autotuner.knobs.LAST_RELEASE`), returned as ``reference_version``.
    Noise-aware, minimal-change choice (issue 20; :func:`autotuner.search.ranking.minimal_change`):
    ``band`` is :func:`error_band`'s result for the env (None: the :data:`MIN_GAIN` tie rule).
    The search's trials and the whole default grid around the reference
    (:func:`autotuner.search.grid.neighbourhood`) are pooled; a proposal is made only when the
    best is predicted faster than the reference by more than the band, and it is then the
    configuration within the band of the best that changes the fewest knobs, then has the
    smallest fusion buffer. ``pick`` gives the band, its source, the predicted gain and the range
    of equally good thresholds (MiB) and cycle times (ms); ``knob_only`` the best proposal
    without compression, always; ``trust``: the env's trust line, and where fp16 is proposed, where its cost
    comes from (:attr:`autotuner.model.costmodel.Fp16Cost.source`: measured, or from a GPU's datasheet).
    fp16 is proposed only where that cost is known (an fp16 phase, or ``gpu``, the env's ``cluster.gpu``, in
    :data:`autotuner.specs.GPUS`); otherwise ``notes`` says why.

    Raises ScenarioError for a strategy without ``trials``, an unknown compression, or a lossy one
    (:data:`~autotuner.model.scenario.LOSSY`: never proposed).
    """
    import time

    from .search.grid import concat_tables, neighbourhood, table_trials
    from .search.ranking import MIN_GAIN, Origin, Trial, minimal_change, top_distinct

    if sc.layout.n_tensors > MAX_SEARCH_TENSORS:
        raise ScenarioError(f"layout {sc.layout.name!r} has {sc.layout.n_tensors:,} tensors; suggest searches layouts of "
                            f"up to {MAX_SEARCH_TENSORS:,} (20,000 take ~9 s and ~430 MB here): simulate single "
                            "configurations of it instead")
    comps = list(HOROVOD_COMPRESSIONS if compressions is None else compressions)
    if not comps:
        raise ScenarioError("no compression to search")
    for c in comps:
        if c not in COMPRESSION_RATIO:
            raise ScenarioError(f"unknown compression {c!r}; use one of {', '.join(COMPRESSION_RATIO)}")
        if c in LOSSY:
            raise ScenarioError(f"suggest never proposes lossy compression: {LOSSY[Compression(c)]}")
    comps = [Compression(c) for c in dict.fromkeys(comps)]
    refc = Compression.none if Compression.none in comps else comps[0]
    comps.sort(key=lambda c: c != refc)  # the reference's compression first

    notes = []
    if fixed and fixed.get("hierarchical_allreduce") and not sc.has_hierarchical_allreduce:
        notes.append(f"{KNOB_BY_FIELD['hierarchical_allreduce'].flag} not kept (searched off): "
                     f"{hierarchical_allreduce_note(sc.effective_backend)}")
    user_fixed = dict(fixed or {})  # the knobs the caller fixed, any the backend ignores pinned off
    fixed = {k: v for k, v in pin_unsupported_off(user_fixed, sc.effective_backend).items() if k in user_fixed}

    if strategy is not None and not callable(getattr(strategy, "trials", None)):
        raise ScenarioError(f"not a search strategy: {strategy!r} (use GridStrategy() or BayesStrategy())")
    t0 = time.perf_counter()
    ref = replace(defaults_for(reference_version), **(fixed or {}))
    scs = {c: replace(sc, compression=str(c)) for c in comps}
    n_trials, found, picks = 0, {}, {}
    band_f = float(band["band"]) if band else MIN_GAIN
    for k, c in enumerate(comps):
        # the noise-aware choice reads the whole default grid around the reference; a strategy's
        # own trials (Bayesian search, another grid) are pooled with it
        table = neighbourhood(scs[c], ref, fixed or {})
        n_trials += len(table["step_time_ms"])
        trials = table_trials(table, 64, Origin.search)
        if strategy is not None:
            own = strategy.trials(scs[c], ref, fixed or {})
            n_trials += len(own)
            trials = own + trials
            table = concat_tables(table, _trials_table(own))
        found[c] = top_distinct(trials, top, ref)
        picks[c] = minimal_change(table, ref, band_f)
        if progress is not None:
            progress(k + 1, len(comps))
    wall = time.perf_counter() - t0
    base = scs[refc].simulate(ref)
    kp = picks[refc]
    knob_pick = Trial(kp.config, kp.step_time_s, Origin.search)
    cut = kp.best_step_time_s * (1 - band_f)
    # a compression is proposed only where what it costs besides the bytes is known (CostModel.fp16: measure's
    # fp16 phase on CPU ranks, or the GPU's datasheet memory bandwidth, specs.GPUS): on the CPU testbed the bytes
    # alone were 13-24 % optimistic (docs/tune.md)
    calibrated = {c: c == Compression.none or scs[c].cost.fp16 is not None for c in comps}
    winners = sorted(((Trial(picks[c].config, picks[c].step_time_s, Origin.search), c) for c in comps[1:]
                      if picks[c].best_step_time_s < cut and calibrated[c]), key=lambda tc: tc[0].step_time_s)
    for c in comps[1:]:
        if picks[c].best_step_time_s < cut and not calibrated[c]:
            from .specs import GPUS

            on_gpu = bool(gpu) and not _cpu_ranks(str(gpu))
            why = (f"its GPU {gpu!r} is not in the table of device memory bandwidths (autotuner.specs.GPUS: "
                   f"{', '.join(GPUS)}) and it has no fp16 phase, so what {c} costs besides the bytes (the casts, "
                   f"the {c} sum) is unknown" if on_gpu else
                   f"{sc.env} never measured what {c} costs besides the bytes (the casts, the {c} sum: autotuner "
                   "measure's fp16 phase)")
            notes.append(f"{c} compression not proposed: predicted {picks[c].best_step_time_s * 1e3:.1f} ms from the "
                         f"bytes alone, but {why}; on the emulated testbed the bytes alone were "
                         "13-24 % optimistic (docs/tune.md)")
    rest = [(t, refc) for t in found[refc] if t.config != kp.config]
    picked = (winners + [(knob_pick, refc)] + rest)[:top]

    def entry(c: Config, comp: Compression, r: StepResult | None = None) -> dict:
        r = r or scs[comp].simulate(c)
        return {"config": c.to_dict(), "compression": str(comp), "compression_code": COMPRESSION_CODE[comp],
                "step_time_ms": r.step_time_ms, "speedup_vs_default": base.step_time_s / r.step_time_s,
                "score_bytes_per_us": r.score_bytes_per_us, "horovodrun_flags": horovodrun_flags(c),
                "env_vars": horovod_env(c)}
    res = {"env": sc.env, "model": sc.model, "layout": sc.layout.name,
           "nodes": sc.cluster.nodes, "gpus_per_node": sc.cluster.gpus_per_node,
           "default": entry(ref, refc, base), "proposals": [entry(t.config, c) for t, c in picked],
           "evaluations": n_trials, "search_seconds": wall}
    res["keep_defaults"] = kp.keep_defaults and not winners
    res["knob_only"] = entry(kp.config, refc)
    res["pick"] = {"band": band_f, "band_source": band["source"] if band else f"the {MIN_GAIN:.1%} tie rule",
                   "gain": kp.gain, "keep_knobs": kp.keep_defaults, "best_step_time_ms": kp.best_step_time_s * 1e3, "best_config": kp.best.to_dict(),
                   "equivalent": kp.equivalent, "threshold_mib": list(kp.threshold_mib), "cycle_ms": list(kp.cycle_ms)}
    res["trust"] = band["line"] if band else None
    fp16_src = next((scs[c].cost.fp16.source for _, c in picked if c == Compression.fp16
                     and scs[c].cost.fp16 is not None and scs[c].cost.fp16.source), None)
    if fp16_src:
        res["trust"] = (res["trust"] + "; " if res["trust"] else "") + f"fp16 term {fp16_src}"
    res["reference_version"] = reference_version or LAST_RELEASE
    res["strategy"] = "grid" if strategy is None else type(strategy).__name__
    res["backend"] = sc.backend  # the --backend what-if simulated (None: the env's own)
    res["min_gain"] = band_f
    res["compressions_searched"] = [str(c) for c in comps]
    res["best_by_compression"] = {str(c): found[c][0].step_time_s * 1e3 for c in comps}
    res["compression_notes"] = {str(c): COMPRESSION_NUMERICS[c] for c in dict.fromkeys(
        [refc] + [c for _, c in picked]) if c in COMPRESSION_NUMERICS}
    if fixed:
        res["fixed"] = dict(fixed)
    res["notes"] = notes
    return res


def suggest(model: str, env: str | None = None, *, fixed: Mapping[str, Any] | None = None,
            compression: str | None = None, strategy=None, top: int = 3, nodes: int | None = None,
            gpus_per_node: int | None = None, bandwidth_gbps: float | None = None, compute_ms: float | None = None,
            backend: str | None = None, model_dir: Path | Sequence[Path] | None = None, progress=None,
            reference_version: str | None = None):
    """Best knobs for ``model`` on ``env``: ``autotuner suggest`` as a function.

    Args:
        model: a shipped layout (``vgg16``), a layout ``.json`` path, or ``pkg.mod:factory``.
        env: a fitted environment (None: the one marked default).
        fixed: knobs kept, by option name in flag units (``{"cycle_time_ms": 5,
            "fusion_threshold_mb": 64}``) or field name; the others are searched and the reference is
            Horovod's defaults (of ``reference_version``) with these applied.
        compression: pin the gradient compression (``none`` or ``fp16``); None searches both.
        strategy: a :class:`autotuner.search.ranking.Strategy` object
            (:class:`~autotuner.search.grid.GridStrategy`, :class:`~autotuner.search.bayes.BayesStrategy`)
            whose trials are pooled with the exact grid; None: the exact grid alone (fast simulator).
        top: proposals returned (>= 1).
        nodes, gpus_per_node, bandwidth_gbps (Gbit/s), compute_ms (forward + backward, ms),
            backend: what-ifs, as :func:`make_scenario`.
        model_dir: fitted models searched first (None: :func:`autotuner.paths.model_search_path`).
        progress: called as ``progress(done, total)`` once per compression searched.
        reference_version: the Horovod release whose defaults the proposals are compared with
            (``"0.28.1"``, ``"0.20.3"``: 64 MiB / 5 ms before 0.21.0, 128 MiB / 1 ms since); None: the
            env's own (its model file's ``cluster.horovod_version``, from env.toml), else the last release.

    Returns a :class:`autotuner.results.SuggestResult`. Raises an
    :class:`~autotuner.errors.AutotunerError` subclass (one-line message) for an unknown model,
    env, knob or compression, a lossy compression, a bad value, a string that names no Horovod
    release or a too-large layout.
    """
    from .knobs import fixed_fields
    from .results import SuggestResult

    if not isinstance(top, int) or top < 1:
        raise ScenarioError(f"top must be a whole number >= 1, got {top!r}")
    if compression is not None and compression in LOSSY:
        raise ScenarioError(f"suggest never proposes lossy compression: {LOSSY[Compression(compression)]}")
    fx = fixed_fields(fixed, "fixed")
    asked = None if reference_version is None else check_horovod_version(reference_version, "reference_version")
    dirs = _model_dirs(model_dir)
    sc, fenv = make_scenario(dirs, env, model, nodes=nodes, gpus_per_node=gpus_per_node,
                             bandwidth_gbps=bandwidth_gbps, compression=compression or "none",
                             compute_ms=compute_ms, backend=backend)
    version, note = asked, None
    if version is None:
        version, note = env_horovod_version(fenv)
    res = suggest_scenario(sc, top=top, strategy=strategy, progress=progress, fixed=fx,
                           gpu=(fenv.raw.get("cluster") or {}).get("gpu"),
                           compressions=None if compression is None else (compression,),
                           band=error_band(dirs, fenv), reference_version=version)
    if note:
        res["notes"] = [note] + list(res["notes"])
    return SuggestResult.from_dict(res, link_gbps=sc.cost.link_gbps, warnings=layout_warnings(sc, fenv))


def env_horovod_version(fenv) -> tuple[str, str | None]:
    """The Horovod release ``fenv`` (a :class:`autotuner.fit.store.FittedEnv`) ran: its model file's
    ``cluster.horovod_version`` (``fit`` copies it from env.toml), and None; the last release
    (:data:`autotuner.knobs.LAST_RELEASE`) when it names none, with a one-line note when it names something
    that is no Horovod release."""
    v = (fenv.raw.get("cluster") or {}).get("horovod_version")
    if v is None:
        return LAST_RELEASE, None
    try:
        return check_horovod_version(v, f"{fenv.name}: horovod_version"), None
    except KnobError as e:
        return LAST_RELEASE, f"{e}; Horovod {LAST_RELEASE}'s defaults are the reference"


def simulate(model: str, env: str | None = None, *, config: Config | Mapping[str, Any] | None = None,
             compression: str = "none", nodes: int | None = None, gpus_per_node: int | None = None,
             bandwidth_gbps: float | None = None, compute_ms: float | None = None, backend: str | None = None,
             model_dir: Path | Sequence[Path] | None = None, timeline: Path | None = None, timeline_steps: int = 2):
    """Predicted step of one configuration: ``autotuner simulate`` as a function.

    ``config``: a :class:`~autotuner.knobs.Config`, or knobs by option name in flag units / field
    name (unset ones take Horovod 0.28.1's defaults; None: the defaults). ``compression``: the
    gradient compression simulated (a lossy one is simulated as asked, and ``warnings`` says so).
    ``timeline``: also write the simulated steps (``timeline_steps`` of them) as a Horovod timeline
    there. Other arguments as :func:`suggest`. Returns a :class:`autotuner.results.SimulateResult`;
    raises an :class:`~autotuner.errors.AutotunerError` subclass (one line) for bad input.
    """
    from .knobs import config_from_values
    from .results import Response, SimulateResult

    cfg = config if isinstance(config, Config) else config_from_values(dict(config or {}))
    if timeline is not None:
        check_output_dir(Path(timeline).parent, "--timeline")
    dirs = _model_dirs(model_dir)
    sc, fenv = make_scenario(dirs, env, model, nodes=nodes, gpus_per_node=gpus_per_node,
                             bandwidth_gbps=bandwidth_gbps, compression=compression, compute_ms=compute_ms,
                             backend=backend)
    notes, warnings = [], []
    if compression in LOSSY:  # simulated as asked, never silently
        warnings.append(LOSSY[Compression(compression)])
    why = hierarchical_allreduce_note(sc.effective_backend) if cfg.hierarchical_allreduce else None
    if why:
        notes.append(f"{KNOB_BY_FIELD['hierarchical_allreduce'].flag} simulated as off on backend "
                     f"{sc.effective_backend}: {why}")
    r = sc.simulate(cfg)
    written = None
    if timeline is not None:
        written, _ = write_simulated_timeline(sc, fenv, cfg, Path(timeline), steps=timeline_steps)
    run = sc.run
    return SimulateResult(
        env=sc.env, model=sc.model, layout=sc.layout.name, n_tensors=sc.layout.n_tensors,
        layout_mib=sc.layout.total_bytes / 2**20, nodes=sc.cluster.nodes, gpus_per_node=sc.cluster.gpus_per_node,
        link_gbps=sc.cost.link_gbps, compression=sc.compression, backend=sc.backend, config=cfg,
        step_time_ms=r.step_time_ms, comm_ms=r.comm_s * 1e3, overlap=r.overlap,
        score_bytes_per_us=r.score_bytes_per_us, bytes_per_step=r.bytes_per_step,
        responses=tuple(Response(x.nbytes, x.n_tensors, x.start_s * 1e3, x.duration_s * 1e3) for x in r.responses),
        trust=error_band(dirs, fenv)["line"], warnings=tuple(warnings + layout_warnings(sc, fenv)),
        notes=tuple(notes),
        steps_per_rank=None if run is None else run.steps_per_rank(sc.cluster.size),
        wall_time_s=None if run is None else sc.wall_s(r.step_time_s),
        startup_s=None if run is None else run.startup_s,
        timeline=None if written is None else str(written))


def fit_environments(runs_dir: Path, out: Path | None = None):
    """``autotuner fit`` (named so: ``autotuner.fit`` is the fitting package): a cost model per environment under ``runs_dir``, written as
    ``<env>.json`` (+ a bandwidth plot) to ``out`` (default: ``$AUTOTUNER_MODEL_DIR``, else the
    user's model folder, :func:`autotuner.paths.model_output_dir`). Returns a
    :class:`autotuner.results.FitResult`; raises an AutotunerError (one line) for an unusable
    runs folder or output folder, and FitError when nothing could be fitted."""
    from .errors import FitError
    from .fit import fitters  # noqa: F401  (the fitters and scipy load before --out is made)
    from .paths import model_output_dir
    from .results import FitResult

    default_folder, model_dir = out is None, model_output_dir(out)
    check_output_dir(model_dir, "--out")
    fitted, problems = fit_runs(Path(runs_dir), model_dir)
    if not fitted:
        raise FitError("no environment could be fitted" + (f" ({len(problems)} input problem(s): "
                                                            f"{problems[0]})" if problems else ""))
    return FitResult(tuple(fitted), tuple(problems), model_dir, default_folder)


def inspect_log(path: Path, model: str | None = None) -> list[str]:
    """``autotuner inspect``: a Horovod autotune log (``--autotune-log-file`` CSV) explained, one
    line each (:func:`autotuner.readers.autotune_log.explain`); with ``model`` (a layout) the score
    is also turned into a time per step. Raises AutotuneLogError / LayoutError (one line)."""
    from .readers.autotune_log import explain, read_autotune_log

    log = read_autotune_log(Path(path))
    return explain(log, load_layout(model).total_bytes if model else None)


def explore(model: str, env: str | None = None, *, config: Config | Mapping[str, Any] | None = None,
            pick_file: Path | None = None, suggest_pick: bool = True, resolution: int = 64,
            nodes: int | None = None, gpus_per_node: int | None = None, bandwidth_gbps: float | None = None,
            compression: str = "none", compute_ms: float | None = None, backend: str | None = None,
            out_dir: Path = Path("explore"), runs_dir: Path | Sequence[Path] | None = None,
            model_dir: Path | Sequence[Path] | None = None):
    """``autotuner explore``: predicted step time over fusion threshold x cycle time for every on/off
    combination (:func:`autotuner.views.explore.explore`), heatmaps and a sensitivity plot written to
    ``out_dir`` (PNG + SVG), the measured validation trials of the env overlaid when the scenario is
    the measured one (no what-if).

    The marked configuration: ``config`` (knobs by option name or a Config), else the first of
    ``pick_file`` (``suggest --json`` output or a list), else suggest's own pick for this compression
    (:func:`suggest_scenario`, with the env's error band: the same answer as ``autotuner suggest
    --compression C``) when ``suggest_pick``. ``resolution``: points per axis. Returns an
    :class:`autotuner.results.ExploreResult`; raises an AutotunerError (one line) for bad input."""
    import time

    from .knobs import config_from_values
    from .readers.runs import read_validation_records
    from .results import ExploreResult
    from .views.explore import explore as explore_grid
    from .views.plots_explore import heatmaps, sensitivity_plot

    mdirs, rdirs = _model_dirs(model_dir), _runs_dirs(runs_dir)
    check_output_dir(Path(out_dir), "--out")
    sc, fenv = make_scenario(mdirs, env, model, nodes=nodes, gpus_per_node=gpus_per_node, bandwidth_gbps=bandwidth_gbps,
                             compression=compression, compute_ms=compute_ms, backend=backend)
    t0 = time.perf_counter()
    label, t_suggest = "suggest pick", None
    if config is not None:
        pick, label = (config if isinstance(config, Config) else config_from_values(dict(config))), "given configuration"
    elif pick_file is not None:
        pick = load_proposals(Path(pick_file))[0]
    elif suggest_pick:
        pick = Config.from_dict(suggest_scenario(sc, top=1, compressions=(str(compression),),
                                                 band=error_band(mdirs, fenv),
                                                 reference_version=env_horovod_version(fenv)[0])["proposals"][0]["config"])
        t_suggest = time.perf_counter() - t0
    else:
        pick = None
    # each measured job is predicted with its own compression (views.explore.measured_points): any map shows them
    same_setup = nodes is None and gpus_per_node is None and bandwidth_gbps is None and backend is None
    records = read_validation_records(rdirs, sc.env) if same_setup else []
    ex = explore_grid(sc, resolution=resolution, suggested=pick, measured_records=records, pick_label=label)
    t1 = time.perf_counter()
    stem = Path(out_dir) / f"{sc.env}-{Path(sc.model).stem}"
    files = heatmaps(ex, stem.with_name("explore-" + stem.name)) + \
        sensitivity_plot(ex, stem.with_name("sensitivity-" + stem.name))
    return ExploreResult(ex, tuple(str(f) for f in files), t_suggest, time.perf_counter() - t1, same_setup,
                         sc.backend, sc.compression)


def scale(model: str, env: str | None = None, *, nodes: Sequence[int] | None = None, ranks: Sequence[int] | None = None,
          gpus_per_node: int | None = None, bandwidths_gbps: Sequence[float] | None = None,
          batch_size: int | None = None, compute_ms: float | None = None, compression: str = "none",
          backend: str | None = None, out_dir: Path = Path("scale"), runs_dir: Path | Sequence[Path] | None = None,
          model_dir: Path | Sequence[Path] | None = None):
    """``autotuner scale``: what-if at scale (:func:`autotuner.views.scale.scale`): per node count
    (``nodes``; default 1, 2, 4, ..., 64) or per rank count on one node (``ranks``), and per link
    rate (``bandwidths_gbps``, Gbit/s; default the env's), the best configuration and the defaults'
    step time, throughput and scaling efficiency; the plot written to ``out_dir``. The batch per GPU
    (for samples/s) is ``batch_size``, else a profiled layout's, else the env's (runs/<env>/env.toml),
    else its timed run's. Returns an :class:`autotuner.results.ScaleResult`; raises an
    AutotunerError (one line) for bad input (``nodes`` with ``ranks``, ``ranks`` with
    ``gpus_per_node``, non-positive counts or rates)."""
    from .errors import ExploreError
    from .results import ScaleResult
    from .views.plots_explore import scale_plot
    from .views.scale import scale as scale_grid

    if ranks is not None and nodes is not None:
        raise ExploreError("--ranks and --nodes: give one (--ranks: ranks on one node; --nodes: node counts)")
    if ranks is not None and gpus_per_node is not None:
        raise ExploreError("--ranks and --gpus-per-node: give one (--ranks sets the ranks on the one node)")
    mdirs, rdirs = _model_dirs(model_dir), _runs_dirs(runs_dir)
    check_output_dir(Path(out_dir), "--out")
    sc, fenv = make_scenario(mdirs, env, model, compression=compression, compute_ms=compute_ms, backend=backend)
    env_batch = env_batch_size(rdirs, sc.env)
    batch = (batch_size or (sc.layout.batch_size if sc.layout.measured else None) or env_batch
             or (sc.run.batch_size if sc.run else None))
    ns = None if ranks is not None else list(nodes if nodes is not None else SCALE_NODES)
    res = scale_grid(sc, ns, gpus_per_node=gpus_per_node, bandwidths_gbps=bandwidths_gbps, batch_per_gpu=batch,
                     ranks=None if ranks is None else list(ranks))
    files = scale_plot(res, Path(out_dir) / f"scale-{sc.env}-{Path(sc.model).stem}")
    return ScaleResult(res, tuple(str(f) for f in files), error_band(mdirs, fenv)["line"],
                       tuple(layout_warnings(sc, fenv, batch_size or env_batch)), batch, sc.run, sc.backend)


#: ``scale``'s node counts when neither nodes nor ranks is given
SCALE_NODES = (1, 2, 4, 8, 16, 32, 64)


def validate(env: str, model: str, *, command: Sequence[str] = (), np: int = 2, hosts: str = "",
             bandwidth_gbit: float | None = None, testbed_hosts: int | None = None, ranks_per_host: int | None = None,
             link_gbit: float | None = None, replay_wait: str = "spin", compute_ms: float | None = None,
             steps: int = 6, warmup: int = 2, repeats: int = 3, top: int = 1, proposals_file: Path | None = None,
             autotune: bool = True, defaults: bool = True, name: str | None = None, timeout_s: float = 600.0,
             keep_timelines: bool = False, timeline: bool | None = None, batch_size: int | None = None,
             runs_dir: Path | None = None, model_dir: Path | Sequence[Path] | None = None, on_event=None):
    """``autotuner validate``: real ``horovodrun`` trials of Horovod's defaults, its autotune and
    autotune's best, and the proposals (``proposals_file``, else suggest's top ``top`` without
    compression), ``repeats`` times each, interleaved (:func:`run_validation`), with the replay
    workload of ``model`` or the user's ``command``. Records go to ``runs_dir/<env>/validation/``
    (default: ``$AUTOTUNER_RUNS_DIR``, else ./runs, else the user's folder), appended trial by trial;
    a re-run resumes. ``timeline``: record Horovod's timeline in every fixed-configuration trial (for
    responses/step; its writer's cost is then in every step time); None: only with ``keep_timelines``, so
    by default the trials are the production job the predictions are for. Returns a
    :class:`autotuner.results.ValidateResult`; raises an AutotunerError (one line) for bad input, a
    proposal the plan already holds, or a missing horovodrun."""
    from .paths import runs_output_dir
    from .results import ValidateResult

    load_layout(model)  # fail fast on an unknown model
    setup = validation_setup(env=env, model=model, np=np, hosts=hosts, bandwidth_gbit=bandwidth_gbit,
                             compute_ms=compute_ms, steps=steps, warmup=warmup, command=tuple(command or ()),
                             batch_size=batch_size, testbed_hosts=testbed_hosts, ranks_per_host=ranks_per_host,
                             link_gbit=link_gbit, replay_wait=replay_wait)
    proposals = load_proposals(Path(proposals_file)) if proposals_file else None
    recs, report, verdict = run_validation(setup, runs_dir=runs_output_dir(runs_dir), model_dir=_model_dirs(model_dir),
                                           name=name or Path(model).stem, proposals=proposals, top=top,
                                           repeats=repeats, autotune=autotune, defaults=defaults, timeout_s=timeout_s,
                                           keep_timelines=keep_timelines, timeline=timeline, on_event=on_event)
    return ValidateResult(tuple(recs), report, verdict)


#: d2 for 3 samples (the expected range of 3 normal samples in standard deviations, the control-chart constant
#: tabulated in ASTM E2587 / ISO 7870-2): a repeat spread measured as (max - min) over 3 trials is 1.693 sigma
D2_THREE = 1.693
#: one trial's relative noise when the env has no repeat spread to turn into one (fraction)
NOISE_FALLBACK = 0.02


def tune(env: str, model: str, *, command: Sequence[str] = (), np: int = 2, hosts: str = "",
         bandwidth_gbit: float | None = None, testbed_hosts: int | None = None, ranks_per_host: int | None = None,
         link_gbit: float | None = None, replay_wait: str = "spin", compute_ms: float | None = None,
         steps: int = 6, warmup: int = 2, budget_steps: int = 240, compressions: Sequence[str] = ("none",),
         against_autotune: bool = False, repeats: int = 3, name: str | None = None, timeout_s: float = 600.0,
         autotune_timeout_s: float = 3600.0, batch_size: int | None = None, runs_dir: Path | None = None,
         model_dir: Path | Sequence[Path] | None = None, on_event=None, progress=None):
    """``autotuner tune``: Bayesian optimisation on real ``horovodrun`` trials with the simulator as its prior
    (:mod:`autotuner.realrun.tune`, :mod:`autotuner.search.tune`), on the testbed ``validate`` uses.

    Trials of ``steps`` measured + ``warmup`` steps each, at most ``budget_steps`` steps in all, over the
    candidate grid with ``compressions`` (``none``, ``fp16``), without Horovod's timeline; records appended to
    ``runs_dir/<env>/tune/<name>.jsonl`` trial by trial (a re-run resumes). ``against_autotune``: then Horovod's
    autotune with its default settings on the same job (steps and seconds until it settles), and the defaults,
    tune's final and autotune's final measured ``repeats`` times, interleaved (``validation/<name>-h2h.jsonl``).
    ``progress(steps, budget, incumbent)`` after each decision; ``on_event(line)`` per trial.

    Returns a :class:`autotuner.results.TuneResult`. Raises an AutotunerError (one line): a bad budget or
    compression, an env without a fitted model, a missing horovodrun, a testbed that cannot be built.
    """
    import statistics

    from .fit.store import ModelStoreError
    from .knobs import horovod_env, horovodrun_flags
    from .model.scenario import COMPRESSION_CODE
    from .paths import runs_output_dir
    from .realrun.launcher import horovodrun_path, testbed_for
    from .realrun.tune import TUNE_KIND, run_tune
    from .realrun.validation import TrialRunner, TrialStore, ValidationError
    from .results import TuneResult

    say = on_event or (lambda s: None)
    load_layout(model)
    comps = list(dict.fromkeys(str(c) for c in compressions))
    for c in comps:
        if c not in ("none", "fp16"):
            raise ValidationError(f"--compression {c}: tune runs none or fp16 (Horovod 0.28.1's lossless-enough "
                                  "compressors; lossy ones stay out of the search)")
    if not comps:
        raise ValidationError("--compression: give none, fp16 or both")
    if command and comps != ["none"]:
        raise ValidationError("--compression fp16 needs the replay workload: your own script sets its compression "
                              "itself (drop --compression or the command)")
    setup = validation_setup(env=env, model=model, np=np, hosts=hosts, bandwidth_gbit=bandwidth_gbit,
                             compute_ms=compute_ms, steps=steps, warmup=warmup, command=tuple(command or ()),
                             batch_size=batch_size, testbed_hosts=testbed_hosts, ranks_per_host=ranks_per_host,
                             link_gbit=link_gbit, replay_wait=replay_wait)
    per_trial = setup.steps + setup.warmup
    if budget_steps < 2 * per_trial:
        raise ValidationError(f"--budget-steps {budget_steps}: at least 2 trials of {per_trial} steps "
                              f"(--steps {setup.steps} + --warmup {setup.warmup}) are needed: the simulator's best "
                              "and the defaults")
    mdirs = _model_dirs(model_dir)
    topo = setup.topology or (None, None)
    if command and compute_ms is None and not load_layout(model).measured:
        raise ValidationError("tune's prior needs your step's compute time: pass --compute-ms (forward + backward, "
                              "ms) or a profiled layout (autotuner profile)")
    try:
        sc, fenv = make_scenario(mdirs, env, model, nodes=topo[0], gpus_per_node=topo[1], compute_ms=setup.compute_ms)
    except (ModelStoreError, ScenarioError) as e:
        raise ValidationError(f"tune needs the env's fitted model as its prior: {e}") from None
    if horovodrun_path() is None:
        raise ValidationError("horovodrun not found: install Horovod with scripts/install_horovod.sh")
    band = error_band(mdirs, fenv)
    spread = (band.get("trust") or {}).get("repeat_spread_pct")
    noise_fallback = spread / 100 / D2_THREE if spread else NOISE_FALLBACK
    name = name or f"tune-{Path(model).stem}"
    runs = runs_output_dir(runs_dir)
    tdir = runs / env / "tune"
    check_output_dir(tdir, "--runs-dir")
    store = TrialStore(tdir / f"{name}.jsonl")
    scratch = tdir / f".scratch-{name}"
    h2h = None
    with _sigterm_as_exit():
        with testbed_for(setup.topology, setup.bandwidth_gbit, setup.link_gbit) as (tb, net_note):
            say(net_note)
            say(f"prior: {fenv.path}; error band {band['band']:.1%} ({band['source']}); one trial's noise until "
                f"repeats measure it: {noise_fallback:.1%}")
            runner = TrialRunner(setup, scratch, tb.prefix, timeout_s, launcher=tb.launcher, timeline=False)
            ans, recs = run_tune(setup, sc, store, runner, compressions=comps, budget_steps=budget_steps,
                                 prior_sd_band=band["band"], noise_fallback=noise_fallback, testbed_note=net_note,
                                 say=say, progress=progress or (lambda *a: None))
            if against_autotune and ans.candidate is not None:
                h2h = _head_to_head(setup, ans.candidate, runs / env / "validation", name, tb, net_note, runner,
                                    repeats=repeats, autotune_timeout_s=autotune_timeout_s, say=say,
                                    predict=lambda c, comp="none": sc.simulate(c).step_time_ms if comp == "none"
                                    else replace(sc, compression=comp).simulate(c).step_time_ms)
    import shutil

    shutil.rmtree(scratch, ignore_errors=True)
    tune_recs = [r for r in recs if r.get("kind") == TUNE_KIND]
    defaults_ms = tuple(float(r["measured_step_time_ms"]) for r in tune_recs
                        if r["status"] == "ok" and r["config"] == DEFAULTS_0_28.to_dict()
                        and r.get("compression", "none") == "none")
    final = None
    if ans.candidate is not None:
        c = ans.candidate
        final = {"key": c.key, "config": c.config.to_dict(), "compression": c.compression,
                 "compression_code": COMPRESSION_CODE.get(c.compression, ""), "measured_ms": list(ans.measured_ms),
                 "median_ms": float(statistics.median(ans.measured_ms)),
                 "flags": horovodrun_flags(c.config), "env": horovod_env(c.config)}
    from .realrun.tune_report import write_tune_report

    report = write_tune_report(tdir / f"{name}-report.md", setup=setup, records=tune_recs, final=final, stop=ans.stop,
                               steps=ans.steps, budget=budget_steps, wall_s=ans.wall_s, band=band,
                               noise_fallback=noise_fallback, head_to_head=h2h)
    return TuneResult(final, ans.steps, ans.trials, ans.wall_s, ans.stop, tuple(ans.refits), defaults_ms,
                      tuple(tune_recs), report, band["line"], h2h)


def _head_to_head(setup, cand, vdir: Path, name: str, tb, net_note: str, runner, *, repeats: int,
                  autotune_timeout_s: float, say, predict) -> dict:
    """Horovod's default autotune on the same job (steps and seconds until it settled), then the defaults, tune's
    final and autotune's final, ``repeats`` interleaved rounds; records in ``vdir/<name>-h2h.jsonl``."""
    from .realrun.launcher import AutotuneSettings, Job, replay_command
    from .realrun.report import table, write_report
    from .realrun.tune import run_default_autotune
    from .realrun.validation import (STEPS_VAR, WARMUP_VAR, TrialSpec, TrialStore, ValidationError,
                                     autotune_best_config, make_record, matching, plan, run_pending)

    check_output_dir(vdir, "--runs-dir")
    store = TrialStore(vdir / f"{name}-h2h.jsonl")
    recs = matching(store.records(), setup)
    at = [r for r in recs if r["kind"] == "autotune" and r["status"] == "ok"]
    if not at:
        scratch = runner.scratch.resolve()
        scratch.mkdir(parents=True, exist_ok=True)
        log = scratch / "h2h-autotune.csv"
        log.unlink(missing_ok=True)
        settings = AutotuneSettings(log, 3, 10, 20)  # Horovod 0.28.1's own (parameter_manager.cc)
        long_steps = 20000  # stopped as soon as the log says tuning finished
        s = setup
        command = s.command or replay_command(s.model, s.compute_ms, long_steps, 0, s.update_ms, s.replay_wait)
        job = Job(np=s.np, hosts=s.hosts, command=tuple(command), config=None, autotune=settings, prefix=tb.prefix,
                  launcher=tb.launcher, extra_env={STEPS_VAR: str(long_steps), WARMUP_VAR: "0"})
        say("autotune: Horovod's default autotune on the same job (3 warm-up samples, 10 steps per sample, "
            "20 Bayesian samples per combination), until its log's best row")
        out, settled = run_default_autotune(job, autotune_timeout_s, log)
        spec = TrialSpec("autotune/r0", "autotune", 0, None, "autotune")
        rec = make_record(spec, setup, out, None, net_note)
        rec["settled"] = settled
        store.append(rec)
        say(f"autotune: {'settled' if settled['finished'] else 'did not settle'} after {settled['steps']} steps, "
            f"{settled['wall_s']} s ({settled['rows']} log rows)")
        recs = matching(store.records(), setup)
        at = [r for r in recs if r["kind"] == "autotune" and r["status"] == "ok"]
    if not at:
        raise ValidationError(f"Horovod's autotune did not settle: {recs[-1].get('error') if recs else 'no record'}")
    best = autotune_best_config(at[-1]["autotune"])
    proposal = cand.config if cand.compression == "none" else (cand.config, cand.compression)
    same_as_defaults = cand.compression == "none" and cand.config == DEFAULTS_0_28
    # tune's final runs as proposal-1 even when it is the defaults: the verdict compares it by name
    specs = plan([proposal], repeats=repeats, autotune=False, defaults=True, autotune_best=best)

    def done(rec):
        m = rec["measured_step_time_ms"]
        say(f"{rec['trial']}: {rec['status']}" + (f", {m:.1f} ms/step" if m else ""))

    recs = run_pending(specs, store, setup, runner, predict, net_note, done)
    report = vdir / f"{name}-h2h-report.md"
    verdict, _ = write_report(recs, report, title=f"tune vs Horovod's default autotune: {setup.model} on {setup.env}",
                              notes=[f"network: {net_note}", f"tune's final: {cand.key}" + (
                                  " (proposal-1; the defaults themselves, run under both names)" if same_as_defaults else
                                  " (proposal-1)"),
                                  f"autotune settled after {at[-1]['settled']['steps']} steps, "
                                  f"{at[-1]['settled']['wall_s']} s"])
    t = table(recs)
    return {"autotune": {**at[-1]["settled"], "best": at[-1]["autotune"].get("best")}, "verdict": verdict,
            "report": str(report), "table": t.drop(columns=["config"]).to_dict(orient="records")}


def _runs_dirs(runs_dir) -> list[Path]:
    """The runs folders searched: ``runs_dir`` first (one), then the default search; a list as given."""
    from .paths import runs_search_path

    if runs_dir is None or isinstance(runs_dir, (str, Path)):
        return runs_search_path(None if runs_dir is None else Path(runs_dir))
    return [Path(p) for p in runs_dir]


def _model_dirs(model_dir) -> list[Path]:
    """The fitted-model folders searched: ``model_dir`` first (one or several), then the default search."""
    from .paths import model_search_path

    if model_dir is None or isinstance(model_dir, (str, Path)):
        return model_search_path(None if model_dir is None else Path(model_dir))
    return [Path(p) for p in model_dir]


def env_new(name: str, *, nodes: int, gpus_per_node: int, intra: str | None = None, inter_gbit: float | None = None,
            backend: str = "nccl", gpu: str | None = None, out: Path | None = None,
            model_dir: Path | Sequence[Path] | None = None) -> Path:
    """``autotuner env new``: write ``<name>.json``, an environment from published link figures
    (:func:`autotuner.specs.spec_model`; every output marks it "from specs, never measured"), to
    ``out`` (default: the user's model folder, :func:`autotuner.paths.model_output_dir`).

    A measured environment always wins: raises ScenarioError (one line, nothing written) when a
    model of that name that was not built from specs exists in ``model_dir``'s search path or in
    ``out``; also for bad figures (:func:`~autotuner.specs.spec_model`) or an unusable name.
    Returns the path written."""
    from .fit.store import find_models, write_model
    from .paths import model_output_dir
    from .readers.files import read_json
    from .specs import is_spec, spec_model

    out = model_output_dir(out)
    for f in [*find_models(_model_dirs(model_dir)).items(), (name, out / f"{name}.json")]:
        if f[0] == name and Path(f[1]).is_file():
            d = read_json(Path(f[1]), ScenarioError, str(f[1]))
            if not (isinstance(d, dict) and is_spec(d)):
                raise ScenarioError(f"env {name!r} is measured ({f[1]}): a measured environment always wins over "
                                    "specs; pick another name")
    d = spec_model(name, nodes=nodes, gpus_per_node=gpus_per_node, intra=intra, inter_gbit=inter_gbit,
                   backend=backend, gpu=gpu)
    check_output_dir(out, "--out")
    from .fit.store import ModelStoreError

    try:
        return write_model(out, d)
    except ModelStoreError as e:
        raise ScenarioError(str(e)) from None


def envs(model_dir: Path | Sequence[Path] | None = None) -> list[dict[str, Any]]:
    """``autotuner envs``: every environment a command can use (the first folder holding
    ``<env>.json`` wins), each with ``env``, ``nodes``, ``gpus_per_node``, ``gpu``, ``backend``,
    ``link_gbps`` (Gbit/s), ``source`` (``measured``, ``lab report``, ``specs``), ``models``
    (calibrated model names), ``default``, ``path`` and ``trust`` (the trust line, as
    :func:`error_band` gives it). Unreadable files are listed with ``problem`` instead."""
    from .fit.store import find_models, load_env
    from .specs import is_spec

    dirs = _model_dirs(model_dir)
    out = []
    for name, path in sorted(find_models(dirs).items()):
        try:
            fenv = load_env(dirs, name)
        except AutotunerError as e:
            out.append({"env": name, "path": str(path), "problem": str(e)})
            continue
        raw = fenv.raw
        src = str(raw.get("source") or "")
        kind = ("specs" if is_spec(raw) else "lab report" if src.endswith(".md") else "measured")
        c = raw.get("cluster") or {}
        out.append({"env": name, "nodes": c.get("nodes"), "gpus_per_node": c.get("gpus_per_node"),
                    "gpu": c.get("gpu"), "backend": c.get("backend"),
                    "link_gbps": (raw.get("cost_model") or {}).get("link_gbps"), "source": kind,
                    "models": sorted(raw.get("workloads") or {}), "default": bool(raw.get("default")),
                    "path": str(path), "trust": error_band(dirs, fenv)["line"]})
    return out


def env_batch_size(runs_dir: Path | Sequence[Path], env: str) -> int | None:
    """``batch_size`` (samples per GPU per step) from ``<runs>/<env>/env.toml`` (the first folder
    of ``runs_dir`` holding it, when several), or None when there is no such file (or ``env`` is
    not a plain name) or it sets none.

    Raises RunsError or SchemaError (one line) for an env.toml that cannot be read or does not
    match its schema (:func:`autotuner.readers.runs.read_env_meta`).
    """
    from .paths import env_folder
    from .readers.runs import read_env_meta
    from .schemas import is_plain_name

    dirs = [runs_dir] if isinstance(runs_dir, (str, Path)) else list(runs_dir)
    folder = env_folder([Path(d) for d in dirs], env) if is_plain_name(env) else None
    if folder is None:
        return None
    return read_env_meta(folder)[1].batch_size


def load_proposals(path: Path) -> list:
    """Configurations from a JSON file: a list of knob dicts, or ``suggest --json`` output.
    Each is a :class:`Config`, or ``(Config, "fp16")`` for a ``suggest --json`` entry with fp16
    compression (the replay workload applies it, :mod:`autotuner.realrun.replay`).

    The file is checked by :mod:`autotuner.schemas` (:data:`~autotuner.schemas.ProposalList` or
    :class:`~autotuner.schemas.SuggestOutput`; each entry :class:`~autotuner.schemas.Knobs`, or a
    ``suggest --json`` entry whose ``config`` is one: unknown knob names fail, values are checked
    by the knob table). Raises ScenarioError (one line: file, proposal, field, value, reason)
    for an unreadable file or a malformed entry.
    """

    from .readers.files import read_json
    from .schemas import Knobs, ProposalEntry, ProposalList, SuggestOutput, check

    d = read_json(path, ScenarioError, f"proposals {path}")
    if isinstance(d, dict):
        items = check(SuggestOutput, d, str(path), ScenarioError).proposals
    elif isinstance(d, list):
        items = check(ProposalList, d, str(path), ScenarioError)
    else:
        raise ScenarioError(f"{path}: expected a non-empty list of configurations or suggest --json output, "
                            f"got a JSON {type(d).__name__}")
    out = []
    for i, it in enumerate(items, 1):
        where = f"{path}: proposal {i}"
        if isinstance(it, dict) and "config" in it:
            check(ProposalEntry, it, where, ScenarioError)
            comp = str(it.get("compression") or "none")
            if comp not in ("none", "fp16"):
                raise ScenarioError(f"{where} uses {comp} compression: a real run applies none or fp16 only "
                                    "(Horovod 0.28.1's torch compressors)")
            it = it["config"]
        else:
            check(Knobs, it, where, ScenarioError)
            comp = "none"
        try:
            c = Config.from_dict(it)
        except (TypeError, ValueError) as e:
            raise ScenarioError(f"{where}: {e}") from None
        out.append(c if comp == "none" else (c, comp))
    return out


def accuracy_table(runs_dir: Path | Sequence[Path] | None = None, model_dir: Path | Sequence[Path] | None = None,
                   env: str | None = None, cost_model: str | None = None) -> dict[str, Any]:
    """Predicted vs measured for every committed measurement (``autotuner accuracy``); runs and
    models each from one folder (searched first, then the default search) or a list of folders
    searched in order (:mod:`autotuner.paths`); None: the default search.

    Returns ``{"cases": [...], "summary": [...], "notes": [...]}``: each case is one measured
    number (env, quantity, measured, predicted, error in percent, source file and line, and
    ``used_by_fit``: whether the fit was calibrated on it); the summary gives per environment the
    held-out step-time MAPE and worst case (:func:`autotuner.views.accuracy.summary`). Raises
    RunsError for an unreadable runs dir, ScenarioError for an unknown env.
    """
    from .views.accuracy import cases, summary

    runs_dir, model_dir = _runs_dirs(runs_dir), _model_dirs(model_dir)
    notes: list[str] = []
    cs = cases(runs_dir, model_dir, env, notes, cost_model=cost_model)  # cost_model: see views.accuracy.cases
    return {"cases": [{"env": c.env, "quantity": c.what, "measured": c.measured, "predicted": c.predicted,
                       "error_percent": c.error_pct, "source": c.source, "used_by_fit": c.calibrated} for c in cs],
            "summary": summary(cs), "notes": notes}


def _testbed_topology(testbed_hosts: int | None, ranks_per_host: int | None, link_gbit: float | None,
                      hosts: str) -> tuple[int, int] | None:
    """(hosts, ranks per host) of an emulated cluster asked by ``--testbed-hosts H --ranks-per-host L``,
    or None; ValidationError (one line) for a half-given or inconsistent request."""
    from .errors import ValidationError
    from .realrun.testbed import MAX_HOSTS

    if testbed_hosts is None and ranks_per_host is None:
        if link_gbit is not None:
            raise ValidationError("--link-gbit needs --testbed-hosts (one host has no link)")
        return None
    if testbed_hosts is None or ranks_per_host is None:
        raise ValidationError("--testbed-hosts and --ranks-per-host go together")
    if not 1 <= testbed_hosts <= MAX_HOSTS:
        raise ValidationError(f"--testbed-hosts {testbed_hosts}: from 1 to {MAX_HOSTS}")
    if ranks_per_host < 1:
        raise ValidationError(f"--ranks-per-host {ranks_per_host}: at least 1")
    if hosts:
        raise ValidationError("--hosts and --testbed-hosts: give one (the emulated cluster names its own hosts)")
    return testbed_hosts, ranks_per_host


def validation_setup(**kw):
    """A :class:`autotuner.schemas.Setup` (what every trial of a validation shares); ValidationError
    (one line naming the field and value) for a value out of range.

    ``compute_ms=None``: the layout's measured forward + backward when it carries them
    (``autotuner profile``; the replay then splits it in the measured ratio), else Setup's default."""
    from pydantic import ValidationError as PydanticValidationError

    from .errors import ValidationError
    from .realrun.validation import Setup
    from .schemas import one_line

    topo = _testbed_topology(kw.get("testbed_hosts"), kw.get("ranks_per_host"), kw.get("link_gbit"), kw.get("hosts", ""))
    if topo is not None:
        from .realrun.testbed import cluster_hosts

        kw["np"], kw["hosts"] = topo[0] * topo[1], cluster_hosts(*topo)
    if "compute_ms" in kw and kw["compute_ms"] is None:
        layout = load_layout(kw["model"])
        if layout.measured:
            kw["compute_ms"] = round(layout.forward_ms + layout.backward_ms, 4)
        else:
            del kw["compute_ms"]
    try:
        return Setup(**kw)
    except PydanticValidationError as e:
        raise ValidationError(one_line(e, "validate")) from None


def run_validation(setup, *, runs_dir: Path, model_dir: Path | Sequence[Path], name: str, proposals: list[Config] | None,
                   top: int = 1, repeats: int = 3, autotune: bool = True, defaults: bool = True,
                   timeout_s: float = 600.0, keep_timelines: bool = False, timeline: bool | None = None,
                   on_event=None):
    """Real validation of ``setup`` (see :mod:`autotuner.realrun.validation`); returns (records, report path, verdict).

    Trials run in the emulated network of ``setup.bandwidth_gbit`` (:mod:`autotuner.realrun.testbed`;
    plain loopback, said in the report, when it cannot be built). Records are appended to
    ``runs_dir/<env>/validation/<name>.jsonl``; a re-run resumes. With ``keep_timelines`` each
    trial's raw timeline is kept gzipped in ``validation/timelines/<name>/``. ``timeline`` True: the
    fixed-configuration trials record Horovod's timeline (fused-response samples, responses/step), and its
    writer's cost is in their step times (several per cent, more with hundreds of small responses:
    docs/validation.md); False: they run as a production job, the job the predictions are for; None (the
    default): True only with ``keep_timelines``. Records carry ``timeline_recorded``; a trial recorded in
    the other mode is another job, measured again, and the report holds this plan's jobs only.
    ``on_event(str)`` gets one line per finished trial. Raises ScenarioError / ValidationError for
    unusable input.
    """
    import shutil

    from .fit.store import ModelStoreError
    from .realrun.launcher import horovodrun_path
    from .realrun.report import write_report
    from .realrun.validation import TrialStore, ValidationError

    say = on_event or (lambda s: None)
    if horovodrun_path() is None:
        raise ValidationError("horovodrun not found: install Horovod with scripts/install_horovod.sh")
    topo = setup.topology or (None, None)  # an emulated cluster: predict its shape, not the env's
    try:
        sc, fenv = make_scenario(model_dir, setup.env, setup.model, nodes=topo[0], gpus_per_node=topo[1],
                                 compute_ms=None if setup.command else setup.compute_ms)
        def predict(c: Config, compression: str = "none") -> float:
            return replace(sc, compression=compression).simulate(c).step_time_ms

        model_note = f"predictions: cost model {fenv.path}"
    except (ModelStoreError, ScenarioError) as e:
        sc, predict, why = None, (lambda c, compression="none": None), str(e)
        model_note = f"no predictions ({why})"
    if keep_timelines and timeline is False:
        raise ValidationError("--keep-timelines needs the trials' timelines: drop --no-timeline")
    timeline = bool(keep_timelines if timeline is None else timeline)
    if proposals is None:
        if sc is None:
            raise ValidationError(f"cannot propose configurations: {why}; "
                                  "pass --proposals FILE or fit the environment first")
        res = suggest_scenario(sc, top=top, compressions=("none",), band=error_band(model_dir, fenv))
        proposals = list(dict.fromkeys(c for c in (Config.from_dict(p["config"]) for p in res["proposals"])
                                       if not (defaults and c == DEFAULTS_0_28)))
        pk = res["pick"]
        if not proposals and Config.from_dict(pk["best_config"]) != DEFAULTS_0_28:
            # suggest keeps the defaults: run the best configuration it found, to check that decision
            proposals = [Config.from_dict(pk["best_config"])]
            say(f"note: suggest keeps Horovod's defaults on {setup.env} (predicted gain {pk['gain']:.1%}, inside "
                f"the {pk['band']:.1%} band); proposal-1 is the best configuration it found, run to check that")
        if not proposals:
            raise ValidationError(f"suggest's best configuration on {setup.env} is Horovod's defaults: nothing to run "
                                  "beside them; pass --proposals FILE to measure other configurations")
    _refuse_duplicates(proposals, defaults)
    vdir = runs_dir / setup.env / "validation"
    check_output_dir(vdir, "--runs-dir")
    store = TrialStore(vdir / f"{name}.jsonl")
    scratch = vdir / f".scratch-{name}"
    with _sigterm_as_exit():
        recs, net_note, runner, others = _run_trials(setup, store, scratch, proposals, repeats=repeats,
                                             autotune=autotune, defaults=defaults, timeout_s=timeout_s,
                                             predict=predict, say=say, timeline=timeline,
                                             keep=vdir / "timelines" / name if keep_timelines else None)
    for n in store.dropped:  # damaged-store notes: on stderr as well as in the report
        say(f"note: {n}")
    for f in scratch.glob("*-autotune.csv"):
        shutil.copyfile(f, vdir / f"{name}-{f.name}")
    shutil.rmtree(scratch, ignore_errors=True)
    shown = {k: v for k, v in setup.to_dict().items() if v not in (None, "", (), [])}
    notes = ["setup: " + ", ".join(f"{k} {' '.join(v) if isinstance(v, (list, tuple)) else v}"
                                   for k, v in shown.items()), f"network: {net_note}", model_note,
             f"{repeats} repeats per fixed configuration, interleaved; records: {store.path.name}"
             + ("" if timeline else "; trials run without Horovod's timeline, as a production job (--timeline "
                                    "records it, for responses/step)")]
    if others:
        notes.append(f"{others} other record(s) of this setup in {store.path.name} measured other jobs (run "
                     f"{'without' if timeline else 'with'} Horovod's timeline, or other knobs or compression under the "
                     "same trial name): left out of this report")
    if autotune:
        notes.append("Horovod autotune shortened to fit the run: warm-up samples "
                     f"{runner.autotune_warmup_samples}, steps per sample {runner.autotune_steps_per_sample}, "
                     f"at most {runner.autotune_max_samples} samples per categorical combination "
                     "(Horovod's defaults: 3, 10, 20)")
    notes += store.dropped
    report = vdir / f"{name}-report.md"
    verdict, _ = write_report(recs, report, title=f"Validation: {setup.model} on {setup.env}", notes=notes)
    return recs, report, verdict


def _describe(c: Config) -> str:
    return (f"{c.fusion_threshold_bytes / 2**20:g} MiB, {c.cycle_time_ms:g} ms, cache "
            f"{'on' if c.cache_capacity else 'off'}" + (", hierarchical allreduce" if c.hierarchical_allreduce else ""))


def _refuse_duplicates(proposals: Sequence[Config], defaults: bool) -> None:
    """One configuration is measured once per plan: a proposal equal to Horovod's defaults (when
    they run) or to an earlier proposal would be measured twice under two names, and its "gain"
    would be noise. Raises ValidationError (one line) naming both."""
    from .realrun.validation import ValidationError

    from .realrun.validation import split_candidate

    plan = {(DEFAULTS_0_28, "none"): "Horovod's defaults (which run anyway)"} if defaults else {}
    for i, c in enumerate(proposals, 1):
        key = split_candidate(c)
        if key in plan:
            raise ValidationError(f"proposal {i} ({_describe(key[0])}{'' if key[1] == 'none' else ', ' + key[1]}) is "
                                  f"the same configuration as {plan[key]}: drop it from the plan (suggest's \"keep "
                                  "the defaults\" needs no run)")
        plan[key] = f"proposal {i}"


@contextmanager
def _sigterm_as_exit():
    """While validating, SIGTERM raises SystemExit (main thread only) so running jobs are killed."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise SystemExit(128 + signum)

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _run_trials(setup, store, scratch: Path, proposals, *, repeats, autotune, defaults, timeout_s, predict, say,
                keep, timeline: bool = False):
    """Run the autotune trial, then the interleaved fixed-configuration rounds, in the testbed. Returns
    (this plan's records, network note, runner, how many records of this setup measured other jobs)."""
    from .realrun.launcher import testbed_for
    from .realrun.validation import TrialRunner, autotune_best_config, plan, plan_records, run_pending

    with testbed_for(setup.topology, setup.bandwidth_gbit, setup.link_gbit) as (tb, net_note):
        say(net_note)
        runner = TrialRunner(setup, scratch, tb.prefix, timeout_s, keep_timelines=keep, launcher=tb.launcher,
                             timeline=timeline)

        def done(rec):
            m = rec["measured_step_time_ms"]
            say(f"{rec['trial']}: {rec['status']}" + (f", {m:.1f} ms/step" if m else "")
                + (f" (predicted {rec['predicted_step_time_ms']:.1f})" if rec["predicted_step_time_ms"] else "")
                + (f" - {rec['error']}" if rec["error"] else ""))

        at_specs = plan([], repeats=1, autotune=True, defaults=False) if autotune else []
        recs = run_pending(at_specs, store, setup, runner, predict, net_note, done, timeline=timeline)
        at_recs = [r for r in recs if r["kind"] == "autotune" and r.get("autotune")]
        try:
            best = autotune_best_config(at_recs[-1]["autotune"]) if at_recs else None
        except KnobError as e:  # e.g. a cycle time the user's autotune explored beyond the knob table
            say(f"note: autotune's best configuration is outside the knob table ({e}); its fixed re-run is skipped")
            best = None
        specs = plan(proposals, repeats=repeats, autotune=autotune, defaults=defaults, autotune_best=best)
        recs = run_pending(specs, store, setup, runner, predict, net_note, done, timeline=timeline)
    mine = plan_records(recs, specs, timeline)
    return mine, net_note, runner, len(recs) - len(mine)


def measure(*, env: str, runs_dir: Path | None = None, np: int = 2, hosts: str = "", bandwidth_gbit: float | None = None,
            sizes: str | None = None, repeats: int = 5, warmup: int = 1, timeout_s: float = 900.0,
            testbed_hosts: int | None = None, ranks_per_host: int | None = None, link_gbit: float | None = None,
            wait: str = "spin", cpu_repeats: int = 5, trickle_repeats: int = 2, idle_repeats: int = 3,
            fp16_repeats: int = 3, burst_repeats: int = 3, on_total=None, on_item=None, on_event=None) -> dict:
    """``autotuner measure``: the allreduce sweep of :mod:`autotuner.realrun.measure` into
    ``runs_dir/<env>/`` (resumes a killed sweep), then its ``cpu`` phase (``cpu_repeats``
    rounds, :mod:`autotuner.realrun.cpuprobe`) and its ``trickle`` phase (``trickle_repeats``
    rounds, :mod:`autotuner.realrun.trickleprobe`), its ``idle`` phase (``idle_repeats`` jobs,
    :mod:`autotuner.realrun.idleprobe`), its ``burst`` phase (``burst_repeats`` jobs, no timeline,
    :mod:`autotuner.realrun.burstprobe`) and its ``fp16`` phase (``fp16_repeats`` jobs,
    :mod:`autotuner.realrun.fp16probe`; 0 skips any of them). ``sizes``: ``LO:HI`` or a comma list (bytes,
    ``K``/``M``/``G`` binary units), default 1K:512M. ``runs_dir`` None: ``$AUTOTUNER_RUNS_DIR``, else
    ./runs, else the user's folder. Returns the JSON-ready summary (with ``runs_dir``). Raises
    ValidationError (one line) for bad input, a missing horovodrun or a failed job; OutputError
    when ``runs_dir/<env>`` cannot be written."""
    from .errors import ValidationError
    from .realrun.measure import DEFAULT_SIZES, SweepSetup, parse_sizes, run_measure, tiers

    topo = _testbed_topology(testbed_hosts, ranks_per_host, link_gbit, hosts)
    if topo is not None:
        from .realrun.testbed import cluster_hosts

        np, hosts = topo[0] * topo[1], cluster_hosts(*topo)
    if np < 2:
        raise ValidationError(f"--np {np}: an allreduce needs at least 2 ranks")
    for bad, v in (("--cpu-repeats", cpu_repeats), ("--trickle-repeats", trickle_repeats),
                   ("--idle-repeats", idle_repeats), ("--fp16-repeats", fp16_repeats),
                   ("--burst-repeats", burst_repeats)):
        if v < 0:
            raise ValidationError(f"{bad} {v}: must be >= 0")
    tiers(np, hosts)  # bad --hosts: one line before anything starts
    sz = parse_sizes(sizes) if sizes else DEFAULT_SIZES
    from .paths import runs_output_dir

    runs_dir = runs_output_dir(runs_dir)
    env_dir = runs_dir / env
    check_output_dir(env_dir, "--runs-dir")
    setup = SweepSetup(np=np, hosts=hosts, bandwidth_gbit=bandwidth_gbit, repeats=repeats, warmup=warmup,
                       testbed_hosts=testbed_hosts, ranks_per_host=ranks_per_host, link_gbit=link_gbit, wait=wait)
    with _sigterm_as_exit():
        summary = run_measure(env_dir, setup, sizes=sz, timeout_s=timeout_s, cpu_repeats=cpu_repeats,
                              trickle_repeats=trickle_repeats, idle_repeats=idle_repeats, fp16_repeats=fp16_repeats,
                              burst_repeats=burst_repeats, on_total=on_total, on_item=on_item, on_event=on_event)
    return summary | {"runs_dir": str(runs_dir)}
