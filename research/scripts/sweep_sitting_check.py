"""Issue 29 part 5: does a sitting's own sweep move a replay's level? Fit an env with its main sweep taken from
another sitting, every other phase its own, and compare the predictions of its replays with the shipped model's.

The other sitting's sweep is a folder holding ``sweep.jsonl`` and ``timelines/`` (what ``autotuner measure`` writes
with every phase after the sweep set to 0 repeats), e.g. ``runs/fresh-2x1-5gbit/experiments/sweep-2026-12-01/``,
measured 2026-12-01 18:50 UTC, an hour after that env's third sitting of DistilBERT replays, with::

    autotuner measure --env fresh-2x1-5gbit --runs-dir /tmp/scr2 --repeats 5 --warmup 1 --testbed-hosts 2 \\
        --ranks-per-host 1 --link-gbit 5 --cpu-repeats 0 --trickle-repeats 0 --idle-repeats 0 --fp16-repeats 0 \\
        --burst-repeats 0 --step-repeats 0 --fused-repeats 0 --mid-repeats 0

(``/tmp/scr2/fresh-2x1-5gbit/`` holding only the env's ``env.toml``). No shipped model is changed.

    python research/scripts/sweep_sitting_check.py fresh-2x1-5gbit runs/fresh-2x1-5gbit/experiments/sweep-2026-12-01 \\
        [--files small-distilbert]

Prints, per step-time row of the env's validation files whose name starts with ``--files``: the measured median,
the shipped model's prediction and error, and the prediction and error of the fit on the other sitting's sweep; then
the two sweeps' medians side by side for the sizes of 16 MiB and more (the ratio other / committed).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "runs"


def _accuracy(env: str, model_dir: Path | None) -> dict[tuple[str, str], dict]:
    """The env's ``autotuner accuracy`` cases (:func:`autotuner.accuracy_table`), keyed by (source, quantity)."""
    import autotuner

    return {(r["source"], r["quantity"]): r for r in autotuner.accuracy_table(None, model_dir, env)["cases"]}


def _medians(path: Path) -> dict[tuple, float]:
    """(phase, tier, job, cache, bytes, tensors) -> median ms of a sweep file (the project's reader)."""
    from autotuner.frameworks.horovod.readers.sweep import read_sweep_records

    recs, _ = read_sweep_records(path)
    return {(r["phase"], r["tier"], r["job"], r["cache"], r["bytes"], r["tensors"]): r["median_ms"] for r in recs}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("env")
    ap.add_argument("sweep_dir", type=Path, help="a folder with the other sitting's sweep.jsonl and timelines/")
    ap.add_argument("--files", default="small-", help="validation files whose name starts with this")
    a = ap.parse_args(argv)
    src = RUNS / a.env
    if not (src / "env.toml").is_file() or not (a.sweep_dir / "sweep.jsonl").is_file():
        print(f"error: need {src}/env.toml and {a.sweep_dir}/sweep.jsonl", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        runs, models = Path(tmp) / "runs", Path(tmp) / "models"
        d = runs / a.env
        d.mkdir(parents=True)
        for f in src.iterdir():
            if f.name not in ("sweep.jsonl", "timelines", "validation", "experiments", "tune"):
                (d / f.name).symlink_to(f.resolve())
        (d / "sweep.jsonl").symlink_to((a.sweep_dir / "sweep.jsonl").resolve())
        (d / "timelines").symlink_to((a.sweep_dir / "timelines").resolve())
        import autotuner

        autotuner.fit_environments(runs, models)
        shipped, other = _accuracy(a.env, None), _accuracy(a.env, models)
    print(f"| file | configuration | measured ms | shipped model | fitted on {a.sweep_dir.name}'s sweep |")
    print("|---|---|---:|---:|---:|")
    for k, r in shipped.items():
        name = k[0].split("/")[-1].split(" ")[0]
        if "/validation/" in k[0] and name.startswith(a.files) and k[1].endswith("step time (ms)") and k in other:
            o = other[k]
            print(f"| {name} | {k[1].split(':')[0]} | {r['measured']:.1f} | {r['predicted']:.1f} "
                  f"({r['error_percent']:+.1f} %) | {o['predicted']:.1f} ({o['error_percent']:+.1f} %) |")
    mine, theirs = _medians(src / "sweep.jsonl"), _medians(a.sweep_dir / "sweep.jsonl")
    ratios = [theirs[k] / mine[k] for k in mine if k in theirs and k[0] == "allreduce" and k[4] >= 16 << 20]
    print(f"allreduce >= 16 MiB, {a.sweep_dir.name} / committed sweep medians: "
          + ", ".join(f"{x:.2f}" for x in ratios) + f" (median {statistics.median(ratios):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
