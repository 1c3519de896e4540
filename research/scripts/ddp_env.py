"""Measure a DDP environment for issue 30, as `autotuner ddp measure` then `autotuner ddp validate` per layout
(the default 11 bucket settings, 3 interleaved repeats, no timeline): the records the DDP tests read.

    python research/scripts/ddp_env.py --env ddp-2gbit --np 2 --bandwidth-gbit 2 --models resnet18,resnet101
    python research/scripts/ddp_env.py --env ddp-2x1-3gbit --testbed-hosts 2 --ranks-per-host 1 --link-gbit 3 --models ...

Records: runs/<env>/ddp-sweep.jsonl and runs/<env>/ddp-validation/<model>.jsonl (autotuner/frameworks/ddp/realrun.py
says what each holds); a killed run resumes. As root (shaped links are network namespaces with HTB), on a quiet
machine, alone.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
RUNS = ROOT / "runs"


def main() -> int:
    import autotuner
    from autotuner.errors import AutotunerError

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", required=True)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--bandwidth-gbit", type=float, default=None)
    ap.add_argument("--testbed-hosts", type=int, default=0)
    ap.add_argument("--ranks-per-host", type=int, default=1)
    ap.add_argument("--link-gbit", type=float, default=None)
    ap.add_argument("--sweep-jobs", type=int, default=3)
    ap.add_argument("--sweep-repeats", type=int, default=7)
    ap.add_argument("--models", default="")
    ap.add_argument("--compute-ms", type=float, default=100.0)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    shape = dict(np=a.np, bandwidth_gbit=a.bandwidth_gbit, testbed_hosts=a.testbed_hosts,
                 ranks_per_host=a.ranks_per_host, link_gbit=a.link_gbit, runs_dir=RUNS)
    try:
        autotuner.ddp_measure(a.env, jobs=a.sweep_jobs, repeats=a.sweep_repeats, **shape)
        for model in [m for m in a.models.split(",") if m]:
            r = autotuner.ddp_validate(a.env, model, compute_ms=a.compute_ms, steps=a.steps, warmup=a.warmup,
                                       repeats=a.repeats, **shape)
            for row in r.rows:
                print(f"{model} {row.label}: measured {row.measured_ms:.1f} ms, predicted {row.predicted_ms:.1f} "
                      f"({row.error_pct:+.1f} %)", flush=True)
    except AutotunerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
