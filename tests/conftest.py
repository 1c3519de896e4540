import os
from pathlib import Path

import pytest

# GNU readline (which pytest imports, for pdb) exports the terminal's COLUMNS and LINES at the C level, unseen by
# os.environ: every ``autotuner`` a test starts would inherit COLUMNS=80 and wrap its piped tables to it
# (autotuner/render.py). A test that wants a width sets it in the child's environment itself.
for _name in ("COLUMNS", "LINES"):
    if _name not in os.environ:
        os.unsetenv(_name)

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


@pytest.fixture(scope="session")
def refit_all(tmp_path_factory):
    """``autotuner fit runs/ --out DIR`` as a user runs it (README command 1), once per test session: the
    ``(CompletedProcess, DIR)`` every test that needs a refit of the whole committed runs folder shares (each such
    fit takes 25-40 s on this machine's kind; the tests only read what it wrote)."""
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("refit-all")
    p = subprocess.run([sys.executable, "-m", "autotuner.cli", "fit", str(ROOT / "runs"), "--out", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    return p, out
