"""Does Gloo's float16 sum cost a CPU less when every rank holds the same values? (issue 29: the Horovod replay's
fp16 steps run faster than the fp16 phase predicts.)

    python research/scripts/fp16_rank_values.py                       # 2 ranks on loopback
    python research/scripts/fp16_rank_values.py --bandwidth-gbit 2    # 2 ranks, shaped loopback (root)
    python research/scripts/fp16_rank_values.py --bandwidth-gbit 2 --out runs/fresh-poll-2gbit/experiments/fp16-rank-values.jsonl

The Horovod replay (``autotuner/frameworks/horovod/replay.py`` before this change) gave each rank its own N(0, 1e-6)
gradients once and never wrote them again; Horovod writes the averaged result back into every gradient
(``hvd.allreduce_async_`` in place; with ``hvd.Compression.fp16``, ``p.grad.set_`` the decompressed output,
horovod/torch/optimizer.py ``synchronize``), so from the second step on every rank allreduces the *same* values.
Gloo's float16 sum converts in software (``gloo/types.h`` ``cpu_float2half_rn``): ``x + x`` is exact in float16, its
rounding branch always goes the same way, ``x + y`` of independent values does not. A training job's ranks hold
different gradients (different data). This script times, on 2 ranks, 16 MiB of float16 and of float32 in 64 tensors
enqueued at once and averaged (a fused response), the values copied in before each round from sources made once:
``distinct`` (each rank its own seed, the fp16 phase's values), ``same`` (both ranks one seed: the replay from its
second step). Waited for by polling (the replay's ``--wait sleep``); 7 timed rounds after a warm-up, interleaved.
Prints (rank 0) per case the median and range, ms; ``--out FILE`` also appends one JSON record per run (the
setup, UTC time, and per case every timed round in ms).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
BYTES, TENSORS, ROUNDS = 16 << 20, 64, 7


def worker() -> None:
    import horovod.torch as hvd
    import torch

    hvd.init()
    torch.set_num_threads(1)
    srcs: dict[tuple[str, str], list] = {}
    for dt in (torch.float16, torch.float32):
        n = BYTES // (2 if dt == torch.float16 else 4) // TENSORS
        for case, seed in (("distinct", 1 + hvd.rank()), ("same", 1)):
            g = torch.Generator().manual_seed(seed)
            srcs[(str(dt).split(".")[1], case)] = [(torch.randn(n, generator=g) * 1e-3).to(dt) for _ in range(TENSORS)]
    bufs = {k: [x.clone() for x in v] for k, v in srcs.items()}
    res: dict[tuple[str, str], list[float]] = {}
    for rnd in range(ROUNDS + 1):  # the first round is a warm-up
        for key, src in srcs.items():
            ts = bufs[key]
            for t, x in zip(ts, src):
                t.copy_(x)
            t0 = time.perf_counter()
            hs = [hvd.allreduce_async_(t, name=f"rv.{key[0]}.{key[1]}.{i}", op=hvd.Average) for i, t in enumerate(ts)]
            for h in hs:
                while not hvd.poll(h):
                    time.sleep(0.0005)
                hvd.synchronize(h)
            if rnd:
                res.setdefault(key, []).append((time.perf_counter() - t0) * 1e3)
    if hvd.rank() == 0:
        for (dt, case), v in res.items():
            v = sorted(v)
            print(f"CASE {dt:8} {case:9} median {v[len(v) // 2]:7.1f} ms  range {v[0]:.1f}-{v[-1]:.1f}", flush=True)
        print("CASE-RECORD " + json.dumps({f"{dt} {case}": [round(x, 2) for x in v] for (dt, case), v in res.items()}),
              flush=True)
    hvd.shutdown()


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fp16_values import run_worker

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bandwidth-gbit", type=float, default=None, help="shape loopback to this rate (root)")
    ap.add_argument("--out", type=Path, default=None, help="append one JSON record per run to this file")
    a = ap.parse_args()
    if a.bandwidth_gbit is not None and not a.bandwidth_gbit > 0:
        print("error: --bandwidth-gbit must be > 0", file=sys.stderr)
        return 2
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = run_worker(Path(__file__).resolve(), "CASE", bandwidth_gbit=a.bandwidth_gbit)
    text = buf.getvalue()
    print("".join(line + "\n" for line in text.splitlines() if "CASE-RECORD " not in line), end="")
    if rc == 0 and a.out is not None:
        rec = next((line.split("CASE-RECORD ", 1)[1] for line in text.splitlines() if "CASE-RECORD " in line), None)
        if rec is not None:
            a.out.parent.mkdir(parents=True, exist_ok=True)
            with open(a.out, "a") as f:
                f.write(json.dumps({"utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                    "bandwidth_gbit": a.bandwidth_gbit, "bytes": BYTES, "tensors": TENSORS,
                                    "values": "normal(0, 1e-6), averaged", "wait": "poll 0.5 ms",
                                    "rounds_ms": json.loads(rec)}) + "\n")
    return rc


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        worker()
        sys.exit(0)
    sys.exit(main())
