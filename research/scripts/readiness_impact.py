#!/usr/bin/env python3
"""How much do the shipped FLOP-based compute shares differ from gradient readiness measured
on a GPU, and how much does that move the simulator's predictions?

Reads a profile written by ``research/scripts/profile_gradient_readiness.py`` (default: the committed
``runs/gpu-profiles/h100-torch2.11/profiles.json``) and, for every calibrated (environment,
model) in ``autotuner/models/`` (the shipped models) whose layout has the same tensors, replaces
the layout's readiness with the measured one (same tensors, same workload, same cost model) and
compares predicted step times over a grid of fusion thresholds (0-256 MiB) x cycle times
(0.5-50 ms), cache on.

Prints one table row per (environment, model, profile):
  - ``fwd share``: measured forward / (forward + backward); the simulator assumes 1/3 for
    models without calibrated phase times;
  - ``ready d``: mean over tensors, weighted by bytes, of |measured - FLOP| ready fraction;
  - ``defaults``: predicted step time at Horovod 0.28's defaults, FLOP shares -> measured;
  - ``pick regret``: the grid's best configuration under FLOP shares, evaluated under the
    measured readiness, vs the best under the measured readiness (what a user would lose);
  - ``max |d|``: the largest relative change of predicted step time over the grid.

Usage: python research/scripts/readiness_impact.py [--profiles FILE] [--batch-sizes 32,64,128]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from autotuner.frameworks.horovod.predict import make_scenario
from autotuner.readers.layouts import layout_from_dict

ROOT = Path(__file__).resolve().parents[2]
MIB = 1 << 20
FUSION_MIB = np.array([0, 1, 2, 4, 8, 16, 32, 64, 128, 256])
CYCLE_MS = np.array([0.5, 1, 2, 5, 10, 25, 50])
DEFAULT = (8, 1)  # index of 128 MiB, 1 ms


def _grid(sc) -> np.ndarray:
    f, c = np.meshgrid(FUSION_MIB * MIB, CYCLE_MS, indexing="ij")
    return sc.step_times(fusion_threshold_bytes=f, cycle_time_ms=c, cache_capacity=np.full(f.shape, 1024),
                         hierarchical_allreduce=np.zeros(f.shape, bool)) * 1e3


def rows(profiles: list[dict], model_dir: Path, batch_sizes: set[int]) -> pd.DataFrame:
    out = []
    for env in sorted(p.stem for p in model_dir.glob("*.json")):
        for prof in profiles:
            if prof["batch_size"] not in batch_sizes:
                continue
            try:
                sc, _ = make_scenario(model_dir, env, prof["model"])
            except ValueError:
                continue  # model not calibrated in this env
            measured = layout_from_dict(prof["layout"])
            if sorted(measured.names) != sorted(sc.layout.names):
                continue  # env calibrated on another layout (e.g. vgg16 on vgg16_bn)
            pos = {n: i for i, n in enumerate(measured.names)}  # orders differ under autocast
            ready_measured = measured.ready_fraction[[pos[n] for n in sc.layout.names]]
            a, b = _grid(sc), _grid(dataclasses.replace(sc, layout=measured))
            ia, ib = np.unravel_index(a.argmin(), a.shape), np.unravel_index(b.argmin(), b.shape)
            w = sc.layout.sizes_bytes / sc.layout.total_bytes
            out.append({
                "env": env, "model": prof["model"], "precision": prof["precision"],
                "batch": prof["batch_size"],
                "fwd share": prof["forward_ms"] / (prof["forward_ms"] + prof["backward_ms"]),
                "ready d": float(np.sum(w * np.abs(ready_measured - sc.layout.ready_fraction))),
                "defaults FLOP ms": a[DEFAULT], "defaults measured ms": b[DEFAULT],
                "defaults change %": 100 * (b[DEFAULT] / a[DEFAULT] - 1),
                "pick FLOP": f"{FUSION_MIB[ia[0]]} MiB / {CYCLE_MS[ia[1]]:g} ms",
                "pick measured": f"{FUSION_MIB[ib[0]]} MiB / {CYCLE_MS[ib[1]]:g} ms",
                "pick regret %": 100 * (b[ia] / b[ib] - 1),
                "max |d| %": 100 * float(np.abs(b / a - 1).max()),
            })
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profiles", type=Path, default=ROOT / "runs/gpu-profiles/h100-torch2.11/profiles.json")
    ap.add_argument("--model-dir", type=Path, default=ROOT / "autotuner" / "models")
    ap.add_argument("--batch-sizes", default="32,64,128")
    a = ap.parse_args(argv)
    try:
        profiles = json.loads(a.profiles.read_text())["profiles"]
        batches = {int(b) for b in a.batch_sizes.split(",")}
    except (OSError, ValueError, KeyError) as e:
        print(f"error: cannot read {a.profiles}: {e}", file=sys.stderr)
        return 2
    df = rows(profiles, a.model_dir, batches)
    with pd.option_context("display.width", 250, "display.max_columns", None, "display.float_format", "{:.2f}".format):
        print(df.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
