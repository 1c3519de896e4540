"""Write the shipped GPU priors of DDP's Reducer host cost (``autotuner/frameworks/ddp/data/gpu_host_priors.json``)
from the committed real-GPU records in ``runs/gpu-profiles/`` (:data:`autotuner.frameworks.ddp.host_priors.RECORDS`;
the method is :mod:`autotuner.frameworks.ddp.host_priors`'s docstring). ``runs/`` stays out of the wheel: the
package reads this file. Run from the repository root after a new GPU record is added::

    python scripts/gpu_host_priors.py [--check]

``--check`` writes nothing and exits 1 when the shipped file differs from what the records give (every figure
compared to 1e-6 relative; ``tests/test_gpu_host_priors.py`` runs it). Prints each GPU's prior and every model's
own figures.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autotuner.frameworks.ddp.host_priors import PRIORS_FILE, RECORDS, derive  # noqa: E402
from autotuner.writers.atomic import atomic_write_text  # noqa: E402


def derived() -> dict:
    """The priors' dict from the records under ROOT."""
    return derive({gpu: (json.loads((ROOT / a).read_text()), json.loads((ROOT / b).read_text()), a, b)
                   for gpu, (a, b) in RECORDS.items()})


def differences(a, b, where: str = "") -> list[str]:
    """Where ``a`` and ``b`` differ: numbers beyond 1e-6 relative (or 1e-9 absolute), anything else unequal."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{where}/{k}: only on one side" for k in sorted(set(a) ^ set(b))]
        return out + [d for k in sorted(set(a) & set(b)) for d in differences(a[k], b[k], f"{where}/{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} items against {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{where}[{i}]")]
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return [] if math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9) else [f"{where}: {a} against {b}"]
    return [] if a == b else [f"{where}: {a!r} against {b!r}"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the shipped file is stale; write nothing")
    a = ap.parse_args()
    d = derived()
    for gpu, g in d["gpus"].items():
        for m in g["models"]:
            print(f"{gpu} {m['model']:>16} ({m['tensors']} tensors): {m['per_tensor_us']:6.2f} us per tensor, "
                  f"{m['per_bucket_us']:7.2f} us per bucket")
    for gpu, p in [*((g, v["prior"]) for g, v in d["gpus"].items()), ("all", d["all"])]:
        print(f"{gpu} prior: {p['per_tensor_us']:.2f} us per tensor ({p['per_tensor_range_us'][0]:.2f}-"
              f"{p['per_tensor_range_us'][1]:.2f}), {p['per_bucket_us']:.2f} us per bucket "
              f"({p['per_bucket_range_us'][0]:.2f}-{p['per_bucket_range_us'][1]:.2f})")
    if a.check:
        if not PRIORS_FILE.exists():
            print(f"{PRIORS_FILE.relative_to(ROOT)}: missing; run python scripts/gpu_host_priors.py")
            return 1
        diff = differences(json.loads(PRIORS_FILE.read_text()), d)
        for line in diff[:20]:
            print(f"stale: {line}")
        return 1 if diff else 0
    atomic_write_text(PRIORS_FILE, json.dumps(d, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {PRIORS_FILE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
