"""Shared by the CLI tests: run ``autotuner`` in a subprocess; check one-line errors."""
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
