#!/usr/bin/env python3
"""Every figure of docs/validation.md's "Two emulated hosts" section, from the committed runs/local-gloo-2x2.

    python scripts/local_gloo_2x2_figures.py [--env local-gloo-2x2|local-gloo-2x2-poll] [--json]

Reads the real trials under runs/<env>/validation/ (written by scripts/validate_2x2.sh) and
predicts each with the shipped model autotuner/models/<env>.json, fitted only from the env's own
``measure`` sweep, for the trial's own shape (its testbed hosts x ranks per host):

1. the knob sweep on 2x2: per configuration measured (median over repeats of each trial's median
   step time, and the min-max over repeats), predicted, error; MAPE and worst case;
2. suggest's pick vs Horovod's defaults vs autotune's best on 2x2 (ResNet50, BERT-Medium):
   throughput ratios with the range over repeats (min/max pairs);
3. the topology what-if: the 2x2 fit predicting 2x1, 4x1, 1x4 for the defaults and the pick;
4. one alternative reading of the fit the sweep cannot rule out (the large-message line's
   intercept per allreduce instead of per ring step: identical at the sweep's 2 ranks), as a
   second prediction beside each row, so the reader sees the range the data leave.

Nothing is typed in: every number comes from the records, the model file and the simulator.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from autotuner.fit.fitters import workload_for
from autotuner.fit.store import load_env
from autotuner.knobs import Config
from autotuner.model.costmodel import Cluster
from autotuner.model.simulator import simulate_step
from autotuner.readers.layouts import load_layout
from autotuner.readers.runs import parse_records

ROOT = Path(__file__).resolve().parents[1]
#: the two environments of the 2x2 emulated cluster: ranks waiting as Horovod does (spinning) and
#: measured + trained with polling waits (measure --wait sleep, validate --replay-wait sleep)
ENVS = ("local-gloo-2x2", "local-gloo-2x2-poll")
VDIR = ROOT / "runs" / ENVS[0] / "validation"


def use_env(env: str) -> None:
    """Read the records of ``env`` (one of :data:`ENVS`) from now on."""
    global VDIR
    VDIR = ROOT / "runs" / env / "validation"


def _records(name: str) -> list[dict]:
    f = VDIR / f"{name}.jsonl"
    if not f.exists():
        return []
    recs, _ = parse_records(f.read_text(), f.name)
    return [r for r in recs if r.get("status") == "ok"]


def predict(fenv, model: str, cfg: Config, shape: tuple[int, int], compute_ms: float, per_message: bool = False):
    L = load_layout(model)
    cost = fenv.cost_for(Cluster(*shape))  # more ranks on a host than cores: its share (issue 20)
    if per_message and cost.inter.large_from_bytes is not None:
        p = shape[0] * shape[1]
        if p > 2:  # 2(p-1) alpha' = 2 alpha  =>  alpha' = alpha / (p-1)
            cost = replace(cost, inter=replace(cost.inter, large_alpha_s=cost.inter.large_alpha_s / (p - 1)))
    backend = str((fenv.raw.get("cluster") or {}).get("backend") or "").lower() or None
    return simulate_step(L.sizes_bytes, L.ready_fraction, workload_for(compute_ms * 1e-3), cfg, cost,
                         Cluster(*shape), backend=backend).step_time_ms


def groups(recs: list[dict]) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = {}
    for r in recs:
        if r.get("config"):
            shape = (r["setup"]["testbed_hosts"], r["setup"]["ranks_per_host"])
            out.setdefault((r["label"], json.dumps(r["config"], sort_keys=True), shape), []).append(r)
    return out


def knob_table(fenv) -> dict:
    rows = []
    for (label, cj, shape), rs in groups(_records("knobs-resnet50")).items():
        cfg = Config.from_dict(json.loads(cj))
        ms = [r["measured_step_time_ms"] for r in rs]
        pred = predict(fenv, "resnet50", cfg, shape, rs[0]["setup"]["compute_ms"])
        alt = predict(fenv, "resnet50", cfg, shape, rs[0]["setup"]["compute_ms"], per_message=True)
        med = float(np.median(ms))
        rows.append({"label": label, "fusion_mib": cfg.fusion_threshold_mb, "cycle_ms": cfg.cycle_time_ms,
                     "cache": cfg.cache_capacity > 0, "hierarchical": cfg.hierarchical_allreduce,
                     "measured_ms": round(med, 1), "min_ms": round(min(ms), 1), "max_ms": round(max(ms), 1),
                     "repeats": len(ms), "predicted_ms": round(pred, 1), "error_pct": round((pred - med) / med * 100, 1),
                     "predicted_per_message_ms": round(alt, 1),
                     "error_per_message_pct": round((alt - med) / med * 100, 1)})
    errs = [abs(r["error_pct"]) for r in rows]
    return {"rows": rows, "mape_pct": round(float(np.mean(errs)), 1) if errs else None,
            "worst": max(rows, key=lambda r: abs(r["error_pct"]))["label"] if rows else None,
            "within_5pct": sum(e <= 5 for e in errs)}


def _throughput_range(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """Throughput of a vs b: median ratio (b/a of step times) and the min-max over repeat pairs."""
    ratios = [y / x for x in a for y in b]
    return float(np.median(b) / np.median(a)), min(ratios), max(ratios)


def suggest_table(fenv, model: str) -> dict | None:
    recs = _records(f"suggest-{model}")
    if not recs:
        return None
    by = {}
    for r in recs:
        if r["kind"] != "autotune":
            by.setdefault(r["label"], []).append(r)
    out = {"model": model}
    for label, rs in by.items():
        ms = [r["measured_step_time_ms"] for r in rs]
        cfg = Config.from_dict(rs[0]["config"])
        out[label] = {"config": f"{cfg.fusion_threshold_mb:g} MiB, {cfg.cycle_time_ms:g} ms, cache "
                                f"{'on' if cfg.cache_capacity else 'off'}",
                      "measured_ms": round(float(np.median(ms)), 1), "min_ms": round(min(ms), 1),
                      "max_ms": round(max(ms), 1), "predicted_ms": round(rs[0]["predicted_step_time_ms"], 1)}
    p = [r["measured_step_time_ms"] for r in by.get("proposal-1", [])]
    for ref in ("default", "autotune_best"):
        q = [r["measured_step_time_ms"] for r in by.get(ref, [])]
        if p and q:
            med, lo, hi = _throughput_range(p, q)
            out[f"proposal_vs_{ref}"] = {"throughput_ratio": round(med, 3), "min": round(lo, 3), "max": round(hi, 3)}
    at = [r for r in recs if r["kind"] == "autotune"]
    if at:
        out["autotune_run_step_ms"] = round(at[0]["measured_step_time_ms"], 1)
    return out


def topo_table(fenv) -> dict:
    rows = []
    for f in sorted(VDIR.glob("topo-*.jsonl")):
        model = f.stem.split("-", 2)[2]
        for (label, cj, shape), rs in groups(_records(f.stem)).items():
            cfg = Config.from_dict(json.loads(cj))
            ms = [r["measured_step_time_ms"] for r in rs]
            med = float(np.median(ms))
            pred = predict(fenv, model, cfg, shape, rs[0]["setup"]["compute_ms"])
            alt = predict(fenv, model, cfg, shape, rs[0]["setup"]["compute_ms"], per_message=True)
            rows.append({"model": model, "shape": f"{shape[0]}x{shape[1]}", "label": label,
                         "config": f"{cfg.fusion_threshold_mb:g} MiB, {cfg.cycle_time_ms:g} ms",
                         "measured_ms": round(med, 1), "min_ms": round(min(ms), 1), "max_ms": round(max(ms), 1),
                         "predicted_ms": round(pred, 1), "error_pct": round((pred - med) / med * 100, 1),
                         "predicted_per_message_ms": round(alt, 1)})
    errs = [abs(r["error_pct"]) for r in rows]
    return {"rows": rows, "mape_pct": round(float(np.mean(errs)), 1) if errs else None,
            "within_10pct": sum(e <= 10 for e in errs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--env", default=ENVS[0], choices=ENVS)
    a = ap.parse_args()
    use_env(a.env)
    fenv = load_env(ROOT / "autotuner" / "models", a.env)
    out = {"knobs": knob_table(fenv), "suggest": [s for m in ("resnet50", "bert_medium") if (s := suggest_table(fenv, m))],
           "topology": topo_table(fenv)}
    times = VDIR / "batch-times.txt"
    out["batch_times"] = times.read_text().splitlines() if times.exists() else []
    if a.json:
        print(json.dumps(out, indent=1))
        return
    k = out["knobs"]
    print("1. knob sweep on 2x2 (ResNet50 replay, 300 ms compute)")
    print("fusion MiB | cycle ms | cache | measured ms (min-max, n) | predicted | error | per-message reading")
    for r in k["rows"]:
        print(f"{r['fusion_mib']:>9g} | {r['cycle_ms']:>8g} | {'on' if r['cache'] else 'off':>5}"
              f"{' hier' if r['hierarchical'] else ''} | {r['measured_ms']:.1f} ({r['min_ms']:.1f}-{r['max_ms']:.1f}, "
              f"{r['repeats']}) | {r['predicted_ms']:.1f} | {r['error_pct']:+.1f}% | {r['predicted_per_message_ms']:.1f} "
              f"({r['error_per_message_pct']:+.1f}%)")
    print(f"MAPE {k['mape_pct']}%, worst {k['worst']}, {k['within_5pct']} of {len(k['rows'])} within 5%")
    print("\n2. suggest's pick vs defaults vs autotune's best (2x2)")
    for s in out["suggest"]:
        print(json.dumps(s))
    print("\n3. topology what-if from the 2x2 fit")
    for r in out["topology"]["rows"]:
        print(f"{r['model']:>11} {r['shape']} {r['label']:>10} ({r['config']}): measured {r['measured_ms']:.1f} "
              f"({r['min_ms']:.1f}-{r['max_ms']:.1f}), predicted {r['predicted_ms']:.1f} ({r['error_pct']:+.1f}%), "
              f"per-message reading {r['predicted_per_message_ms']:.1f}")
    t = out["topology"]
    print(f"MAPE {t['mape_pct']}%, {t['within_10pct']} of {len(t['rows'])} within 10%")
    print("\nbatch wall times:", "; ".join(out["batch_times"]))


if __name__ == "__main__":
    main()
