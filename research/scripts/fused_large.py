"""Issue 29 part 5: do fused responses pay the fusion buffer's copies at the sizes a real step fuses?

The fourth set of ``research/scripts/step_layout_neighbours.py`` (fresh-poll-2x1-2.5gbit, 2026-12-02, session 54) found that
the two real layouts' fusion off - defaults, at 10 and at 300 ms of compute, meet one small-response price (1.10 ms)
only with **no** copy credit: over copy rates >= 0 and prices 0.3-3 ms, the least chi-square is at 0.00 ms per MiB
(0.00-0.08 within delta chi-square 4) against the 0.24 the env charges; on fresh-poll-2x1-4.5gbit the same (0.00,
0.00-0.14, charged 0.34); on the one-host fresh-poll-2.5gbit the charged rate (0.34, 0.22-0.50, charged 0.32). The
env's own fused phase (session 53's sitting) measured 0.27 +- 0.04 ms per MiB, at S = 4-32 MiB; the defaults of
those replays fuse responses of 76-122 MiB. This runs the fused phase (one tensor of S alone against 8 float32 + 8
float64 tensors of S/8 enqueued together: two fused responses of S; ``autotuner.frameworks.horovod.measure.
run_fused_phase``) at S = 4, 16, 32, 64 and 96 MiB, 3 jobs, no timeline, on the env's own testbed, in this
session's sitting.

Declared before it ran (2026-12-02, session 54):

1. If the copies are hidden at the sizes a step's defaults fuse and paid below them: ``x(S) / S`` at 64 and 96 MiB
   at most 0.10 ms per MiB (median over jobs), while at 16-32 MiB at least 0.15 (session 53's sitting: 0.19-0.25).
2. If they are paid at every size (0.15 ms per MiB or more at 64 and 96 MiB too): the phase and the real steps
   disagree at the same sizes, and what differs is not the size (the tensor count: 8 against 50-100; the readiness).
3. If 16-32 MiB also gives under 0.10 ms per MiB: this sitting does not reproduce session 53's phase, and the copy
   rate itself moves between sittings.

``x(S) = (T_fused(S) - 2 T_lone(S)) / 2`` as the fit's :func:`autotuner.frameworks.horovod.fit.sweep.fused_copy`
(its ``c`` term, about -1.7 ms on this env, is the fused pair's shared cycle: read ``x(S) / S`` at the large sizes,
where it is small beside the copies).

    python research/scripts/fused_large.py measure    # as root, alone (~4 min)
    python research/scripts/fused_large.py report

Records: ``runs/fresh-poll-2x1-2.5gbit/experiments/fused-large.jsonl``; no fit reads them.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "runs"
ENV = "fresh-poll-2x1-2.5gbit"
MIB = 2**20
SIZES = (4 * MIB, 16 * MIB, 32 * MIB, 64 * MIB, 96 * MIB)
RECORDS = "experiments/fused-large.jsonl"


def measure(jobs: int = 3) -> int:
    """The fused phase's ``jobs`` jobs at :data:`SIZES` on the env's own recorded testbed, appended to
    :data:`RECORDS` (a killed run resumes)."""
    from autotuner.frameworks.horovod.measure import run_fused_phase
    from burst_midsize import env_testbed

    with env_testbed(ENV, RECORDS) as (setup, tier, tb, _):
        r = run_fused_phase(RUNS / ENV, setup, tier, tb, jobs, 900.0, lambda m: print(f"  {m}", flush=True),
                            sizes=SIZES, records=RECORDS)
    print(f"{ENV}: {r['jobs_new']} new job(s), {r['jobs_recorded']} recorded in {RECORDS}", flush=True)
    return 0


def points(f: Path) -> dict[int, list[tuple[float, float, float]]]:
    """Per size S (bytes): per job, ``(x(S) ms, median lone ms, median fused pair ms)``, read with the project's
    reader (a damaged line is named and skipped)."""
    from autotuner.frameworks.horovod.fit.phase_fused import fused_copy
    from autotuner.frameworks.horovod.readers.sweep import parse_fused_records

    recs, problems = parse_fused_records(f.read_text(), f.name)
    for p in problems:
        print(f"skipped: {p}", file=sys.stderr)
    recs = [r for r in recs if r.get("phase") == "fused"]
    x = {(b, j): v for b, j, v in fused_copy(recs, None)["points"]}
    out: dict[int, list] = {}
    for j, r in enumerate(recs):
        for b, lo, fu in zip(r["sizes"], r["lone_ms"], r["fused_ms"]):
            out.setdefault(int(b), []).append((x[(int(b), j)], statistics.median(lo), statistics.median(fu)))
    return out


def report() -> int:
    f = RUNS / ENV / RECORDS
    if not f.exists():
        print(f"error: no {f}: run `python research/scripts/fused_large.py measure` first", file=sys.stderr)
        return 2
    print(f"{ENV}, {RECORDS}: x(S) = (T_fused(S) - 2 T_lone(S)) / 2 per job\n")
    print("| S (MiB) | jobs | lone, median (ms) | fused pair, median (ms) | x(S), jobs (ms) | x(S) / S, median (ms per MiB) |")
    print("|---:|---:|---:|---:|---|---:|")
    for b, v in sorted(points(f).items()):
        xs = [x for x, _, _ in v]
        print(f"| {b / MIB:g} | {len(v)} | {statistics.median(lo for _, lo, _ in v):.1f} | "
              f"{statistics.median(fu for _, _, fu in v):.1f} | {', '.join(f'{x:+.1f}' for x in xs)} | "
              f"{statistics.median(xs) / (b / MIB):.3f} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("measure", "report"))
    a = ap.parse_args(argv)
    return measure() if a.what == "measure" else report()


if __name__ == "__main__":
    sys.exit(main())
