#!/usr/bin/env python3
"""Every figure of docs/validation.md's "Two emulated hosts" section, from the committed runs/local-gloo-2x2
(the tables are :mod:`autotuner.frameworks.horovod.views.emulated_2x2`'s; this script prints them).

    python research/scripts/local_gloo_2x2_figures.py [--env local-gloo-2x2|local-gloo-2x2-poll] [--json]

Reads the real trials under runs/<env>/validation/ (written by research/scripts/validate_2x2.sh) and
predicts each with the shipped model autotuner/models/<env>.json, fitted only from the env's own
``measure`` sweep, for the trial's own shape (its testbed hosts x ranks per host):

1. the knob sweep on 2x2: per configuration measured (median over repeats of each trial's median
   step time, and the min-max over repeats), predicted, error; MAPE and worst case;
2. suggest's pick vs Horovod's defaults vs autotune's best on 2x2 (ResNet50, BERT-Medium):
   throughput ratios with the range over repeats (min/max pairs);
3. the topology what-if: the 2x2 fit predicting 2x1, 4x1, 1x4 for the defaults and the pick;
4. one alternative reading of the fit the sweep cannot rule out (the large-message line's
   intercept per allreduce instead of per ring step: identical at the sweep's 2 ranks), as a
   second prediction beside each row, so the reader sees the range the data leave.

Nothing is typed in: every number comes from the records, the model file and the simulator.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from autotuner.frameworks.horovod.fit.store import load_env
from autotuner.frameworks.horovod.views.emulated_2x2 import ENVS, Figures

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--env", default=ENVS[0], choices=ENVS)
    a = ap.parse_args()
    vdir = ROOT / "runs" / a.env / "validation"
    fig = Figures(vdir)
    fenv = load_env(ROOT / "autotuner" / "models", a.env)
    out = {"knobs": fig.knob_table(fenv),
           "suggest": [s for m in ("resnet50", "bert_medium") if (s := fig.suggest_table(fenv, m))],
           "topology": fig.topo_table(fenv)}
    times = vdir / "batch-times.txt"
    out["batch_times"] = times.read_text().splitlines() if times.exists() else []
    if a.json:
        print(json.dumps(out, indent=1))
        return
    k = out["knobs"]
    print("1. knob sweep on 2x2 (ResNet50 replay, 300 ms compute)")
    print("fusion MiB | cycle ms | cache | measured ms (min-max, n) | predicted | error | per-message reading")
    for r in k["rows"]:
        print(f"{r['fusion_mib']:>9g} | {r['cycle_ms']:>8g} | {'on' if r['cache'] else 'off':>5}"
              f"{' hier' if r['hierarchical'] else ''} | {r['measured_ms']:.1f} ({r['min_ms']:.1f}-{r['max_ms']:.1f}, "
              f"{r['repeats']}) | {r['predicted_ms']:.1f} | {r['error_pct']:+.1f}% | {r['predicted_per_message_ms']:.1f} "
              f"({r['error_per_message_pct']:+.1f}%)")
    print(f"MAPE {k['mape_pct']}%, worst {k['worst']}, {k['within_5pct']} of {len(k['rows'])} within 5%")
    print("\n2. suggest's pick vs defaults vs autotune's best (2x2)")
    for s in out["suggest"]:
        print(json.dumps(s))
    print("\n3. topology what-if from the 2x2 fit")
    for r in out["topology"]["rows"]:
        print(f"{r['model']:>11} {r['shape']} {r['label']:>10} ({r['config']}): measured {r['measured_ms']:.1f} "
              f"({r['min_ms']:.1f}-{r['max_ms']:.1f}), predicted {r['predicted_ms']:.1f} ({r['error_pct']:+.1f}%), "
              f"per-message reading {r['predicted_per_message_ms']:.1f}")
    t = out["topology"]
    print(f"MAPE {t['mape_pct']}%, {t['within_10pct']} of {len(t['rows'])} within 10%")
    print("\nbatch wall times:", "; ".join(out["batch_times"]))


if __name__ == "__main__":
    main()
