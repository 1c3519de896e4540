"""Is a fused float16 response cheaper than the fp16 phase's lone tensor of the same bytes? (issue 29: fp16 on CPU
ranks is predicted 6-21 % too slow; the fp16 phase times one tensor per allreduce, a training step's responses
fuse many.)

    python research/scripts/fp16_fused_vs_lone.py --bandwidth-gbit 2            # 2 ranks, shaped loopback (root)
    python research/scripts/fp16_fused_vs_lone.py --testbed-hosts 2 --link-gbit 3

On 2 ranks, for B = 4 and 16 MiB of float16 (and float32 of the same element count, 2B): one tensor, and 64 tensors
of B/64 enqueued at once (one fused response at the 64 MiB default threshold), and 64 float16 tensors cast from
float32 just before the allreduce (``tensor.type(torch.float16)``, new each round, as ``hvd.Compression.fp16`` makes
them in each hook; the other cases reuse buffers made once, as the fp16 phase does), each averaged (``hvd.Average``) and
waited for by polling (the replay's ``--wait sleep``); gradient-like values N(0, 1e-6); 5 timed rounds after a
warm-up, interleaved. Prints (rank 0) per case the median and range, ms. As root, alone on a quiet machine.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
ROUNDS = 5


def worker() -> None:
    import horovod.torch as hvd
    import torch

    hvd.init()
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(hvd.rank())
    res: dict[str, list[float]] = {}
    kept: dict[tuple, list] = {}
    srcs: dict[tuple, list] = {}
    for rnd in range(ROUNDS + 1):
        for mib in (4, 16):
            n16 = (mib << 20) // 2  # float16 elements
            for dt, dname in ((torch.float16, "float16"), (torch.float32, "float32")):
                for parts in (1, 64, -64):  # -64: 64 float16 tensors cast from float32 just before, as
                    if parts < 0 and dt != torch.float16:  # hvd.Compression.fp16 does in each hook
                        continue
                    n = abs(parts)
                    key0 = (mib, dname, parts)
                    if key0 not in kept:  # the phase's way: buffers made once, the values copied in each round
                        kept[key0] = [(torch.randn(n16 // n, generator=g) * 1e-3).to(dt) for _ in range(n)]
                        srcs[key0] = [x.clone() for x in kept[key0]]
                    if parts < 0:  # the compressor's way: a new float16 tensor cast from float32 each time
                        ts = [x.float().type(torch.float16) for x in srcs[key0]]
                    else:
                        ts = kept[key0]
                        for t, x in zip(ts, srcs[key0]):
                            t.copy_(x)
                    t0 = time.perf_counter()
                    hs = [hvd.allreduce_async_(t, name=f"c.{mib}.{dname}.{parts}.{i}", op=hvd.Average)
                          for i, t in enumerate(ts)]
                    for h in hs:
                        while not hvd.poll(h):
                            time.sleep(0.0005)
                        hvd.synchronize(h)
                    if rnd:
                        key = (f"{n16 / 2**20:.0f} Mi elements {dname:8} "
                               f"{'1 tensor' if parts == 1 else '64 tensors' if parts > 0 else '64 cast just before'}")
                        res.setdefault(key, []).append((time.perf_counter() - t0) * 1e3)
    if hvd.rank() == 0:
        for k, v in res.items():
            v = sorted(v)
            print(f"CASE {k:40} median {v[len(v) // 2]:7.1f} ms  range {v[0]:.1f}-{v[-1]:.1f}", flush=True)
    hvd.shutdown()


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fp16_values import cli

    return cli(__file__, __doc__, "CASE ")


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        worker()
        sys.exit(0)
    sys.exit(main())
