"""Shared by the tests: run ``autotuner`` in a subprocess, check one-line errors, require Horovod,
load the fuzz harness."""
import importlib.util
import json
import os
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


def need_horovod():
    """Skip the calling test when Horovod is missing; fail it under CI, where it must be installed."""
    import pytest

    from autotuner.frameworks.horovod.launch import horovodrun_path

    try:
        import horovod.torch  # noqa: F401
        ok = horovodrun_path() is not None
    except ImportError:
        ok = False
    if not ok:
        if os.environ.get("CI"):
            pytest.fail("Horovod is not installed in CI: scripts/install_horovod.sh did not run")
        pytest.skip("Horovod not installed (run scripts/install_horovod.sh)")


def fuzz_harness():
    """``tests/fuzz/harness.py`` as a module (loaded once by path; it is a script, not a package)."""
    name = "autotuner_fuzz_harness"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / "fuzz" / "harness.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]
