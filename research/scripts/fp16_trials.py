"""Every committed real fp16 trial next to its prediction, with two model folders side by side (issue 29).

    python research/scripts/fp16_trials.py [--before DIR] [--after DIR]

Reads ``runs/<env>/validation/*.jsonl`` and ``runs/<env>/tune/*.jsonl`` for trials run with
``hvd.Compression.fp16`` and predicts each with :func:`autotuner.frameworks.horovod.views.accuracy.simulate_trial` (the trial's
layout, emulated compute, shape and compression) from the env's model in ``--after`` (default: the shipped
``autotuner/models``) and, when given, ``--before`` (an earlier fit's model folder). Prints one row per configuration: env, file, knobs, trials, measured median (ms), each prediction
(ms) and its error (%). The fp16 term of every env is fitted from its own ``fp16.jsonl`` alone: none of these
trials is used by a fit (held out).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    from autotuner.frameworks.horovod.fit.store import load_env
    from autotuner.frameworks.horovod.knobs import Config
    from autotuner.frameworks.horovod.views.accuracy import simulate_trial

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", type=Path, default=None, help="model folder of the earlier fit")
    ap.add_argument("--after", type=Path, default=ROOT / "autotuner" / "models", help="model folder of the new fit")
    a = ap.parse_args(argv)
    runs = ROOT / "runs"
    cols = [("after", a.after)] + ([("before", a.before)] if a.before else [])
    print("| env | file | knobs | trials | measured ms | " + " | ".join(f"{n} ms (error)" for n, _ in cols) + " |")
    print("|---|---|---|---:|---:|" + "---:|" * len(cols))
    for f in sorted([*runs.glob("*/validation/*.jsonl"), *runs.glob("*/tune/*.jsonl")]):
        env = f.parts[-3]
        groups: dict[str, list[dict]] = {}
        for line in f.read_text().splitlines():
            r = json.loads(line)
            if r.get("compression") != "fp16" or r.get("status") != "ok" or r.get("measured_step_time_ms") is None:
                continue
            groups.setdefault(json.dumps(r["config"], sort_keys=True), []).append(r)
        for key, rs in groups.items():
            cfg = Config.from_dict(json.loads(key))
            meas = statistics.median(r["measured_step_time_ms"] for r in rs)
            cells = []
            for _, d in cols:
                fenv = load_env(d, env)
                ms = simulate_trial(fenv, runs / env, cfg, rs[0]["setup"], compression="fp16").step_time_ms
                cells.append(f"{ms:.1f} ({(ms - meas) / meas * 100:+.1f} %)")
            knobs = f"{cfg.fusion_threshold_bytes / 2**20:g} MiB, {cfg.cycle_time_ms:g} ms"
            print(f"| {env} | {f.parent.name}/{f.name} | {knobs} | {len(rs)} | {meas:.1f} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
