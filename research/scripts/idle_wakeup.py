#!/usr/bin/env python3
"""Back-to-back small allreduces while the cores idle vs while they are kept busy (real Horovod, 2 ranks, Gloo).

    python research/scripts/idle_wakeup.py [--rounds 3] [--bandwidth-gbit 0.75] [--out runs/fresh-poll-0.75gbit/experiments/idle-wakeup.jsonl]

Why: with fusion off, the MobileNetV2 replays on ``fresh-poll-0.75gbit`` ran their < 16 KiB responses
in 1.51 ms (median 1.73 ms) against 0.89 ms simulated, and the trickle phase's back-to-back 4 KiB
responses took 0.26 ms (docs/fresh-environments.md section 10). The trickle phase waits with
Horovod's ``hvd.synchronize``, which spins (horovod/torch/mpi_ops_v2.cc ``WaitAndClear``, 0.28.1);
the replays and ``measure --wait sleep`` poll every 0.2 ms and sleep in between, so the cores idle.
This machine is a VM whose cpuidle driver is ``haltpoll`` with ``guest_halt_poll_ns`` 0: an idle vCPU
halts, and each wake-up of a Horovod or Gloo thread on it waits for the hypervisor.

Each round runs four interleaved jobs under ``horovodrun -np 2 --gloo`` (fusion threshold 0, cycle
1 ms, timeline on): the waits ``sleep`` (``hvd.poll`` + 0.2 ms sleeps) and ``spin``
(``hvd.synchronize``), each with the cores otherwise idle and with two ``nice -n 19`` busy loops
keeping them from halting (CFS gives a nice-19 task 15/1024 of a nice-0 task's share: they take
almost nothing from Horovod, they only keep the vCPUs awake). Each job enqueues 32 float32 tensors
of 4 KiB together, waits, 4 times over, and once more behind an 8 MiB tensor (in the same cycle).
One record per job (``wait``, ``busy``, ``round``, the 4 KiB responses' ``median_ms``, ``mean_ms``,
share under 0.6 ms) is appended to ``--out`` (one write + fsync per line); the table is printed.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from autotuner.readers.timeline import read_timeline  # noqa: E402
from autotuner.realrun.testbed import shaped_network  # noqa: E402

SMALL, TENSORS, BIG = 4096, 32, 8 << 20

JOB = r'''
import sys, time, torch, horovod.torch as hvd
hvd.init(); torch.set_num_threads(1)
wait = sys.argv[1]
def batch(sizes, tag):
    hs = [hvd.allreduce_async_(torch.zeros(max(1, s // 4)), name=f"{tag}.{i}.{s}") for i, s in enumerate(sizes)]
    if wait == "sleep":
        while not all(hvd.poll(h) for h in hs):
            time.sleep(0.0002)
    for h in hs:
        hvd.synchronize(h)
for rep in range(4):
    batch([%(small)d] * %(n)d, f"small{rep}")
    time.sleep(0.05)
batch([%(big)d] + [%(small)d] * %(n)d, "behind")
hvd.shutdown()
''' % {"small": SMALL, "n": TENSORS, "big": BIG}


def run_job(tb, wait: str, busy: bool, timeline: Path) -> dict:
    script = timeline.with_suffix(".py")
    script.write_text(JOB)
    env = dict(os.environ, HOROVOD_TIMELINE=str(timeline), HOROVOD_FUSION_THRESHOLD="0", HOROVOD_CYCLE_TIME="1")
    hogs = [subprocess.Popen(["nice", "-n", "19", sys.executable, "-c", "while 1: pass"]) for _ in range(2)] if busy else []
    try:
        time.sleep(0.3 if busy else 0.0)
        subprocess.run(tb.wrap(["horovodrun", "-np", "2", "-H", "localhost:2", "--gloo", sys.executable, str(script), wait]),
                       env=env, check=True, capture_output=True, timeout=300)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
    tl = read_timeline(timeline)
    d = np.array([r.duration_us / 1e3 for r in tl.responses if r.op == "allreduce" and r.nbytes == SMALL])
    return {"responses": int(d.size), "median_ms": round(float(np.median(d)), 3), "mean_ms": round(float(d.mean()), 3),
            "share_under_0_6ms": round(float((d < 0.6).mean()), 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bandwidth-gbit", type=float, default=None, help="HTB-shaped loopback (root); default plain loopback")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    if a.rounds < 1:
        print("error: --rounds must be >= 1", file=sys.stderr)
        return 2
    a.out.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    with shaped_network(a.bandwidth_gbit) as tb, tempfile.TemporaryDirectory() as tmp, open(a.out, "a") as out:
        for rnd in range(a.rounds):
            for wait in ("sleep", "spin"):
                for busy in (False, True):
                    rec = {"experiment": "idle-wakeup", "round": rnd, "wait": wait, "busy_neighbours": busy,
                           "bandwidth_gbit": a.bandwidth_gbit, "shaped": tb.shaped, "bytes": SMALL, "tensors": TENSORS,
                           **run_job(tb, wait, busy, Path(tmp) / f"{rnd}-{wait}-{busy}.json"),
                           "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
                    out.write(json.dumps(rec) + "\n")
                    out.flush()
                    os.fsync(out.fileno())
                    rows.append(rec)
    print("wait   cores kept busy  round  median ms  mean ms  share < 0.6 ms")
    for r in rows:
        print(f"{r['wait']:<6} {'yes' if r['busy_neighbours'] else 'no':<16} {r['round']:>5}  {r['median_ms']:>9.2f}"
              f"  {r['mean_ms']:>7.2f}  {r['share_under_0_6ms']:>14.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
