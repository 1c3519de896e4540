"""The generated pages are current: each generator's ``--check`` (it writes nothing) passes on this tree, so a change
to a command's options or help, to a knob table, or to a shipped model or committed record that moves a figure on
the accuracy page fails here until the page is regenerated with the command the failure names.

- ``scripts/gen_cli_reference.py``: docs/reference/cli.md from the typer app;
- ``scripts/gen_knob_table.py``: docs/reference/knobs.md and docs/reference/ddp-knobs.md from the knob tables;
- ``scripts/gen_accuracy_page.py``: docs/accuracy.md from ``autotuner envs``, ``accuracy`` and ``ddp envs`` (their
  ``--json``, on the shipped models and committed records; no real run).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("script", ["gen_cli_reference.py", "gen_knob_table.py", "gen_accuracy_page.py"])
def test_generated_page_is_current(script):
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / script), "--check"], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, f"{script} --check: exit {p.returncode}: {p.stderr.strip() or p.stdout.strip()}"
