"""What writing a step's gradients costs a CPU rank when they are held to the step's end (DDP without
``gradient_as_bucket_view``) against when each is dropped after its copy into the bucket (with the view), issue 30.

    python research/scripts/first_touch_probe.py --model resnet101 --procs 1 --out first-touch.json

Each step makes every gradient fresh (``clone()``, as autograd makes each gradient after
``zero_grad(set_to_none=True)``) and copies it into a preallocated flat bucket, as DDP's hook does
(``mark_variable_ready_dense``, reducer.cpp). "held": the fresh gradients stay alive until the next step (without the
view DDP copies the bucket back into them), so the allocator returns their pages at ``zero_grad`` and the next step
first-touches them again (minor page faults); "dropped": each is freed right after its copy (with the view the
gradient becomes the bucket view), and the allocator reuses the pages. ``--procs N`` runs N such processes at once
(N ranks on one host). glibc's ``MALLOC_TRIM_THRESHOLD_`` and ``MALLOC_MMAP_THRESHOLD_`` (set in the environment,
recorded as ``malloc_env``) decide whether freed pages go back to the kernel. Output: per process and mode, the
median over steps 1..``--steps`` of the step's write time (ms), the copy-in part (ms) and the minor faults
(``getrusage``); one JSON file. Exit status 2 and one line for bad arguments. The timing is
:func:`autotuner.frameworks.ddp.firsttouchprobe.time_mode`, what ``autotuner ddp measure``'s first-touch phase runs
on every rank under torchrun; this script runs it in N plain processes (no process group).
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _one(args):
    model, mode, steps = args
    import torch
    from autotuner.frameworks.ddp.firsttouchprobe import time_mode
    from autotuner.readers.layouts import load_layout
    torch.set_num_threads(1)
    return time_mode(torch, load_layout(model).shapes, mode, steps)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet101")
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    if a.procs < 1 or a.steps < 1:
        print("error: --procs and --steps must be >= 1", file=sys.stderr)
        return 2
    rows = []
    ctx = mp.get_context("spawn")
    for mode in ("held", "dropped", "held", "dropped"):
        with ctx.Pool(a.procs) as pool:
            got = pool.map(_one, [(a.model, mode, a.steps)] * a.procs)
        rows.extend(got)
        print(f"{a.model} {mode:8s} x{a.procs}: write " + ", ".join(f"{r['write_ms']:.1f}" for r in got)
              + " ms; faults " + ", ".join(str(r["minor_faults"]) for r in got), flush=True)
    import os
    import platform
    rec = {"schema": "autotuner/first-touch/1", "model": a.model, "procs": a.procs, "steps": a.steps,
           "machine": platform.machine(), "cpus": mp.cpu_count(), "rows": rows,
           "malloc_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("MALLOC_")},
           "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    from autotuner.writers.atomic import atomic_write_text
    atomic_write_text(a.out, json.dumps(rec, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
