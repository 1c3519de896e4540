"""Measure one probe phase of ``autotuner measure`` (``--phase burst``, the default: small responses timed by the
wall clock, no timeline; ``--phase step``: replay jobs of a synthetic layout of many small gradients, defaults /
fusion off / cache off, no timeline; ``--phase fp16``: float16 against float32 allreduces of gradient-like values;
``--phase fused``: fused responses of 4-32 MiB against lone ones, no timeline) on committed sweep environments, each with its own recorded setup (link rate, emulated hosts, wait mode), and copy the
phase's records into ``runs/<env>/<phase>.jsonl``, keeping the env's earlier records of the phase as
``<phase>-previous-<k>.jsonl`` (no fit reads them; the fp16 phase's older ones are ``fp16-ones.jsonl``, which summed
ones, and ``fp16-lone.jsonl``, one tensor per allreduce).

Each env is measured in a scratch copy (``autotuner measure`` would otherwise append to the committed
sweep if any item were missing); only ``burst.jsonl`` comes back. As root, on a quiet machine, one env
at a time; a killed run resumes (the scratch copy is kept until the env is done).

    python scripts/probe_phase.py                     # every sweep env under runs/
    python scripts/probe_phase.py fresh-3gbit fresh-poll-2gbit --repeats 3
    python scripts/probe_phase.py --phase step --repeats 3
    python scripts/probe_phase.py --phase step --repeats 5 --extend   # 2 more rounds after the committed 3
    python scripts/probe_phase.py --phase fused --repeats 3
    python scripts/probe_phase.py --phase fp16 fresh-poll-0.75gbit fresh-poll-1.25gbit fresh-poll-2gbit fresh-poll-2x1-3gbit
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "runs"


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
    ap.add_argument("--phase", choices=("burst", "step", "fp16", "fused"), default="burst")
    ap.add_argument("--repeats", type=int, default=3, help="jobs (step: rounds of 3 jobs) of the phase per env")
    ap.add_argument("--extend", action="store_true",
                    help="keep the env's records of the phase and add jobs up to --repeats (measure resumes them)")
    ap.add_argument("--scratch", type=Path, default=Path("/tmp/autotuner-probe-phase"))
    a = ap.parse_args()
    envs = a.envs or sorted(p.parent.name for p in RUNS.glob("*/sweep.jsonl"))
    for env in envs:
        if not (RUNS / env / "sweep.jsonl").exists():
            print(f"error: {env}: no runs/{env}/sweep.jsonl", file=sys.stderr)
            return 2
    for env in envs:
        dst = a.scratch / env
        if not dst.exists():
            shutil.copytree(RUNS / env, dst, ignore=shutil.ignore_patterns("validation", "tune", "*-timelines",
                                                                  f"{a.phase}.jsonl", "fp16-ones.jsonl"))
            if a.extend and (RUNS / env / f"{a.phase}.jsonl").exists():  # measure appends to them
                shutil.copyfile(RUNS / env / f"{a.phase}.jsonl", dst / f"{a.phase}.jsonl")
        cmd = [str(Path(sys.executable).parent / "autotuner"), "measure", "--env", env, "--runs-dir", str(a.scratch),
               *setup_args(env), "--cpu-repeats", "0", "--trickle-repeats", "0", "--idle-repeats", "0",
               "--fp16-repeats", str(a.repeats) if a.phase == "fp16" else "0",
               "--burst-repeats", str(a.repeats) if a.phase == "burst" else "0",
               "--step-repeats", str(a.repeats) if a.phase == "step" else "0",
               "--fused-repeats", str(a.repeats) if a.phase == "fused" else "0"]
        print("+ " + " ".join(cmd), flush=True)
        p = subprocess.run(cmd, cwd=ROOT)
        if p.returncode != 0:
            return p.returncode
        out = RUNS / env / f"{a.phase}.jsonl"
        if out.exists() and not a.extend:  # nothing measured is lost (--extend: the new file holds the old lines): the env's earlier records of the phase are kept beside
            k = 1
            while (RUNS / env / f"{a.phase}-previous-{k}.jsonl").exists():
                k += 1
            shutil.copyfile(out, RUNS / env / f"{a.phase}-previous-{k}.jsonl")
        shutil.copyfile(dst / f"{a.phase}.jsonl", out)
        shutil.rmtree(dst)
        print(f"{env}: runs/{env}/{a.phase}.jsonl", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
