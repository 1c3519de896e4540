"""Horovod's predicting jobs: build a scenario (:func:`make_scenario`), simulate it, suggest knobs (the grid or
Bayesian search), explore a knob plane, scale out, and the simulated timeline. No real run.
"""
from __future__ import annotations

from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..._deprecated import renamed_keywords
from ...errors import ScenarioError
from .fit.store import FittedEnv, load_env
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
from ...model.costmodel import Cluster, CostModelError
from .scenario import (
    COMPRESSION_CODE,
    COMPRESSION_NUMERICS,
    COMPRESSION_RATIO,
    HOROVOD_COMPRESSIONS,
    LOSSY,
    Compression,
    Scenario,
)
from .simulator import StepResult
from ...model.workload import Workload
from ...readers.layouts import load_layout
from ...writers.atomic import check_output_dir
from .environments import _model_dirs, _runs_dirs, env_batch_size, env_horovod_version, error_band


@renamed_keywords(bandwidth_gbps="link_gbit")
def make_scenario(model_dir: Path | Sequence[Path] | None, env: str | None, model: str, *, nodes: int | None = None,
                  gpus_per_node: int | None = None, link_gbit: float | None = None,
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
        from ...paths import model_search_path

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
        from ...specs import gpu_fp16_cost

        dev = gpu_fp16_cost((fenv.raw.get("cluster") or {}).get("gpu"))
        base = base if dev is None else replace(base, fp16=dev)
    cost = base if link_gbit is None else base.with_bandwidth(link_gbit)
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
    timeline (:mod:`autotuner.frameworks.horovod.views.timeline_export`; gzip when ``path`` ends in ``.gz``).

    The collective activity follows the env's backend (``cluster.backend`` in the model file).
    Returns (path, traced result). Raises ScenarioError for ``steps`` < 1, OutputError when the
    file cannot be written.
    """
    from .views.timeline_export import collective_activity, timeline_events
    from ...writers.timeline import write_timeline

    if steps < 1:
        raise ScenarioError(f"timeline steps must be >= 1, got {steps}")
    r = sc.simulate(config, trace=True, measure_steps=steps)
    backend = (fenv.raw.get("cluster") or {}).get("backend")
    events = timeline_events(r, sc.layout, collective=collective_activity(backend),
                             compression_ratio=COMPRESSION_RATIO[sc.compression])
    return write_timeline(path, events), r


def suggest_configs(sc: Scenario, *, top: int = 3, n_calls: int = 24, seed: int = 0,
                    progress=None, fixed: Mapping[str, Any] | None = None, strategy=None) -> tuple[list, list]:
    """Search ``sc`` with ``strategy`` (a :class:`autotuner.frameworks.horovod.search.ranking.Strategy`; default: Bayesian
    optimization refined on the batch simulator, :class:`autotuner.frameworks.horovod.search.bayes.BayesStrategy` with
    ``n_calls``, ``seed`` and ``progress``); returns (all trials, top distinct by
    :func:`autotuner.frameworks.horovod.search.ranking.top_distinct`). ``suggest`` itself answers from the exact grid
    (:func:`suggest_scenario`).

    ``fixed``: knobs the search keeps (field name -> value, internal units); the reference the
    proposals are ranked against is then Horovod's defaults with those knobs applied. Knobs the
    scenario's backend ignores are pinned off (:func:`autotuner.frameworks.horovod.knobs.pin_unsupported_off`:
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
    """Trials as a :func:`autotuner.frameworks.horovod.search.grid.grid_table`-form table (column -> array)."""
    import numpy as np

    from .search.grid import COLUMNS

    rows = [{**{k: v for k, v in t.config.to_dict().items() if k in COLUMNS}, "step_time_ms": t.step_time_s * 1e3}
            for t in trials]
    return {k: np.array([r[k] for r in rows]) for k in COLUMNS}


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
    """One line per way a profiled layout differs from the environment it is predicted in:
    its ``device`` against the env's ranks (the model file's ``cluster.gpu``:
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
                   f"(research/notes/fresh-environments.md, section 8)")
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
    """The search strategies ``suggest`` offers (:class:`autotuner.frameworks.horovod.search.ranking.Strategy`)."""

    bayes = "bayes"
    grid = "grid"


#: most gradient tensors ``suggest`` searches: time and memory grow about linearly with the tensor
#: count (research/notes/benchmarks.md: 20,000 tensors ~9 s and ~430 MB), so 50,000 stays within a minute
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
    than :data:`autotuner.frameworks.horovod.search.ranking.MIN_GAIN` (the tie rule: then the first proposal is the
    reference itself). ``search_seconds``: wall time (s). ``strategy``: a
    :class:`autotuner.frameworks.horovod.search.ranking.Strategy` object; None (default) answers from the exact grid
    on the fast simulator (:func:`autotuner.frameworks.horovod.search.grid.neighbourhood`, ~10^5-10^6 configurations
    in a fraction of a second), which the noise-aware choice reads anyway; a
    :class:`autotuner.frameworks.horovod.search.bayes.BayesStrategy` adds its ~30 simulations + batch refinement.
    ``progress(done, total)`` is called once per compression searched.

    ``compressions``: the gradient compressions searched (None: Horovod 0.28.1's,
    :data:`~autotuner.frameworks.horovod.scenario.HOROVOD_COMPRESSIONS`: none and fp16; one value pins it).
    The knobs are searched for each one on ``sc`` with that compression. The reference is the
    defaults without compression (with the first one given when ``none`` is not among them). A
    proposal with another compression is kept only when it is predicted faster than the best
    proposal of the reference's compression by more than ``MIN_GAIN``: compression changes
    numerics (:data:`~autotuner.frameworks.horovod.scenario.COMPRESSION_NUMERICS`, in ``compression_notes``)
    and is not worth a tie. ``best_by_compression``: the best predicted step (ms) of each.
    Hierarchical allreduce is never searched nor proposed where the scenario's backend has none
    (:attr:`~autotuner.frameworks.horovod.scenario.Scenario.has_hierarchical_allreduce`); a fixed
    ``hierarchical_allreduce`` on is then kept off and ``notes`` says why (one line each).
    ``reference_version``: the Horovod release whose defaults are the reference
    (:func:`autotuner.frameworks.horovod.knobs.defaults_for`: 64 MiB / 5 ms before 0.21.0, else 128 MiB / 1 ms; None: the last
    release, :data:`autotuner.frameworks.horovod.knobs.LAST_RELEASE`), returned as ``reference_version``.
    Noise-aware, minimal-change choice (:func:`autotuner.frameworks.horovod.search.ranking.minimal_change`):
    ``band`` is :func:`error_band`'s result for the env (None: the :data:`MIN_GAIN` tie rule).
    The search's trials and the whole default grid around the reference
    (:func:`autotuner.frameworks.horovod.search.grid.neighbourhood`) are pooled; a proposal is made only when the
    best is predicted faster than the reference by more than the band, and it is then the
    configuration within the band of the best that changes the fewest knobs, then has the
    smallest fusion buffer. ``pick`` gives the band, its source, the predicted gain and the range
    of equally good thresholds (MiB) and cycle times (ms); ``knob_only`` the best proposal
    without compression, always; ``trust``: the env's trust line, and where fp16 is proposed, where its cost
    comes from (:attr:`autotuner.model.costmodel.Fp16Cost.source`: measured, or from a GPU's datasheet).
    fp16 is proposed only where that cost is known (an fp16 phase, or ``gpu``, the env's ``cluster.gpu``, in
    :data:`autotuner.specs.GPUS`); otherwise ``notes`` says why.

    Raises ScenarioError for a strategy without ``trials``, an unknown compression, or a lossy one
    (:data:`~autotuner.frameworks.horovod.scenario.LOSSY`: never proposed).
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
    # alone were 13-24 % optimistic (docs/how-to/tune.md)
    calibrated = {c: c == Compression.none or scs[c].cost.fp16 is not None for c in comps}
    winners = sorted(((Trial(picks[c].config, picks[c].step_time_s, Origin.search), c) for c in comps[1:]
                      if picks[c].best_step_time_s < cut and calibrated[c]), key=lambda tc: tc[0].step_time_s)
    for c in comps[1:]:
        if picks[c].best_step_time_s < cut and not calibrated[c]:
            from ...specs import GPUS

            on_gpu = bool(gpu) and not _cpu_ranks(str(gpu))
            why = (f"its GPU {gpu!r} is not in the table of device memory bandwidths (autotuner.specs.GPUS: "
                   f"{', '.join(GPUS)}) and it has no fp16 phase, so what {c} costs besides the bytes (the casts, "
                   f"the {c} sum) is unknown" if on_gpu else
                   f"{sc.env} never measured what {c} costs besides the bytes (the casts, the {c} sum: autotuner "
                   "measure's fp16 phase)")
            notes.append(f"{c} compression not proposed: predicted {picks[c].best_step_time_s * 1e3:.1f} ms from the "
                         f"bytes alone, but {why}; on the emulated testbed the bytes alone were "
                         "13-24 % optimistic (docs/how-to/tune.md)")
    rest = [(t, refc) for t in found[refc] if t.config != kp.config]
    picked = (winners + [(knob_pick, refc)] + rest)[:top]

    def entry(c: Config, comp: Compression, r: StepResult | None = None) -> dict:
        r = r or scs[comp].simulate(c)
        return {"config": c.to_dict(), "compression": str(comp), "compression_code": COMPRESSION_CODE[comp],
                "step_time_ms": r.step_time_ms, "speedup_vs_default": base.step_time_s / r.step_time_s,
                "score_bytes_per_us": r.score_bytes_per_us, "horovodrun_flags": horovodrun_flags(c),
                "env_vars": horovod_env(c)}
    def with_range(e: dict, c: Config, comp: Compression) -> dict:
        # a measured float16 sum the fp16 phase pins only to its points' quartiles: the step at both ends
        f = scs[comp].cost.fp16 if comp != Compression.none else None
        if f is not None and f.device is None and f.sum_extra_range_s_per_elem is not None:
            lo, hi = (replace(scs[comp], cost=replace(scs[comp].cost, fp16=replace(f, sum_extra_s_per_elem=x))).simulate(c).step_time_ms
                      for x in f.sum_extra_range_s_per_elem)
            e["step_time_range_ms"] = [min(lo, hi), max(lo, hi)]
        return e

    res = {"env": sc.env, "model": sc.model, "layout": sc.layout.name,
           "nodes": sc.cluster.nodes, "gpus_per_node": sc.cluster.gpus_per_node,
           "default": entry(ref, refc, base),
           "proposals": [with_range(entry(t.config, c), t.config, c) for t, c in picked],
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
    ranged = [(i, e) for i, e in enumerate(res["proposals"], 1) if "step_time_range_ms" in e]
    if ranged:
        f = scs[Compression.fp16].cost.fp16
        lo_ns, hi_ns = (v * 1e9 for v in f.sum_extra_range_s_per_elem)
        whose = ("the points of the fp16 phases it borrows from (this env's phase does not pin it)"
                 if f.source and "borrowed" in f.source else "the fp16 phase's points")
        notes.append(f"fp16 on CPU ranks: {whose} put Gloo's float16 sum at {lo_ns:.1f}-{hi_ns:.1f} ns "
                     f"per element (quartiles; charged {f.sum_extra_s_per_elem * 1e9:.1f}), so "
                     + ", ".join(f"#{i} is {e['step_time_ms']:.1f} ms within {e['step_time_range_ms'][0]:.1f}-"
                                 f"{e['step_time_range_ms'][1]:.1f}" for i, e in ranged)
                     + " (docs/explanation/fp16-compression.md, \"How well the phase pins the sum\")")
    # a small response's price the burst and step phases leave open: where it moves a row by more than the band
    moved = []
    for i, (t, c) in enumerate([(None, refc)] + picked):
        cfg = ref if t is None else t.config
        r = step_range_ms(scs[c], cfg, (res["default"] if t is None else res["proposals"][i - 1])["step_time_ms"])
        if r is not None and r[0][1] - r[0][0] > band_f * r[0][1]:
            moved.append((("the reference row" if t is None else f"#{i}"), r))
    if moved:
        a_lo, a_hi = moved[0][1][1]
        notes.append(f"small responses: the env's burst and step phases price one at {a_lo:.2f}-{a_hi:.2f} ms "
                     "(step charged; which one a real step meets is not identified), so "
                     + ", ".join(f"{who} is {lo:.1f}-{hi:.1f} ms" for who, ((lo, hi), _) in moved)
                     + " (research/notes/accuracy.md, \"The small-response price the phases leave open\")")
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


@renamed_keywords(bandwidth_gbps="link_gbit")
def suggest(model: str, env: str | None = None, *, fixed: Mapping[str, Any] | None = None,
            compression: str | None = None, strategy=None, top: int = 3, nodes: int | None = None,
            gpus_per_node: int | None = None, link_gbit: float | None = None, compute_ms: float | None = None,
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
        strategy: a :class:`autotuner.frameworks.horovod.search.ranking.Strategy` object
            (:class:`~autotuner.frameworks.horovod.search.grid.GridStrategy`, :class:`~autotuner.frameworks.horovod.search.bayes.BayesStrategy`)
            whose trials are pooled with the exact grid; None: the exact grid alone (fast simulator).
        top: proposals returned (>= 1).
        nodes, gpus_per_node, link_gbit (the link between nodes, Gbit/s; old name ``bandwidth_gbps``), compute_ms
            (forward + backward, ms),
            backend: what-ifs, as :func:`make_scenario`.
        model_dir: fitted models searched first (None: :func:`autotuner.paths.model_search_path`).
        progress: called as ``progress(done, total)`` once per compression searched.
        reference_version: the Horovod release whose defaults the proposals are compared with
            (``"0.28.1"``, ``"0.20.3"``: 64 MiB / 5 ms before 0.21.0, 128 MiB / 1 ms since); None: the
            env's own (its model file's ``cluster.horovod_version``, from env.toml), else the last release.

    Returns a :class:`autotuner.frameworks.horovod.results.SuggestResult`. Raises an
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
                             link_gbit=link_gbit, compression=compression or "none",
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


@renamed_keywords(bandwidth_gbps="link_gbit", timeline="timeline_filename")
def simulate(model: str, env: str | None = None, *, config: Config | Mapping[str, Any] | None = None,
             compression: str = "none", nodes: int | None = None, gpus_per_node: int | None = None,
             link_gbit: float | None = None, compute_ms: float | None = None, backend: str | None = None,
             model_dir: Path | Sequence[Path] | None = None, timeline_filename: Path | None = None,
             timeline_steps: int = 2,
             reference_version: str | None = None):
    """Predicted step of one configuration: ``autotuner simulate`` as a function.

    ``config``: a :class:`~autotuner.frameworks.horovod.knobs.Config`, or knobs by option name in flag units / field
    name (None: no knob set). Unset knobs take the defaults of ``reference_version`` (a Horovod release), else of the
    env's own release (its model file's ``cluster.horovod_version``: 64 MiB / 5 ms before 0.21.0, 128 MiB / 1 ms
    since; :func:`autotuner.frameworks.horovod.knobs.defaults_for`), else of the last release; the result's
    ``reference_version`` names it. ``compression``: the
    gradient compression simulated (a lossy one is simulated as asked, and ``warnings`` says so).
    ``timeline_filename`` (old name ``timeline``): also write the simulated steps (``timeline_steps`` of them) as a
    Horovod timeline there. Other arguments as :func:`suggest`. Returns a :class:`autotuner.frameworks.horovod.results.SimulateResult`;
    raises an :class:`~autotuner.errors.AutotunerError` subclass (one line) for bad input.
    """
    from .knobs import config_from_values
    from .results import Response, SimulateResult

    asked = None if reference_version is None else check_horovod_version(reference_version, "reference_version")
    if not isinstance(config, Config):
        config_from_values(dict(config or {}))  # a bad knob is named before any file is read
    if timeline_filename is not None:
        check_output_dir(Path(timeline_filename).parent, "--timeline-filename")
    dirs = _model_dirs(model_dir)
    sc, fenv = make_scenario(dirs, env, model, nodes=nodes, gpus_per_node=gpus_per_node,
                             link_gbit=link_gbit, compression=compression, compute_ms=compute_ms,
                             backend=backend)
    notes, warnings = [], []
    version, note = (asked, None) if asked is not None else env_horovod_version(fenv)
    if note:
        notes.append(note)
    cfg = config if isinstance(config, Config) else config_from_values(dict(config or {}), base=defaults_for(version))
    if compression in LOSSY:  # simulated as asked, never silently
        warnings.append(LOSSY[Compression(compression)])
    why = hierarchical_allreduce_note(sc.effective_backend) if cfg.hierarchical_allreduce else None
    if why:
        notes.append(f"{KNOB_BY_FIELD['hierarchical_allreduce'].flag} simulated as off on backend "
                     f"{sc.effective_backend}: {why}")
    r = sc.simulate(cfg)
    rng = step_range_ms(sc, cfg, r.step_time_ms)
    written = None
    if timeline_filename is not None:
        written, _ = write_simulated_timeline(sc, fenv, cfg, Path(timeline_filename), steps=timeline_steps)
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
        timeline=None if written is None else str(written),
        step_time_range_ms=None if rng is None else rng[0], small_price_range_ms=None if rng is None else rng[1],
        reference_version=version)


def step_range_ms(sc, cfg: Config, charged_ms: float | None = None
                  ) -> tuple[tuple[float, float], tuple[float, float]] | None:
    """The step time (ms) of ``cfg`` on scenario ``sc`` with the inter tier's small-message latency at either end of
    ``sc.cost.small_alpha_range_s``, low to high, and those ends as a small response's fixed cost (ms, ``2(p-1)·alpha``
    on the scenario's ``p`` ranks, the flat ring's); None for a cost model without the range. ``charged_ms``: the step
    already simulated at the charged latency, reused for the end it equals
    (:meth:`autotuner.model.costmodel.CostModel.small_alpha_ends`). Pure (no I/O)."""
    r = sc.cost.small_alpha_range_s
    if r is None:
        return None
    times = sorted(charged_ms if m is None and charged_ms is not None else
                   replace(sc, cost=m or sc.cost).simulate(cfg).step_time_ms for m in sc.cost.small_alpha_ends())
    k = 2 * (sc.cluster.size - 1) * 1e3
    return (times[0], times[1]), (k * r[0], k * r[1])


def prediction_ranges(sc, records) -> dict[tuple[str, str], tuple[float, float]]:
    """Per validation job (``(label, compression)``, as :func:`autotuner.frameworks.horovod.report.table` groups
    records) with fixed knobs, the step time (ms, low to high) at either end of the small-response price the env's
    phases leave open (:func:`step_range_ms` on scenario ``sc`` with the job's compression; the record's
    ``predicted_step_time_ms`` reused for the charged end). Empty for a cost model without the range, or ``sc``
    None. ``records``: validation records (:mod:`autotuner.frameworks.horovod.validation`). Pure (no I/O)."""
    out: dict[tuple[str, str], tuple[float, float]] = {}
    if sc is None or sc.cost.small_alpha_range_s is None:
        return out
    for r in records:
        key = (r.get("label") or r["trial"].split("/")[0], str(r.get("compression") or "none"))
        if r.get("config") is None or key in out:
            continue
        rng = step_range_ms(replace(sc, compression=key[1]), Config.from_dict(r["config"]),
                            r.get("predicted_step_time_ms"))
        if rng is not None:
            out[key] = rng[0]
    return out


@renamed_keywords(bandwidth_gbps="link_gbit", pick_file="proposals")
def explore(model: str, env: str | None = None, *, config: Config | Mapping[str, Any] | None = None,
            proposals: Path | None = None, suggest_pick: bool = True, resolution: int = 64,
            nodes: int | None = None, gpus_per_node: int | None = None, link_gbit: float | None = None,
            compression: str = "none", compute_ms: float | None = None, backend: str | None = None,
            out_dir: Path = Path("explore"), runs_dir: Path | Sequence[Path] | None = None,
            model_dir: Path | Sequence[Path] | None = None, on_event=None):
    """``autotuner explore``: predicted step time over fusion threshold x cycle time for every on/off
    combination (:func:`autotuner.frameworks.horovod.views.explore.explore`), heatmaps and a sensitivity plot written to
    ``out_dir`` (PNG + SVG), the measured validation trials of the env overlaid when the scenario is
    the measured one (no what-if).

    The marked configuration: ``config`` (knobs by option name or a Config), else the first of
    ``proposals`` (a file: ``suggest --json`` output or a list; old name ``pick_file``), else suggest's own pick for this compression
    (:func:`suggest_scenario`, with the env's error band: the same answer as ``autotuner suggest
    --compression C``) when ``suggest_pick``. The defaults marked are those of the env's own Horovod version
    (env.toml's ``horovod_version``). ``resolution``: points per axis. ``on_event(line)``: one line as each
    stage starts (suggest's pick, the grid, the plots). Returns an
    :class:`autotuner.frameworks.horovod.results.ExploreResult`; raises an AutotunerError (one line) for bad input."""
    import time

    from .knobs import config_from_values
    from .readers.runs import read_validation_records
    from .results import ExploreResult
    from .views.explore import explore as explore_grid
    from .views.plots_explore import heatmaps, sensitivity_plot

    mdirs, rdirs = _model_dirs(model_dir), _runs_dirs(runs_dir)
    check_output_dir(Path(out_dir), "--out")
    say = on_event or (lambda line: None)
    sc, fenv = make_scenario(mdirs, env, model, nodes=nodes, gpus_per_node=gpus_per_node, link_gbit=link_gbit,
                             compression=compression, compute_ms=compute_ms, backend=backend)
    version = env_horovod_version(fenv)[0]  # the defaults marked, as suggest compares with them
    t0 = time.perf_counter()
    label, t_suggest = "suggest pick", None
    if config is not None:
        pick, label = (config if isinstance(config, Config) else config_from_values(dict(config))), "given configuration"
    elif proposals is not None:
        pick = load_proposals(Path(proposals))[0]
    elif suggest_pick:
        say("suggest's pick")
        pick = Config.from_dict(suggest_scenario(sc, top=1, compressions=(str(compression),),
                                                 band=error_band(mdirs, fenv),
                                                 reference_version=version)["proposals"][0]["config"])
        t_suggest = time.perf_counter() - t0
    else:
        pick = None
    # each measured job is predicted with its own compression (frameworks.horovod.views.explore.measured_points): any map shows them
    same_setup = nodes is None and gpus_per_node is None and link_gbit is None and backend is None
    records = read_validation_records(rdirs, sc.env) if same_setup else []
    say(f"the grid: {resolution} x {resolution} per combination")
    ex = explore_grid(sc, resolution=resolution, suggested=pick, measured_records=records, pick_label=label,
                      reference_version=version)
    t1 = time.perf_counter()
    stem = Path(out_dir) / f"{sc.env}-{Path(sc.model).stem}"
    say("the plots")
    files = heatmaps(ex, stem.with_name("explore-" + stem.name)) + \
        sensitivity_plot(ex, stem.with_name("sensitivity-" + stem.name))
    return ExploreResult(ex, tuple(str(f) for f in files), t_suggest, time.perf_counter() - t1, same_setup,
                         sc.backend, sc.compression)


@renamed_keywords(bandwidths_gbps="links_gbit")
def scale(model: str, env: str | None = None, *, nodes: Sequence[int] | None = None, ranks: Sequence[int] | None = None,
          gpus_per_node: int | None = None, links_gbit: Sequence[float] | None = None,
          batch_size: int | None = None, compute_ms: float | None = None, compression: str = "none",
          backend: str | None = None, out_dir: Path = Path("scale"), runs_dir: Path | Sequence[Path] | None = None,
          model_dir: Path | Sequence[Path] | None = None, reference_version: str | None = None, on_event=None):
    """``autotuner scale``: what-if at scale (:func:`autotuner.frameworks.horovod.views.scale.scale`): per node count
    (``nodes``; default 1, 2, 4, ..., 64) or per rank count on one node (``ranks``), and per link
    rate (``links_gbit``, Gbit/s, old name ``bandwidths_gbps``; default the env's), the best configuration and the defaults'
    step time, throughput and scaling efficiency; the plot written to ``out_dir``. The batch per GPU
    (for samples/s) is ``batch_size``, else a profiled layout's, else the env's (runs/<env>/env.toml),
    else its timed run's. The defaults are those of ``reference_version`` (a Horovod release), else of the
    env's own Horovod version (env.toml's ``horovod_version``, as ``suggest`` compares). Returns an
    :class:`autotuner.frameworks.horovod.results.ScaleResult`; raises an AutotunerError (one line) for bad input (``nodes`` with
    ``ranks``, ``ranks`` with ``gpus_per_node``, non-positive counts or rates, a string that names no Horovod
    release). ``on_event(line)``: one line as each stage starts (the search per shape, the plot)."""
    from ...errors import ExploreError
    from .results import ScaleResult
    from .views.plots_explore import scale_plot
    from .views.scale import scale as scale_grid

    if ranks is not None and nodes is not None:
        raise ExploreError("--ranks and --nodes: give one (--ranks: ranks on one node; --nodes: node counts)")
    if ranks is not None and gpus_per_node is not None:
        raise ExploreError("--ranks and --gpus-per-node: give one (--ranks sets the ranks on the one node)")
    asked = None if reference_version is None else check_horovod_version(reference_version, "reference_version")
    mdirs, rdirs = _model_dirs(model_dir), _runs_dirs(runs_dir)
    check_output_dir(Path(out_dir), "--out")
    sc, fenv = make_scenario(mdirs, env, model, compression=compression, compute_ms=compute_ms, backend=backend)
    version = asked or env_horovod_version(fenv)[0]
    env_batch = env_batch_size(rdirs, sc.env)
    batch = (batch_size or (sc.layout.batch_size if sc.layout.measured else None) or env_batch
             or (sc.run.batch_size if sc.run else None))
    ns = None if ranks is not None else list(nodes if nodes is not None else SCALE_NODES)
    say = on_event or (lambda line: None)
    say(f"the best knobs at {len(ranks) if ranks is not None else len(ns)} "
        f"{'rank' if ranks is not None else 'node'} count(s) x {len(links_gbit) if links_gbit else 1} link rate(s)")
    res = scale_grid(sc, ns, gpus_per_node=gpus_per_node, bandwidths_gbps=links_gbit, batch_per_gpu=batch,
                     ranks=None if ranks is None else list(ranks), reference_version=version)
    say("the plot")
    files = scale_plot(res, Path(out_dir) / f"scale-{sc.env}-{Path(sc.model).stem}")
    return ScaleResult(res, tuple(str(f) for f in files), error_band(mdirs, fenv)["line"],
                       tuple(layout_warnings(sc, fenv, batch_size or env_batch)), batch, sc.run, sc.backend)


#: ``scale``'s node counts when neither nodes nor ranks is given
SCALE_NODES = (1, 2, 4, 8, 16, 32, 64)


#: d2 for 3 samples (the expected range of 3 normal samples in standard deviations, the control-chart constant
#: tabulated in ASTM E2587 / ISO 7870-2): a repeat spread measured as (max - min) over 3 trials is 1.693 sigma
D2_THREE = 1.693


def load_proposals(path: Path) -> list:
    """Configurations from a JSON file: a list of knob dicts, or ``suggest --json`` output.
    Each is a :class:`Config`, or ``(Config, "fp16")`` for a ``suggest --json`` entry with fp16
    compression (the replay workload applies it, :mod:`autotuner.frameworks.horovod.replay`).

    The file is checked by :mod:`autotuner.schemas` (:data:`~autotuner.schemas.ProposalList` or
    :class:`~autotuner.schemas.SuggestOutput`; each entry :class:`~autotuner.schemas.Knobs`, or a
    ``suggest --json`` entry whose ``config`` is one: unknown knob names fail, values are checked
    by the knob table). Raises ScenarioError (one line: file, proposal, field, value, reason)
    for an unreadable file or a malformed entry.
    """

    from ...readers.files import read_json
    from ...schemas import check
    from .schemas import Knobs, ProposalEntry, ProposalList, SuggestOutput

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
