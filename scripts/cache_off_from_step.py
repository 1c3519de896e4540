"""Issue 29 part 5, a prototype (not the fit): the no-cache extra of a busy cycle charged from the step phase.

The negotiation terms a cache-off cycle pays (``cost_model.negotiation``: ``nocache_us`` per busy cycle in place of
``busy_us``, plus ``per_tensor_us`` x tensors x ranks; :meth:`autotuner.model.costmodel.Negotiation.cycle_s`) are
fitted from the sweep's timelines (:func:`autotuner.frameworks.horovod.fit.sweep.cycle_negotiation_s`), whose writer
does per-tensor work in exactly those cycles. The step phase (no timeline) measures cache off - defaults of its
replay (``fit.small_responses.step.cache_off_delta_ms``). Here one ``k`` in [0, 1] per env scales the extra,
``nocache' = busy + k (nocache - busy)`` (unchanged where ``nocache <= busy``) and ``per_tensor' = k per_tensor``,
with ``k`` from scipy ``brentq`` so that the simulated step-phase difference
(:func:`autotuner.frameworks.horovod.fit.sweep._step_delta_sim_ms`, job ``cache-off``) equals the measured one (the
end of [0, 1] nearer it where they do not bracket it). Only envs whose step phase is charged are changed.

Writes a copy of the shipped models (autotuner/models) with those two numbers replaced into OUT and prints one line
per env; then compare:

    python scripts/cache_off_from_step.py /tmp/proto
    autotuner accuracy --json > before.json
    autotuner accuracy --json --model-dir /tmp/proto > after.json
    python scripts/accuracy_diff.py before.json after.json
"""
from __future__ import annotations

import json
import shutil
import sys
from dataclasses import replace
from pathlib import Path

from scipy.optimize import brentq

from autotuner.frameworks.horovod.fit.sweep import _step_delta_sim_ms
from autotuner.model.costmodel import Cluster, CostModel

MODELS = Path(__file__).resolve().parents[1] / "autotuner" / "models"


def calibrate(d: dict) -> tuple[float, float, float, float] | None:
    """``(k, measured, simulated at k = 1, simulated at k)`` (ms) for a model dict, its negotiation replaced in
    place; None where the step phase is not charged or the model has no ``nocache_us``."""
    step = ((d.get("fit") or {}).get("small_responses") or {}).get("step")
    if not step or not step.get("charged") or step.get("cache_off_delta_ms") is None:
        return None
    cost = CostModel.from_dict(d["cost_model"])
    neg = cost.negotiation
    if neg.nocache_s is None:
        return None
    base = neg.busy_s if neg.busy_s is not None else neg.cache_ops * neg.ctrl_op_s
    cluster = Cluster(d["cluster"]["nodes"], d["cluster"]["gpus_per_node"])
    backend, measured = d["cluster"].get("backend"), step["cache_off_delta_ms"]

    def scaled(k: float):
        nocache = neg.nocache_s if neg.nocache_s <= base else base + k * (neg.nocache_s - base)
        return replace(cost, negotiation=replace(neg, nocache_s=nocache, per_tensor_s=k * neg.per_tensor_s))

    def sim(k: float) -> float:
        return _step_delta_sim_ms(scaled(k), cluster, step["fixed_ms"], "cache-off", backend)

    g0, g1 = sim(0.0), sim(1.0)
    if (g0 - measured) * (g1 - measured) < 0:
        k = float(brentq(lambda x: sim(x) - measured, 0.0, 1.0, xtol=1e-3))
    else:
        k = 0.0 if abs(g0 - measured) <= abs(g1 - measured) else 1.0
    n2 = scaled(k).negotiation
    d["cost_model"]["negotiation"]["nocache_us"] = n2.nocache_s * 1e6
    d["cost_model"]["negotiation"]["per_tensor_us"] = n2.per_tensor_s * 1e6
    return k, measured, g1, sim(k)


def main() -> int:
    if len(sys.argv) != 2:
        print("error: give OUT, the folder to write the models' copy into", file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    if out.resolve() == MODELS.resolve():
        print("error: OUT must not be the shipped models' folder", file=sys.stderr)
        return 2
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(MODELS, out)
    for f in sorted(out.glob("*.json")):
        d = json.loads(f.read_text())
        res = calibrate(d)
        if res is None:
            continue
        f.write_text(json.dumps(d, indent=1))
        k, measured, g1, gk = res
        print(f"{f.stem:26s} step phase cache off - defaults: measured {measured:+6.1f} ms, simulated {g1:+6.1f} "
              f"-> k = {k:.3f}, simulated {gk:+6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
