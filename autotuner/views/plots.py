"""Plots (matplotlib, Agg backend; files only)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ..model.costmodel import CostModel  # noqa: E402
from ..model.units import MIB  # noqa: E402
from ..writers.atomic import save_figure  # noqa: E402


def _curve_label(model: dict[str, Any], cost: CostModel, p: int) -> str:
    """The fitted curve's legend: where its small-message latency (``2(p-1)·alpha``, ms) comes from
    (``fit.small_responses``: the step phase, the timelines' back-to-back spans, the burst phase, or the sweep's
    pooled line), the shift of the line above the knee and the bandwidth below it where the mid-size burst phase
    moved them."""
    small = (model.get("fit") or {}).get("small_responses") or {}
    a_ms = 2 * (p - 1) * cost.inter.alpha_s * 1e3
    if (small.get("step") or {}).get("charged"):
        src = "a step's, from the step phase"
    elif (small.get("burst") or {}).get("charged"):
        src = "from the burst phase"
    elif small.get("fixed_ms") is not None and small.get("charged", True):
        src = "back to back, from the timelines"
    else:
        return "fitted alpha-beta (pooled)"
    mid = small.get("mid") or {}
    knee = cost.inter.large_from_bytes
    moved = (f";\nfrom {knee / MIB:g} MiB moved {mid['shift_ms']:+.2f} ms (queued responses, mid-size burst phase)"
             if mid.get("charged") and knee else "")
    low = mid.get("below") or {}
    if low.get("charged") and knee:
        b0, b1 = low["bandwidth_gbps"]
        moved += (f";\nbelow {knee / MIB:g} MiB {b0:.2f} -> {b1:.2f} Gbit/s (queued responses, mid-size burst "
                  "phase)")
    return f"fitted alpha-beta; small responses {a_ms:.2f} ms ({src}){moved}"


def bandwidth_plot(model: dict[str, Any], path: Path) -> Path | None:
    """Measured (size, time) samples vs the fitted allreduce curve, log-log. None if no samples."""
    samples = model["fit"].get("samples")
    if not samples:
        return None
    cost = CostModel.from_dict(model["cost_model"])
    p = int(model["fit"]["p"])
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for m in sorted({s.get("model", "") for s in samples}):  # sources without a model: one series
        pts = [s for s in samples if s.get("model", "") == m]
        ax.scatter([max(s["bytes"], 1) / MIB for s in pts], [s["time_ms"] for s in pts], label=f"measured ({m})" if m else "measured", s=18)
    n = np.logspace(np.log10(256), np.log10(1024 * MIB), 200)
    ax.plot(n / MIB, [cost.inter.allreduce_s(x, p) * 1e3 for x in n], "k-", label=_curve_label(model, cost, p))
    for m, w in model["workloads"].items():
        if w.get("comm_scale", 1.0) != 1.0:
            ax.plot(n / MIB, [cost.inter.allreduce_s(x, p) * 1e3 * w["comm_scale"] for x in n], "--",
                    label=f"x comm_scale {w['comm_scale']:.2f} ({m})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("response size (MiB)")
    ax.set_ylabel("allreduce time (ms)")
    ax.set_title(f"{model['env']}: allreduce time vs size, p={p}")
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, path, dpi=110)
