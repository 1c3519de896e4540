"""How much slower a rank's CPU compute runs while Horovod communicates (issue 20, part 4's compute half).

Each rank runs one compute thread (its main thread, ``torch.set_num_threads(1)``: a 256x1024 @
1024x1024 float32 matmul, ~2 ms, timed one by one) while Horovod's background thread keeps a stream
of allreduces in flight (the next batch is enqueued, ``hvd.allreduce_async_``, as soon as the last
is done, checked between two matmuls). Per stream, the median matmul time with the stream in
flight over the median without it is the compute's **stretch**; the busy fraction is the share of
the timed span with a batch in flight. ``time.thread_time`` of the main thread vs its wall time
tells whether the compute thread lost the CPU (runnable but not running) or ran slower on it.

Run on a shaped link (as root)::

    python research/scripts/cpu_contention.py --bandwidth-gbit 2 --out runs/fresh-poll-2gbit/experiments/cpu-contention.jsonl

Appends one JSON line per stream (``stream``, ``bytes``, ``tensors``, ``cycle_time_ms``,
``matmul_ms_alone``, ``matmul_ms_with_comm``, ``stretch``, ``busy_fraction``, ``cpu_share``: the
compute thread's CPU time over its wall time with the stream in flight, ``np``, ``bandwidth_gbit``).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

STREAMS = {  # name: (bytes per tensor, tensors per batch, batches timed)
    "fused-8MiB": (8 << 20, 1, 40),
    "fused-1MiB": (1 << 20, 1, 200),
    "unfused-64KiB-x16": (64 << 10, 16, 200),
    "unfused-4KiB-x32": (4 << 10, 32, 600),
}
ALONE_MATMULS = 1000  # compute units timed alone (the model kernel: 12)


def rank_main(kernel: str, streams: dict, plain: bool = False) -> None:
    import torch

    if plain:  # no Horovod at all: the units alone, np processes at once (the no-cycle baseline)
        hvd = None
    else:
        import horovod.torch as hvd
        hvd.init()
    torch.set_num_threads(1)
    a, b = torch.randn(256, 1024), torch.randn(1024, 1024)
    work = lambda: torch.mm(a, b)  # noqa: E731
    if kernel == "model":  # examples/train_horovod.py's transformer: forward + backward, no hooks
        sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
        import train_horovod as th
        m = th.build_model()
        x = torch.randn(16, th.SEQ, th.FEATURES)

        def work():
            m(x).float().sum().backward()

    def run(stream: tuple[int, int, int] | None) -> tuple[list[float], float, float, float]:
        if stream and kernel == "model":  # one batch at most per forward+backward (~0.3 s): 12 of them
            stream = (stream[0], stream[1], 12)
        # Every rank enqueues the same batches in the same order (a batch only after the last is
        # done) and stops after the same count: nothing is left unmatched.
        ts = [torch.zeros(stream[0] // 4) for _ in range(stream[1])] if stream else []
        hs: list = []
        times, busy, done = [], 0.0, 0
        w0, c0 = time.perf_counter(), time.thread_time()
        batch_start = None
        while (done < stream[2]) if stream else (len(times) < (ALONE_MATMULS if kernel == 'mm' else 12)):
            if stream and (not hs or all(hvd.poll(h) for h in hs)):
                for h in hs:
                    hvd.synchronize(h)
                now = time.perf_counter()
                if batch_start is not None:
                    busy += now - batch_start
                    done += 1
                batch_start = now
                if done < stream[2]:
                    hs = [hvd.allreduce_async_(t, name=f"s{stream[0]}.{i}") for i, t in enumerate(ts)]
                else:
                    hs = []
                    break
            t = time.perf_counter()
            work()
            times.append((time.perf_counter() - t) * 1e3)
        wall, cpu = time.perf_counter() - w0, time.thread_time() - c0
        if hvd is not None:
            hvd.allreduce(torch.zeros(1), name="sync")
        return times, busy / wall, cpu / wall, wall

    out = []
    if not streams:  # idle cycles only: the compute units timed with nothing in flight
        alone, _, cpu_alone, wall = run(None)
        out.append({"stream": "plain" if plain else "idle", "units": len(alone), "unit_ms_median": round(statistics.median(alone), 4),
                    "unit_ms_mean": round(statistics.fmean(alone), 4), "cpu_share_alone": round(cpu_alone, 3),
                    "wall_s": round(wall, 3), "np": int(os.environ.get("PLAIN_NP", "0")) if plain else hvd.size()})
    for name, stream in streams.items():
        alone, _, cpu_alone, _ = run(None)
        with_comm, busy, cpu_share, _ = run(stream)
        ma, mc = statistics.median(alone), statistics.median(with_comm)
        out.append({"stream": name, "bytes": stream[0], "tensors": stream[1],
                    "matmul_ms_alone": round(ma, 4), "matmul_ms_with_comm": round(mc, 4),
                    "mean_ms_alone": round(statistics.fmean(alone), 4),
                    "mean_ms_with_comm": round(statistics.fmean(with_comm), 4),
                    "stretch": round(statistics.fmean(with_comm) / statistics.fmean(alone), 4),
                    "busy_fraction": round(busy, 3), "cpu_share": round(cpu_share, 3),
                    "cpu_share_alone": round(cpu_alone, 3), "np": hvd.size()})
    if plain or hvd.rank() == 0:
        for r in out:
            print("CONTENTION " + json.dumps(r), flush=True)
    if hvd is not None:
        hvd.shutdown()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bandwidth-gbit", type=float, default=None, help="shaped loopback (root); none: plain loopback")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--cycle-time-ms", type=float, default=1.0)
    ap.add_argument("--out", type=Path, required=True, help="JSON Lines file to append to")
    ap.add_argument("--kernel", choices=("mm", "model"), default="mm",
                    help="compute: a 256x1024 @ 1024x1024 matmul, or examples/train_horovod.py's forward+backward")
    ap.add_argument("--streams", default=",".join(STREAMS),
                    help="which streams, comma-separated; 'idle': the units alone under idle cycles only")
    ap.add_argument("--plain", action="store_true",
                    help="no Horovod: --np plain processes time the units at once (the baseline of 'idle')")
    ap.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.rank:
        rank_main(a.kernel, {} if a.plain else {k: STREAMS[k] for k in a.streams.split(',') if k != "idle"},
                  plain=a.plain)
        return 0
    if a.np < 1 or a.cycle_time_ms <= 0:
        print("error: --np and --cycle-time-ms must be positive", file=sys.stderr)
        return 2
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from autotuner.realrun.testbed import shaped_network

    cmd = ["horovodrun", "-np", str(a.np), "-H", f"localhost:{a.np}", "--gloo", "--cycle-time-ms",
           f"{a.cycle_time_ms:g}", sys.executable, __file__, "--rank", "--kernel", a.kernel,
           "--streams", a.streams, "--out", str(a.out)]
    if a.plain:
        me = [sys.executable, __file__, "--rank", "--plain", "--kernel", a.kernel, "--out", str(a.out)]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PLAIN_NP": str(a.np)}
        procs = [subprocess.Popen(me, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                 for _ in range(a.np)]
        outs = [p.communicate(timeout=300) for p in procs]
        res = subprocess.CompletedProcess(me, max(p.returncode for p in procs), outs[0][0], outs[0][1])
    else:
        with shaped_network(a.bandwidth_gbit) as tb:
            res = subprocess.run(tb.wrap(cmd), capture_output=True, text=True, timeout=300,
                                 env={**os.environ, "PYTHONUNBUFFERED": "1"})
    rows = [json.loads(line.split("CONTENTION ", 1)[1]) for line in res.stdout.splitlines() if "CONTENTION " in line]
    if res.returncode != 0 or not rows:
        print(f"error: horovodrun exit {res.returncode}: {(res.stderr or res.stdout).strip().splitlines()[-1:]}",
              file=sys.stderr)
        return 1
    a.out.parent.mkdir(parents=True, exist_ok=True)
    with a.out.open("a") as f:
        for r in rows:
            r.update(bandwidth_gbit=a.bandwidth_gbit, cycle_time_ms=a.cycle_time_ms, kernel=a.kernel)
            f.write(json.dumps(r) + "\n")
            print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
