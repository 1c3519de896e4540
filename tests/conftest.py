from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session", autouse=True)
def _no_user_model_or_runs_folders(tmp_path_factory):
    """Every test (and every ``autotuner`` it starts) sees an empty per-user data folder and no
    ``AUTOTUNER_MODEL_DIR`` / ``AUTOTUNER_RUNS_DIR`` (autotuner/paths.py): a developer's own fits
    never shadow the shipped models, and nothing is written into the real ~/.local/share."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg-data-home")))
        mp.delenv("AUTOTUNER_MODEL_DIR", raising=False)
        mp.delenv("AUTOTUNER_RUNS_DIR", raising=False)
        yield
