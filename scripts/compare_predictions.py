"""Every number of two ``--json`` outputs compared, for a change that must not move a prediction (a restructure):

    autotuner accuracy --json > before.json     # at the old commit
    autotuner accuracy --json > after.json
    python scripts/compare_predictions.py before.json after.json [--rel 1e-9]

Prints how many numbers the first holds, how many differ beyond ``--rel`` (relative) or are gone in the second, and
how many text fields changed (paths ignored); exit status 1 when a number differs, 0 otherwise, 2 on bad arguments.
Works on any JSON (``ddp envs --json``, ``suggest --json``, a model file).
"""
from __future__ import annotations

import argparse
import json
import math
import sys


def leaves(x, path=""):
    """(path, value) of every scalar in ``x``."""
    if isinstance(x, dict):
        for k, v in x.items():
            yield from leaves(v, f"{path}.{k}")
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from leaves(v, f"{path}[{i}]")
    else:
        yield path, x


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--rel", type=float, default=1e-9, help="relative tolerance (fitted floats differ in the 8th "
                                                            "digit between machines: use 1e-6 across machines)")
    ap.error = lambda msg: (print(f"error: {msg}", file=sys.stderr), sys.exit(2))
    a = ap.parse_args(argv)
    try:
        before, after = (dict(leaves(json.load(open(p)))) for p in (a.before, a.after))
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    nums = [k for k, v in before.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    moved = [k for k in nums if not isinstance(after.get(k), (int, float))
             or not math.isclose(before[k], after[k], rel_tol=a.rel, abs_tol=0.0)]
    texts = [k for k, v in before.items() if isinstance(v, str) and after.get(k) != v and not k.endswith(".path")]
    print(f"{len(nums)} numbers, {len(moved)} moved or gone; {len(texts)} text fields changed; "
          f"{len(set(after) - set(before))} fields new")
    for k in moved[:20]:
        print(f"  moved: {k}: {before[k]!r} -> {after.get(k)!r}")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
