"""The trial behind "recorded, not charged" for the step phase at 300 ms of compute (docs/accuracy.md, "The step phase
at 300 ms of compute"): copies of the shipped models that charge the two latencies the phase's two computes identify
(``fit.small_responses.step.long``: ``during_ms`` as the tier's small-message latency, ``after_backward_us`` as
:attr:`autotuner.model.costmodel.CostModel.after_backward_s`), for ``autotuner accuracy --model-dir``.

``--same-sitting`` takes the latencies from ``runs/<env>/experiments/step-two-computes-same-sitting.jsonl`` instead
(both computes interleaved in one sitting; four envs), fitted by the same function on the shipped model's cost.

    autotuner accuracy --json > /tmp/before.json
    python research/scripts/step_two_latencies.py --out /tmp/two
    autotuner accuracy --model-dir /tmp/two --json > /tmp/after.json
    python scripts/accuracy_diff.py /tmp/before.json /tmp/after.json
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "autotuner" / "models"
RUNS = ROOT / "runs"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="folder for the patched model copies (replaced)")
    ap.add_argument("--same-sitting", action="store_true",
                    help="the latencies from experiments/step-two-computes-same-sitting.jsonl")
    a = ap.parse_args()
    from autotuner.frameworks.horovod.fit.store import load_env
    from autotuner.frameworks.horovod.fit.phase_step import step_small_response

    if a.out.resolve() in (MODELS.resolve(), ROOT.resolve()):
        print(f"error: --out {a.out} would overwrite the shipped models", file=sys.stderr)
        return 2
    if a.out.exists():
        shutil.rmtree(a.out)
    a.out.mkdir(parents=True)
    for f in sorted(MODELS.glob("*.json")):
        d = json.loads(f.read_text())
        step = ((d.get("fit") or {}).get("small_responses") or {}).get("step") or {}
        long = step.get("long") or {}
        if a.same_sitting:
            src = RUNS / f.stem / "experiments" / "step-two-computes-same-sitting.jsonl"
            if not src.exists() or not step.get("charged"):
                continue
            fenv = load_env(MODELS, f.stem)
            recs = [json.loads(x) for x in src.read_text().splitlines()]
            long = step_small_response(recs, fenv.cost, fenv.cluster, d["cluster"].get("backend"))["long"]
        if not step.get("charged") or long.get("during_ms") is None:
            continue
        p = int(d["fit"]["p"])
        d["cost_model"]["inter"]["alpha_us"] = long["during_ms"] * 1e3 / (2 * (p - 1))
        d["cost_model"]["after_backward_us"] = long["after_backward_us"]
        (a.out / f.name).write_text(json.dumps(d, indent=1))
        print(f"{f.stem}: {long['during_ms']:.2f} ms during the backward, {long['after_ms']:.2f} ms after it "
              f"(one latency: {step['fixed_ms']:.2f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
