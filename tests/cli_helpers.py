"""Shared by the tests: run ``autotuner`` in a subprocess, check one-line errors, require what a test needs
(torch, Horovod, root, ...: skipped where missing, failed under CI), load the fuzz harness."""
import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "tests") not in sys.path:  # imported as tests.cli_helpers (tests/test_fuzz.py)
    sys.path.insert(0, str(ROOT / "tests"))
from cli_server import startup_env  # noqa: E402  (what a forked child cannot take on)

_LAUNCHER: subprocess.Popen | None = None
_LAUNCHER_STARTUP: dict = {}


def _launcher(env: dict) -> subprocess.Popen | None:
    """The running ``tests/cli_server.py`` (started on first use), or None where a command must start as a fresh
    interpreter: the tests are told so (``AUTOTUNER_TEST_FRESH_PROCESS=1``), or ``env`` differs from the
    launcher's in what an interpreter reads only as it starts."""
    global _LAUNCHER, _LAUNCHER_STARTUP
    if os.environ.get("AUTOTUNER_TEST_FRESH_PROCESS"):
        return None
    if _LAUNCHER is None or _LAUNCHER.poll() is not None:
        _LAUNCHER_STARTUP = startup_env(dict(os.environ))
        _LAUNCHER = subprocess.Popen([sys.executable, str(ROOT / "tests" / "cli_server.py")], cwd=ROOT,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return _LAUNCHER if startup_env(env) == _LAUNCHER_STARTUP else None


def run(*args, cwd=ROOT, env=None, timeout=300):
    """``python -m autotuner.cli ARGS`` as a user would run it, in ``cwd`` with ``env`` (default: this process's
    environment); returns the CompletedProcess (``text=True``) and raises :class:`subprocess.TimeoutExpired`
    past ``timeout`` seconds, as :func:`subprocess.run` does.

    Each command runs in its own process, forked from ``tests/cli_server.py``, which has imported autotuner's
    modules once: the 2-3 s a fresh interpreter spends importing on the CI machines is paid once per test session,
    not per command (the suite starts about a thousand). ``AUTOTUNER_TEST_FRESH_PROCESS=1`` starts a fresh
    ``python -m autotuner.cli`` for each command instead. Tests of Ctrl-C and of the program's start itself
    start the program with :mod:`subprocess` directly."""
    cmd = [sys.executable, "-m", "autotuner.cli", *map(str, args)]
    env = dict(os.environ if env is None else env)
    server = _launcher(env)
    if server is None:
        return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    with tempfile.TemporaryDirectory(prefix="autotuner-cli-") as d:
        out, err = Path(d) / "stdout", Path(d) / "stderr"
        req = {"args": cmd[3:], "cwd": str(Path(cwd).resolve()), "env": env, "stdout": str(out),
               "stderr": str(err), "timeout": timeout}
        try:
            server.stdin.write(json.dumps(req) + "\n")
            server.stdin.flush()
            reply = server.stdout.readline()
        except BrokenPipeError:
            reply = ""
        if not reply:
            raise RuntimeError(f"tests/cli_server.py ended (status {server.poll()}); see its stderr above")
        rc = json.loads(reply)["rc"]
        stdout, stderr = out.read_text(), err.read_text()
    if rc is None:
        raise subprocess.TimeoutExpired(cmd, timeout, output=stdout, stderr=stderr)
    return subprocess.CompletedProcess(cmd, rc, stdout, stderr)


def assert_one_line_error(p, needle):
    """Exit status 2, exactly one non-empty stderr line containing ``needle``, no traceback."""
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and needle in lines[0], p.stderr
    assert "Traceback" not in p.stderr


def under_ci() -> bool:
    """True where the tests run as CI runs them: ``CI`` set to anything but empty, ``0``, ``false`` or ``no``
    (``.ci/run`` exports ``CI=true``, as most CI services do)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a parent package missing, or a broken install
        return False


def _horovod() -> bool:
    """``import horovod.torch`` works and ``horovodrun`` is on PATH (the check is the import itself: a Horovod
    built without its torch extension has the module files but cannot load them)."""
    try:
        import horovod.torch  # noqa: F401
    except ImportError:
        return False
    from autotuner.frameworks.horovod.launch import horovodrun_path

    return horovodrun_path() is not None


#: everything a test may need beyond the package's own dependencies: name -> (how to get it, is it here?). The
#: README's test command (``.ci/run``) provides all of it, run as root on Linux; under CI (:func:`under_ci`) a
#: missing one fails the run (tests/conftest.py checks them all as the session starts) instead of skipping.
NEEDS = {
    "torch": ("pip install torch==2.13.0, or bash scripts/install_horovod.sh (which installs it)",
              lambda: _module("torch")),
    "Horovod": ("bash scripts/install_horovod.sh (Horovod 0.28.1 with PyTorch and Gloo)", _horovod),
    "root": ("run the tests as root: network namespaces and traffic shaping need it",
             lambda: os.geteuid() == 0),
    "iproute2": ("install iproute2 (ip, tc), e.g. apt-get install iproute2",
                 lambda: shutil.which("ip") is not None and shutil.which("tc") is not None),
    "setpriv": ("install util-linux (setpriv), e.g. apt-get install util-linux", lambda: shutil.which("setpriv") is not None),
    "Linux /proc": ("run the tests on Linux (a real /proc)", lambda: Path("/proc/self/environ").exists()),
    "perfetto": ("pip install perfetto (the test extra: pip install -e '.[test]')",
                 lambda: _module("perfetto.trace_processor")),
    "wheel": ("pip install wheel", lambda: _module("wheel")),
}

#: a skip allowed under CI: the tests of the CUDA paths, on a machine without a CUDA GPU
NO_CUDA = "no CUDA GPU (a skip allowed under CI)"
#: a skip allowed under CI: perfetto's own parser is a binary (trace_processor_shell) the perfetto package downloads
#: on first use; a machine without the network and without the binary on PATH cannot have it
NO_TRACE_PROCESSOR = ("no trace_processor_shell on PATH and no network to download it (a skip allowed under CI: "
                      "put the binary on PATH to run it)")
#: every skip CI allows; any other skip fails under CI (tests/conftest.py)
ALLOWED_UNDER_CI = (NO_CUDA, NO_TRACE_PROCESSOR)


def missing(what: str, how: str):
    """A test's prerequisite ``what`` is missing: skip the test naming ``how`` to get it; under CI fail it instead
    (one line, no traceback)."""
    import pytest

    if under_ci():
        pytest.fail(f"{what} is missing under CI: {how}", pytrace=False)
    pytest.skip(f"{what} missing: {how}")


def need(*names: str):
    """Skip the calling test (fail it under CI) unless every prerequisite named (keys of :data:`NEEDS`) is here."""
    for name in names:
        how, ok = NEEDS[name]
        if not ok():
            missing(name, how)


def need_module(name: str, need_name: str | None = None):
    """``import_module(name)``, or :func:`missing` for :data:`NEEDS` ``[need_name or name]`` where the import fails;
    at a module's top it skips (or fails) the whole module, as ``pytest.importorskip`` would."""
    import pytest

    try:
        return importlib.import_module(name)
    except ImportError:
        what = need_name or name
        how = NEEDS[what][0]
        if under_ci():
            pytest.fail(f"{what} is missing under CI: {how}", pytrace=False)
        pytest.skip(f"{what} missing: {how}", allow_module_level=True)


def need_horovod():
    """Skip the calling test when Horovod is missing; fail it under CI, where it must be installed."""
    need("Horovod")


def need_cuda():
    """Skip the calling test on a machine without a CUDA GPU: a skip CI allows (:data:`NO_CUDA`)."""
    import pytest
    import torch

    if not torch.cuda.is_available():
        pytest.skip(NO_CUDA)


def fuzz_harness():
    """``tests/fuzz/harness.py`` as a module (loaded once by path; it is a script, not a package)."""
    name = "autotuner_fuzz_harness"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / "fuzz" / "harness.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]
