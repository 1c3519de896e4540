"""Measure the ``burst`` phase (issue 29: small responses timed by the wall clock, no timeline) on committed
sweep environments, each with its own recorded setup (link rate, emulated hosts, wait mode), and copy the
phase's records into ``runs/<env>/burst.jsonl``.

Each env is measured in a scratch copy (``autotuner measure`` would otherwise append to the committed
sweep if any item were missing); only ``burst.jsonl`` comes back. As root, on a quiet machine, one env
at a time; a killed run resumes (the scratch copy is kept until the env is done).

    python scripts/burst_phase.py                     # every sweep env under runs/
    python scripts/burst_phase.py fresh-3gbit fresh-poll-2gbit --repeats 3
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "autotuner" / "runs"


def setup_args(env: str) -> list[str]:
    """``autotuner measure`` options that reproduce the setup recorded in ``runs/<env>/sweep.jsonl``."""
    s = json.loads((RUNS / env / "sweep.jsonl").open().readline())["setup"]
    args = ["--repeats", str(s["repeats"]), "--warmup", str(s["warmup"])]
    if s.get("testbed_hosts"):
        args += ["--testbed-hosts", str(s["testbed_hosts"]), "--ranks-per-host", str(s["ranks_per_host"]),
                 "--link-gbit", f"{s['link_gbit']:g}"]
    else:
        args += ["--np", str(s["np"])] + (["--hosts", s["hosts"]] if s["hosts"] else [])
        if s.get("bandwidth_gbit") is not None:
            args += ["--bandwidth-gbit", f"{s['bandwidth_gbit']:g}"]
    if s.get("wait", "spin") != "spin":
        args += ["--wait", s["wait"]]
    return args


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("envs", nargs="*")
    ap.add_argument("--repeats", type=int, default=3, help="jobs of the burst phase per env")
    ap.add_argument("--scratch", type=Path, default=Path("/tmp/autotuner-burst"))
    a = ap.parse_args()
    envs = a.envs or sorted(p.parent.name for p in RUNS.glob("*/sweep.jsonl"))
    for env in envs:
        if not (RUNS / env / "sweep.jsonl").exists():
            print(f"error: {env}: no runs/{env}/sweep.jsonl", file=sys.stderr)
            return 2
    for env in envs:
        dst = a.scratch / env
        if not dst.exists():
            shutil.copytree(RUNS / env, dst, ignore=shutil.ignore_patterns("validation", "tune", "*-timelines"))
        cmd = [str(Path(sys.executable).parent / "autotuner"), "measure", "--env", env, "--runs-dir", str(a.scratch),
               *setup_args(env), "--cpu-repeats", "0", "--trickle-repeats", "0", "--idle-repeats", "0",
               "--fp16-repeats", "0", "--burst-repeats", str(a.repeats)]
        print("+ " + " ".join(cmd), flush=True)
        p = subprocess.run(cmd, cwd=ROOT)
        if p.returncode != 0:
            return p.returncode
        shutil.copyfile(dst / "burst.jsonl", RUNS / env / "burst.jsonl")
        shutil.rmtree(dst)
        print(f"{env}: runs/{env}/burst.jsonl", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
