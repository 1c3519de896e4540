"""What Gloo's float16 sum costs a CPU, by the values summed (issue 29, second pass; docs/compression.md, "The
values matter, and so does the wait").

    python research/scripts/fp16_values.py                                  # 2 ranks on loopback
    python research/scripts/fp16_values.py --testbed-hosts 2 --link-gbit 3  # 2 emulated hosts x 1 rank (root)

On 2 ranks: 16 MiB of float32 and of float16, in 64 tensors enqueued at once and averaged (as a training step's
fused response), for zeros, ones and N(0, s^2) values with s = 1, 1e-3, 1e-5; 5 timed rounds each after a
warm-up, interleaved. Prints (rank 0) one line per dtype and values: the median and range in ms. As root on a
quiet machine, alone.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
BYTES, TENSORS, ROUNDS = 16 << 20, 64, 5


def worker() -> None:
    import horovod.torch as hvd
    import torch

    hvd.init()
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(hvd.rank())
    values = {"zeros": lambda n: torch.zeros(n), "ones": lambda n: torch.ones(n),
              "N(0, 1)": lambda n: torch.randn(n, generator=g),
              "N(0, 1e-6)": lambda n: torch.randn(n, generator=g) * 1e-3,
              "N(0, 1e-10)": lambda n: torch.randn(n, generator=g) * 1e-5}
    res: dict[tuple[str, str], list[float]] = {}
    for rnd in range(ROUNDS + 1):  # the first round is a warm-up
        for dt in (torch.float32, torch.float16):
            for name, make in values.items():
                n = BYTES // (4 if dt == torch.float32 else 2) // TENSORS
                ts = [make(n).to(dt) for _ in range(TENSORS)]
                t0 = time.perf_counter()
                hs = [hvd.allreduce_async_(t, name=f"v.{dt}.{name}.{i}", op=hvd.Average) for i, t in enumerate(ts)]
                for h in hs:
                    hvd.synchronize(h)
                if rnd:
                    res.setdefault((str(dt).split(".")[1], name), []).append((time.perf_counter() - t0) * 1e3)
    if hvd.rank() == 0:
        for (dt, name), v in res.items():
            v = sorted(v)
            print(f"{dt:8} {name:12} median {v[len(v) // 2]:.1f} ms  range {v[0]:.1f}-{v[-1]:.1f}", flush=True)
    hvd.shutdown()


def run_worker(script: Path, marker: str, testbed_hosts: int = 0, link_gbit: float | None = None,
               bandwidth_gbit: float | None = None) -> int:
    """Run ``script --worker`` on 2 ranks under horovodrun: 2 emulated hosts x 1 rank (``testbed_hosts``, root), a
    shaped loopback (``bandwidth_gbit``, root) or plain loopback; print rank 0's lines holding ``marker``."""
    from autotuner.frameworks.horovod.launch import Job, run_job
    from autotuner.realrun.launcher import testbed_for

    cmd = (sys.executable, str(script), "--worker")
    topo = (testbed_hosts, 1) if testbed_hosts else None
    with testbed_for(topo, bandwidth_gbit, link_gbit) as (tb, note):
        print(note)
        job = Job(np=2, command=cmd, hosts=tb.hosts_arg(1) if topo else "", prefix=tb.prefix, launcher=tb.launcher)
        r = run_job(job, 900)
    print("\n".join(line.split(">:", 1)[-1] for line in r.stdout.splitlines() if marker in line))
    return 0 if r.returncode == 0 else (print(r.stderr[-2000:], file=sys.stderr) or 1)


def cli(script: str, doc: str, marker: str) -> int:
    """A fp16 script's command line: ``--testbed-hosts``/``--link-gbit``/``--bandwidth-gbit``, then
    :func:`run_worker`."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--testbed-hosts", type=int, default=0)
    ap.add_argument("--link-gbit", type=float, default=None)
    ap.add_argument("--bandwidth-gbit", type=float, default=None)
    a = ap.parse_args()
    return run_worker(Path(script).resolve(), marker, a.testbed_hosts, a.link_gbit, a.bandwidth_gbit)


def main() -> int:
    return cli(__file__, __doc__, " median ")


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        worker()
        sys.exit(0)
    sys.exit(main())
