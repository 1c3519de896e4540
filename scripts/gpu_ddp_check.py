"""DDP on one GPU, predicted then measured: what DDP adds to a model's training step (its step under a DDP setting
less the same module's step without DDP), from an env measured by ``autotuner ddp measure --device cuda --np 1``,
against real ``DistributedDataParallel`` steps (``research/scripts/gpu_ddp_probe.py``). Run by
``scripts/gpu_ddp_session.sh`` on a lent GPU; its parts run anywhere (a CPU env predicts as well, meaning little).

``predict`` (before anything of the models is measured): per model (a shipped layout) and DDP setting, the
device's passes over the gradients (:func:`autotuner.frameworks.ddp.host_priors.device_ms`, at the rates the env's
own sweep measured: its ``copy`` and ``casts`` rows, the 16-bit divide at 4/6 of the cast down) plus the Reducer's
host work ``per_tensor x T + per_bucket x B`` (``B``: the Reducer simulator's rebuilt buckets,
:func:`autotuner.frameworks.ddp.reducer.assign_buckets`), each host cost at its central figure and the ends of its
range, from: the env's host phase (:func:`autotuner.frameworks.ddp.fit.host_cost`, ``ddp-host.jsonl``) where it
has one, and the shipped GPU prior (:func:`autotuner.frameworks.ddp.host_priors.gpu_host_prior`; it was fitted on
the H100/H200 records of some of these models, so for them it is not held out).

``compare`` (after the measurement): each prediction against the measured DDP-minus-plain (medians of the rounds),
DDP's own rebuilt bucket counts against the simulator's, and one more prediction per model held out: the host terms
fitted (:func:`autotuner.frameworks.ddp.host_priors.fit_terms`) on the other models' measured steps of this run.

    python scripts/gpu_ddp_check.py predict --env-dir runs/gpu1 --models resnet50,vgg16 --out check.json
    python scripts/gpu_ddp_check.py compare --check check.json --measured ddp-gpu.json

Writes ``--out`` / updates ``--check`` atomically (schema ``autotuner.gpu-ddp-check/1``) and prints a table. Exit 2
with one line for bad input (a missing env file, an unknown model, a measurement of other models).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autotuner.frameworks.ddp.host_priors import device_ms, fit_terms, gpu_host_prior  # noqa: E402
from autotuner.frameworks.ddp.knobs import DdpConfig  # noqa: E402
from autotuner.writers.atomic import atomic_write_text  # noqa: E402

SCHEMA = "autotuner.gpu-ddp-check/1"
#: the probe's settings (research/scripts/gpu_ddp_probe.py SETTINGS) this check predicts, as DDP configurations
CONFIGS = {"default": DdpConfig(), "cap1": DdpConfig(bucket_cap_mb=1), "cap25": DdpConfig(bucket_cap_mb=25),
           "cap100": DdpConfig(bucket_cap_mb=100), "view": DdpConfig(gradient_as_bucket_view=True),
           "fp16_hook": DdpConfig(comm_hook="fp16_compress"), "bf16_hook": DdpConfig(comm_hook="bf16_compress")}


class Refused(Exception):
    """Bad input: one line."""


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def sweep_rates(sweep: dict) -> dict[str, float]:
    """ns per gradient element of each pass (the keys of host_priors.device_ns_per_elem) from one sweep record's
    largest ``copy`` and ``casts`` rows (``casts_bf16`` where the record has it, else the float16 ones)."""
    if not sweep.get("copy") or not sweep.get("casts"):
        raise Refused("the env's sweep has no copy or casts rows")
    size, ms = max(sweep["copy"], key=lambda r: r[0])
    out = {"copy": ms * 1e6 / (size / 4)}
    for dt, key in (("fp16", "casts"), ("bf16", "casts_bf16")):
        rows = sweep.get(key) or sweep["casts"]
        _, n, down, up = max(rows, key=lambda r: r[1])
        out[f"{dt}_down"], out[f"{dt}_up"] = down * 1e6 / n, up * 1e6 / n
        out[f"{dt}_div"] = out[f"{dt}_down"] * 4 / 6  # 4 of the cast down's 6 B per element
    return out


def host_costs(env_dir: Path, gpu: str | None) -> dict:
    """name -> ReducerHostCost: ``host phase`` (the env's own, where it has ddp-host.jsonl) and ``prior``."""
    from autotuner.frameworks.ddp.fit import host_cost, host_cost_term

    out = {}
    host = env_dir / "ddp-host.jsonl"
    if host.exists():
        sweep = _jsonl(env_dir / "ddp-sweep.jsonl")[-1]
        size, ms = max(sweep["copy"], key=lambda r: r[0])
        term = host_cost_term(host_cost(_jsonl(host), size / (ms * 1e-3)))
        if term is not None:
            out["host phase"] = term
    out["prior"] = gpu_host_prior(gpu)
    return out


def layout_of(model: str):
    """(T, elements, layout) of a shipped layout."""
    from autotuner.readers.layouts import load_layout

    try:
        L = load_layout(model)
    except ValueError as e:
        raise Refused(str(e).splitlines()[0]) from None
    return L.n_tensors, int(sum(L.numels)), L


def buckets(L, cfg: DdpConfig) -> int:
    """DDP's rebuilt buckets of layout ``L`` under ``cfg`` (the Reducer simulator's)."""
    import numpy as np

    from autotuner.frameworks.ddp.reducer import assign_buckets

    order = np.argsort(L.ready_fraction, kind="stable")
    b, _ = assign_buckets(L.sizes_bytes, L.dtypes, cfg.rebuild_limits(), order)
    return len(b)


def predict(env_dir: Path, models: list[str], settings: list[str], gpu: str | None) -> dict:
    sweep_path = env_dir / "ddp-sweep.jsonl"
    if not sweep_path.exists():
        raise Refused(f"{sweep_path}: no sweep (run autotuner ddp measure first)")
    sweep = _jsonl(sweep_path)[-1]
    if gpu is None and sweep.get("gpu"):
        from autotuner.specs import find_gpu

        g = find_gpu(sweep["gpu"].replace("NVIDIA ", "").split(" ")[0])
        gpu = g.name if g else None
    ns = sweep_rates(sweep)
    costs = host_costs(env_dir, gpu)
    out = {}
    for model in models:
        T, E, L = layout_of(model)
        rows = {}
        for s in settings:
            B = buckets(L, CONFIGS[s])
            dev = device_ms(s, E, ns)
            rows[s] = {"buckets": B, "device_ms": round(dev, 4), "predicted_ms": {
                name: [round(dev + (c.per_tensor_s * T + c.per_bucket_s * B) * 1e3, 4)
                       for c in (hc, hc.at("low"), hc.at("high"))] for name, hc in costs.items()}}
        out[model] = {"tensors": T, "elements": E, "settings": rows}
    return {"schema": SCHEMA, "predicted_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "env": str(env_dir), "gpu": gpu, "sweep_gpu": sweep.get("gpu"), "device": sweep.get("device", "cpu"),
            "rates_ns_per_elem": {k: round(v, 7) for k, v in ns.items()},
            "host_costs": {k: v.to_dict() for k, v in costs.items()}, "models": out,
            "what": "predicted_ms: DDP's step less the plain step, ms, [central, low, high] per host cost"}


def compare(check: dict, measured: dict) -> dict:
    ns = check["rates_ns_per_elem"]
    got = {m["model"]: m for m in measured["ddp"]}
    missing = sorted(set(check["models"]) - set(got))
    if missing:
        raise Refused(f"the measurement has no {', '.join(missing)}")
    meas = {}
    for model, pred in check["models"].items():
        m = got[model]
        plain = statistics.median(r["step_ms"] for r in m["settings"]["plain"])
        meas[model] = {"plain_ms": plain, "tensors": m["tensors"], "settings": {}}
        for s in pred["settings"]:
            if s not in m["settings"]:
                continue
            rounds = m["settings"][s]
            ddp_b = {len(r["ddp_logging"]["rebuilt_bucket_sizes"].split(",")) for r in rounds}
            step = statistics.median(r["step_ms"] for r in rounds)
            meas[model]["settings"][s] = {"step_ms": step, "overhead_ms": step - plain, "ddp_buckets": sorted(ddp_b),
                                          "device_ms": device_ms(s, m["elements"], ns)}
    # the held-out fit: each model predicted from the others' measured steps of this run
    for model in meas:
        rows = [(meas[o]["tensors"], check["models"][o]["settings"][s]["buckets"], v["overhead_ms"] - v["device_ms"])
                for o in meas if o != model for s, v in meas[o]["settings"].items()]
        pt, pb = fit_terms(rows) if rows else (None, None)
        for s, v in meas[model]["settings"].items():
            p = check["models"][model]["settings"][s]
            if pt is not None:
                p["predicted_ms"]["held out"] = [round(v["device_ms"] + pt * meas[model]["tensors"] + pb * p["buckets"],
                                                       4)] * 3
            p["measured_ms"] = round(v["overhead_ms"], 4)
            p["measured_step_ms"] = round(v["step_ms"], 4)
            p["plain_ms"] = round(meas[model]["plain_ms"], 4)
            p["ddp_buckets"] = v["ddp_buckets"]
        if pt is not None:
            check["models"][model]["held_out_terms_us"] = [round(pt * 1e3, 3), round(pb * 1e3, 3)]
    summary = {}
    for model, p in check["models"].items():
        for s, r in p["settings"].items():
            if "measured_ms" not in r:
                continue
            for name, (c, lo, hi) in r["predicted_ms"].items():
                e = summary.setdefault(name, {"abs_ms": [], "of_step": [], "inside": 0, "n": 0})
                e["abs_ms"].append(abs(c - r["measured_ms"]))
                e["of_step"].append(abs(c - r["measured_ms"]) / r["measured_step_ms"])
                e["inside"] += int(min(lo, hi) <= r["measured_ms"] <= max(lo, hi))
                e["n"] += 1
    check["summary"] = {k: {"mean_abs_ms": round(statistics.mean(v["abs_ms"]), 4),
                            "mean_abs_of_step": round(statistics.mean(v["of_step"]), 4),
                            "worst_abs_ms": round(max(v["abs_ms"]), 4), "measured_inside_range": v["inside"],
                            "n": v["n"]} for k, v in summary.items()}
    check["measured"] = {"record": measured.get("command"), "device": measured.get("device"),
                         "torch": measured.get("torch"), "recorded": measured.get("recorded")}
    check["bucket_counts_match"] = all(r["ddp_buckets"] == [r["buckets"]] for p in check["models"].values()
                                       for r in p["settings"].values() if "ddp_buckets" in r)
    return check


def _table(check: dict) -> None:
    for model, p in check["models"].items():
        for s, r in p["settings"].items():
            preds = ", ".join(f"{k} {v[0]:.2f}" for k, v in r["predicted_ms"].items())
            m = f"measured {r['measured_ms']:+.2f} ms of {r['measured_step_ms']:.2f}" if "measured_ms" in r else ""
            print(f"{model:>14} {s:>10} B={r['buckets']:<3} device {r['device_ms']:.3f} ms; predicted {preds}; {m}")
    for k, v in check.get("summary", {}).items():
        print(f"{k}: mean |error| {v['mean_abs_ms']:.2f} ms ({100 * v['mean_abs_of_step']:.1f} % of the step), worst "
              f"{v['worst_abs_ms']:.2f} ms; measured inside the range {v['measured_inside_range']} of {v['n']}")
    if "bucket_counts_match" in check:
        print(f"DDP's rebuilt bucket counts equal the simulator's: {check['bucket_counts_match']}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("predict")
    p.add_argument("--env-dir", type=Path, required=True, help="the env measured by autotuner ddp measure")
    p.add_argument("--models", default="resnet50,resnet101,vgg16,mobilenet_v2", help="shipped layouts")
    p.add_argument("--settings", default="default,cap1,cap100,view,fp16_hook",
                   help=f"comma list of {', '.join(CONFIGS)}")
    p.add_argument("--gpu", default=None, help="the GPU prior's GPU (default: the sweep's GPU, else every GPU's)")
    p.add_argument("--out", type=Path, required=True)
    c = sub.add_parser("compare")
    c.add_argument("--check", type=Path, required=True, help="predict's file, updated in place")
    c.add_argument("--measured", type=Path, required=True, help="research/scripts/gpu_ddp_probe.py's record")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "predict":
            settings = [s for s in a.settings.split(",") if s]
            bad = [s for s in settings if s not in CONFIGS]
            if bad:
                raise Refused(f"--settings {bad[0]}: one of {', '.join(CONFIGS)}")
            d = predict(a.env_dir, [m for m in a.models.split(",") if m], settings, a.gpu)
            out = a.out
        else:
            d = compare(json.loads(a.check.read_text()), json.loads(a.measured.read_text()))
            out = a.check
    except (Refused, OSError, KeyError, ValueError) as e:
        print(f"error: {type(e).__name__ + ': ' if isinstance(e, KeyError) else ''}{str(e).splitlines()[0]}",
              file=sys.stderr)
        return 2
    atomic_write_text(out, json.dumps(d, indent=1) + "\n")
    _table(d)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
