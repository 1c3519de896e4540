"""Every DDP replay of an environment beside its prediction from the env's own sweep alone (issue 30).

    python research/scripts/ddp_accuracy.py ddp-2gbit [more envs]

Fits the env's cost model from ``runs/<env>/ddp-sweep.jsonl`` (:func:`autotuner.frameworks.ddp.fit.cost_model_from_sweep`)
and prints, per layout and bucket setting: trials, measured median step (range), predicted, error; the first
iteration measured and predicted; whether DDP's own rebuilt buckets (its logging data) are the simulator's. Then per
layout: MAPE, worst, Kendall's tau over the pairs measured more than 2 % apart ((concordant - discordant) / pairs),
the pick (the setting predicted fastest) measured against DDP's defaults.
"""
from __future__ import annotations

import itertools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _source(r) -> str:
    """A row's record file and, where it differs, its layout: ``resnet101-long (resnet101)``."""
    return r.model if r.source in ("", r.model) else f"{r.source} ({r.model})"


def main() -> int:
    import numpy as np
    from autotuner.frameworks.ddp.records import env_cost, rows

    envs = sys.argv[1:]
    if not envs:
        print("usage: python research/scripts/ddp_accuracy.py ENV [ENV ...]", file=sys.stderr)
        return 2
    for env in envs:
        d = ROOT / "runs" / env
        cost, info, _ = env_cost(d)
        print(f"## {env}: alpha {info['alpha_us']:.0f} us, busbw {info['busbw_gbps']:.2f} Gbit/s, copy "
              f"{info['copy_GBps']:.1f} GB/s, float16 sum {info['fp16'].get('sum_extra_ns_per_elem') or 0:.1f} ns/elem, "
              f"queued bucket saves {info['queued']['saving_us']:.0f} us ({info['queued']['jobs']} burst jobs)")
        rs = rows(d, cost)
        print("| records (layout) | setting | trials | measured ms (range) | predicted | error | first: measured / "
              "predicted | buckets as DDP's |")
        print("|---|---|---:|---:|---:|---:|---:|---|")
        for r in rs:
            same = "n/a" if r.buckets is None else ("yes" if tuple(r.buckets) == r.predicted_buckets else
                                                     f"no ({len(r.buckets)} vs {len(r.predicted_buckets)})")
            print(f"| {_source(r)} | {r.label} | {r.trials} | {r.measured_ms:.1f} ({r.low_ms:.1f}-{r.high_ms:.1f}) | "
                  f"{r.predicted_ms:.1f} | {r.error_pct:+.1f} % | {r.first_measured_ms:.1f} / {r.first_predicted_ms:.1f} | "
                  f"{same} |")
        for source in dict.fromkeys(r.source for r in rs):
            m = [r for r in rs if r.source == source]
            errs = [abs(r.error_pct) for r in m]
            pairs = [(a, b) for a, b in itertools.combinations(m, 2)
                     if abs(a.measured_ms - b.measured_ms) / min(a.measured_ms, b.measured_ms) > 0.02]
            # Kendall's tau over the pairs measured > 2 % apart: (concordant - discordant) / pairs
            conc = np.mean([np.sign(a.measured_ms - b.measured_ms) == np.sign(a.predicted_ms - b.predicted_ms)
                            for a, b in pairs]) if pairs else float("nan")
            tau = 2 * conc - 1
            pick = min(m, key=lambda r: r.predicted_ms)
            default = next(r for r in m if r.label.startswith("25 MiB (default"))
            print(f"{_source(m[0])}: MAPE {np.mean(errs):.1f} %, worst {max(m, key=lambda r: abs(r.error_pct)).error_pct:+.1f} %; "
                  f"Kendall tau {tau:.2f} over {len(pairs)} pairs measured > 2 % apart; "
                  f"pick {pick.label}: measured {pick.measured_ms:.1f} ms vs defaults {default.measured_ms:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
