"""How a DDP step's real CPU compute and Gloo's allreduces slow each other on CPU ranks that fill their cores
(issue 30: ``examples/train_ddp.py`` on ddp-2gbit was predicted 5-12 % too fast; docs/ddp.md "Your own script").

Every rank (torchrun, Gloo, ``torch.set_num_threads(1)``) times, in interleaved rounds:

- ``compute``: ``examples/train_ddp.py``'s model, forward + backward (no DDP), ``--iters`` iterations alone;
- ``stream``: allreduces of one bucket (``--bucket-mib``), each launched when the last is done, alone (the main
  thread blocked in ``wait()``), ``--iters`` x 4 of them;
- ``both``: the same stream in flight while the main thread runs the same iterations (a new allreduce launched
  between two iterations and from a helper thread the moment the last ends).

Prints per round: compute ms per iteration alone / beside the stream, allreduce ms alone / beside compute. Run as
root on a shaped loopback (as ddp-2gbit was measured)::

    python research/scripts/ddp_cpu_contention.py --bandwidth-gbit 2 --out runs/ddp-2gbit/experiments/ddp-cpu-contention.jsonl
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def rank_main(a) -> None:
    import torch
    import torch.distributed as dist

    sys.path.insert(0, str(ROOT / "examples"))
    import train_horovod as th

    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    m = th.build_model()
    x = torch.randn(16, th.SEQ, th.FEATURES)
    buf = torch.randn(int(a.bucket_mib * 2**20) // 4) * 1e-3
    ma, mb = torch.randn(256, 1024), torch.randn(1024, 1024)

    def one():
        if a.kernel == "mm":  # 20 matmuls of 256x1024 @ 1024x1024 (~40 ms): cache-resident compute
            for _ in range(20):
                torch.mm(ma, mb)
            return
        m.zero_grad(set_to_none=True)
        m(x).float().sum().backward()

    for _ in range(2):
        one()
    out = []
    for rnd in range(a.rounds):
        dist.barrier()
        t = []
        for _ in range(a.iters):
            t0 = time.perf_counter(); one(); t.append((time.perf_counter() - t0) * 1e3)
        comp_alone = statistics.median(t)
        dist.barrier()
        s = []
        for _ in range(a.iters * 2):
            t0 = time.perf_counter(); dist.all_reduce(buf); s.append((time.perf_counter() - t0) * 1e3)
        ar_alone = statistics.median(s)
        dist.barrier()
        # both: a helper thread keeps one allreduce in flight (blocking calls back to back) while this thread computes
        stop = threading.Event()
        ar = []

        def stream():
            while not stop.is_set():
                t0 = time.perf_counter(); dist.all_reduce(buf); ar.append((time.perf_counter() - t0) * 1e3)

        # the stream's count must match across ranks: run a fixed count instead of a stop flag
        n_ar = a.iters * 2

        def stream_n():
            for _ in range(n_ar):
                t0 = time.perf_counter(); dist.all_reduce(buf); ar.append((time.perf_counter() - t0) * 1e3)

        th_ = threading.Thread(target=stream_n)
        th_.start()
        tb = []
        while th_.is_alive():
            t0 = time.perf_counter(); one(); tb.append((time.perf_counter() - t0) * 1e3)
        th_.join()
        row = {"round": rnd, "compute_ms_alone": round(comp_alone, 3), "compute_ms_beside": round(statistics.median(tb), 3),
               "iters_beside": len(tb), "allreduce_ms_alone": round(ar_alone, 3),
               "allreduce_ms_beside": round(statistics.median(ar), 3), "bucket_mib": a.bucket_mib, "kernel": a.kernel,
               "ranks": dist.get_world_size()}
        out.append(row)
    if dist.get_rank() == 0:
        for r in out:
            print("CONTENTION " + json.dumps(r), flush=True)
    dist.destroy_process_group()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bandwidth-gbit", type=float, default=None)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--bucket-mib", type=float, default=4.0)
    ap.add_argument("--iters", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kernel", choices=("model", "mm"), default="model",
                    help="compute: examples/train_ddp.py's forward + backward, or 20 matmuls 256x1024 @ 1024x1024")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.rank:
        rank_main(a)
        return 0
    sys.path.insert(0, str(ROOT))
    from autotuner.frameworks.ddp.launch import run_ddp
    from autotuner.realrun.testbed import shaped_network  # noqa: E402

    args = ["--rank", "--kernel", a.kernel, "--bucket-mib", str(a.bucket_mib), "--iters", str(a.iters), "--rounds", str(a.rounds)]
    with shaped_network(a.bandwidth_gbit) as tb:
        res = run_ddp(str(Path(__file__).resolve()), args, ranks_per_host=a.np, testbed=tb if a.bandwidth_gbit else None)
    text = res.stdout if hasattr(res, "stdout") else str(res)
    rows = [json.loads(l.split("CONTENTION ", 1)[1]) for l in text.splitlines() if "CONTENTION " in l]
    for r in rows:
        r["bandwidth_gbit"] = a.bandwidth_gbit
        print(json.dumps(r))
    if a.out and rows:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        with a.out.open("a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
