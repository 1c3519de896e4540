"""When does each gradient's allreduce finish in a real replay step, without Horovod's timeline? (issue 29: fp16
on CPU ranks is predicted too slow, and the timeline's writer costs a float16 step 58 %, so it cannot say which
response the model overcharges.)

    python research/scripts/fp16_handle_times.py --env fresh-poll-2gbit [--model resnet18]

Runs the replay workload's step (:mod:`autotuner.frameworks.horovod.replay`'s own graph, compute, optimizer and
``--wait sleep`` polling) with the setup of the env's committed fp16 replays, 128 MiB / 1 ms, once uncompressed
and once with fp16, and records on rank 0 the wall-clock time each gradient's handle first polls done (ms from the
step's start). Handles done within 0.3 ms of each other are one response. Prints per compression the median over
the measured steps of each response's end and bytes, beside the simulator's responses for the same trial (the
env's shipped model: :func:`autotuner.frameworks.horovod.views.accuracy.simulate_trial`). As root, alone on a quiet machine.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
TAG = "HANDLES"


def worker(model: str, compute_ms: float, compression: str, steps: int, warmup: int) -> None:
    import horovod.torch as hvd
    import torch

    from autotuner.frameworks.horovod import replay as R
    from autotuner.readers.layouts import load_layout

    hvd.init()
    torch.set_num_threads(1)
    layout = load_layout(model)
    fwd_s, bwd_s = compute_ms * R.FORWARD_SHARE / 1e3, compute_ms * (1 - R.FORWARD_SHARE) / 1e3
    params, forward, clock, values = R._build(layout, bwd_s, seed=hvd.rank())

    class Noop(torch.optim.Optimizer):
        def __init__(self, ps):
            super().__init__(ps, {})

        def step(self, closure=None):  # noqa: ARG002
            pass

    comp = {"none": hvd.Compression.none, "fp16": hvd.Compression.fp16}[compression]
    opt = hvd.DistributedOptimizer(Noop(params), named_parameters=list(zip(layout.names, params)), compression=comp)
    nbytes = {p: int(p.numel() * p.element_size()) for p in params}
    x = torch.ones(1, requires_grad=True)
    for step in range(warmup + steps):
        R.renew(params, values)  # each rank's own values, as the replay since issue 29's fourth pass
        t = time.perf_counter()
        loss = forward(x)
        R._sleep_to(t + fwd_s)
        clock["t0"] = t + fwd_s
        loss.backward()
        R._sleep_to(clock["t0"] + bwd_s)
        pending = {p: h for p, (h, _) in opt._handles.items() if h is not None}
        done: list[tuple[float, int]] = []
        while pending:
            now = time.perf_counter()
            for p in [p for p, h in pending.items() if hvd.poll(h)]:
                done.append(((now - t) * 1e3, nbytes[p]))
                del pending[p]
            time.sleep(R.WAIT_POLL_S)
        opt.step()
        end = (time.perf_counter() - t) * 1e3
        if hvd.rank() == 0 and step >= warmup:
            print(f"{TAG} " + json.dumps({"step_ms": end, "done": sorted(done)}), flush=True)
    hvd.shutdown()


def fp16_replay_setup(env: str) -> dict | None:
    """The setup (compute, link or loopback rate, shape, wait) of ``env``'s first committed fp16 replay with
    gradient-like values (``validation/fp16-*gradients*.jsonl``), or None with one line on stderr."""
    recs = sorted((ROOT / "runs" / env / "validation").glob("fp16-*gradients*.jsonl"))
    if not recs:
        print(f"error: {env} has no committed fp16 replay with gradient values", file=sys.stderr)
        return None
    return dict(json.loads(recs[0].read_text().splitlines()[0])["setup"])


def _responses(done: list[list[float]]) -> list[tuple[float, int]]:
    """Handles finishing within 0.3 ms of the previous one: one response; (end ms, fp32 bytes) each."""
    out: list[list[float]] = []
    for ms, b in done:
        if out and ms - out[-1][0] < 0.3:
            out[-1][0], out[-1][1] = ms, out[-1][1] + b
        else:
            out.append([ms, b])
    return [(ms, int(b)) for ms, b in out]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", required=True)
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--steps", type=int, default=8)
    a = ap.parse_args()
    from autotuner.frameworks.horovod.fit.store import load_env
    from autotuner.frameworks.horovod.knobs import DEFAULTS_0_28
    from autotuner.frameworks.horovod.launch import Job, run_job
    from autotuner.realrun.launcher import testbed_for
    from autotuner.frameworks.horovod.views.accuracy import simulate_trial

    env_dir = ROOT / "runs" / a.env
    setup = fp16_replay_setup(a.env)
    if setup is None:
        return 2
    setup["model"] = a.model
    topo = (int(setup["testbed_hosts"]), int(setup["ranks_per_host"])) if setup.get("testbed_hosts") else None
    cfg = replace(DEFAULTS_0_28, fusion_threshold_bytes=128 << 20, cycle_time_ms=1.0)
    fenv = load_env(ROOT / "autotuner" / "models", a.env)
    with testbed_for(topo, setup.get("bandwidth_gbit"), setup.get("link_gbit")) as (tb, note):
        print(note)
        for comp in ("none", "fp16"):
            cmd = (sys.executable, str(Path(__file__).resolve()), "--worker", a.model, str(setup["compute_ms"]), comp,
                   str(a.steps), "3")
            job = Job(np=topo[0] * topo[1] if topo else int(setup["np"]), command=cmd, config=cfg,
                      hosts=tb.hosts_arg(topo[1]) if topo else "", prefix=tb.prefix, launcher=tb.launcher)
            r = run_job(job, 900)
            rows = [json.loads(x.split(f"{TAG} ", 1)[1]) for x in r.stdout.splitlines() if f"{TAG} " in x]
            if not rows:
                print(r.stderr[-1500:], file=sys.stderr)
                return 1
            resp = [_responses(x["done"]) for x in rows]
            n = statistics.mode(len(x) for x in resp)
            same = [x for x in resp if len(x) == n]
            print(f"--compression {comp}: step {statistics.median(x['step_ms'] for x in rows):.1f} ms (median of "
                  f"{len(rows)}); {n} responses in {len(same)} of the steps; per response: end ms, MB (fp32)")
            for k in range(n):
                print(f"  measured  #{k}: ends {statistics.median(x[k][0] for x in same):7.1f}  "
                      f"{statistics.median(x[k][1] for x in same) / 1e6:6.2f} MB")
            sim = simulate_trial(fenv, env_dir, cfg, setup, compression=comp)
            ratio = 0.5 if comp == "fp16" else 1.0
            for k, x in enumerate(sim.responses):
                print(f"  simulated #{k}: ends {(x.start_s + x.duration_s) * 1e3:7.1f}  {x.nbytes / ratio / 1e6:6.2f} MB"
                      f"  (starts {x.start_s * 1e3:.1f}, lasts {x.duration_s * 1e3:.1f})")
            print(f"  simulated step {sim.step_time_ms:.1f} ms")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        w = sys.argv[2:]
        worker(w[0], float(w[1]), w[2], int(w[3]), int(w[4]))
        sys.exit(0)
    sys.exit(main())
