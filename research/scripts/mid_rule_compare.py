"""The mid-size rule's effect, env by env (issue 29; docs/accuracy.md, "Mid-size responses back to back"): each env
fitted on its measured files without ``burst-mid.jsonl`` (the rule not applied; ``--without F``: without another of
measure's files, e.g. ``fused.jsonl``) against the shipped model, on every
replay file of the env with at least 4 configurations: MAPE (the report's, over configurations) and Kendall tau over
the pairs more than 2 % apart.

    python research/scripts/mid_rule_compare.py fresh-poll-2x1-4gbit fresh-poll-2x1-3gbit fresh-poll-2gbit
    python research/scripts/mid_rule_compare.py --rows fresh-poll-2x1-4.5gbit   # and each configuration's error
    python research/scripts/mid_rule_compare.py --rows --without fused.jsonl fresh-poll-1.75gbit   # another phase left out

Reads only; fits into a temporary folder.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "runs"
MODELS = ROOT / "autotuner" / "models"


def main() -> int:
    sys.path.insert(0, str(ROOT / "research" / "scripts"))
    from fresh_env import measured_only

    from autotuner.frameworks.horovod.fit.store import env_from_dict
    from autotuner.frameworks.horovod.measure import MID_RECORDS
    from autotuner.frameworks.horovod.views.accuracy import simulate_trial
    from autotuner.frameworks.horovod.views.protocol import rows_from_records, summary
    from autotuner.frameworks.horovod.readers.runs import parse_records

    argv = sys.argv[1:]
    rows = "--rows" in argv
    left_out = MID_RECORDS
    if "--without" in argv:
        i = argv.index("--without")
        if i + 1 >= len(argv) or argv[i + 1] not in measured_files():
            print(f"error: --without names one of measure's files ({', '.join(measured_files())})", file=sys.stderr)
            return 2
        left_out = argv[i + 1]
        del argv[i:i + 2]
    envs = [a for a in argv if a != "--rows"]
    bad = [e for e in envs if not (RUNS / e / "sweep.jsonl").exists()]
    if not envs or bad:
        print(f"error: name sweep envs under runs/ ({', '.join(bad) or 'none given'})", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp, measured_only(envs, left_out) as runs:
        out = Path(tmp) / "models"
        subprocess.run([sys.executable, "-m", "autotuner.cli", "fit", str(runs), "--out", str(out)], check=True,
                       capture_output=True)
        print(f"{'env':22} {'replays':32} {'MAPE % without -> with':>24} {'tau > 2 % without -> with':>27}")
        for e in envs:
            fenvs = [env_from_dict(json.loads(p.read_text())) for p in (out / f"{e}.json", MODELS / f"{e}.json")]
            for f in sorted((RUNS / e / "validation").glob("*.jsonl")):
                recs, _ = parse_records(f.read_text(), f.name)
                if len({r["label"] for r in recs}) < 4:
                    continue
                try:
                    got = [rows_from_records(recs, lambda cfg, setup, fe=fe: simulate_trial(
                        fe, RUNS / e, cfg, dict(setup)).step_time_ms) for fe in fenvs]
                    s = [summary(g, "default") for g in got]
                except Exception as err:  # a replay of a layout this folder does not hold
                    print(f"{e:22} {f.name:32} skipped: {' '.join(str(err).split())[:60]}")
                    continue
                print(f"{e:22} {f.name:32} {s[0]['mape_pct']:>10.2f} -> {s[1]['mape_pct']:<10.2f} "
                      f"{s[0]['kendall_tau_gap']:>8.2f} -> {s[1]['kendall_tau_gap']:.2f} ({s[1]['pairs_gap']} pairs)")
                for r0, r1 in zip(*got) if rows else ():
                    m = float(np.median(r1.measured_ms))
                    print(f"{'':22} {r1.label:12} {m:8.1f} ms measured ({min(r1.measured_ms):.1f}-{max(r1.measured_ms):.1f}): "
                          f"{100 * (r0.predicted_ms / m - 1):+6.1f} % -> {100 * (r1.predicted_ms / m - 1):+6.1f} %")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # the reader stopped reading (| head): not an error of this script
        sys.stdout = open(os.devnull, "w")
        sys.exit(0)
