"""Would pricing a step's small responses by regime help? (issue 29 part 5; docs/accuracy.md, "The burst phase").

    python research/scripts/small_response_regimes.py

A trial, not shipped: every committed fresh env's real replays predicted three ways, with the shipped models and
nothing refitted. ``base``: as shipped (every response pays the tier's latency, the timelines' back-to-back price).
``two``: a response that opens its cycle pays the idle phase's price for a lone small response
(``fit.idle_response.per_response_us``), every later response of the cycle the burst phase's back-to-back price
without the timeline (``fit.small_responses.burst.alpha_us``). ``busy``: every response the burst price. The
variants patch Horovod's simulator from outside (the first response of each cycle is told by wrapping ``fuse``;
the latency by wrapping ``CostModel.allreduce_s``); no product code changes. Prints the MAPE of the small-response
rows (fusion off, <= 1 MiB, cache off) and of the others, with and without Horovod's timeline, and each small row
without the timeline. Reads committed records only; the replays are held out (no fit reads them).
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def _regimes() -> dict[int, tuple[float, float, float]]:
    """inter alpha (ns, the env's key) -> (charged fixed s, burst fixed s, idle fixed s) per response, 2 ranks."""
    out = {}
    for f in (ROOT / "autotuner" / "models").glob("fresh-*.json"):
        d = json.loads(f.read_text())
        sr, ir = d["fit"]["small_responses"], d["fit"].get("idle_response") or {}
        b = sr.get("burst") or {}
        if sr.get("charged") and b.get("alpha_us") and ir.get("per_response_us"):
            a, p = d["cost_model"]["inter"]["alpha_us"] * 1e-6, d["fit"]["p"]
            out[round(a * 1e9)] = (2 * (p - 1) * a, 2 * (p - 1) * b["alpha_us"] * 1e-6, ir["per_response_us"] * 1e-6)
    return out


def predict(mode: str) -> dict[tuple, float]:
    """(env, file, row) -> error % of every fresh env's replay row, with the latency priced as ``mode`` says."""
    import autotuner.frameworks.horovod.simulator as sim
    from autotuner.model.costmodel import CostModel
    from autotuner.paths import model_search_path, runs_search_path
    from autotuner.frameworks.horovod.views.accuracy import cases

    reg, state = _regimes(), {"first": False}
    fuse0, ar0 = sim.fuse, CostModel.allreduce_s

    def fuse(wire, thr):
        for k, ab in enumerate(fuse0(wire, thr)):
            state["first"] = k == 0
            yield ab

    def allreduce_s(self, nbytes, cluster, hierarchical):
        t = ar0(self, nbytes, cluster, hierarchical)
        r = reg.get(round(self.inter.alpha_s * 1e9))
        if r is None or mode == "base":
            return t
        return t - r[0] + (r[2] if (mode == "two" and state["first"]) else r[1])

    sim.fuse, CostModel.allreduce_s = fuse, allreduce_s
    try:
        return {(c.env, c.source.split("/")[-1].split(" ")[0], c.what.split(":")[0]): c.error_pct
                for c in cases(runs_search_path(), model_search_path())
                if c.env.startswith("fresh-") and c.what.endswith("step time (ms)")}
    finally:
        sim.fuse, CostModel.allreduce_s = fuse0, ar0


def _small(row: str) -> bool:
    m = re.search(r"\((\S+) MiB, \S+ ms(.*?)\)", row)
    return bool(m) and (float(m.group(1)) <= 1 or "cache off" in m.group(2))


def main() -> int:
    modes = ("base", "two", "busy")
    res = {m: predict(m) for m in modes}
    keys = sorted(res["base"])
    print("rows                  n    MAPE " + "  ".join(f"{m:>5}" for m in modes) + "   rows > 10 %")
    for name, want_small, want_tl in (("small, no timeline", True, False), ("small, timeline", True, True),
                                      ("other, no timeline", False, False), ("other, timeline", False, True)):
        ks = [k for k in keys if _small(k[2]) == want_small and ("timeline ran" in k[2]) == want_tl]
        mape = "  ".join(f"{np.mean([abs(res[m][k]) for k in ks]):5.1f}" for m in modes)
        over = " / ".join(str(sum(abs(res[m][k]) > 10 for k in ks)) for m in modes)
        print(f"{name:20s} {len(ks):3d}        {mape}   {over}")
    print("\nsmall-response rows without the timeline: error % base / two / busy")
    for k in keys:
        if _small(k[2]) and "timeline ran" not in k[2]:
            print(f"  {k[0]:22s} {k[2][:58]:58s} " + " ".join(f"{res[m][k]:+6.1f}" for m in modes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
