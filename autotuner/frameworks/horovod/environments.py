"""Horovod environments: fit every environment of a runs tree, list them, make one from specs, their error band
and Horovod version, the accuracy table, a real autotune log read back, a timeline compared.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ..._deprecated import renamed_keywords
from ...errors import AutotunerError, KnobError, ScenarioError
from .fit.store import write_model
from .knobs import LAST_RELEASE, check_horovod_version
from ...readers.layouts import load_layout
from ...writers.atomic import check_output_dir



def compare_timelines(real: Path, sim: Path, *, skip_real: int = 1, skip_sim: int = 0, top: int = 10) -> dict:
    """Read two timelines (plain or gzipped) and compare them (:func:`autotuner.views.timeline_compare.compare`).

    Raises TimelineError (one line) for an unreadable file, a non-timeline or no complete step.
    """
    from ...readers.timeline import read_timeline
    from ...views.timeline_compare import compare

    if skip_real < 0 or skip_sim < 0 or top < 0:
        raise ScenarioError("--skip-real, --skip-sim and --top must be >= 0")
    tr, ts = read_timeline(real), read_timeline(sim)
    d = compare(tr, ts, skip_real=skip_real, skip_sim=skip_sim, top=top)
    d["notes"] = [*tr.problems, *ts.problems, *d.get("notes", [])]  # what the reader dropped, named
    return d


def fit_runs(runs_dir: Path, model_dir: Path, on_event=None) -> tuple[list[tuple[dict, Path, Path | None]], list[str]]:
    """Fit every environment under ``runs_dir``; write model JSON + bandwidth PNG per env.

    Returns ([(model dict, json path, png path or None)], problems). ``problems`` names every
    environment, run, row, record or timeline left out, and each environment that could not be
    fitted ("not fitted": a fit error, or a model :func:`autotuner.frameworks.horovod.fit.store.write_model`
    refuses, e.g. one holding a non-finite number); the others are still fitted. Files are
    written only inside ``model_dir``. Raises RunsError when nothing can be read, FitError (one
    line naming every problem) when no environment could be fitted, OutputError when a file
    cannot be written.
    """
    from ...errors import FitError, OutputError
    from ...views.plots import (
        bandwidth_plot,  # matplotlib: imported only when plotting (keeps `suggest` start fast)
    )

    from .fit.fitters import fit_env
    from .readers.runs import read_runs

    say = on_event or (lambda line: None)
    say(f"reading {runs_dir}")
    envs, problems = read_runs(runs_dir)
    fitted = []
    for i, env in enumerate(envs, 1):
        say(f"fitting {env.name} ({i} of {len(envs)})")
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

    # an environment's own folder (``fit runs/mycluster``) is checked from the runs folder it sits in, as ``fit runs/``
    # checks it: its validation records are read from <runs>/<env>/validation
    roots = Path(runs_dir).resolve().parent if (Path(runs_dir) / "env.toml").is_file() else runs_dir
    say("checking each fit against its env's real trials")
    for d, path, _ in fitted:  # every model written first: trust_of predicts with the new fits
        d["trust"] = trust_of(roots, model_dir, d["env"])
        write_model(model_dir, d)
    if not fitted:  # one line, naming every problem, and nothing written
        raise FitError(f"no environment could be fitted: {'; '.join(problems)}")
    return fitted, problems


def error_band(model_dir: Path | Sequence[Path], fenv) -> dict[str, Any]:
    """The error band ``suggest`` holds a predicted gain against, and the trust line every
    prediction carries.

    Where ``fenv`` (a :class:`autotuner.frameworks.horovod.fit.store.FittedEnv`) has been checked against real
    trials (its model file's ``trust``, written by ``fit``: :func:`autotuner.frameworks.horovod.views.accuracy.trust_of`),
    the band is its own: the larger of its held-out mean error and its repeat spread. Otherwise it
    is borrowed: the median band of the checked environments measured on the same backend in
    ``model_dir`` (every folder searched), or of all checked environments when none shares the
    backend, and ``source`` gives their range. Returns ``band`` (a fraction, >= :data:`autotuner.frameworks.horovod.search.ranking.MIN_GAIN`),
    ``source`` (one line: whose band and why), ``line`` (the trust line: "checked on N real
    trials, mean error X %, worst Y %", saying how many configurations that ran another job than predicted
    were left out, or that every one did: :func:`autotuner.frameworks.horovod.views.accuracy.trust_of`; or
    "never checked against a real run") and ``trust``."""
    from .fit.store import find_models, model_dirs
    from ...readers.files import read_json
    from .search.ranking import MIN_GAIN

    t = fenv.raw.get("trust") or {}
    if t.get("configurations"):
        line = (f"checked on {t['trials']} real trials ({t['configurations']} configurations): mean error "
                f"{t['mean_error_pct']:.1f} %, worst {t['worst_pct']:+.1f} %")
        kinds = ", ".join(t.get("other_jobs") or []) or "another job"
        if t.get("only_other_job"):
            line += f" (every one ran another job than predicted: {kinds})"
        elif t.get("other_job_configurations"):
            n = int(t["other_job_configurations"])
            line += f"; {n} configuration{'s' * (n != 1)} of another job left out ({kinds})"
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
    from ...specs import NEVER_MEASURED, is_spec

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


def env_horovod_version(fenv) -> tuple[str, str | None]:
    """The Horovod release ``fenv`` (a :class:`autotuner.frameworks.horovod.fit.store.FittedEnv`) ran: its model file's
    ``cluster.horovod_version`` (``fit`` copies it from env.toml), and None; the last release
    (:data:`autotuner.frameworks.horovod.knobs.LAST_RELEASE`) when it names none, with a one-line note when it names something
    that is no Horovod release."""
    v = (fenv.raw.get("cluster") or {}).get("horovod_version")
    if v is None:
        return LAST_RELEASE, None
    try:
        return check_horovod_version(v, f"{fenv.name}: horovod_version"), None
    except KnobError as e:
        return LAST_RELEASE, f"{e}; Horovod {LAST_RELEASE}'s defaults are the reference"


def fit_environments(runs_dir: Path, out: Path | None = None, on_event=None):
    """``autotuner fit`` (named so: ``autotuner.fit`` is the fitting package): a cost model per environment under ``runs_dir``, written as
    ``<env>.json`` (+ a bandwidth plot) to ``out`` (default: ``$AUTOTUNER_MODEL_DIR``, else the
    user's model folder, :func:`autotuner.paths.model_output_dir`). ``on_event(line)``: one line as each env's fit
    starts. Returns a
    :class:`autotuner.frameworks.horovod.results.FitResult`; raises an AutotunerError (one line) for an unusable
    runs folder or output folder, and FitError when nothing could be fitted."""
    from ...errors import FitError
    from .fit import fitters  # noqa: F401  (the fitters and scipy load before --out is made)
    from ...paths import model_output_dir
    from .results import FitResult

    default_folder, model_dir = out is None, model_output_dir(out)
    check_output_dir(model_dir, "--out")
    fitted, problems = fit_runs(Path(runs_dir), model_dir, on_event=on_event)
    if not fitted:
        raise FitError("no environment could be fitted" + (f" ({len(problems)} input problem(s): "
                                                            f"{problems[0]})" if problems else ""))
    return FitResult(tuple(fitted), tuple(problems), model_dir, default_folder)


def inspect_log(path: Path, model: str | None = None) -> list[str]:
    """``autotuner inspect``: a Horovod autotune log (``--autotune-log-file`` CSV) explained, one
    line each (:func:`autotuner.frameworks.horovod.autotune_log.explain`); with ``model`` (a layout) the score
    is also turned into a time per step. Raises AutotuneLogError / LayoutError (one line)."""
    from .autotune_log import explain, read_autotune_log

    log = read_autotune_log(Path(path))
    return explain(log, load_layout(model).total_bytes if model else None)


def _runs_dirs(runs_dir) -> list[Path]:
    """The runs folders searched: ``runs_dir`` first (one), then the default search; a list as given."""
    from ...paths import runs_search_path

    if runs_dir is None or isinstance(runs_dir, (str, Path)):
        return runs_search_path(None if runs_dir is None else Path(runs_dir))
    return [Path(p) for p in runs_dir]


def _model_dirs(model_dir) -> list[Path]:
    """The fitted-model folders searched: ``model_dir`` first (one or several), then the default search."""
    from ...paths import model_search_path

    if model_dir is None or isinstance(model_dir, (str, Path)):
        return model_search_path(None if model_dir is None else Path(model_dir))
    return [Path(p) for p in model_dir]


@renamed_keywords(inter_gbit="link_gbit")
def env_new(name: str, *, nodes: int, gpus_per_node: int, intra: str | None = None, link_gbit: float | None = None,
            backend: str = "nccl", gpu: str | None = None, out: Path | None = None,
            model_dir: Path | Sequence[Path] | None = None) -> Path:
    """``autotuner env new``: write ``<name>.json``, an environment from published link figures
    (:func:`autotuner.frameworks.horovod.fit.from_specs.spec_model`; every output marks it "from specs, never measured"), to
    ``out`` (default: the user's model folder, :func:`autotuner.paths.model_output_dir`).

    A measured environment always wins: raises ScenarioError (one line, nothing written) when a
    model of that name that was not built from specs exists in ``model_dir``'s search path or in
    ``out``; also for bad figures (:func:`~autotuner.frameworks.horovod.fit.from_specs.spec_model`) or an unusable name.
    ``link_gbit``: the node link, Gbit/s (old name ``inter_gbit``, DeprecationWarning). Returns the path written."""
    from .fit.store import find_models, write_model
    from ...paths import model_output_dir
    from ...readers.files import read_json
    from ...specs import is_spec
    from .fit.from_specs import spec_model

    out = model_output_dir(out)
    for f in [*find_models(_model_dirs(model_dir)).items(), (name, out / f"{name}.json")]:
        if f[0] == name and Path(f[1]).is_file():
            d = read_json(Path(f[1]), ScenarioError, str(f[1]))
            if not (isinstance(d, dict) and is_spec(d)):
                raise ScenarioError(f"env {name!r} is measured ({f[1]}): a measured environment always wins over "
                                    "specs; pick another name")
    d = spec_model(name, nodes=nodes, gpus_per_node=gpus_per_node, intra=intra, inter_gbit=link_gbit,
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
    (calibrated model names), ``default``, ``path``, ``trust`` (the trust line, as
    :func:`error_band` gives it) and ``checked`` (its figures: ``trials``, ``configurations``, ``mean_error_pct``,
    ``worst_pct``, %; None where never checked against a real run). Unreadable files are listed with ``problem``
    instead."""
    from .fit.store import find_models, load_env
    from ...specs import is_spec

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
                    "path": str(path), "trust": (band := error_band(dirs, fenv))["line"],
                    "checked": ({k: band["trust"][k] for k in ("trials", "configurations", "mean_error_pct",
                                                                 "worst_pct")}
                                if (band["trust"] or {}).get("configurations") else None)})
    return out


def env_batch_size(runs_dir: Path | Sequence[Path], env: str) -> int | None:
    """``batch_size`` (samples per GPU per step) from ``<runs>/<env>/env.toml`` (the first folder
    of ``runs_dir`` holding it, when several), or None when there is no such file (or ``env`` is
    not a plain name) or it sets none.

    Raises RunsError or SchemaError (one line) for an env.toml that cannot be read or does not
    match its schema (:func:`autotuner.readers.runs.read_env_meta`).
    """
    from ...paths import env_folder
    from .readers.runs import read_env_meta
    from ...schemas import is_plain_name

    dirs = [runs_dir] if isinstance(runs_dir, (str, Path)) else list(runs_dir)
    folder = env_folder([Path(d) for d in dirs], env) if is_plain_name(env) else None
    if folder is None:
        return None
    return read_env_meta(folder)[1].batch_size


def accuracy_table(runs_dir: Path | Sequence[Path] | None = None, model_dir: Path | Sequence[Path] | None = None,
                   env: str | None = None, cost_model: str | None = None) -> dict[str, Any]:
    """Predicted vs measured for every committed measurement (``autotuner accuracy``); runs and
    models each from one folder (searched first, then the default search) or a list of folders
    searched in order (:mod:`autotuner.paths`); None: the default search.

    Returns ``{"cases": [...], "summary": [...], "notes": [...]}``: each case is one measured
    number (env, quantity, measured, predicted, error in percent, source file and line; the source again as
    ``file`` and ``where`` in it, e.g. ``"5 trials"`` or ``"line 39"``
    (:func:`autotuner.frameworks.horovod.views.accuracy.source_parts`); and ``used_by_fit``: whether the fit was
    calibrated on it; for a replay's step time on an env whose phases leave a small response's price open, ``predicted_range``: [low, high] ms, the prediction at either end of it); the
    summary gives per environment the held-out step-time MAPE and worst case (:func:`autotuner.frameworks.horovod.views.accuracy.summary`). Raises
    RunsError for an unreadable runs dir, ScenarioError for an unknown env.
    """
    from .views.accuracy import cases, source_parts, summary

    runs_dir, model_dir = _runs_dirs(runs_dir), _model_dirs(model_dir)
    notes: list[str] = []
    cs = cases(runs_dir, model_dir, env, notes, cost_model=cost_model)  # cost_model: see frameworks.horovod.views.accuracy.cases
    return {"cases": [{"env": c.env, "quantity": c.what, "measured": c.measured, "predicted": c.predicted,
                       "error_percent": c.error_pct, "source": c.source, "used_by_fit": c.calibrated,
                       **dict(zip(("file", "where"), source_parts(c.source))),
                       **({} if c.predicted_range is None else {"predicted_range": list(c.predicted_range)})}
                      for c in cs],
            "summary": summary(cs), "notes": notes}
