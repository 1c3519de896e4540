"""Copy the reference data that ships in the wheel from the repository's ``runs/`` into
``autotuner/reference/``.

The measurement records stay in ``runs/`` (the repository only). The wheel carries what the
predicting commands read on a shipped environment when no ``runs/`` is at hand:

- every environment's ``env.toml`` (hardware, Horovod release, batch size, run shape);
- a DDP environment's own phases (``ddp-*.jsonl``: the sweep its cost model is fitted from, the
  CPU, burst and first-touch phases) and its real replays (``ddp-validation/*.jsonl``: the trust
  line and error band of ``ddp suggest``).

Run from the repository root after changing any of those files::

    python scripts/ship_reference.py

``tests/test_shipped_data.py`` fails while the copy differs from ``runs/``.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autotuner.paths import reference_files  # noqa: E402


def main() -> int:
    src, dst = ROOT / "runs", ROOT / "autotuner" / "reference"
    wanted = reference_files(src)
    if dst.exists():
        shutil.rmtree(dst)
    for rel in wanted:
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / rel, dst / rel)
    size = sum((dst / r).stat().st_size for r in wanted)
    print(f"{len(wanted)} files, {size / 1e6:.2f} MB -> {dst.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
