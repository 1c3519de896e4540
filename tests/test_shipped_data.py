"""The reference data in the wheel (``autotuner/reference``) is the repository's ``runs/``, file
for file, and holds nothing else: ``python scripts/ship_reference.py`` refreshes it."""
from pathlib import Path

from autotuner.paths import reference_files, shipped_runs

ROOT = Path(__file__).resolve().parent.parent


def test_shipped_reference_is_a_copy_of_runs():
    want = reference_files(ROOT / "runs")
    shipped = shipped_runs()
    have = sorted(str(p.relative_to(shipped)) for p in shipped.rglob("*") if p.is_file())
    assert have == want, "autotuner/reference differs from runs/: run python scripts/ship_reference.py"
    stale = [r for r in want if (shipped / r).read_bytes() != (ROOT / "runs" / r).read_bytes()]
    assert not stale, f"stale copies (run python scripts/ship_reference.py): {stale[:5]}"


def test_reference_names_every_ddp_env_and_no_timelines():
    want = reference_files(ROOT / "runs")
    ddp_envs = {p.parent.name for p in (ROOT / "runs").glob("*/ddp-sweep.jsonl")}
    assert ddp_envs and ddp_envs == {r.split("/")[0] for r in want if r.endswith("ddp-sweep.jsonl")}
    assert not [r for r in want if r.endswith((".gz", ".png", ".md"))]
