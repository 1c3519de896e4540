"""Where fitted models and measured runs are found, and where new ones are written.

The fitted models ship inside the package (``autotuner/models``), with the small reference data
the predicting commands read on a shipped environment (``autotuner/reference``: every env's
``env.toml``, and a DDP env's own phases and replays, :func:`reference_files`), so ``suggest``
and ``ddp suggest`` work from any working directory. The measurement records themselves live in
the repository's ``runs/`` and are not in the wheel: ``fit``, ``validate`` and ``accuracy`` find
them as ``./runs`` from the repository's root. A user's own fits and measurements live outside
the package and win over a shipped file of the same name.

Fitted models (``<env>.json``), searched in this order; for each env the first folder holding
``<env>.json`` wins, the envs offered are the union, and the default env comes from the first
folder holding any model (:func:`autotuner.frameworks.horovod.fit.store.default_env`):

1. ``--model-dir`` (when given; it must be a folder);
2. ``$AUTOTUNER_MODEL_DIR`` (when set);
3. the user's folder, ``platformdirs.user_data_dir("autotuner")/models``
   (``~/.local/share/autotuner/models`` on Linux, ``$XDG_DATA_HOME`` honoured);
4. the shipped models, ``autotuner/models`` in the installed package.

``autotuner fit`` writes to ``--out``, else ``$AUTOTUNER_MODEL_DIR``, else the user's folder:
never into the installed package (maintainers refresh the shipped models with
``autotuner fit runs/ --out autotuner/models``).

Runs (``<env>/env.toml`` and its measurements), searched in this order:

1. ``--runs-dir`` (when given; it must be a folder);
2. ``$AUTOTUNER_RUNS_DIR`` (when set);
3. ``./runs`` when the working directory holds a runs tree (a folder with an ``*/env.toml``,
   as the repository's root does);
4. the user's folder, ``platformdirs.user_data_dir("autotuner")/runs``;
5. the shipped reference data, ``autotuner/reference`` in the installed package.

An environment's ``env.toml`` is read from the first folder holding it; validation records
are read from every folder. ``validate`` (and any command recording measurements) writes to
the first of 1-4 that applies: ``--runs-dir``, ``$AUTOTUNER_RUNS_DIR``, ``./runs`` (a runs
tree), the user's folder.
"""
from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from .errors import ModelStoreError, RunsError

MODEL_DIR_ENV = "AUTOTUNER_MODEL_DIR"
RUNS_DIR_ENV = "AUTOTUNER_RUNS_DIR"
APP = "autotuner"


def user_dir() -> Path:
    """The per-user data folder (``platformdirs.user_data_dir("autotuner")``); not created here."""
    from platformdirs import user_data_dir  # imported on use: keeps `import autotuner.paths` light

    return Path(user_data_dir(APP, appauthor=False))


def shipped_models() -> Path:
    """The fitted models shipped in the package (``autotuner/models``)."""
    return Path(str(resources.files("autotuner") / "models"))


def shipped_runs() -> Path:
    """The reference data shipped in the package (``autotuner/reference``): the files of the
    repository's ``runs/`` that :func:`reference_files` names, laid out as a runs tree."""
    return Path(str(resources.files("autotuner") / "reference"))


def reference_files(runs: Path) -> list[str]:
    """The files of runs tree ``runs`` that ship in the wheel, as paths relative to it (sorted):
    every ``<env>/env.toml``, and for a DDP env its phases ``<env>/ddp-*.jsonl`` and replays
    ``<env>/ddp-validation/*.jsonl`` with the layout files they name (``ddp suggest``'s cost model, trust line and error band)."""
    runs = Path(runs)
    out = [p for p in runs.glob("*/env.toml")]
    for env in {p.parent for p in runs.glob("*/ddp-sweep.jsonl")}:
        out += list(env.glob("ddp-*.jsonl")) + list(env.glob("ddp-validation/*.jsonl")) + list(env.glob("ddp-validation/*.json"))
    return sorted(str(p.relative_to(runs)) for p in out if p.is_file())


def _from_env(var: str) -> Path | None:
    v = os.environ.get(var, "").strip()
    return Path(v).expanduser() if v else None


def _given(path: Path | None, flag: str, error: type[Exception]) -> Path | None:
    if path is None:
        return None
    path = Path(path).expanduser()
    if not path.is_dir():
        why = "not a directory" if path.exists() else "no such directory"
        raise error(f"{flag} {path}: {why}")
    return path


def _unique(dirs: list[Path | None]) -> list[Path]:
    """``dirs`` without None and without a folder already listed (compared resolved)."""
    out, seen = [], set()
    for d in dirs:
        if d is None:
            continue
        try:
            key = d.resolve()
        except OSError:
            key = d.absolute()
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def describe(dirs: list[Path]) -> str:
    """The folders searched, for an error message: ``a, b, c``."""
    return ", ".join(str(d) for d in dirs)


def model_search_path(model_dir: Path | None = None) -> list[Path]:
    """Folders searched for ``<env>.json``, in order (see the module doc). Raises
    ModelStoreError (one line) when ``model_dir`` is given but is not a folder."""
    return _unique([_given(model_dir, "--model-dir", ModelStoreError), _from_env(MODEL_DIR_ENV),
                    user_dir() / "models", shipped_models()])


def model_output_dir(out: Path | None = None) -> Path:
    """Where ``fit`` writes: ``out``, else ``$AUTOTUNER_MODEL_DIR``, else the user's folder."""
    return Path(out) if out is not None else (_from_env(MODEL_DIR_ENV) or user_dir() / "models")


def _local_runs() -> Path | None:
    """``./runs`` when it is a runs tree (holds a folder with ``env.toml``), else None."""
    d = Path("runs")
    try:
        if d.is_dir() and any((p / "env.toml").is_file() for p in d.iterdir() if p.is_dir()):
            return d
    except OSError:
        pass
    return None


def runs_search_path(runs_dir: Path | None = None) -> list[Path]:
    """Folders searched for environments and their measurements, in order (see the module
    doc). Raises RunsError (one line) when ``runs_dir`` is given but is not a folder."""
    return _unique([_given(runs_dir, "--runs-dir", RunsError), _from_env(RUNS_DIR_ENV), _local_runs(),
                    user_dir() / "runs", shipped_runs()])


def runs_output_dir(runs_dir: Path | None = None) -> Path:
    """Where new measurements go: ``runs_dir``, else ``$AUTOTUNER_RUNS_DIR``, else ``./runs`` when
    the working directory holds a runs tree, else the user's folder (never the package)."""
    if runs_dir is not None:
        return Path(runs_dir)
    return _from_env(RUNS_DIR_ENV) or _local_runs() or user_dir() / "runs"


def env_folder(runs_dirs: list[Path], env: str) -> Path | None:
    """``<dir>/<env>`` of the first folder of ``runs_dirs`` holding ``<env>/env.toml``, else None."""
    for d in runs_dirs:
        if (d / env / "env.toml").is_file():
            return d / env
    return None
