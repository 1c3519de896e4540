"""Each response of a real fp16 training step against the cost model's price for it (issue 29: fp16 on CPU ranks
is predicted 6-21 % too slow while the fp16 phase it is fitted from is reproduced within 1-3 %).

    python research/scripts/fp16_response_spans.py --env fresh-poll-2gbit [--model resnet18] [--out DIR]

Runs the setup of the env's committed fp16 replays (``validation/fp16-*-gradients.jsonl``: compute, link or
loopback rate, wait mode, shape) with Horovod's timeline,
once with ``--compression none`` and once with ``fp16`` (128 MiB, 1 ms, the defaults of the committed fp16
replays), and prints, per response size class, the timeline's collective span (median, ms) against the env's
shipped model (``CostModel.allreduce_s`` for float32, ``CostModel.for_fp16().allreduce_s`` for the float16
payload; the same call the simulator makes). The timeline's writer costs the ranks CPU (docs/accuracy.md), so the
spans are an upper bound of the production job's; what this separates is the collective's own price from the
step's other terms. Writes the timelines to ``--out`` (default a temporary folder). As root, alone.
"""
from __future__ import annotations

import argparse
from dataclasses import replace
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", required=True)
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    from autotuner.frameworks.horovod.fit.store import load_env
    from autotuner.frameworks.horovod.knobs import DEFAULTS_0_28
    from autotuner.frameworks.horovod.launch import Job, replay_command, run_job
    from autotuner.model.costmodel import Cluster
    from autotuner.readers.timeline import read_timeline
    from autotuner.realrun.launcher import testbed_for

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fp16_handle_times import fp16_replay_setup

    setup = fp16_replay_setup(a.env)
    if setup is None:
        return 2
    compute, wait = float(setup["compute_ms"]), setup.get("replay_wait", "spin")
    hosts = int(setup.get("testbed_hosts") or 1)
    rph = int(setup.get("ranks_per_host") or setup["np"])
    topo = (hosts, rph) if setup.get("testbed_hosts") else None
    link, bw = setup.get("link_gbit"), setup.get("bandwidth_gbit")
    out = a.out or Path(tempfile.mkdtemp(prefix="fp16spans-"))
    out.mkdir(parents=True, exist_ok=True)
    fenv = load_env(ROOT / "autotuner" / "models", a.env)
    cl = Cluster(hosts, rph)
    cfg = replace(DEFAULTS_0_28, fusion_threshold_bytes=128 << 20, cycle_time_ms=1.0)
    print(f"{a.env}: {hosts}x{rph} ranks, compute {compute:g} ms, wait {wait}, link {link or bw} Gbit/s; "
          f"timelines in {out}")
    with testbed_for(topo, bw, link) as (tb, note):
        print(note)
        for comp in ("none", "fp16"):
            tl = out / f"{comp}.json"
            cmd = replay_command(a.model, compute, a.steps, 3, wait=wait, compression=comp)
            job = Job(np=hosts * rph, command=cmd, config=cfg, timeline=tl, hosts=tb.hosts_arg(rph) if topo else "",
                      prefix=tb.prefix, launcher=tb.launcher)
            r = run_job(job, 900)
            if r.returncode != 0:
                print(r.stderr[-1500:], file=sys.stderr)
                return 1
            t = read_timeline(tl)
            cost = fenv.cost.for_fp16() if comp == "fp16" else fenv.cost
            by: dict[str, list[tuple[float, float]]] = {}
            resps = [x for x in t.responses if x.op == "allreduce"]
            skip = len(resps) // (a.steps + 3) * 3  # the warm-up steps' responses
            for x in resps[skip:]:
                n = x.nbytes
                k = ("< 64 KiB" if n < 64 << 10 else "64 KiB-1 MiB" if n < 1 << 20 else "1-8 MiB" if n < 8 << 20
                     else ">= 8 MiB")
                pred = cost.allreduce_s(n, cl, False) * 1e3
                by.setdefault(k, []).append((x.duration_us / 1e3, pred))
            from autotuner.readers.replay_output import parse_output

            steps = parse_output(r.stdout).step_times_ms
            print(f"--compression {comp}: {len(resps) - skip} responses in {a.steps} steps; step (with the timeline) "
                  f"median {statistics.median(steps):.1f} ms")
            for k in ("< 64 KiB", "64 KiB-1 MiB", "1-8 MiB", ">= 8 MiB"):
                if k in by:
                    m = [v[0] for v in by[k]]
                    p = [v[1] for v in by[k]]
                    print(f"  {k:13s} n={len(m):4d}  span sum {sum(m) / a.steps:8.1f} ms/step  model {sum(p) / a.steps:8.1f}"
                          f"  median span {statistics.median(m):7.2f}  model {statistics.median(p):7.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
