#!/usr/bin/env python3
"""The below-knee bound's two forms side by side on named envs (issue 29 part 5): each env fitted from its measured
files alone (``research/scripts/fresh_env.py``'s ``fit_alone``) with the bound as shipped (second form: below the knee no
cheaper per byte than the segment from it) and with its first form (only a slope above the link's line rate
borrows), then every like-with-like small-response row (no timeline) and the defaults of ``autotuner accuracy``
under both. A diagnosis of what the second form changes, not a judgement (that is the held-out script's).

    python research/scripts/below_knee_forms.py fresh-poll-1.5gbit fresh-poll-3.5gbit

Prints a markdown table; exit 2 on an env with no measured sweep under runs/.
"""
from __future__ import annotations

import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fresh_env  # noqa: E402

from autotuner import accuracy_table, fit_environments  # noqa: E402
from autotuner.frameworks.horovod.fit import phase_fused as sweep  # noqa: E402


def fit_alone(env: str, out: Path) -> None:
    """``fresh_env.fit_alone`` in this process (so that the form patched in below is the one fitted): what ``measure``
    wrote for ``env`` (:func:`fresh_env.measured_only`), fitted to ``out``."""
    with fresh_env.measured_only([env]) as runs:
        fit_environments(runs, out)


def first_form(tier, link_gbps: float, piece_info):
    """``sweep.bound_below_knee`` as committed at 1910530: borrow only where the slope's busbw exceeds the link."""
    if piece_info is None or not tier.large_from_bytes or tier.bandwidth_Bps <= link_gbps * sweep.GBIT:
        return tier
    piece_info["small"]["per_byte_borrowed"] = {"fitted_busbw_gbps": tier.bandwidth_Bps / sweep.GBIT,
                                                "link_gbps": link_gbps, "busbw_gbps": tier.large_bandwidth_Bps / sweep.GBIT,
                                                "why": "above the link"}
    return replace(tier, bandwidth_Bps=tier.large_bandwidth_Bps)


def rows(env: str, model_dir: Path) -> dict[tuple[str, str], tuple[float, float, float]]:
    """(source file, quantity) -> (measured, predicted, error %) of every step-time row without the timeline."""
    table = accuracy_table(env=env, model_dir=[model_dir])
    return {(c["source"], c["quantity"]): (c["measured"], c["predicted"], c["error_percent"]) for c in table["cases"]
            if "step time" in c["quantity"] and "timeline ran" not in c["quantity"] and not c["used_by_fit"]}


def main() -> int:
    envs = sys.argv[1:]
    bad = [e for e in envs if not (fresh_env.RUNS / e / "sweep.jsonl").exists()]
    if not envs or bad:
        print(f"error: {', '.join(bad) or 'no env named'}: give envs measured under runs/", file=sys.stderr)
        return 2
    print("| env | row (file) | measured ms | second form (shipped) | first form |")
    print("|---|---|---:|---:|---:|")
    for env in envs:
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            fit_alone(env, Path(a))
            shipped = sweep.bound_below_knee
            sweep.bound_below_knee = first_form
            try:
                fit_alone(env, Path(b))
            finally:
                sweep.bound_below_knee = shipped
            second, first = rows(env, Path(a)), rows(env, Path(b))
        for key, (m, p2, e2) in second.items():
            p1, e1 = first[key][1:]
            print(f"| {env} | {key[1].split(': step')[0]} ({key[0].split('/')[-1]}) | {m:.1f} | {p2:.1f} ({e2:+.1f} %) "
                  f"| {p1:.1f} ({e1:+.1f} %) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
