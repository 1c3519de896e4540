#!/usr/bin/env python3
"""Where a replay step's time goes: runs the replay workload (real horovodrun, 2 ranks, Gloo) on a
shaped loopback at each given configuration and prints its ``phases_ms`` (autotuner.frameworks.horovod.replay
PHASES) beside the simulator's forward, backward and step for the same env and configuration.

    python research/scripts/replay_phases.py --env fresh-poll-1.25gbit --model mobilenet_v2 --compute-ms 150 \\
        --bandwidth-gbit 1.25 --wait sleep --configs 128:1,0:1 --rounds 2 --out runs/fresh-poll-1.25gbit/experiments/replay-phases.jsonl

Root is needed for the shaped link. One JSON line per run is appended to ``--out``.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> int:
    from autotuner.frameworks.horovod.fit.store import load_env
    from autotuner.frameworks.horovod.fit.fitters import workload_for
    from autotuner.frameworks.horovod.knobs import DEFAULTS_0_28, MIB, Config
    from autotuner.frameworks.horovod.simulator import simulate_step
    from autotuner.readers.layouts import load_layout
    from autotuner.realrun.launcher import testbed_for
    from autotuner.frameworks.horovod.launch import Job, replay_command, run_job

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--env", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--compute-ms", type=float, default=150.0)
    ap.add_argument("--bandwidth-gbit", type=float, required=True)
    ap.add_argument("--wait", choices=("spin", "sleep"), default="sleep")
    ap.add_argument("--configs", default="128:1", help="fusion MiB:cycle ms, comma separated")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--timeline", choices=("off", "on", "both"), default="both",
                    help="record Horovod's timeline (as validate --keep-timelines does): off, on, or both interleaved")
    ap.add_argument("--compressions", default="none", help="gradient compressions, comma separated (none, fp16)")
    ap.add_argument("--keep", type=Path, default=None, help="keep each run's timeline here (gzipped)")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    fenv = load_env([ROOT / "autotuner" / "models"], a.env)
    L = load_layout(a.model)
    wl = workload_for(a.compute_ms * 1e-3)
    cfgs = []
    for c in a.configs.split(","):
        f, cyc = (float(x) for x in c.split(":"))
        cfgs.append(Config(fusion_threshold_bytes=int(f * MIB), cycle_time_ms=cyc,
                           cache_capacity=DEFAULTS_0_28.cache_capacity))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    with testbed_for(None, a.bandwidth_gbit, None) as (tb, note):
        print(note, file=sys.stderr)
        tls = {"off": [False], "on": [True], "both": [False, True]}[a.timeline]
        for r in range(a.rounds):
            for cfg, with_tl, comp in ((c, t, k) for c in cfgs for t in tls for k in a.compressions.split(",")):
                cmd = replay_command(a.model, a.compute_ms, a.steps, 3, 0.0, a.wait, comp)
                tl = Path(tempfile.mkdtemp()) / "timeline.json" if with_tl else None
                res = run_job(Job(np=2, hosts="localhost:2", command=tuple(cmd), prefix=tb.prefix, config=cfg,
                                  timeline=tl), 600)
                if tl is not None:
                    if a.keep is not None and tl.exists():
                        import gzip
                        a.keep.mkdir(parents=True, exist_ok=True)
                        name = f"{a.model}-f{cfg.fusion_threshold_mb:g}-c{cfg.cycle_time_ms:g}-{comp}-r{r}.json.gz"
                        with open(tl, "rb") as src, gzip.open(a.keep / name, "wb") as dst:
                            shutil.copyfileobj(src, dst)
                    shutil.rmtree(tl.parent, ignore_errors=True)
                m = re.search(r"AUTOTUNER_RESULT (\{.*\})", res.stdout)
                if not m:
                    print(f"no result: {res.stderr[-300:]}", file=sys.stderr)
                    return 1
                d = json.loads(m.group(1))
                from autotuner.frameworks.horovod.scenario import COMPRESSION_RATIO
                cost = fenv.cost.for_fp16() if comp == "fp16" else fenv.cost
                w = wl
                if comp == "fp16" and fenv.cost.fp16 is not None:
                    from dataclasses import replace
                    w = replace(wl, update_s=wl.update_s + fenv.cost.fp16.update_s(float(sum(L.sizes_bytes))))
                sim = simulate_step(L.sizes_bytes, L.ready_fraction, w, cfg, cost, fenv.cluster,
                                    compression_ratio=COMPRESSION_RATIO[comp])
                row = {"env": a.env, "model": a.model, "compute_ms": a.compute_ms, "wait": a.wait, "round": r,
                       "timeline": with_tl, "compression": comp,
                       "fusion_mb": cfg.fusion_threshold_mb, "cycle_ms": cfg.cycle_time_ms,
                       "measured_ms": d["median_step_time_ms"], "predicted_ms": round(sim.step_time_ms, 3),
                       "phases_ms": d["phases_ms"], "simulated_forward_ms": wl.forward_s * 1e3,
                       "simulated_backward_ms": wl.backward_s * 1e3,
                       "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
                with a.out.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")
                print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
