"""Shared by the tests: run ``autotuner`` in a subprocess, check one-line errors, require Horovod,
load the fuzz harness."""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(*args, cwd=ROOT):
    """``python -m autotuner.cli ARGS`` as a user would run it; returns the CompletedProcess."""
    return subprocess.run([sys.executable, "-m", "autotuner.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


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
