"""Mid-size responses back to back, with and without Horovod's timeline (issue 29, part 5): an experiment.

On two emulated hosts a replay of vit_s16 with a 1 MiB fusion threshold (80 responses a step, 36 of them single
tensors of 1.7-2.3 MiB) measured 504 ms without the timeline against 578 predicted (+14.8 %), while its fusion-off
and default twins were predicted within 3 %. The tier's line above its knee is fitted on spans read off the
sweep's timelines, so this measures what a response of 256 KiB to 4 MiB costs by the wall clock, lone (count 1)
and back to back (count 8) in a busy cycle, in jobs without the timeline and with it, interleaved per round, on
each env's own recorded setup (link rate, emulated hosts, wait mode): the burst probe
(:mod:`autotuner.frameworks.horovod.burstprobe`) with ``--sizes``/``--counts``. Records go to
``runs/<env>/burst-mid.jsonl``, the file of ``autotuner measure``'s mid-size burst phase (a killed run resumes;
the phase runs only the jobs without the timeline, and the fit reads only those:
:func:`autotuner.frameworks.horovod.fit.sweep.mid_response`).

    python research/scripts/burst_midsize.py fresh-poll-2x1-3gbit fresh-3gbit --rounds 3
    python research/scripts/burst_midsize.py --report            # what the records say, beside the shipped models

As root, on a quiet machine (nothing else measuring), one env at a time.
"""
from __future__ import annotations

import argparse
import json
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from autotuner.frameworks.horovod.measure import MID_COUNTS as COUNTS, MID_RECORDS as RECORDS, MID_SIZES as SIZES

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "runs"


@contextmanager
def env_testbed(env: str, records: str):
    """``env``'s own recorded testbed (its sweep's setup: hosts, link, wait) built and named on stdout, and the folder
    of ``runs/<env>/<records>`` made; yields ``(setup, tier, tb, note)``: the :class:`SweepSetup`, the cluster's
    widest tier, the open testbed and its one-line description. The testbed is torn down on leaving."""
    from autotuner.frameworks.horovod.measure import SweepSetup, tiers
    from autotuner.realrun.launcher import testbed_for

    setup = SweepSetup(**json.loads((RUNS / env / "sweep.jsonl").open().readline())["setup"])
    (RUNS / env / records).parent.mkdir(parents=True, exist_ok=True)
    with testbed_for(setup.topology, setup.bandwidth_gbit, setup.link_gbit) as (tb, note):
        print(f"{env}: {note}", flush=True)
        yield setup, tiers(setup.np, setup.hosts)[-1], tb, note


def measure(env: str, rounds: int, sizes: tuple[int, ...] = SIZES, counts: tuple[int, ...] = COUNTS,
            timelines: tuple[bool, ...] = (False, True), records: str = RECORDS) -> None:
    """The burst probe's ``rounds`` jobs on ``env``'s own recorded testbed (``sizes`` bytes, ``counts`` at once, per round
    one job per ``timelines`` entry), appended to ``runs/<env>/<records>`` (a killed run resumes)."""
    from autotuner.frameworks.horovod.measure import run_burst_phase

    with env_testbed(env, records) as (setup, tier, tb, _):
        r = run_burst_phase(RUNS / env, setup, tier, tb, rounds, 900.0, lambda m: print(f"  {m}", flush=True),
                            sizes=sizes, counts=counts, timelines=timelines, records=records)
    print(f"{env}: {r['jobs_new']} new job(s), {r['jobs_recorded']} recorded in {records}", flush=True)


def report(envs: list[str]) -> list[dict]:
    """Per env and size: the marginal wall time of a response back to back ((T(8) - T(1)) / 7, ms, median over
    jobs), without and with the timeline, and what the shipped model's simulator charges for the same marginal
    (:func:`autotuner.frameworks.horovod.fit.sweep._burst_marginal_sim_s`) and for one lone response."""
    from autotuner.frameworks.horovod.fit.phase_small import _burst_marginal_sim_s, burst_marginals_ms
    from autotuner.frameworks.horovod.fit.store import load_env
    from autotuner.model.costmodel import Cluster

    out = []
    for env in envs:
        f = RUNS / env / RECORDS
        if not f.exists():
            continue
        recs = [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
        fenv = load_env(ROOT / "autotuner" / "models", env)
        cost, p = fenv.cost, int(recs[0]["ranks"])
        for b in SIZES:
            row = {"env": env, "bytes": b}
            for tl in (False, True):
                m, lone = [], []
                for r in recs:
                    if bool(r.get("timeline_recorded")) != tl:
                        continue
                    got = [x for size, count, x in burst_marginals_ms(r) if size == b and count == COUNTS[-1]]
                    if got:
                        m.append(got[0])
                        lone.append(float(np.median(next(x[2] for x in r["wall_ms"] if x[:2] == [b, 1]))))
                key = "timeline" if tl else "no_timeline"
                row[key] = {"marginal_ms": float(np.median(m)) if m else None,
                            "marginal_range_ms": [min(m), max(m)] if m else None,
                            "lone_ms": float(np.median(lone)) if lone else None, "jobs": len(m)}
            row["sim_marginal_ms"] = _burst_marginal_sim_s(cost, b, 8, p) * 1e3
            row["sim_collective_ms"] = cost.allreduce_s(b, Cluster(p, 1), False) * 1e3
            out.append(row)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("envs", nargs="*")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    envs = a.envs or sorted(p.parent.name for p in RUNS.glob(f"*/{RECORDS}"))
    bad = [e for e in envs if not (RUNS / e / "sweep.jsonl").exists()]
    if bad or a.rounds < 1:
        print(f"error: {', '.join(bad) or '--rounds'}: not a sweep env under runs/ (or --rounds < 1)", file=sys.stderr)
        return 2
    if not a.report:
        for e in envs:
            measure(e, a.rounds)
        return 0
    rows = report(envs)
    if a.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'env':24} {'KiB':>6} {'no-tl marginal':>15} {'tl marginal':>12} {'sim marginal':>13} "
          f"{'no-tl lone':>11} {'tl lone':>8} {'sim coll.':>9}  (ms)")
    for r in rows:
        n, t = r["no_timeline"], r["timeline"]

        def f(v):
            return "-" if v is None else f"{v:.2f}"
        print(f"{r['env']:24} {r['bytes'] // 1024:>6} {f(n['marginal_ms']):>15} {f(t['marginal_ms']):>12} "
              f"{f(r['sim_marginal_ms']):>13} {f(n['lone_ms']):>11} {f(t['lone_ms']):>8} {f(r['sim_collective_ms']):>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
