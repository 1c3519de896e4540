"""The DDP host phase: what DDP's Reducer adds to a rank's step beyond the bucket copies and the collectives' wire,
per gradient and per bucket (:class:`~.hostcost.ReducerHostCost`, docs/explanation/ddp-simulator.md, "The
Reducer's host work").

Per gradient DDP runs, on the thread that runs the backward (torch 2.13 ``torch/csrc/distributed/c10d/reducer.cpp``):
the hook autograd calls after accumulating the gradient (``autograd_hook``), ``mark_variable_ready`` and
``mark_variable_ready_dense`` (the copy into the bucket, its launch and bookkeeping); per bucket,
``mark_bucket_ready`` -> ``all_reduce_bucket`` (the ``GradBucket``, the comm hook's call, the process group's
enqueue, the future); at the end ``finalize_backward`` (each bucket's wait, each gradient's copy back or view
check). None of it is in the sweep's timed allreduce.

Runs under torchrun on every rank (``python -m autotuner.frameworks.ddp.hostprobe``), every rank at once, so the
host's cores carry the load a training job puts on them; each rank wraps its module in DDP over its own one-rank
process group (``dist.new_group([r])`` for every rank, ``DistributedDataParallel(m, process_group=groups[rank])``):
no cross-rank collective, no wire. The module has ``T`` parameters of ``--tensor-bytes`` each (float32), for T in
``--tensors``; its backward is the DDP replay's emulated one (:mod:`.replay`, shifted stages): stage i waits to
its deadline ``backward start + i x --gap-us``, shifted later by all the time the backward's thread spent between
stages so far (autograd's ``AccumulateGrad`` and, under DDP, the Reducer's hook), then returns a fresh gradient.
Per T the module runs plain (no DDP: the step's compute and autograd's own work) and under DDP with three bucket
caps: every gradient in one bucket, ``--per-bucket`` gradients a bucket, and one gradient a bucket (``bucket_cap_mb``
the bytes of T, of ``--per-bucket`` and of one tensor; caps reached with ``>=``). Each of ``--rounds`` rounds runs
every (T, setting) once, interleaved, ``--steps`` timed steps each (``zero_grad(set_to_none=True)``, forward,
``backward()``, which returns after ``finalize_backward``) after the models' warm-up (3 steps each, the first
rebuilding DDP's buckets); a barrier on the world group before each setting. What DDP adds to a setting is its
step less the plain step of the same T and round; :func:`autotuner.frameworks.ddp.fit.host_cost` takes the
modelled copies off and fits ``T x per_tensor + B x per_bucket + per_step`` (``per_step``: DDP's forward wrapper
and the last one-rank collective's latency, which the sweep's alpha already holds; reported, not charged).

With ``--device cuda`` the ranks run on their GPUs over NCCL (:func:`.rankside.init_rank`), the parameters and
gradients on the device, and each step ends with ``torch.cuda.synchronize()``: at ``--np 1`` it measures one
GPU host's Reducer cost.

Output (rank 0, stdout): one line ``AUTOTUNER_DDP_HOST {json}``: ``ranks``, ``backend``, ``tensor_bytes``,
``gap_us``, ``steps``, ``per_bucket``, ``rows`` (one per round, T and setting: ``round``, ``tensors``, ``mode``
("plain" or "ddp"), ``cap_bytes`` (None for plain), ``buckets`` (DDP's rebuilt bucket count, rank 0's; None for
plain), ``step_ms`` (per rank, the median timed step, ms), ``between_ms`` (per rank, the median time the backward's
thread spent between stages per step, ms)); with ``--device cuda`` also ``device``, ``gpu``, ``cuda``, ``nccl``
(:func:`.rankside.device_fields`). Exit status 2 and one line on stderr for a bad argument, no torchrun, or
(``--device cuda``) no CUDA device, no NCCL, or more ranks on a host than it has GPUs.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from .rankside import add_device_option, device_fields, init_rank, synchronize

TAG = "AUTOTUNER_DDP_HOST"
#: the gradient counts of the module (few, hundreds: a ResNet-101 has 314, a DenseNet-121 364)
TENSORS = (32, 128, 512)
#: each gradient's bytes (float32): small, so the copies it prices are a small part of what DDP adds
TENSOR_BYTES = 4096
MIB = 1 << 20


def _args(argv):
    p = argparse.ArgumentParser(prog="python -m autotuner.frameworks.ddp.hostprobe", description=__doc__.split("\n")[0])
    p.add_argument("--tensors", default=",".join(map(str, TENSORS)), help="comma-separated gradient counts T")
    p.add_argument("--tensor-bytes", type=int, default=TENSOR_BYTES, help="bytes per gradient (float32, >= 4)")
    p.add_argument("--per-bucket", type=int, default=8, help="gradients per bucket of the middle setting (>= 2)")
    p.add_argument("--gap-us", type=float, default=100.0, help="the emulated backward's compute per gradient (us)")
    p.add_argument("--steps", type=int, default=8, help="timed steps per setting and round")
    p.add_argument("--rounds", type=int, default=5, help="rounds (each: every T and setting once)")
    add_device_option(p)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = _args(argv)
    try:
        counts = [int(x) for x in a.tensors.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 2:
        print(f"error: --tensors {a.tensors!r}: whole gradient counts >= 2, comma-separated", file=sys.stderr)
        return 2
    if a.tensor_bytes < 4 or a.per_bucket < 2 or not (0 <= a.gap_us <= 1e5) or a.steps < 1 or a.rounds < 1:
        print("error: --tensor-bytes >= 4, --per-bucket >= 2, --gap-us in [0, 1e5], --steps and --rounds >= 1",
              file=sys.stderr)
        return 2
    try:
        from torch.nn.parallel import DistributedDataParallel
    except ImportError as e:
        print(f"error: the host phase needs torch ({e})", file=sys.stderr)
        return 2
    started = init_rank(a.device)
    if started is None:
        return 2
    torch, dist, rank, dev = started
    world = dist.get_world_size()
    groups = [dist.new_group([r]) for r in range(world)]  # every rank creates every group, in the same order
    mine = groups[rank]
    elems = max(1, a.tensor_bytes // 4)
    gap = a.gap_us * 1e-6
    gen = torch.Generator().manual_seed(rank)
    clock = {"t0": 0.0, "shift": 0.0, "ret": None}

    class Stage(torch.autograd.Function):
        """The replay's shifted stage: identity on the activation; its backward waits to its deadline and returns
        a fresh gradient for its parameter."""

        @staticmethod
        def forward(ctx, x, weight, index, grad):  # noqa: ARG004 - weight links the parameter into the graph
            ctx.index, ctx.grad = index, grad
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            start = time.perf_counter()
            if clock["ret"] is None:
                clock["t0"] = start
            else:  # autograd's and the Reducer's work since the last stage shifts every later deadline
                clock["shift"] += start - clock["ret"]
            out = ctx.grad.clone()
            end = clock["t0"] + (ctx.index + 1) * gap + clock["shift"]
            wait = end - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            clock["ret"] = time.perf_counter()
            return g, out, None, None

    class Chain(torch.nn.Module):
        def __init__(self, T: int):
            super().__init__()
            self.ws = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(elems, device=dev)) for _ in range(T)])
            self.grads = [(torch.randn(elems, generator=gen) * 1e-3).to(dev) for _ in range(T)]

        def forward(self, x):
            T = len(self.ws)
            for k, w in enumerate(self.ws):  # backward runs the last parameter first: stage index T - 1 - k
                x = Stage.apply(x, w, T - 1 - k, self.grads[k])
            return x.sum()

    settings = []  # (T, cap bytes or None, module)
    for T in counts:
        settings.append((T, None, Chain(T)))
        for per in (T, a.per_bucket, 1):
            cap = per * elems * 4
            m = DistributedDataParallel(Chain(T), process_group=mine, bucket_cap_mb=cap / MIB,
                                        **({"device_ids": [dev.index]} if dev.type == "cuda" else {}))
            settings.append((T, cap, m))
    x = torch.ones(1, requires_grad=True, device=dev)

    def step(m) -> tuple[float, float]:
        for p_ in m.parameters():
            p_.grad = None  # optimizer.zero_grad(set_to_none=True)
        synchronize(torch, dev)
        clock["shift"], clock["ret"] = 0.0, None
        t = time.perf_counter()
        m(x).backward()
        synchronize(torch, dev)
        return (time.perf_counter() - t) * 1e3, clock["shift"] * 1e3

    for _, _, m in settings:
        for _ in range(3):
            step(m)
    rows = []
    for rnd in range(a.rounds):
        for T, cap, m in settings:
            dist.barrier()
            got = [step(m) for _ in range(a.steps)]
            med = torch.tensor([statistics.median(s for s, _ in got), statistics.median(b for _, b in got)],
                               dtype=torch.float64, device=dev)
            every = [torch.zeros(2, dtype=torch.float64, device=dev) for _ in range(world)]
            dist.all_gather(every, med)
            buckets = None
            if cap is not None:
                rebuilt = m._get_ddp_logging_data().get("rebuilt_bucket_sizes")
                buckets = len(str(rebuilt).split(", ")) if rebuilt else None
            rows.append({"round": rnd, "tensors": T, "mode": "plain" if cap is None else "ddp", "cap_bytes": cap,
                         "buckets": buckets, "step_ms": [round(float(e[0]), 4) for e in every],
                         "between_ms": [round(float(e[1]), 4) for e in every]})
    dist.barrier()
    if rank == 0:
        print(f"{TAG} " + json.dumps({"ranks": world, "backend": dist.get_backend(), "tensor_bytes": elems * 4,
                                      "gap_us": a.gap_us, "steps": a.steps, "per_bucket": a.per_bucket,
                                      "rows": rows, **device_fields(torch, dev)}), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
