"""Issue 29 part 5: the small-response rows of the committed fresh envs, paired by round.

Reads every ``runs/fresh*/validation/small-*.jsonl`` (validation files without Horovod's timeline, their
configurations interleaved round by round) and prints, per file, for each configuration against Horovod's defaults:
the measured difference (configuration - defaults, ms; mean over the rounds that ran both, and its standard error
sd / sqrt(n)) beside the predicted difference (the records' ``predicted_step_time_ms``). Then, for fusion off, the
small-response price ``a = 2(p-1)·alpha`` (ms per response) at which the simulator gives the measured difference
(scipy ``brentq`` over 0-10 ms on the scenario of :func:`autotuner.frameworks.horovod.predict.make_scenario` with
only ``cost.inter.alpha_s`` varied), beside the env's own ``a`` (its step phase's, when charged).

    python research/scripts/small_response_pairs.py            # every fresh env
    python research/scripts/small_response_pairs.py fresh-poll-2x1-4.5gbit

Reads the shipped runs and fitted models (runs/, autotuner/models); writes nothing.
"""
from __future__ import annotations

import math
import os
import statistics
import sys
from dataclasses import replace
from pathlib import Path

from scipy.optimize import brentq

from autotuner.frameworks.horovod.knobs import config_from_values
from autotuner.frameworks.horovod.predict import make_scenario
from autotuner.frameworks.horovod.readers.runs import parse_records

RUNS = Path(__file__).resolve().parents[2] / "runs"


def _rounds(path: Path) -> dict[str, dict[str, dict]]:
    """round -> label -> record, for the file's ok trials without a timeline or compression."""
    by: dict[str, dict[str, dict]] = {}
    recs, _ = parse_records(path.read_text(), path.name)  # the project's reader: damaged lines named and skipped
    for r in recs:
        if r.get("status") != "ok" or r.get("timeline_recorded") or r.get("compression") not in (None, "none"):
            continue
        label, rnd = r["trial"].rsplit("/", 1)
        by.setdefault(rnd, {})[label] = r
    return by


def _mean_se(xs: list[float]) -> tuple[float, float]:
    return statistics.mean(xs), (statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else float("nan"))


def report(path: Path) -> None:
    by = _rounds(path)
    labels = {lab: r for d in by.values() for lab, r in d.items()}
    if "default" not in labels:
        return
    setup = labels["default"]["setup"]
    env, model = setup["env"], setup["model"]
    print(f"\n{env} {model} ({path.name}, compute {setup['compute_ms']:g} ms)")
    for lab, r in sorted(labels.items()):
        if lab == "default":
            continue
        d = [x[lab]["measured_step_time_ms"] - x["default"]["measured_step_time_ms"] for x in by.values()
             if lab in x and "default" in x]
        m, se = _mean_se(d)
        c = r["config"]
        pred = r["predicted_step_time_ms"] - labels["default"]["predicted_step_time_ms"]
        print(f"  {lab:11s} {c['fusion_threshold_bytes'] / 2**20:g} MiB, {c['cycle_time_ms']:g} ms, cache "
              f"{c['cache_capacity']}: measured {m:+7.1f} +- {se:4.1f} ms (n={len(d)}), predicted {pred:+7.1f} ms")
    fo = [lab for lab, r in labels.items() if r["config"]["fusion_threshold_bytes"] == 0
          and r["config"]["cache_capacity"] > 0 and r["config"]["cycle_time_ms"] == 1.0]
    if not fo:
        return
    sc, _ = make_scenario(None, env, model, compute_ms=setup["compute_ms"])
    c_def, c_fo = config_from_values(labels["default"]["config"]), config_from_values(labels[fo[0]]["config"])
    m, _ = _mean_se([x[fo[0]]["measured_step_time_ms"] - x["default"]["measured_step_time_ms"] for x in by.values()
                     if fo[0] in x and "default" in x])

    a, own, at_own = price_that_meets(sc, c_def, c_fo, m)
    print("  fusion off: the price a fitting the measured difference "
          + ("none in 0-10 ms" if a is None else f"{a:.2f} ms")
          + f"; the env's a {own:.2f} ms (simulated difference there {at_own:+.1f} ms)")


def price_that_meets(sc, c_def, c_fo, measured_ms: float) -> tuple[float | None, float, float]:
    """``(a, own, at_own)``: the small-response price ``a = 2(p-1) alpha`` (ms) at which scenario ``sc`` simulates
    ``c_fo`` - ``c_def`` as ``measured_ms`` (scipy ``brentq`` over 0-10 ms; None where none there), the scenario's
    own price (ms), and the difference it simulates (ms)."""
    p = sc.cluster.size

    def diff(a_ms: float) -> float:
        s = replace(sc, cost=replace(sc.cost, inter=replace(sc.cost.inter, alpha_s=a_ms * 1e-3 / (2 * (p - 1)))))
        return (s.simulate(c_fo).step_time_s - s.simulate(c_def).step_time_s) * 1e3

    own = sc.cost.inter.alpha_s * 2 * (p - 1) * 1e3
    try:
        a = float(brentq(lambda x: diff(x) - measured_ms, 0.0, 10.0, xtol=1e-3))
    except ValueError:
        a = None
    return a, own, diff(own)


def main() -> int:
    envs = sys.argv[1:]
    files = sorted(RUNS.glob("fresh*/validation/small-*.jsonl"))
    if envs:
        files = [f for f in files if f.parents[1].name in envs]
        if not files:
            print(f"error: no small-*.jsonl validation file under {RUNS} for {', '.join(envs)}", file=sys.stderr)
            return 2
    try:
        for f in files:
            report(f)
    except BrokenPipeError:  # the reader stopped reading (| head): not an error of this script
        sys.stdout = open(os.devnull, "w")
    return 0


if __name__ == "__main__":
    sys.exit(main())
