#!/usr/bin/env python3
"""The head-to-head table of docs/tune.md from the committed records of research/scripts/tune_cases.sh.

    python research/scripts/tune_summary.py            # one Markdown table, then one line per case

Per case: tune's trials and steps (warm-up included) and their jobs' wall seconds; Horovod's default autotune's
steps and seconds until its log's best row; then the defaults, tune's final and autotune's final, each the
median (min-max) over 3 interleaved repeats of each trial's median step time, and the verdict ("tie" when
the ranges overlap).
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CASES = (("fresh-poll-0.75gbit", "mnist", "1 host, 0.75 Gbit/s"),
         ("fresh-poll-2gbit", "mobilenet_v2", "1 host, 2 Gbit/s"),
         ("fresh-poll-2x1-3gbit", "mobilenet_v2", "2 emulated hosts, 3 Gbit/s"))


def _lines(p: Path) -> list[dict]:
    return [json.loads(s) for s in p.read_text().splitlines() if s.strip()] if p.exists() else []


def _stat(v: list[float]) -> tuple[float, float, float]:
    return statistics.median(v), min(v), max(v)


def _vs(a: tuple, b: tuple) -> str:
    """a (tune) against b: faster / slower when the ranges are apart, else tie."""
    if a[2] < b[1]:
        return f"faster ({b[0] / a[0]:.3f}x)"
    if a[1] > b[2]:
        return f"slower ({b[0] / a[0]:.3f}x)"
    return f"tie ({b[0] / a[0]:.3f}x, ranges overlap)"


def main() -> int:
    print("| case | tune: trials, steps, s | tune's final | autotune: steps, s | autotune's final | "
          "defaults ms | tune's final ms | autotune's final ms | tune vs defaults | tune vs autotune | "
          "steps ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for env, model, what in CASES:
        base = ROOT / "runs" / env
        tune = [r for r in _lines(base / "tune" / f"h2h-{model}.jsonl") if r.get("kind") == "tune"]
        h2h = _lines(base / "validation" / f"h2h-{model}-h2h.jsonl")
        if not tune or not h2h:
            print(f"| {env} {model} | (not run) |||||||||", file=sys.stdout)
            continue
        steps = sum(r["tune"]["steps"] for r in tune)
        wall = sum(r["wall_s"] for r in tune)
        at = [r for r in h2h if r["kind"] == "autotune"][-1]
        st = at["settled"]
        best = at["autotune"]["best"]
        by = {}
        for r in h2h:
            if r["kind"] != "autotune" and r["status"] == "ok":
                by.setdefault(r["label"], []).append(r["measured_step_time_ms"])
        final = next(r["label"] for r in h2h if r["label"] == "proposal-1")
        cfg = next(r["config"] for r in h2h if r["label"] == final)
        d, t, a = _stat(by["default"]), _stat(by["proposal-1"]), _stat(by["autotune_best"])
        fmt = lambda s: f"{s[0]:.1f} ({s[1]:.1f}-{s[2]:.1f})"  # noqa: E731
        print(f"| {env}, {model} ({what}) | {len(tune)}, {steps}, {wall:.0f} | {cfg['fusion_threshold_mb']:g} MiB, "
              f"{cfg['cycle_time_ms']:g} ms, cache {'on' if cfg['cache_capacity'] else 'off'} | {st['steps']}, "
              f"{st['wall_s']:.0f} | {best['fusion_threshold_mb']:.3g} MiB, {best['cycle_time_ms']:.3g} ms, cache "
              f"{'on' if best['cache_enabled'] else 'off'} | {fmt(d)} | {fmt(t)} | {fmt(a)} | {_vs(t, d)} | "
              f"{_vs(t, a)} | {steps / st['steps']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
