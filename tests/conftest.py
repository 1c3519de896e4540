import contextlib
import fcntl
import json
import os
import subprocess
import sys
import tempfile
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
    """Every test (and every ``autotuner`` it starts) sees an empty per-user data folder, an empty cache folder and no
    ``AUTOTUNER_MODEL_DIR`` / ``AUTOTUNER_RUNS_DIR`` (autotuner/paths.py): a developer's own fits
    never shadow the shipped models, and nothing is written into the real ~/.local/share."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_DATA_HOME", str(tmp_path_factory.mktemp("xdg-data-home")))
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache-home")))
        mp.delenv("AUTOTUNER_MODEL_DIR", raising=False)
        mp.delenv("AUTOTUNER_RUNS_DIR", raising=False)
        yield


# --------------------------------------------------------------------------- real runs alone under pytest-xdist

def _shared_dir(config) -> Path | None:
    """The folder every pytest-xdist worker of this run shares (named by xdist's run id), or None when the
    tests run in one process."""
    uid = getattr(config, "workerinput", {}).get("testrunuid")
    if uid is None:
        return None
    d = Path(tempfile.gettempdir()) / f"autotuner-tests-{uid}"
    d.mkdir(exist_ok=True)
    return d


@contextlib.contextmanager
def _slot(config, alone: bool):
    """Under pytest-xdist (README command 2 runs ``-n auto``): a test marked ``real`` (a real ``horovodrun`` or
    ``torchrun`` job, whose timings and timeouts assume the machine to itself) runs alone, every other test beside
    other such tests. A readers-writer lock on a file every worker shares: ``flock`` exclusive for a real test,
    shared for the rest, taken through a turnstile (one more exclusive ``flock``, held only while waiting) so that
    a waiting real test is not overtaken by the other workers' next tests. Nothing happens in one process."""
    d = _shared_dir(config)
    if d is None:
        yield
        return
    with open(d / "turnstile", "a+") as turn, open(d / "real-runs", "a+") as lock:
        fcntl.flock(turn, fcntl.LOCK_EX)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turn, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Each test's whole protocol (its fixtures' setup and teardown included: a module's fixture is made in its
    first test's setup) inside :func:`_slot`."""
    with _slot(item.config, item.get_closest_marker("real") is not None):
        yield


# --------------------------------------------------------------------------- no silent skips under CI


def pytest_sessionstart(session):
    """Under CI (``CI`` set: ``.ci/run`` exports ``CI=true``) the run stops before any test, with one ``ERROR:``
    line and exit status 4 (pytest's usage error), when anything the tests need is missing (tests/cli_helpers.py
    ``NEEDS``: torch, Horovod, root, iproute2, setpriv, /proc, perfetto, wheel), naming how to get each, instead
    of skipping the tests that need it. Checked once, in the process that runs the session, not in pytest-xdist's
    workers."""
    from cli_helpers import NEEDS, under_ci

    if not under_ci() or hasattr(session.config, "workerinput"):
        return
    gone = [f"{name} is missing: {how}" for name, (how, ok) in NEEDS.items() if not ok()]
    if gone:
        raise pytest.UsageError("under CI, " + "; ".join(gone))


def _skip_reason(report) -> str:
    lr = report.longrepr
    reason = lr[2] if isinstance(lr, tuple) and len(lr) == 3 else str(lr)
    return reason.removeprefix("Skipped: ")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI a skip is a failure unless it is one of those allowed (tests/cli_helpers.py ``ALLOWED_UNDER_CI``:
    no CUDA GPU; no trace_processor_shell offline): a test that skips for a reason no helper routes (a stray
    ``pytest.skip``) cannot pass CI silently."""
    outcome = yield
    rep = outcome.get_result()
    from cli_helpers import ALLOWED_UNDER_CI, under_ci

    if rep.skipped and not hasattr(rep, "wasxfail") and under_ci() and _skip_reason(rep) not in ALLOWED_UNDER_CI:
        rep.outcome = "failed"
        rep.longrepr = (f"skipped under CI, where nothing may skip but the CUDA tests and perfetto's binary offline: "
                        f"{_skip_reason(rep)}")


def pytest_terminal_summary(terminalreporter):
    """The run's skips at its end, one line per reason: how many tests, the first few by name."""
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if not hasattr(r, "wasxfail")]
    if not skipped:
        return
    by: dict[str, list[str]] = {}
    for r in skipped:
        by.setdefault(_skip_reason(r), []).append(r.nodeid)
    terminalreporter.section(f"{len(skipped)} skipped", sep="-")
    for reason, ids in sorted(by.items(), key=lambda kv: -len(kv[1])):
        names = ", ".join(i.split("::", 1)[-1] for i in ids[:3]) + (f" (+{len(ids) - 3})" if len(ids) > 3 else "")
        terminalreporter.write_line(f"{len(ids)} x {reason}: {names}")


def pytest_configure(config):
    config.addinivalue_line("markers", "real: starts real horovodrun/torchrun jobs; runs alone under pytest-xdist")
    config.addinivalue_line("markers", "long: a real-run check of 40 s or more on the CI machine kind: left out of "
                            "README command 2 (-m 'not long'); scripts/long_checks.py runs it and commits its record, "
                            "which tests/test_long_checks.py reads")


# --------------------------------------------------------------------------- the shared refit


def _refit(out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autotuner.cli", "fit", str(ROOT / "runs"), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="session")
def refit_all(request, tmp_path_factory):
    """``autotuner fit runs/ --out DIR`` as a user runs it (README command 1), once per test session: the
    ``(CompletedProcess, DIR)`` every test that needs a refit of the whole committed runs folder shares (the fit
    takes 25-40 s on a fast machine, 3 min on the slow kind CI now runs on; the tests only read what it wrote).
    Under pytest-xdist the first worker to ask fits, into the folder the workers share, and the others wait on a
    lock and read its result (the pattern of pytest-xdist's docs, "Making session-scoped fixtures execute only
    once")."""
    if _shared_dir(request.config) is None:
        out = tmp_path_factory.mktemp("refit-all")
        return _refit(out), out
    shared = tmp_path_factory.getbasetemp().parent  # the workers' common base, which pytest rotates away
    out, done = shared / "refit-all", shared / "refit-all.json"
    with open(shared / "refit-all.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not done.exists():
                out.mkdir(exist_ok=True)
                p = _refit(out)
                tmp = done.with_suffix(".tmp")
                tmp.write_text(json.dumps({"args": p.args, "returncode": p.returncode, "stdout": p.stdout,
                                           "stderr": p.stderr}))
                tmp.replace(done)
            r = json.loads(done.read_text())
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return subprocess.CompletedProcess(r["args"], r["returncode"], r["stdout"], r["stderr"]), out
