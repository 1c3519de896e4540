"""The figures of docs/how-to/validate.md's "Two emulated hosts" section, from an env's committed records
(one definition, shared by the tests and the script).

:class:`Figures` reads the real trials under ``runs/<env>/validation/`` (written by
research/scripts/validate_2x2.sh; read with :func:`autotuner.readers.runs.read_validation_files`) and predicts
each with a fitted model for the trial's own shape (testbed hosts x ranks per host):

1. :meth:`Figures.knob_table`: the knob sweep on 2x2, per configuration measured (median over
   repeats of each trial's median step time, and the min-max over repeats), predicted, error;
2. :meth:`Figures.suggest_table`: suggest's pick vs Horovod's defaults vs autotune's best, throughput
   ratios with the range over repeats;
3. :meth:`Figures.topo_table`: the topology what-if, the 2x2 fit predicting 2x1, 4x1, 1x4;
4. beside each prediction, one alternative reading of the fit the sweep cannot rule out (the
   large-message line's intercept per allreduce instead of per ring step: identical at the
   sweep's 2 ranks), so the reader sees the range the data leave (:func:`predict`, ``per_message``).

Nothing is typed in: every number comes from the records, the model and the simulator.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..fit.fitters import workload_for
from ..knobs import Config
from ....model.costmodel import Cluster
from ..simulator import simulate_step
from ....readers.layouts import load_layout
from ..readers.runs import read_validation_files

#: the two environments of the 2x2 emulated cluster: ranks waiting as Horovod does (spinning) and
#: measured + trained with polling waits (measure --wait sleep, validate --wait sleep)
ENVS = ("local-gloo-2x2", "local-gloo-2x2-poll")


def predict(fenv, model: str, cfg: Config, shape: tuple[int, int], compute_ms: float, per_message: bool = False) -> float:
    """Predicted step time (ms) of one replay trial: ``model``'s shipped layout, the replay's
    emulated compute (``compute_ms``, forward 1/3 and backward 2/3), the shape ``(hosts, ranks per
    host)`` and its cost model (:meth:`autotuner.frameworks.horovod.fit.store.FittedEnv.cost_for`); ``per_message``:
    the alternative reading of the large-message intercept (module docstring, item 4)."""
    L = load_layout(model)
    cost = fenv.cost_for(Cluster(*shape))  # more ranks on a host than cores: its share
    if per_message and cost.inter.large_from_bytes is not None:
        p = shape[0] * shape[1]
        if p > 2:  # 2(p-1) alpha' = 2 alpha  =>  alpha' = alpha / (p-1)
            cost = replace(cost, inter=replace(cost.inter, large_alpha_s=cost.inter.large_alpha_s / (p - 1)))
    backend = str((fenv.raw.get("cluster") or {}).get("backend") or "").lower() or None
    return simulate_step(L.sizes_bytes, L.ready_fraction, workload_for(compute_ms * 1e-3), cfg, cost,
                         Cluster(*shape), backend=backend).step_time_ms



def groups(recs: list[dict]) -> dict[tuple, list[dict]]:
    """Records by (label, configuration JSON, shape)."""
    out: dict[tuple, list[dict]] = {}
    for r in recs:
        if r.get("config"):
            shape = (r["setup"]["testbed_hosts"], r["setup"]["ranks_per_host"])
            out.setdefault((r["label"], json.dumps(r["config"], sort_keys=True), shape), []).append(r)
    return out



def throughput_range(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """Throughput of a vs b (step times, ms): median ratio (b/a of step times) and the min-max over repeat pairs."""
    ratios = [y / x for x in a for y in b]
    return float(np.median(b) / np.median(a)), min(ratios), max(ratios)



@dataclass
class Figures:
    """The figures of one environment's validation folder ``vdir`` (read once, when built)."""

    vdir: Path
    files: dict[str, list[dict]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.files = {p.stem: recs for p, recs in read_validation_files(Path(self.vdir).parent)}

    def records(self, name: str) -> list[dict]:
        """The ok records of ``<vdir>/<name>.jsonl`` ([] without that file)."""
        return [r for r in self.files.get(name, []) if r.get("status") == "ok"]

    def knob_table(self, fenv) -> dict:
        """The knob sweep (``knobs-resnet50``): rows, MAPE, the worst row, rows within 5 %."""
        rows = []
        for (label, cj, shape), rs in groups(self.records("knobs-resnet50")).items():
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

    def suggest_table(self, fenv, model: str) -> dict | None:
        """suggest's pick vs the defaults vs autotune's best (``suggest-<model>``), or None without records."""
        recs = self.records(f"suggest-{model}")
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
                med, lo, hi = throughput_range(p, q)
                out[f"proposal_vs_{ref}"] = {"throughput_ratio": round(med, 3), "min": round(lo, 3), "max": round(hi, 3)}
        at = [r for r in recs if r["kind"] == "autotune"]
        if at:
            out["autotune_run_step_ms"] = round(at[0]["measured_step_time_ms"], 1)
        return out

    def topo_table(self, fenv) -> dict:
        """The topology what-if (``topo-*``): rows, MAPE, rows within 10 %."""
        rows = []
        for stem in sorted(s for s in self.files if s.startswith("topo-")):
            model = stem.split("-", 2)[2]
            for (label, cj, shape), rs in groups(self.records(stem)).items():
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


__all__ = ["ENVS", "Figures", "predict", "groups", "throughput_range"]
