"""Allreduce sweep: the workload ``autotuner measure`` runs under horovodrun, one job per tier and cache setting.

Run it under horovodrun, e.g.::

    horovodrun -np 2 -H localhost:2 --gloo python -m autotuner.frameworks.horovod.sweepprobe \\
        --sizes 1024,2048 --fusion-sizes 1048576 --tiny-counts 1,16 --repeats 5 --warmup 1

Every number is Horovod's own: each sample is one ``hvd.allreduce`` (or a batch of
``hvd.allreduce_async_`` + ``hvd.synchronize``) of float tensors, timed on the rank around
the call, so the cycle wait, negotiation, fusion, the collective and the callbacks are all
in it (Horovod 0.28.1 ``horovod/torch/mpi_ops.py``). The job's timeline (``--timeline-filename``
with ``--timeline-mark-cycles``) splits that time into its parts for the fit.

Phases, in this order (each item: ``--warmup`` untimed samples, then ``--repeats`` timed ones,
or fewer, never under 2, once the item has taken ``--budget-s`` seconds on the slowest rank:
the largest messages on a slow link take seconds each; after the second timed sample one
8-byte allreduce named ``sweep.budget`` between samples tells every rank the slowest clock):

- ``allreduce``: one tensor of each of ``--sizes`` bytes (float32, bytes / 4 elements), one
  response per call: the collective's cost versus message size.
- ``fusion``: for each of ``--fusion-sizes`` S bytes, 8 float32 tensors and 8 float64 tensors
  of S/8 bytes each, enqueued together: Horovod fuses tensors of one dtype only
  (``horovod/common/controller.cc`` ``FuseResponses``), so each batch is two fused responses of
  S bytes back to back in one cycle: the fusion-buffer copies (MEMCPY_IN/OUT_FUSION_BUFFER) and
  the host time between two responses.
- ``unfused``: for each of ``--unfused-sizes`` s bytes, ``--unfused-count`` float32 tensors of
  s bytes enqueued together, in a job run with a fusion threshold of 0 by ``autotuner
  measure``: that many responses back to back in one cycle, the regime of a training step with
  fusion off or a small threshold (small collectives queued behind each other, and the host
  time between two responses).
- ``negotiation``: N one-element float32 tensors for each N of ``--tiny-counts``, enqueued
  together: the control plane per cycle (run once with the response cache on and once off by
  ``autotuner measure``).

Output (rank 0, stdout): one line ``AUTOTUNER_SWEEP {json}`` per finished item, with keys
``phase``, ``bytes`` (bytes of one response: the tensor, the fused S, or 4·N), ``tensors``
(tensors per sample), ``times_ms`` (timed samples, ms), ``ranks``. With ``--one-line`` (``autotuner measure``'s
``fused`` phase: the same ``--sizes`` and ``--fusion-sizes``, one job one record) instead one line
``AUTOTUNER_FUSED {json}`` at the end: ``sizes``, ``lone_ms`` and ``fused_ms`` (per size, the timed samples of the
``allreduce`` and ``fusion`` items), ``ranks``, ``wait``.

``--device cuda``: every rank's tensors live on the GPU its ``hvd.local_rank()`` names (``torch.cuda.set_device``),
so a Horovod built with NCCL (``HOROVOD_GPU_OPERATIONS=NCCL``) runs the collectives there (Horovod 0.28.1
``horovod/common/ops/nccl_operations.cc``, the fusion buffer on the device); each sample ends with
``torch.cuda.synchronize()`` after Horovod's synchronize; the budget's 8-byte exchange stays a CPU tensor. The lines
then carry ``"device": "cuda"``.

Errors: a bad argument exits with status 2 and one line on stderr, as does ``--device cuda`` where torch sees no
CUDA device, Horovod was built without NCCL (``hvd.nccl_built()``), or a host runs more ranks than it has GPUs.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

TAG = "AUTOTUNER_SWEEP"
FUSED_TAG = "AUTOTUNER_FUSED"  # --one-line
WAIT_POLL_S = 0.0002  # the replay workload's (autotuner.frameworks.horovod.replay.WAIT_POLL_S; not imported: light start)
FUSION_SPLIT = 8  # tensors per dtype per fusion batch


def cuda_refusal(torch, hvd) -> str | None:
    """Why ranks here cannot run with ``--device cuda`` (one line), or None: ``torch`` sees no CUDA device, or
    Horovod (``hvd``: ``horovod.torch``) was built without NCCL (``hvd.nccl_built()``). Needs no ``hvd.init()``."""
    if not torch.cuda.is_available():
        build = "a CPU build" if torch.version.cuda is None else f"CUDA {torch.version.cuda}, no device visible"
        return f"--device cuda: torch {torch.__version__} sees no CUDA device ({build})"
    if not hvd.nccl_built():
        return ("--device cuda: this Horovod was built without NCCL (hvd.nccl_built() is false; reinstall it with "
                "HOROVOD_GPU_OPERATIONS=NCCL)")
    return None


def _ints(s: str) -> list[int]:
    return [int(x) for x in s.split(",") if x.strip()] if s else []


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m autotuner.frameworks.horovod.sweepprobe", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="", help="allreduce phase: message sizes, bytes, comma-separated")
    p.add_argument("--fusion-sizes", default="", help="fusion phase: fused response sizes, bytes")
    p.add_argument("--unfused-sizes", default="", help="unfused phase: tensor sizes, bytes")
    p.add_argument("--unfused-count", type=int, default=16, help="unfused phase: tensors per batch")
    p.add_argument("--tiny-counts", default="", help="negotiation phase: tensors per batch")
    p.add_argument("--repeats", type=int, default=5, help="timed samples per item")
    p.add_argument("--warmup", type=int, default=1, help="untimed samples per item")
    p.add_argument("--wait", choices=("spin", "sleep"), default="spin",
                   help="spin = Horovod's synchronize; sleep = hvd.poll every 0.2 ms first "
                        "(autotuner.frameworks.horovod.replay.WAIT_POLL_S: emulated hosts sharing few cores)")
    p.add_argument("--budget-s", type=float, default=15.0, help="seconds per item after which sampling stops "
                   "(at least 2 timed samples)")
    p.add_argument("--one-line", action="store_true", help="the fused phase: one AUTOTUNER_FUSED line at the end "
                   "(--sizes and --fusion-sizes the same list)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="where the tensors live: cpu, or cuda (the GPU hvd.local_rank() names; Horovod with NCCL)")
    try:
        args = p.parse_args(argv)
        sizes, fusion, tiny = _ints(args.sizes), _ints(args.fusion_sizes), _ints(args.tiny_counts)
        unfused = _ints(args.unfused_sizes)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.repeats < 1 or args.warmup < 0 or any(v < 4 for v in sizes + fusion + unfused) \
            or any(v < 1 for v in tiny) or args.unfused_count < 2:
        print("error: --repeats >= 1, --warmup >= 0, sizes >= 4 bytes, tiny counts >= 1, --unfused-count >= 2",
              file=sys.stderr)
        return 2
    if args.one_line and (not sizes or sizes != fusion or unfused or tiny):
        print("error: --one-line needs --sizes and --fusion-sizes the same list, and no other phase", file=sys.stderr)
        return 2
    try:
        import horovod.torch as hvd
        import torch
    except ImportError as e:
        print(f"error: the sweep needs torch and horovod ({e}); run scripts/install_horovod.sh", file=sys.stderr)
        return 2
    cuda = args.device == "cuda"
    why = cuda_refusal(torch, hvd) if cuda else None
    if why:
        print(f"error: {why}", file=sys.stderr)
        return 2

    hvd.init()
    torch.set_num_threads(1)  # as the replay workload: the cores stay with Horovod's thread and Gloo
    rank0 = hvd.rank() == 0
    dev = torch.device("cpu")
    if cuda:
        n = torch.cuda.device_count()
        over = hvd.local_rank() >= n
        # every rank learns whether one is over (a CPU tensor), so all stop together rather than wait for it
        if int(hvd.allreduce(torch.tensor([int(over)]), op=hvd.Max, name="sweep.device")[0]):
            if over:
                print(f"error: --device cuda: local rank {hvd.local_rank()} but this host has {n} GPU(s): at most "
                      f"{n} ranks per host", file=sys.stderr)
            hvd.shutdown()
            return 2
        dev = torch.device("cuda", hvd.local_rank())
        torch.cuda.set_device(dev)
    where = {"device": "cuda"} if cuda else {}

    def wait(hs) -> None:
        """Horovod's synchronize on every handle; with ``--wait sleep`` first sleep-poll until all are done
        (as the replay workload's ``--wait sleep``)."""
        if args.wait == "sleep":
            while not all(hvd.poll(h) for h in hs):
                time.sleep(WAIT_POLL_S)
        for h in hs:
            hvd.synchronize(h)
        if cuda:
            torch.cuda.synchronize(dev)

    items: dict[tuple[str, int], list[float]] = {}

    def emit(phase: str, nbytes: int, tensors: int, times: list[float]) -> None:
        items[(phase, nbytes)] = [round(t, 4) for t in times]
        if rank0 and not args.one_line:
            print(f"{TAG} " + json.dumps({"phase": phase, "bytes": nbytes, "tensors": tensors, "ranks": hvd.size(),
                                          "times_ms": [round(t, 4) for t in times], **where}), flush=True)

    def timed(fn) -> list[float]:
        out: list[float] = []
        start = time.perf_counter()
        for i in range(args.warmup + args.repeats):
            if len(out) >= 2:
                # stop on the slowest rank's clock, so every rank runs the same collectives: one
                # 8-byte allreduce (Max) between samples, outside the timed call
                spent = hvd.allreduce(torch.tensor([time.perf_counter() - start], dtype=torch.float64),
                                      op=hvd.Max, name="sweep.budget")
                if float(spent[0]) > args.budget_s:
                    break
            t0 = time.perf_counter()
            fn()
            if i >= args.warmup:
                out.append((time.perf_counter() - t0) * 1e3)
        return out

    for n in sizes:
        emit("allreduce", n, 1, timed(lambda t=torch.ones(max(n // 4, 1), dtype=torch.float32, device=dev), n=n:
                                      wait([hvd.allreduce_async_(t, name=f"sweep.allreduce.{n}")])))
    for s in fusion:
        per = max(s // FUSION_SPLIT, 8)
        ts = [(torch.ones(per // 4, dtype=torch.float32, device=dev), f"sweep.fusion.{s}.f32.{i}") for i in range(FUSION_SPLIT)]
        ts += [(torch.ones(per // 8, dtype=torch.float64, device=dev), f"sweep.fusion.{s}.f64.{i}") for i in range(FUSION_SPLIT)]

        def batch(ts=ts):
            wait([hvd.allreduce_async_(x, name=name) for x, name in ts])
        emit("fusion", per * FUSION_SPLIT, 2 * FUSION_SPLIT, timed(batch))
        del ts
    for s in unfused:
        ts = [(torch.ones(s // 4, dtype=torch.float32, device=dev), f"sweep.unfused.{s}.{i}") for i in range(args.unfused_count)]

        def batch(ts=ts):
            wait([hvd.allreduce_async_(x, name=name) for x, name in ts])
        emit("unfused", (s // 4) * 4, args.unfused_count, timed(batch))
        del ts
    for k in tiny:
        ts = [(torch.ones(1, dtype=torch.float32, device=dev), f"sweep.tiny.{k}.{i}") for i in range(k)]

        def batch(ts=ts):
            wait([hvd.allreduce_async_(x, name=name) for x, name in ts])
        emit("negotiation", 4 * k, k, timed(batch))
    if rank0 and args.one_line:
        # the fusion item's bytes are what its tensors hold (FUSION_SPLIT x S / FUSION_SPLIT rounded down)
        fused = {s: items[("fusion", max(s // FUSION_SPLIT, 8) * FUSION_SPLIT)] for s in fusion}
        print(f"{FUSED_TAG} " + json.dumps({"sizes": sizes, "lone_ms": [items[("allreduce", n)] for n in sizes],
                                             "fused_ms": [fused[n] for n in sizes], "ranks": hvd.size(),
                                             "wait": args.wait, **where}), flush=True)
    # the timeline is written by a background thread: let it drain before shutdown
    time.sleep(0.5)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
