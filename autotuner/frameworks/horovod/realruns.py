"""Horovod's real runs: profile a model, measure an environment, validate proposals and ``tune`` on real
``horovodrun`` jobs, with the trial store, the report and resume.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import Any, Sequence

from ..._deprecated import link_rates, renamed_keywords
from ...errors import KnobError, ScenarioError
from .knobs import DEFAULTS_0_28, Config
from ...readers.layouts import load_layout
from ...writers.atomic import check_output_dir
from .environments import _model_dirs, error_band
from .predict import D2_THREE, load_proposals, make_scenario, prediction_ranges, suggest_scenario


class ProfileDevice(StrEnum):
    """Where ``autotuner profile`` runs the model."""

    cpu = "cpu"
    cuda = "cuda"


def profile_model(spec: str, out: Path, *, input_shape: str, batch_size: int, device: str = "cpu",
                  amp: bool = False, steps: int = 10, warmup: int = 3, threads: int | None = None,
                  concurrent: int = 1, on_event=None) -> dict[str, Any]:
    """``autotuner profile``: run the ``torch.nn.Module`` of ``spec`` (``pkg.mod:factory``) forward
    and backward, time each gradient's readiness (:mod:`autotuner.realrun.profile`; torch is
    imported only here), write the measured layout JSON to ``out`` atomically. CPU: ``threads``
    torch threads, ``concurrent`` copies computing at once (the ranks of one host). ``on_event(line)``: one line
    before the profiling starts (torch loads first).

    Returns the JSON-ready summary (``profile --json``): ``out`` (the path written), the layout's
    name, device, dtype, amp, batch size, input shape, steps, forward/backward ms, ``tensors``,
    ``bytes``, first/last ready ms, ``warnings``. Raises ProfileError / LayoutError / OutputError
    (one line) for a bad spec, shape or device, a model that fails, or an unwritable file.
    """
    import json

    from ...readers.layouts import layout_from_dict
    from ...realrun.profile import profile_layout
    from ...writers.atomic import atomic_write_text

    check_output_dir(Path(out).parent, "--out")  # before minutes of profiling
    if on_event is not None:
        on_event(f"{spec} on {device}: {warmup} warm-up and {steps} measured steps")
    d, warnings = profile_layout(spec, input_shape=input_shape, batch_size=batch_size, device=str(device),
                                 amp=amp, steps=steps, warmup=warmup, threads=threads, concurrent=concurrent)
    path = atomic_write_text(Path(out), json.dumps(d, indent=1, allow_nan=False) + "\n")
    ts = d["tensors"]
    return {"model": spec, "out": str(path), **{k: d[k] for k in (
                "name", "device", "device_name", "dtype", "amp", "batch_size", "input_shape", "steps", "warmup",
                "forward_ms", "backward_ms")}, "threads": d.get("threads"), "concurrent": d.get("concurrent"),
            "tensors": len(ts), "bytes": layout_from_dict(d, str(path)).total_bytes,
            "first_ready_ms": ts[0]["ready_ms"], "last_ready_ms": ts[-1]["ready_ms"], "warnings": warnings}


@renamed_keywords(replay_wait="wait", proposals_file="proposals")
def validate(env: str, model: str, *, command: Sequence[str] = (), np: int = 2, hosts: str = "",
             link_gbit: float | None = None, loopback_gbit: float | None = None, testbed_hosts: int | None = None,
             ranks_per_host: int | None = None, wait: str = "spin", compute_ms: float | None = None,
             steps: int = 6, warmup: int = 2, repeats: int = 3, top: int = 1, proposals: Path | None = None,
             autotune: bool = True, defaults: bool = True, name: str | None = None, timeout_s: float = 600.0,
             keep_timelines: bool = False, timeline: bool | None = None, batch_size: int | None = None,
             runs_dir: Path | None = None, model_dir: Path | Sequence[Path] | None = None, on_event=None,
             bandwidth_gbit: float | None = None):
    """``autotuner validate``: real ``horovodrun`` trials of Horovod's defaults, its autotune and
    autotune's best, and the proposals (``proposals``: a file, a JSON list or ``suggest --json`` output; else
    suggest's top ``top`` without compression), ``repeats`` times each, interleaved (:func:`run_validation`), with the replay
    workload of ``model`` or the user's ``command``. Records go to ``runs_dir/<env>/validation/``
    (default: ``$AUTOTUNER_RUNS_DIR``, else ./runs, else the user's folder), appended trial by trial;
    a re-run resumes. ``timeline``: record Horovod's timeline in every fixed-configuration trial (for
    responses/step; its writer's cost is then in every step time); None: only with ``keep_timelines``, so
    by default the trials are the production job the predictions are for. The network (root only; default
    unshaped): ``link_gbit`` (Gbit/s) between the ranks, one shaped loopback or, with ``testbed_hosts`` x
    ``ranks_per_host`` emulated hosts, each host's link; ``loopback_gbit`` each emulated host's loopback
    (:func:`autotuner._deprecated.link_rates`). ``wait``: how the replay waits for its allreduces (``spin``:
    Horovod's synchronize; ``sleep``: polling). ``on_event(line)``: one line per trial. Old keyword names
    (DeprecationWarning): ``bandwidth_gbit``, ``replay_wait``, ``proposals_file``. Returns a
    :class:`autotuner.frameworks.horovod.results.ValidateResult`; raises an AutotunerError (one line) for bad input, a
    proposal the plan already holds, or a missing horovodrun."""
    from ...paths import runs_output_dir
    from .results import ValidateResult

    load_layout(model)  # fail fast on an unknown model
    loopback, host_link = link_rates(link_gbit, loopback_gbit, bandwidth_gbit,
                                     testbed_hosts is not None or ranks_per_host is not None, "validate")
    setup = validation_setup(env=env, model=model, np=np, hosts=hosts, bandwidth_gbit=loopback,
                             compute_ms=compute_ms, steps=steps, warmup=warmup, command=tuple(command or ()),
                             batch_size=batch_size, testbed_hosts=testbed_hosts, ranks_per_host=ranks_per_host,
                             link_gbit=host_link, replay_wait=wait)
    proposals = load_proposals(Path(proposals)) if proposals else None
    recs, report, verdict = run_validation(setup, runs_dir=runs_output_dir(runs_dir), model_dir=_model_dirs(model_dir),
                                           name=name or Path(model).stem, proposals=proposals, top=top,
                                           repeats=repeats, autotune=autotune, defaults=defaults, timeout_s=timeout_s,
                                           keep_timelines=keep_timelines, timeline=timeline, on_event=on_event)
    return ValidateResult(tuple(recs), report, verdict)


#: one trial's relative noise when the env has no repeat spread to turn into one (fraction)
NOISE_FALLBACK = 0.02


@renamed_keywords(replay_wait="wait")
def tune(env: str, model: str, *, command: Sequence[str] = (), np: int = 2, hosts: str = "",
         link_gbit: float | None = None, loopback_gbit: float | None = None, testbed_hosts: int | None = None,
         ranks_per_host: int | None = None, wait: str = "spin", compute_ms: float | None = None,
         steps: int = 6, warmup: int = 2, budget_steps: int = 240, compressions: Sequence[str] = ("none",),
         against_autotune: bool = False, repeats: int = 3, name: str | None = None, timeout_s: float = 600.0,
         autotune_timeout_s: float = 3600.0, batch_size: int | None = None, runs_dir: Path | None = None,
         model_dir: Path | Sequence[Path] | None = None, on_event=None, progress=None,
         bandwidth_gbit: float | None = None):
    """``autotuner tune``: Bayesian optimisation on real ``horovodrun`` trials with the simulator as its prior
    (:mod:`autotuner.frameworks.horovod.tune`, :mod:`autotuner.search.tune`), on the testbed ``validate`` uses.

    Trials of ``steps`` measured + ``warmup`` steps each, at most ``budget_steps`` steps in all, over the
    candidate grid with ``compressions`` (``none``, ``fp16``), without Horovod's timeline; records appended to
    ``runs_dir/<env>/tune/<name>.jsonl`` trial by trial (a re-run resumes). ``against_autotune``: then Horovod's
    autotune with its default settings on the same job (steps and seconds until it settles), and the defaults,
    tune's final and autotune's final measured ``repeats`` times, interleaved (``validation/<name>-h2h.jsonl``).
    ``progress(steps, budget, incumbent)`` after each decision; ``on_event(line)`` per trial. The network,
    ``wait`` and the old keyword names (``bandwidth_gbit``, ``replay_wait``) as :func:`validate`.

    Returns a :class:`autotuner.frameworks.horovod.results.TuneResult`. Raises an AutotunerError (one line): a bad budget or
    compression, an env without a fitted model, a missing horovodrun, a testbed that cannot be built.
    """
    import statistics

    from .fit.store import ModelStoreError
    from .knobs import horovod_env, horovodrun_flags
    from .scenario import COMPRESSION_CODE
    from ...paths import runs_output_dir
    from ...realrun.launcher import testbed_for
    from .launch import horovodrun_path
    from .tune import TUNE_KIND, run_tune
    from .validation import TrialRunner, TrialStore, ValidationError
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
    loopback, host_link = link_rates(link_gbit, loopback_gbit, bandwidth_gbit,
                                     testbed_hosts is not None or ranks_per_host is not None, "tune")
    setup = validation_setup(env=env, model=model, np=np, hosts=hosts, bandwidth_gbit=loopback,
                             compute_ms=compute_ms, steps=steps, warmup=warmup, command=tuple(command or ()),
                             batch_size=batch_size, testbed_hosts=testbed_hosts, ranks_per_host=ranks_per_host,
                             link_gbit=host_link, replay_wait=wait)
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
    from .tune_report import write_tune_report

    report = write_tune_report(tdir / f"{name}-report.md", setup=setup, records=tune_recs, final=final, stop=ans.stop,
                               steps=ans.steps, budget=budget_steps, wall_s=ans.wall_s, band=band,
                               noise_fallback=noise_fallback, head_to_head=h2h)
    return TuneResult(final, ans.steps, ans.trials, ans.wall_s, ans.stop, tuple(ans.refits), defaults_ms,
                      tuple(tune_recs), report, band["line"], h2h)


def _head_to_head(setup, cand, vdir: Path, name: str, tb, net_note: str, runner, *, repeats: int,
                  autotune_timeout_s: float, say, predict) -> dict:
    """Horovod's default autotune on the same job (steps and seconds until it settled), then the defaults, tune's
    final and autotune's final, ``repeats`` interleaved rounds; records in ``vdir/<name>-h2h.jsonl``."""
    from .launch import AutotuneSettings, Job, replay_command
    from .report import table, write_report
    from .tune import run_default_autotune
    from .validation import (STEPS_VAR, WARMUP_VAR, TrialSpec, TrialStore, ValidationError,
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


def _testbed_topology(testbed_hosts: int | None, ranks_per_host: int | None, link_gbit: float | None,
                      hosts: str) -> tuple[int, int] | None:
    """(hosts, ranks per host) of an emulated cluster asked by ``--testbed-hosts H --ranks-per-host L``,
    or None; ValidationError (one line) for a half-given or inconsistent request."""
    from ...errors import ValidationError
    from ...realrun.testbed import MAX_HOSTS

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

    from ...errors import ValidationError
    from .validation import Setup
    from ...schemas import one_line

    topo = _testbed_topology(kw.get("testbed_hosts"), kw.get("ranks_per_host"), kw.get("link_gbit"), kw.get("hosts", ""))
    if topo is not None:
        from ...realrun.testbed import cluster_hosts

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
    """Real validation of ``setup`` (see :mod:`autotuner.frameworks.horovod.validation`); returns (records, report path, verdict).

    Trials run in the emulated network of ``setup.bandwidth_gbit`` (:mod:`autotuner.realrun.testbed`;
    plain loopback, said in the report, when it cannot be built). Records are appended to
    ``runs_dir/<env>/validation/<name>.jsonl``; a re-run resumes. With ``keep_timelines`` each
    trial's raw timeline is kept gzipped in ``validation/timelines/<name>/``. ``timeline`` True: the
    fixed-configuration trials record Horovod's timeline (fused-response samples, responses/step), and its
    writer's cost is in their step times (several per cent, more with hundreds of small responses:
    docs/how-to/validate.md); False: they run as a production job, the job the predictions are for; None (the
    default): True only with ``keep_timelines``. Records carry ``timeline_recorded``; a trial recorded in
    the other mode is another job, measured again, and the report holds this plan's jobs only.
    ``on_event(str)`` gets one line per finished trial. Raises ScenarioError / ValidationError for
    unusable input.
    """
    import shutil

    from .fit.store import ModelStoreError
    from .launch import horovodrun_path
    from .report import write_report
    from .validation import TrialStore, ValidationError

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
    verdict, _ = write_report(recs, report, title=f"Validation: {setup.model} on {setup.env}", notes=notes,
                              ranges=prediction_ranges(sc, recs))
    return recs, report, verdict


def _describe(c: Config) -> str:
    return (f"{c.fusion_threshold_bytes / 2**20:g} MiB, {c.cycle_time_ms:g} ms, cache "
            f"{'on' if c.cache_capacity else 'off'}" + (", hierarchical allreduce" if c.hierarchical_allreduce else ""))


def _refuse_duplicates(proposals: Sequence[Config], defaults: bool) -> None:
    """One configuration is measured once per plan: a proposal equal to Horovod's defaults (when
    they run) or to an earlier proposal would be measured twice under two names, and its "gain"
    would be noise. Raises ValidationError (one line) naming both."""
    from .validation import ValidationError

    from .validation import split_candidate

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
    from ...realrun.launcher import testbed_for
    from .validation import TrialRunner, autotune_best_config, plan, plan_records, run_pending

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


def _cuda_here() -> None:
    """Raise ValidationError (one line: :func:`autotuner.frameworks.horovod.sweepprobe.cuda_refusal`) when ranks on
    this machine cannot put their tensors on a GPU, or when torch or Horovod is missing."""
    from ...errors import ValidationError
    from .sweepprobe import cuda_refusal

    try:
        import horovod.torch as hvd
        import torch
    except ImportError as e:
        raise ValidationError(f"--device cuda: the sweep needs torch and horovod ({e})") from None
    why = cuda_refusal(torch, hvd)
    if why:
        raise ValidationError(why)


@renamed_keywords(cpu_repeats="cpu_rounds", trickle_repeats="trickle_rounds", idle_repeats="idle_rounds",
                  fp16_repeats="fp16_rounds", burst_repeats="burst_rounds", step_repeats="step_rounds",
                  mid_repeats="mid_rounds", fused_repeats="fused_rounds")
def measure(*, env: str, runs_dir: Path | None = None, np: int = 2, hosts: str = "", link_gbit: float | None = None,
            loopback_gbit: float | None = None, sizes: str | None = None, repeats: int = 5, warmup: int = 1,
            timeout_s: float = 900.0, testbed_hosts: int | None = None, ranks_per_host: int | None = None,
            wait: str = "spin", cpu_rounds: int = 5, trickle_rounds: int = 2, idle_rounds: int = 3,
            fp16_rounds: int = 3, burst_rounds: int = 3, step_rounds: int = 5, mid_rounds: int = 3,
            fused_rounds: int = 3, on_total=None, on_item=None, on_event=None,
            bandwidth_gbit: float | None = None, device: str = "cpu") -> dict:
    """``autotuner measure``: the allreduce sweep of :mod:`autotuner.frameworks.horovod.measure` into
    ``runs_dir/<env>/`` (resumes a killed sweep), then its ``cpu`` phase (``cpu_rounds``
    rounds, :mod:`autotuner.frameworks.horovod.cpuprobe`) and its ``trickle`` phase (``trickle_rounds``
    rounds, :mod:`autotuner.frameworks.horovod.trickleprobe`), its ``idle`` phase (``idle_rounds`` rounds of one job,
    :mod:`autotuner.frameworks.horovod.idleprobe`), its ``burst`` phase (``burst_rounds`` rounds of one job, no timeline,
    :mod:`autotuner.frameworks.horovod.burstprobe`), its mid-size burst phase (``mid_rounds`` rounds of one job of the same probe
    at 256 KiB-4 MiB, no timeline), its ``step`` phase (``step_rounds`` rounds of 5 replay jobs, no
    timeline, :mod:`autotuner.frameworks.horovod.stepprobe`), its ``fused`` phase (``fused_rounds`` rounds of one job, no timeline:
    fused responses against lone ones, :func:`autotuner.frameworks.horovod.measure.run_fused_phase`) and its ``fp16`` phase (``fp16_rounds`` rounds of one job,
    :mod:`autotuner.frameworks.horovod.fp16probe`; 0 skips any of them). ``sizes``: ``LO:HI`` or a comma list (bytes,
    ``K``/``M``/``G`` binary units), default 1K:512M. ``runs_dir`` None: ``$AUTOTUNER_RUNS_DIR``, else
    ./runs, else the user's folder. The network, ``wait`` and ``bandwidth_gbit`` as :func:`validate`; the phases'
    old keyword names ``<phase>_repeats`` still work (DeprecationWarning). ``device``: ``"cpu"`` (CPU tensors), or
    ``"cuda"``: the sweep's and the fused phase's tensors on each rank's GPU (a Horovod built with NCCL; the ranks
    refuse in one line otherwise), the phases that time CPU tensors skipped. Returns the JSON-ready summary (with
    ``runs_dir``). Raises
    ValidationError (one line) for bad input, a missing horovodrun or a failed job; OutputError
    when ``runs_dir/<env>`` cannot be written."""
    from ...errors import ValidationError
    from .measure import DEFAULT_SIZES, SweepSetup, parse_hosts, parse_sizes, run_measure, tiers

    bandwidth_gbit, link_gbit = link_rates(link_gbit, loopback_gbit, bandwidth_gbit,
                                           testbed_hosts is not None or ranks_per_host is not None, "measure")
    topo = _testbed_topology(testbed_hosts, ranks_per_host, link_gbit, hosts)
    if topo is not None:
        from ...realrun.testbed import cluster_hosts

        np, hosts = topo[0] * topo[1], cluster_hosts(*topo)
    if np < 2:
        raise ValidationError(f"--np {np}: an allreduce needs at least 2 ranks")
    if device not in ("cpu", "cuda"):
        raise ValidationError(f"--device {device}: cpu or cuda")
    for bad, v in (("--cpu-rounds", cpu_rounds), ("--trickle-rounds", trickle_rounds),
                   ("--idle-rounds", idle_rounds), ("--fp16-rounds", fp16_rounds),
                   ("--burst-rounds", burst_rounds), ("--step-rounds", step_rounds),
                   ("--mid-rounds", mid_rounds), ("--fused-rounds", fused_rounds)):
        if v < 0:
            raise ValidationError(f"{bad} {v}: must be >= 0")
    tiers(np, hosts)  # bad --hosts: one line before anything starts
    here = topo is not None or all(h in ("localhost", "127.0.0.1") for h, _ in parse_hosts(hosts, np))
    if device == "cuda" and here:
        _cuda_here()  # the ranks run on this machine: refuse before a job starts or env.toml is written
    sz = parse_sizes(sizes) if sizes else DEFAULT_SIZES
    from ...paths import runs_output_dir

    runs_dir = runs_output_dir(runs_dir)
    env_dir = runs_dir / env
    check_output_dir(env_dir, "--runs-dir")
    setup = SweepSetup(np=np, hosts=hosts, bandwidth_gbit=bandwidth_gbit, repeats=repeats, warmup=warmup,
                       testbed_hosts=testbed_hosts, ranks_per_host=ranks_per_host, link_gbit=link_gbit, wait=wait,
                       device=str(device))
    with _sigterm_as_exit():
        summary = run_measure(env_dir, setup, sizes=sz, timeout_s=timeout_s, cpu_repeats=cpu_rounds,
                              trickle_repeats=trickle_rounds, idle_repeats=idle_rounds, fp16_repeats=fp16_rounds,
                              burst_repeats=burst_rounds, step_repeats=step_rounds, mid_repeats=mid_rounds,
                              fused_repeats=fused_rounds, on_total=on_total, on_item=on_item, on_event=on_event)
    return summary | {"runs_dir": str(runs_dir)}
