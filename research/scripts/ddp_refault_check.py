"""Real DDP on one rank (no wire: world size 1, Gloo), ResNet-101's layout: DDP's default against the view, each
with glibc as it comes and with freed pages kept (``MALLOC_TRIM_THRESHOLD_``/``MALLOC_MMAP_THRESHOLD_``), to see
the gradients' re-faulting (docs/ddp.md, "An uncontended machine") in a real DDP step rather than the probe's loop.

    python research/scripts/ddp_refault_check.py --out runs/ddp-2gbit/refault-1rank.json

4 variants x ``--repeats`` interleaved rounds of one torchrun job each (the DDP replay workload, 100 ms of emulated
compute, 10 steps after 3 warm-up). Output: per variant the job medians (ms) and their median; one JSON file.
Alone on the machine (~3 min).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

KEEP = {"MALLOC_TRIM_THRESHOLD_": "4000000000", "MALLOC_MMAP_THRESHOLD_": "4000000000"}


def main() -> int:
    from autotuner.frameworks.ddp.launch import run_ddp
    from autotuner.readers.replay_output import parse_output

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--model", default="resnet101")
    a = ap.parse_args()
    if a.repeats < 1:
        print("error: --repeats must be >= 1", file=sys.stderr)
        return 2
    variants = {"default": ([], {}), "view": (["--gradient-as-bucket-view"], {}),
                "default, pages kept": ([], KEEP), "view, pages kept": (["--gradient-as-bucket-view"], KEEP)}
    got: dict[str, list[float]] = {k: [] for k in variants}
    for r in range(a.repeats):
        for name, (flags, extra) in variants.items():
            env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")} | extra
            res = run_ddp("autotuner.frameworks.ddp.replay", ["--model", a.model, "--compute-ms", "100", "--steps",
                                                              "10", "--warmup", "3", *flags],
                          ranks_per_host=1, timeout_s=300, env=env)
            times = parse_output(res.stdout).step_times_ms
            if not times:
                print(f"error: {name} r{r} printed no step times (exit {res.returncodes}): "
                      f"{res.stderr.strip().splitlines()[-1:] or ['']}", file=sys.stderr)
                return 1
            got[name].append(round(statistics.median(times), 3))
            print(f"{name} r{r}: {got[name][-1]:.1f} ms/step", flush=True)
    rec = {"schema": "autotuner/ddp-refault-check/1", "model": a.model, "ranks": 1, "compute_ms": 100.0,
           "steps": 10, "warmup": 3, "kept_pages_env": KEEP,
           "variants": {k: {"job_medians_ms": v, "median_ms": statistics.median(v)} for k, v in got.items()},
           "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    from autotuner.writers.atomic import atomic_write_text
    atomic_write_text(a.out, json.dumps(rec, indent=1) + "\n")
    for k, v in rec["variants"].items():
        print(f"{k:22s} {v['median_ms']:.1f} ms (jobs {', '.join(f'{x:.1f}' for x in v['job_medians_ms'])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
