"""A real CPU training script of our own (examples/train_horovod.py) under horovodrun, and its profiled layout. Its
committed runs' predictions are checked in tests/test_cycle_cpu.py; what its first runs measured against the
predictions recorded then is a finding of those experiments, checked beside them, outside this suite."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autotuner.readers.layouts import load_layout
from autotuner.readers.replay_output import parse_output
from autotuner.frameworks.horovod.launch import Job, run_job
from autotuner.frameworks.horovod.validation import STEPS_VAR, WARMUP_VAR
from tests.cli_helpers import need_horovod

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "train_horovod.py"
LAYOUT = ROOT / "examples" / "layouts" / "tiny_transformer.json"


# tests marked `real` start real horovodrun/torchrun jobs (or time this machine): alone under pytest-xdist (conftest.py)


@pytest.mark.real
def test_example_script_under_horovodrun_takes_its_step_counts_from_validate():
    """The counts validate passes (AUTOTUNER_STEPS / AUTOTUNER_WARMUP) reach the script: 2 measured
    step lines in the form validate reads, from 2 real ranks."""
    need_horovod()
    job = Job(np=2, command=(sys.executable, str(SCRIPT), "--batch-size", "2"),
              extra_env={STEPS_VAR: "2", WARMUP_VAR: "1"})
    res = run_job(job, timeout_s=150)
    assert res.returncode == 0 and not res.timed_out, res.stderr[-2000:]
    out = parse_output(res.stdout)
    assert out.form == "step_lines" and len(out.step_times_ms) == 2, res.stdout[-1000:]


@pytest.mark.parametrize("args", [["--steps", "x"], ["--warmup", "-1"], ["--batch-size", "0"]])
def test_example_script_refuses_bad_counts_in_one_line(args):
    p = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": ""})
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


def test_validate_refuses_keep_timelines_without_timelines(tmp_path):
    need_horovod()
    from tests.cli_helpers import assert_one_line_error, run

    p = run("validate", "--env", "fresh-poll-2gbit", "--model", str(LAYOUT), "--no-autotune", "--runs-dir",
            str(tmp_path), "--keep-timelines", "--no-timeline", "--", "python", str(SCRIPT))
    assert_one_line_error(p, "--keep-timelines needs the trials' timelines")
    assert not (tmp_path / "fresh-poll-2gbit" / "validation").exists() or not any(
        (tmp_path / "fresh-poll-2gbit" / "validation").glob("*.jsonl"))


def test_profiled_layout_matches_the_script():
    """The committed layout is the script's model, profiled with one torch thread (as the script trains)."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import train_horovod as th
    finally:
        sys.path.remove(str(SCRIPT.parent))
    lay, raw = load_layout(str(LAYOUT)), json.loads(LAYOUT.read_text())
    params = [p for p in th.build_model().parameters() if p.requires_grad]
    assert lay.n_tensors == len(params) == 52
    assert int(lay.sizes_bytes.sum()) == 4 * sum(p.numel() for p in params)
    assert lay.device == "cpu" and raw["threads"] == 1 and lay.batch_size == 16
