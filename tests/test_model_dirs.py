"""Fitted models and the shipped reference data are found from any working directory; the
measurement records are found from the repository's root (autotuner/paths.py).

Every command here runs in an empty temporary working directory with ``HOME`` and
``XDG_DATA_HOME`` inside ``tmp_path``, so the real per-user folder is never read or written, and
the shipped ``autotuner/models`` is checked unchanged by the tests that fit.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import need, run

from autotuner import paths
from autotuner.errors import ModelStoreError, RunsError
from autotuner.frameworks.horovod.fit.store import default_env, list_envs, load_env

ROOT = Path(__file__).resolve().parents[1]
#: every committed env has something to predict (accuracy shows every env): validation envs, sweep envs
#: replayed for real or predicting the trials of their own setup, reports, and the held-out runs in the
#: model files of t4x4-pcie, t4x4-compression and laptop-cpu
STEP_ENVS = {"local-gloo-1gbit", "local-gloo-2x2", "local-gloo-2x2-poll", "v100-16gbit", "v100-5gbit", "fresh-0.5gbit",
             "fresh-2x1-5gbit", "fresh-3gbit", "fresh-poll-0.75gbit", "fresh-poll-2gbit", "fresh-poll-2x1-2gbit",
             "fresh-1.5gbit", "fresh-poll-1.25gbit", "fresh-poll-2x1-3gbit", "fresh-poll-2x1-4gbit",
             "fresh-poll-2x1-3.5gbit", "fresh-poll-2x1-4.5gbit", "fresh-poll-1.75gbit", "fresh-poll-2.5gbit",
             "fresh-poll-1gbit", "fresh-poll-2.25gbit", "fresh-poll-1.1gbit", "fresh-poll-2.75gbit", "fresh-poll-3gbit",
             "fresh-poll-1.5gbit", "fresh-poll-3.5gbit", "fresh-poll-4gbit", "fresh-poll-2.2gbit", "fresh-poll-2x1-2.5gbit",
             "local-gloo-1gbit-sweep", "t4x4-pcie", "t4x4-compression", "laptop-cpu"}
SHIPPED = ROOT / "autotuner" / "models"
SHIPPED_RUNS = ROOT / "autotuner" / "reference"
RUNS = ROOT / "runs"


def _snapshot(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.fixture
def sandbox(tmp_path):
    """(empty working dir, environment) with the user folder inside tmp_path and no AUTOTUNER_* set."""
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in (paths.MODEL_DIR_ENV, paths.RUNS_DIR_ENV)}
    env.update(HOME=str(tmp_path / "home"), XDG_DATA_HOME=str(tmp_path / "xdg"))
    try:  # keep matplotlib's font cache where it is (a fresh HOME would rebuild it)
        import matplotlib

        env.setdefault("MPLCONFIGDIR", matplotlib.get_configdir())
    except Exception:  # noqa: BLE001 - only a speed-up
        pass
    before = _snapshot(SHIPPED)
    yield work, env
    assert _snapshot(SHIPPED) == before, "a test changed the shipped autotuner/models"


def _run(sandbox, *args, **extra_env):
    work, env = sandbox
    return run(*args, cwd=work, env=env | extra_env)


def _ok_json(p) -> dict:
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def _one_line_error(p, *needles) -> str:
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), p.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def _user_models(tmp_path: Path) -> Path:
    return tmp_path / "xdg" / "autotuner" / "models"


def _model_copy(folder: Path, env: str = "v100-16gbit", *, bandwidth_factor: float = 0.25,
                rename: str | None = None, default: bool | None = None) -> Path:
    """A shipped model copied into ``folder`` with its inter-node bandwidth scaled (a user's own fit)."""
    d = json.loads((SHIPPED / f"{env}.json").read_text())
    d["cost_model"]["inter"]["bandwidth_gbps"] *= bandwidth_factor
    if rename:
        d["env"] = rename
    if default is not None:
        d["default"] = default
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{rename or env}.json"
    path.write_text(json.dumps(d))
    return path


def _step_ms(sandbox, *args, **extra_env) -> tuple[str, float]:
    d = _ok_json(_run(sandbox, "simulate", "--model", "vgg16", "--env", "v100-16gbit", "--json", *args, **extra_env))
    return d["env"], d["step_time_ms"]


# --- the shipped models and runs, from an empty directory ---------------------------------------

def test_suggest_finds_the_shipped_model_from_an_empty_directory(sandbox):
    d = _ok_json(_run(sandbox, "suggest", "--model", "vgg16", "--n-calls", "4", "--json"))
    assert d["env"] == "v100-16gbit" and d["proposals"]
    assert list(sandbox[0].iterdir()) == []  # nothing written in the working directory


def test_accuracy_reads_the_repository_runs_and_says_where_they_are_from_elsewhere(sandbox):
    d = _ok_json(_run(sandbox, "accuracy", "--json", "--runs-dir", str(RUNS)))
    assert {c["env"] for c in d["cases"]} == STEP_ENVS
    assert {s["env"] for s in d["summary"]} == STEP_ENVS
    # the package ships no records: from an empty directory accuracy says where they are
    _one_line_error(_run(sandbox, "accuracy", "--json"), "ships fitted models, not records", "--runs-dir")


def test_scale_and_explore_read_the_shipped_reference_from_an_empty_directory(sandbox, tmp_path):
    # scale takes the batch size from the shipped v100-16gbit/env.toml (batch_size = 32)
    d = _ok_json(_run(sandbox, "scale", "--model", "resnet50", "--nodes", "1,2", "--out", str(tmp_path / "s"), "--json"))
    assert d["batch_per_gpu"] == 32, "no batch size: the shipped runs were not found"
    # explore overlays the validation records of local-gloo-1gbit where the runs are at hand (not shipped)
    args = ("explore", "--model", "resnet50", "--env", "local-gloo-1gbit", "--resolution", "2", "--no-suggest", "--json")
    assert not _ok_json(_run(sandbox, *args, "--out", str(tmp_path / "e")))["measured"]
    d = _ok_json(_run(sandbox, *args, "--out", str(tmp_path / "e2"), "--runs-dir", str(RUNS)))
    assert d["measured"], "no measured points: --runs-dir was not read"


# --- a user's own fit wins ----------------------------------------------------------------------

def test_a_model_in_AUTOTUNER_MODEL_DIR_wins_over_the_shipped_one(sandbox, tmp_path):
    env0, shipped_ms = _step_ms(sandbox)
    mine = tmp_path / "mine"
    _model_copy(mine)
    env1, mine_ms = _step_ms(sandbox, AUTOTUNER_MODEL_DIR=str(mine))
    assert env0 == env1 == "v100-16gbit"
    assert mine_ms > shipped_ms * 1.2  # a quarter of the bandwidth: slower
    # the other shipped envs stay available next to it
    d = _ok_json(_run(sandbox, "simulate", "--model", "resnet50", "--env", "v100-5gbit", "--json",
                      AUTOTUNER_MODEL_DIR=str(mine)))
    assert d["env"] == "v100-5gbit"


def test_a_model_in_the_user_folder_wins_over_the_shipped_one(sandbox, tmp_path):
    _, shipped_ms = _step_ms(sandbox)
    _model_copy(_user_models(tmp_path))
    _, mine_ms = _step_ms(sandbox)
    assert mine_ms > shipped_ms * 1.2


def test_model_dir_wins_over_the_env_var_which_wins_over_the_user_folder(sandbox, tmp_path):
    _model_copy(_user_models(tmp_path), bandwidth_factor=0.5)
    _, user_ms = _step_ms(sandbox)
    _model_copy(tmp_path / "envvar", bandwidth_factor=0.25)
    _, envvar_ms = _step_ms(sandbox, AUTOTUNER_MODEL_DIR=str(tmp_path / "envvar"))
    _model_copy(tmp_path / "given", bandwidth_factor=0.125)
    _, given_ms = _step_ms(sandbox, "--model-dir", str(tmp_path / "given"), AUTOTUNER_MODEL_DIR=str(tmp_path / "envvar"))
    _, shipped_ms = _step_ms(sandbox, "--model-dir", str(SHIPPED), AUTOTUNER_MODEL_DIR=str(tmp_path / "envvar"))
    assert shipped_ms < user_ms < envvar_ms < given_ms


def test_the_default_env_comes_from_the_users_own_fits(sandbox, tmp_path):
    assert _ok_json(_run(sandbox, "simulate", "--model", "resnet50", "--json"))["env"] == "v100-16gbit"
    _model_copy(_user_models(tmp_path), "local-gloo-1gbit", rename="my-cluster", default=False)
    assert _ok_json(_run(sandbox, "simulate", "--model", "resnet50", "--json"))["env"] == "my-cluster"
    # the shipped ones are still there by name
    assert _ok_json(_run(sandbox, "simulate", "--model", "resnet50", "--env", "v100-16gbit", "--json"))["env"] \
        == "v100-16gbit"


# --- errors name what was searched --------------------------------------------------------------

def test_unknown_env_names_every_folder_searched(sandbox, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    line = _one_line_error(_run(sandbox, "simulate", "--model", "vgg16", "--env", "nope", AUTOTUNER_MODEL_DIR=str(mine)),
                           "unknown env 'nope'", str(mine), str(_user_models(tmp_path)), str(SHIPPED))
    assert "v100-16gbit" in line


@pytest.mark.parametrize("cmd", [["simulate", "--model", "vgg16"], ["suggest", "--model", "vgg16", "--n-calls", "2"],
                                 ["accuracy"], ["scale", "--model", "vgg16", "--nodes", "1"]])
def test_a_model_dir_that_is_not_a_folder_is_one_line(sandbox, tmp_path, cmd):
    _one_line_error(_run(sandbox, *cmd, "--model-dir", str(tmp_path / "missing")), "--model-dir", "no such directory")
    f = tmp_path / "afile"
    f.write_text("x")
    _one_line_error(_run(sandbox, *cmd, "--model-dir", str(f)), "--model-dir", "not a directory")


def test_a_runs_dir_that_is_not_a_folder_is_one_line(sandbox, tmp_path):
    _one_line_error(_run(sandbox, "accuracy", "--runs-dir", str(tmp_path / "missing")), "--runs-dir", "no such directory")


def test_no_model_anywhere_names_the_folders(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    with pytest.raises(ModelStoreError) as e:
        load_env([a, b], None)
    assert "no fitted models in any of" in str(e.value) and str(a) in str(e.value) and str(b) in str(e.value)


# --- fit writes outside the package -------------------------------------------------------------

def _one_env_runs(tmp_path: Path) -> Path:
    runs = tmp_path / "runs-in"
    shutil.copytree(RUNS / "v100-5gbit", runs / "v100-5gbit")
    return runs


def test_fit_without_out_writes_to_the_user_folder_and_says_where(sandbox, tmp_path):
    p = _run(sandbox, "fit", str(_one_env_runs(tmp_path)))
    assert p.returncode == 0, p.stderr
    user = _user_models(tmp_path)
    assert (user / "v100-5gbit.json").is_file() and str(user) in p.stdout
    assert list(sandbox[0].iterdir()) == []
    # and the user's fit is what simulate reads now
    d = _ok_json(_run(sandbox, "simulate", "--model", "vgg16", "--env", "v100-5gbit", "--json"))
    assert d["env"] == "v100-5gbit"


def test_fit_writes_to_AUTOTUNER_MODEL_DIR_when_set_and_to_out_when_given(sandbox, tmp_path):
    runs = _one_env_runs(tmp_path)
    p = _run(sandbox, "fit", str(runs), AUTOTUNER_MODEL_DIR=str(tmp_path / "envvar"))
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "envvar" / "v100-5gbit.json").is_file()
    p = _run(sandbox, "fit", str(runs), "--out", str(tmp_path / "out"), AUTOTUNER_MODEL_DIR=str(tmp_path / "envvar2"))
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "out" / "v100-5gbit.json").is_file() and not (tmp_path / "envvar2").exists()
    assert not _user_models(tmp_path).exists()


# --- the lookup itself (in-process) -------------------------------------------------------------

@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(paths.MODEL_DIR_ENV, raising=False)
    monkeypatch.delenv(paths.RUNS_DIR_ENV, raising=False)
    return tmp_path


def test_model_search_path_order(clean_env, monkeypatch):
    tmp = clean_env
    (tmp / "given").mkdir()
    monkeypatch.setenv(paths.MODEL_DIR_ENV, str(tmp / "envvar"))
    assert paths.model_search_path(tmp / "given") == [tmp / "given", tmp / "envvar", _user_models(tmp), SHIPPED]
    monkeypatch.delenv(paths.MODEL_DIR_ENV)
    assert paths.model_search_path() == [_user_models(tmp), SHIPPED]
    assert paths.model_search_path(SHIPPED) == [SHIPPED, _user_models(tmp)]  # listed once
    assert paths.model_output_dir() == _user_models(tmp)
    monkeypatch.setenv(paths.MODEL_DIR_ENV, str(tmp / "envvar"))
    assert paths.model_output_dir() == tmp / "envvar" and paths.model_output_dir(tmp / "o") == tmp / "o"


def test_store_union_first_folder_wins(tmp_path):
    mine = tmp_path / "mine"
    _model_copy(mine, default=False)
    _model_copy(mine, "local-gloo-1gbit", rename="my-cluster", default=False)
    shipped = sorted(f.stem for f in SHIPPED.glob("*.json"))
    assert list_envs([mine, SHIPPED]) == sorted({"my-cluster", *shipped}) and "my-cluster" not in shipped
    assert load_env([mine, SHIPPED], "v100-16gbit").path == mine / "v100-16gbit.json"
    assert load_env([mine, SHIPPED], "v100-5gbit").path == SHIPPED / "v100-5gbit.json"
    assert default_env([SHIPPED]) == "v100-16gbit"
    assert default_env([tmp_path / "missing", mine, SHIPPED]) == "my-cluster"  # mine: none marked, first by name
    assert default_env([tmp_path / "missing"]) is None
    _model_copy(mine, default=True)  # a folder's model marked default wins within it
    assert default_env([mine, SHIPPED]) == "v100-16gbit"


def test_runs_search_and_output(clean_env, monkeypatch):
    tmp = clean_env
    user_runs = tmp / "xdg" / "autotuner" / "runs"
    empty = tmp / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    assert paths.runs_search_path() == [user_runs, SHIPPED_RUNS]
    assert paths.runs_output_dir() == user_runs  # never the package
    # a ./runs that holds environments (the repository's root) is searched and written to
    monkeypatch.chdir(ROOT)
    assert paths.runs_output_dir() == Path("runs")
    assert paths.runs_search_path() == [Path("runs"), user_runs, SHIPPED_RUNS]
    # a ./runs without environments (e.g. TensorBoard's) is not
    (empty / "runs" / "logs").mkdir(parents=True)
    monkeypatch.chdir(empty)
    assert paths.runs_output_dir() == user_runs
    monkeypatch.setenv(paths.RUNS_DIR_ENV, str(tmp / "r"))
    assert paths.runs_output_dir() == tmp / "r" and paths.runs_output_dir(tmp / "given") == tmp / "given"
    assert paths.runs_search_path()[0] == tmp / "r"
    with pytest.raises(RunsError, match="--runs-dir"):
        paths.runs_search_path(tmp / "missing")


# --- a non-editable install ----------------------------------------------------------------------

def test_a_built_wheel_ships_the_models_and_reference_data_and_no_records(tmp_path):
    """Build the wheel from a copy of the source, install it into a plain folder, and run it
    from an empty directory: the shipped models and reference data come from the installed
    package, and both frameworks' suggest answer on a shipped env; no measurement record ships."""
    need("wheel")
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "autotuner", src / "autotuner", ignore=shutil.ignore_patterns("__pycache__", ".scratch-*"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    p = subprocess.run([*pip, "wheel", str(src), "-w", str(tmp_path / "whl"), "--no-deps", "--no-build-isolation"],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    wheels = list((tmp_path / "whl").glob("*.whl"))
    p = subprocess.run([*pip, "install", "--no-deps", "--target", str(tmp_path / "site"), *map(str, wheels)],
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    site = tmp_path / "site"
    assert (site / "autotuner" / "models" / "v100-16gbit.json").is_file()
    assert (site / "autotuner" / "reference" / "v100-16gbit" / "env.toml").is_file()
    assert not (site / "autotuner" / "runs").exists()
    assert not [p for p in site.rglob("*") if p.suffix in (".gz", ".png", ".md") and "dist-info" not in str(p)]
    assert sum(p.stat().st_size for p in wheels) < 5e6
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in (paths.MODEL_DIR_ENV, paths.RUNS_DIR_ENV)}
    env.update(PYTHONPATH=str(site), XDG_DATA_HOME=str(tmp_path / "xdg"))

    def py(*args):
        return subprocess.run([sys.executable, *args], cwd=work, env=env, capture_output=True, text=True, timeout=300)

    p = py("-c", "import autotuner.paths as p; print(p.__file__); print(p.shipped_models()); print(p.shipped_runs())")
    assert p.returncode == 0, p.stderr
    assert all(line.startswith(str(site)) for line in p.stdout.split()), p.stdout
    d = _ok_json(py("-m", "autotuner.cli", "suggest", "--model", "vgg16", "--n-calls", "2", "--json"))
    assert d["env"] == "v100-16gbit"
    d = _ok_json(py("-m", "autotuner.cli", "ddp", "suggest", "--env", "ddp-2x1-3gbit", "--model", "resnet50", "--json"))
    assert d["env"] == "ddp-2x1-3gbit"
    assert list(work.iterdir()) == []
