"""The measure -> fit -> predict loop, checked in one sitting: a short sweep of this machine, then real replays of a
small shipped layout, each setting's prediction (from that sweep alone) against the replays' own range.

The band is the replays' range widened by 10 % on either side: wide enough for this machine's noise, narrow enough
that a broken reader, fit or simulator (a unit slip, a phase charged twice, a rate read as its inverse) lands
outside it. Accuracy itself is judged on held-out environments (docs/accuracy.md), not here.

Both jobs run on one loopback shaped to :data:`LINK_GBIT` (HTB, root), as the committed environments were measured:
unshaped, two CPU ranks on two shared cores are bound by the cores, which no sweep of the link describes.
"""
from __future__ import annotations

import json
import time

import pytest
from cli_helpers import need

import autotuner

pytestmark = pytest.mark.real

#: the shaped loopback (Gbit/s) both the sweep and the replays run on
LINK_GBIT = 2.0
#: the layout replayed: 62 tensors, 44.6 MiB of float32 gradients (torchvision's ResNet-18)
MODEL = "resnet18"
#: forward + backward per step (ms)
COMPUTE_MS = 100.0
#: the band around the replays' range a prediction must fall in (fraction)
WIDEN = 0.10


def _within(predicted: float, low: float, high: float) -> bool:
    return (1 - WIDEN) * low <= predicted <= (1 + WIDEN) * high


def _report(framework: str, rows: list[tuple[str, float, float, float]], wall_s: float) -> str:
    lines = [f"{framework} in one sitting ({wall_s:.0f} s): setting, predicted ms, measured range ms"]
    lines += [f"  {label}: {p:.1f} in [{lo:.1f}, {hi:.1f}]" for label, p, lo, hi in rows]
    return "\n".join(lines)


def test_ddp_sweep_then_replays_in_the_same_sitting(tmp_path):
    """``ddp measure`` (one sweep round, no other phase), then DDP's defaults, a 1 MiB cap and the fp16 hook
    replayed three times each, interleaved: each prediction within the replays' range widened by 10 %."""
    need("torch", "root", "iproute2")
    t0 = time.perf_counter()
    autotuner.ddp_measure("sitting", np=2, link_gbit=LINK_GBIT, sweep_rounds=1, repeats=3, burst_rounds=0,
                          first_touch_rounds=0, cpu_rounds=0, runs_dir=tmp_path)
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps([{}, {"bucket_cap_mb": 1}, {"comm_hook": "fp16_compress"}]))
    r = autotuner.ddp_validate("sitting", MODEL, proposals=settings, compute_ms=COMPUTE_MS, repeats=3, steps=5,
                               warmup=3, np=2, link_gbit=LINK_GBIT, runs_dir=tmp_path)
    rows = [(row["label"], row["predicted_ms"], row["low_ms"], row["high_ms"]) for row in r.to_dict()["rows"]]
    report = _report("DDP", rows, time.perf_counter() - t0)
    print(report)
    assert len(rows) == 3 and all(lo > 0 for _, _, lo, _ in rows), report
    assert all(_within(p, lo, hi) for _, p, lo, hi in rows), report


def test_horovod_sweep_fit_then_trials_in_the_same_sitting(tmp_path):
    """``measure`` (the sweep and its fused phase, one round) and ``fit``, then Horovod's defaults and a 4 MiB fusion
    threshold run three times each, interleaved, without the timeline: each prediction within the trials' range
    widened by 10 %."""
    need("Horovod", "root", "iproute2")
    t0 = time.perf_counter()
    runs, models = tmp_path / "runs", tmp_path / "models"
    autotuner.measure(env="sitting", runs_dir=runs, np=2, link_gbit=LINK_GBIT, sizes="4K:64M", repeats=2, warmup=1,
                      cpu_rounds=0, trickle_rounds=0, idle_rounds=0, fp16_rounds=0, burst_rounds=0, step_rounds=0,
                      mid_rounds=0, fused_rounds=1)
    autotuner.fit_environments(runs / "sitting", out=models)
    proposals = tmp_path / "proposals.json"
    proposals.write_text(json.dumps([{"fusion_threshold_mb": 4}]))
    r = autotuner.validate("sitting", MODEL, np=2, link_gbit=LINK_GBIT, compute_ms=COMPUTE_MS, repeats=3,
                           proposals=proposals, autotune=False, runs_dir=runs, model_dir=models)
    by: dict[str, list[dict]] = {}
    for rec in r.records:
        assert rec["status"] == "ok", rec.get("error")
        by.setdefault(rec["label"], []).append(rec)
    rows = [(label, recs[0]["predicted_step_time_ms"], min(x["measured_step_time_ms"] for x in recs),
             max(x["measured_step_time_ms"] for x in recs)) for label, recs in by.items()]
    report = _report("Horovod", rows, time.perf_counter() - t0)
    print(report)
    assert sorted(by) == ["default", "proposal-1"] and all(len(v) == 3 for v in by.values()), report
    assert all(_within(p, lo, hi) for _, p, lo, hi in rows), report
