"""Before/after of ``autotuner accuracy --json``: per env the held-out MAPE and worst case, and every
small-response row (fusion off, thresholds of 1 MiB and below, cache off) with both errors.

    autotuner accuracy --json > before.json   # at the old commit
    autotuner accuracy --json > after.json
    python scripts/accuracy_diff.py before.json after.json
"""
from __future__ import annotations

import json
import os
import re
import sys

SMALL = re.compile(r"\((?:0|0\.\d+|1) MiB|cache off|cache 0\b|fusion off")


def main() -> int:
    if len(sys.argv) != 3:
        print("error: give BEFORE.json AFTER.json (autotuner accuracy --json)", file=sys.stderr)
        return 2
    b, a = (json.load(open(p)) for p in sys.argv[1:])
    sb = {s["env"]: s for s in b["summary"]}
    print("| env | held-out MAPE before -> after | worst before -> after |")
    print("|---|---|---|")
    for s in a["summary"]:
        o = sb.get(s["env"], {})
        if s.get("held_out_mape_percent") is None:
            continue
        w0, w1 = (o.get("held_out_worst") or {}).get("error_percent"), (s.get("held_out_worst") or {}).get("error_percent")
        f = (lambda x: "-" if x is None else f"{x:+.1f} %")
        print(f"| {s['env']} | {o.get('held_out_mape_percent', float('nan')):.2f} -> {s['held_out_mape_percent']:.2f} % "
              f"| {f(w0)} -> {f(w1)} |")
    key = lambda c: (c["env"], c["quantity"], c["source"])  # noqa: E731
    cb = {key(c): c for c in b["cases"]}
    print("\n| env | small-response row | measured | error before | error after |")
    print("|---|---|---:|---:|---:|")
    for c in a["cases"]:
        if c["used_by_fit"] or not SMALL.search(c["quantity"]) or c.get("error_percent") is None:
            continue
        o = cb.get(key(c))
        eb = "-" if o is None or o.get("error_percent") is None else f"{o['error_percent']:+.1f} %"
        print(f"| {c['env']} | {c['quantity']} ({c['source'].split('/')[-1]}) | {c['measured']:.1f} | {eb} | "
              f"{c['error_percent']:+.1f} % |")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # the reader stopped reading (| head): not an error of this script
        sys.stdout = open(os.devnull, "w")
        sys.exit(0)
