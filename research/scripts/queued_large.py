"""Issue 29 part 5, a lead of docs/accuracy.md ("Two real layouts in one sitting"): do large responses queued back to
back run at the sweep's rate?

On fresh-poll-2x1-4.5gbit the line below the knee (16 MiB) carries 3.62 Gbit/s, set from the mid-size burst phase's
queued responses of 1-4 MiB; the line above it carries 3.18 Gbit/s, fitted on the sweep's lone allreduces of 16-512
MiB (each after an idle link). No queued response at or above the knee was ever measured there (the mid-size phase
stops at 4 MiB), so the model charges a fused response of 90 MiB in a busy step at the lone rate, and fusion off,
which moves DistilBERT's 2.25-9 MiB gradients out of fused responses above the knee, gains ~50 ms from the lines'
inversion alone.

This runs the burst probe (:mod:`autotuner.frameworks.horovod.burstprobe`, as ``measure``'s mid-size phase does:
fusion off, 1 ms cycle, no timeline, the env's own testbed and wait) with responses of 4, 16, 32 and 64 MiB, lone
(count 1) and 4 back to back, 3 jobs, and reports per size the marginal of a queued response ((T(4) - T(1)) / 3,
median over jobs), the lone one, and the per-byte rate between sizes.

Declared before it ran (2026-12-02, session 53): if the sweep's line above the knee is a lone-after-idle rate, the
queued marginal grows from 16 to 64 MiB at >= 3.5 Gbit/s (busbw; within ~3 % of the line below the knee); if at
<= 3.3 Gbit/s, queued large responses pay the sweep's rate and the lines' inversion is real.

    python research/scripts/queued_large.py measure    # as root, alone (~5 min)
    python research/scripts/queued_large.py report

Records: ``runs/fresh-poll-2x1-4.5gbit/experiments/queued-large.jsonl``; no fit reads them.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "runs"
ENV = "fresh-poll-2x1-4.5gbit"
RECORDS = "experiments/queued-large.jsonl"
MIB = 1 << 20
SIZES, COUNTS = (4 * MIB, 16 * MIB, 32 * MIB, 64 * MIB), (1, 4)


def measure(jobs: int) -> int:
    sys.path.insert(0, str(ROOT / "research" / "scripts"))
    from burst_midsize import measure as run_bursts

    run_bursts(ENV, jobs, sizes=SIZES, counts=COUNTS, timelines=(False,), records=RECORDS)
    return 0


def report() -> int:
    from autotuner.frameworks.horovod.fit.phase_small import burst_marginals_ms
    from autotuner.frameworks.horovod.readers.sweep import parse_burst_records, read_phase_records

    recs, problems = read_phase_records(RUNS / ENV / RECORDS, parse_burst_records, f"{ENV}/{RECORDS}")
    for p in problems:
        print(f"warning: {p}", file=sys.stderr)
    marg: dict[int, list[float]] = {}
    lone: dict[int, list[float]] = {}
    for r in recs:
        for b, c, m in burst_marginals_ms(r):
            marg.setdefault(b, []).append(m)
        for b, c, ts in r["wall_ms"]:
            if c == 1:
                lone.setdefault(b, []).append(float(np.median(ts)))  # the probe left each first round out
    model = json.loads((ROOT / "autotuner" / "models" / f"{ENV}.json").read_text())["cost_model"]["inter"]
    print(f"{ENV}: {len(recs)} job(s); the model's lines: {model['bandwidth_gbps']:.2f} Gbit/s below the knee "
          f"({model['large_from_bytes'] / MIB:g} MiB), {model['large_bandwidth_gbps']:.2f} above it\n")
    print("| size (MiB) | lone, measured (median over jobs, ms) | queued marginal, measured (ms; jobs' range) |")
    print("|---:|---:|---:|")
    sizes = sorted(marg)
    for b in sizes:
        m = marg[b]
        print(f"| {b / MIB:g} | {np.median(lone[b]):.1f} | {np.median(m):.1f} ({min(m):.1f}-{max(m):.1f}) |")
    print("\n| between (MiB) | queued: busbw (Gbit/s) | lone: busbw (Gbit/s) |")
    print("|---|---:|---:|")
    for a, b in zip(sizes, sizes[1:]):  # 2 ranks: busbw = algbw = bytes / time
        q = (b - a) * 8 / ((np.median(marg[b]) - np.median(marg[a])) * 1e6)
        lo = (b - a) * 8 / ((np.median(lone[b]) - np.median(lone[a])) * 1e6)
        print(f"| {a / MIB:g}-{b / MIB:g} | {q:.2f} | {lo:.2f} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("measure", "report"))
    ap.add_argument("--jobs", type=int, default=3)
    a = ap.parse_args(argv)
    return measure(a.jobs) if a.what == "measure" else report()


if __name__ == "__main__":
    sys.exit(main())
