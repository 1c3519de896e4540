"""What this machine's emulated cluster can carry (root, real Horovod): ring TCP flows, and small allreduces per shape.

    python research/scripts/testbed_capacity.py [--repeats 10] [--json]

1. Ring flows: on 2 and 4 emulated hosts with 1 Gbit/s links, every host sends to the next at once
   (:func:`autotuner.realrun.testbed.measure_ring_gbit`), as a ring allreduce does: on a real
   switch each flow would get its link's rate; here every packet also crosses one software bridge
   on this machine's 2 cores.
2. Small allreduces: Horovod's own allreduce (the sweep workload's ``unfused`` phase: 16 tensors of s bytes
enqueued together with fusion off, so 16 responses back to back in one cycle, the regime of a
training step with fusion off) on the shapes 2x1 (how ``measure`` fits the inter-node tier),
2x2, 4x1 and 1x4, printing the measured time per response next to what the fitted
local-gloo-2x2 model charges for one flat ring allreduce of s bytes on that shape
(``CostModel.allreduce_s``). The gap at 4 ranks is what a 2-rank sweep cannot see when 4 ranks
share this machine's 2 cores (docs/validation.md, "Two emulated hosts").
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import replace

from autotuner.frameworks.horovod.knobs import DEFAULTS_0_28
from autotuner.frameworks.horovod.fit.store import load_env
from autotuner.model.costmodel import Cluster
from autotuner.paths import model_search_path
from autotuner.frameworks.horovod.launch import Job, run_job
from autotuner.realrun.testbed import emulated_cluster, measure_ring_gbit

SIZES = (4096, 65536, 1048576)


def small_allreduces(bed, hosts: int, per_host: int, repeats: int, wait: str = "spin") -> dict[int, float]:
    """On the emulated cluster ``bed``, ``hosts`` x ``per_host`` ranks run the sweep workload's unfused
    phase (16 responses of s bytes back to back, fusion off; ``--wait``: ``wait``); returns bytes ->
    median ms per response. Exits with one line if horovodrun fails."""
    cmd = (sys.executable, "-m", "autotuner.frameworks.horovod.sweepprobe", "--unfused-sizes", ",".join(map(str, SIZES)),
           "--unfused-count", "16", "--repeats", str(repeats), "--warmup", "2", "--wait", wait)
    job = Job(np=hosts * per_host, hosts=bed.hosts_arg(per_host), command=cmd, prefix=bed.prefix,
              launcher=bed.launcher, config=replace(DEFAULTS_0_28, fusion_threshold_bytes=0))
    res = run_job(job, timeout_s=300)
    if res.returncode != 0:
        sys.exit(f"horovodrun failed: {res.stderr[-500:]}")
    out = {}
    for m in re.finditer(r"AUTOTUNER_SWEEP (\{.*\})", res.stdout):
        d = json.loads(m.group(1))
        t = sorted(d["times_ms"])
        out[int(d["bytes"])] = t[len(t) // 2] / d["tensors"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    cost = load_env(model_search_path(), "local-gloo-2x2").cost
    rows, flows = [], {}
    for hosts, per_host in ((2, 1), (2, 2), (4, 1), (1, 4)):
        with emulated_cluster(hosts, 1.0) as bed:
            if per_host == 1:
                flows[hosts] = [round(g, 3) for g in measure_ring_gbit(bed)]
            for nbytes, med in small_allreduces(bed, hosts, per_host, a.repeats).items():
                model = cost.allreduce_s(nbytes, Cluster(hosts, per_host), False) * 1e3
                rows.append({"shape": f"{hosts}x{per_host}", "ranks": hosts * per_host, "bytes": nbytes,
                             "measured_ms_per_response": round(med, 3), "model_ms_per_response": round(model, 3),
                             "ratio": round(med / model, 2)})
    if a.json:
        print(json.dumps({"ring_flows_gbit": flows, "small_allreduces": rows}, indent=1))
        return
    for h, g in flows.items():
        print(f"ring of {h} hosts, 1 Gbit/s links: per-flow TCP Gbit/s {g}, sum {sum(g):.2f}")
    print("shape  ranks  bytes     measured ms/response  model ms/response  ratio")
    for r in rows:
        print(f"{r['shape']:>5}  {r['ranks']:>5}  {r['bytes']:>8}  {r['measured_ms_per_response']:>20.3f}"
              f"  {r['model_ms_per_response']:>17.3f}  {r['ratio']:>5.2f}")


if __name__ == "__main__":
    main()
