"""DDP replay workload: a training loop whose gradients have exactly a chosen layout, wrapped in real
``torch.nn.parallel.DistributedDataParallel`` with the knobs and hook asked for, on CPU ranks over Gloo or (``--device
cuda``) on the GPU each rank's ``LOCAL_RANK`` names over NCCL.

Run it under torchrun, e.g.::

    torchrun --standalone --nproc-per-node 2 -m autotuner.frameworks.ddp.replay --model resnet50 \\
        --compute-ms 300 --steps 10 --warmup 3 --bucket-cap-mb 4 --gradient-as-bucket-view

The module's parameters are the layout's tensors, registered in forward order (the reverse of the layout's
backward order), so DDP's ``parameters()`` order, its constructor's buckets and its rebuilt ones see the layout's
real sizes, count and backward order. Compute is emulated with the Horovod replay's shares (forward ``compute_ms / 3``,
backward ``2 compute_ms / 3``, tensor ``i``'s gradient produced when ``ready_fraction[i]`` of the backward has
elapsed) in one of three ways (``--stages``):

- ``shifted`` (the default): each stage sleeps to its deadline
  ``backward start + ready_fraction[i] * backward``, shifted later by all the time the backward's thread spent
  *between* stages so far (autograd's ``AccumulateGrad`` and DDP's hook: the copy into the bucket, a compress hook's
  cast). So the hooks' work delays every later gradient, as on a CPU rank's real backward, while a stage's own late
  wake-up from its sleep is not carried into the next (absolute deadlines).
- ``deadline`` (the oldest records' kind): absolute deadlines, unshifted: the hooks' work hides in the slack
  before each next deadline, as if the compute ran on another device (measured: ``runs/ddp-1x4-16core``,
  docs/explanation/ddp-simulator.md).
- ``duration`` (an earlier kind; its records say so): each stage sleeps for its own share
  ``(ready_fraction[i] - ready_fraction[i - 1]) * backward`` from the moment autograd enters it. Every stage's late
  wake-up (the sleep's overshoot, 0.05-0.3 ms, more on busy cores) then adds up over the layout's hundreds of
  stages: the emulated backward runs longer than asked (docs/explanation/ddp-simulator.md).

In every kind a stage writes its gradient inside its compute time (a fresh ``clone()``, as a kernel writes it)
and returns the parameter's gradient, gradient-like values (N(0, 1e-6), seeded by rank, as the
Horovod replay's), so autograd's ``AccumulateGrad`` fires DDP's hook for it; where writing the gradient takes longer
than its stage (a machine whose memory is slow beside the compute asked for), the stage overruns and the result's
``stage_overrun_ms`` says by how much. With ``--device cuda`` the parameters and gradients live on the GPU
(``DistributedDataParallel(..., device_ids=[LOCAL_RANK])``), a stage's ``clone()`` is a kernel the host launches
at its deadline, the emulated compute is still the host's sleep (the kernels the host launches are what DDP's
copies and hooks wait behind), and each step ends with ``torch.cuda.synchronize()`` before its time is taken (an
NCCL bucket's work is only queued when ``backward()`` returns). Each step runs ``optimizer.zero_grad()`` (``set_to_none=True``, the
default) as a training loop does, the forward, ``loss.backward()`` (which returns once DDP's
``finalize_backward`` has waited for every bucket) and an emulated update of ``update_ms``. With ``--no-ddp`` the
same module runs the same steps without DDP (the process group only starts the ranks): its step is the emulated
compute as it ran, autograd's own work between stages included, what ``ddp validate`` takes as a setting's compute.

Output (rank 0, stdout): one ``step N time_ms X`` line per step, then ``AUTOTUNER_RESULT {json}`` with the Horovod
replay's keys (``model, ranks, steps, warmup, compute_ms, update_ms, gradients, bytes_per_step, step_times_ms,
median_step_time_ms``; :func:`autotuner.readers.replay_output.parse_output` reads it) plus ``framework: "ddp"``,
``ddp`` (the knobs as :meth:`DdpConfig.to_dict`; None with ``--no-ddp``), ``first_step_ms`` (the first iteration, before the Reducer
rebuilt its buckets), ``buckets`` (the rebuilt buckets' sizes in bytes, from DDP's own logging data,
``_get_ddp_logging_data()["rebuilt_bucket_sizes"]``, when it has them), ``minor_faults_per_step`` (rank 0's minor
page faults per measured step, the median of ``getrusage(RUSAGE_SELF).ru_minflt`` differences: the pages the
step touched for the first time since glibc gave them back) and ``malloc_env`` (the ``MALLOC_*`` tunables the
ranks ran with, glibc's mallopt(3) environment variables; {} when none), ``stages`` (one of :data:`STAGES`)
and ``stage_overrun_ms`` (rank 0, the median over measured steps of how long the emulated backward ran past its
compute because writing the gradients took longer: with ``duration`` stages the sum of every stage's overrun, with
deadlines how late the last stage wrote its gradient); with ``--device cuda`` also ``device``, ``gpu``, ``cuda``,
``nccl`` (:func:`.rankside.device_fields`). Exit status 2 and one line on stderr for a bad argument, no torchrun,
or (``--device cuda``) no CUDA device, no NCCL, or more ranks on a host than it has GPUs. The result line is printed before the process group is torn down, so a failed teardown (a rank
aborting at exit) never hides a finished measurement.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time

from .rankside import add_device_option, barrier, device_fields, init_rank, load_rank_layout, synchronize

RESULT_TAG = "AUTOTUNER_RESULT"
#: the emulated backward's kinds of stage (module docstring)
STAGES = ("shifted", "deadline", "duration")
FORWARD_SHARE = 1.0 / 3.0
GRADIENT_STD = 1e-3  # as autotuner.frameworks.horovod.replay.GRADIENT_STD


def _sleep_to(deadline: float) -> None:
    wait = deadline - time.perf_counter()
    if wait > 0:
        time.sleep(wait)


def _args(argv):
    from .knobs import COMM_HOOKS

    p = argparse.ArgumentParser(prog="python -m autotuner.frameworks.ddp.replay", description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="layout: shipped name, .json path or pkg.mod:factory")
    p.add_argument("--compute-ms", type=float, default=300.0, help="forward+backward per step, ms (1/3 + 2/3)")
    p.add_argument("--update-ms", type=float, default=0.0, help="optimizer update per step, ms")
    p.add_argument("--steps", type=int, default=10, help="measured steps")
    p.add_argument("--warmup", type=int, default=3, help="steps before measuring (the first one rebuilds buckets)")
    p.add_argument("--bucket-cap-mb", type=float, default=None, help="DDP's bucket_cap_mb (MiB; default: DDP's)")
    p.add_argument("--bucket-cap-mb-list", default=None, help="DDP's bucket_cap_mb_list, comma-separated MiB")
    p.add_argument("--gradient-as-bucket-view", action="store_true")
    p.add_argument("--static-graph", action="store_true")
    p.add_argument("--stages", choices=STAGES, default="shifted",
                   help="emulated backward: deadlines shifted by the work between stages (shifted), absolute "
                        "deadlines (deadline), or each stage's share from its entry (duration)")
    p.add_argument("--comm-hook", choices=[h for h in COMM_HOOKS if h != "powerSGD"], default="allreduce")
    p.add_argument("--no-ddp", action="store_true",
                   help="the same module and steps without DDP (the step's compute and autograd's own work alone)")
    add_device_option(p)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = _args(argv)
    from ...errors import KnobError
    from .knobs import DdpConfig

    if a.compute_ms < 0 or a.update_ms < 0 or a.steps < 1 or a.warmup < 1:
        print("error: --compute-ms/--update-ms must be >= 0, --steps >= 1, --warmup >= 1 (the first step rebuilds "
              "DDP's buckets)", file=sys.stderr)
        return 2
    try:
        caps = None if a.bucket_cap_mb_list is None else tuple(float(x) for x in a.bucket_cap_mb_list.split(","))
        cfg = DdpConfig(a.bucket_cap_mb, caps, a.gradient_as_bucket_view, a.comm_hook, a.static_graph)
    except (KnobError, ValueError) as e:
        print(f"error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    layout = load_rank_layout(a.model)
    if layout is None:
        return 2
    try:
        from torch.nn.parallel import DistributedDataParallel
    except ImportError as e:
        print(f"error: the DDP replay needs torch ({e})", file=sys.stderr)
        return 2
    started = init_rank(a.device)
    if started is None:
        return 2
    torch, dist, rank, dev = started
    cuda = dev.type == "cuda"
    dtypes = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "float64": torch.float64}
    T = len(layout.shapes)
    fwd_s = a.compute_ms * FORWARD_SHARE / 1e3
    bwd_s = a.compute_ms * (1 - FORWARD_SHARE) / 1e3
    ready = list(layout.ready_fraction)
    gen = torch.Generator().manual_seed(rank)
    grads = [(torch.randn(shape, generator=gen) * GRADIENT_STD).to(dtypes[dt]).to(dev)
             for shape, dt in zip(layout.shapes, layout.dtypes)]
    clock = {"t0": 0.0, "overrun": 0.0, "shift": 0.0, "ret": None}
    # each stage's own share of the backward (s), in the order autograd runs them (index 0 first)
    share = [max(0.0, ready[i] - (ready[i - 1] if i else 0.0)) * bwd_s for i in range(T)]
    by_duration, shifted = a.stages == "duration", a.stages == "shifted"

    class Stage(torch.autograd.Function):
        """Identity on the activation; its backward waits until tensor ``index`` is ready and returns its gradient."""

        @staticmethod
        def forward(ctx, x, weight, index):  # noqa: ARG004 - weight links the parameter into the graph
            ctx.index = index
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            i = ctx.index
            # the gradient is written inside the stage's compute time, as a real backward's kernel writes it; the
            # fresh tensor is autograd's alone, so AccumulateGrad takes it without a copy (as a computed one)
            start = time.perf_counter()
            if shifted and clock["ret"] is not None:  # the hook's and autograd's work since the last stage
                clock["shift"] += start - clock["ret"]
            out = grads[i].clone()
            end = start + share[i] if by_duration else clock["t0"] + ready[i] * bwd_s + clock["shift"]
            late = time.perf_counter() - end
            if by_duration:  # each stage's overrun adds to the backward
                clock["overrun"] += max(0.0, late)
            else:  # a late stage is absorbed by the slack before a later deadline: what counts is the last one's
                clock["overrun"] = max(0.0, late)
            if late <= 0:
                _sleep_to(end)
            clock["ret"] = time.perf_counter()
            return g, out, None

    class Replay(torch.nn.Module):
        def __init__(self):
            super().__init__()
            # registered in forward order: parameters() is the reverse of the layout's backward order
            self.ws = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(layout.shapes[i], dtype=dtypes[layout.dtypes[i]],
                                                                             device=dev))
                                              for i in range(T - 1, -1, -1)])

        def forward(self, x):
            for k, w in enumerate(self.ws):
                x = Stage.apply(x, w, T - 1 - k)
            return x.sum()

    kw = {"gradient_as_bucket_view": cfg.gradient_as_bucket_view, "static_graph": cfg.static_graph}
    if cfg.bucket_cap_mb_list is not None:
        kw["bucket_cap_mb_list"] = [int(c) if float(c).is_integer() else c for c in cfg.bucket_cap_mb_list]
    elif cfg.bucket_cap_mb is not None:
        kw["bucket_cap_mb"] = cfg.bucket_cap_mb
    if cuda:
        kw["device_ids"] = [dev.index]
    model = Replay().to(dev) if a.no_ddp else DistributedDataParallel(Replay(), **kw)
    if cfg.comm_hook != "allreduce" and not a.no_ddp:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        model.register_comm_hook(None, getattr(default_hooks, f"{cfg.comm_hook}_hook"))
    params = list(model.parameters())
    x = torch.ones(1, requires_grad=True, device=dev)
    times: list[float] = []
    faults: list[int] = []
    overruns: list[float] = []
    first_ms = None
    for step in range(a.warmup + a.steps):
        for p_ in params:
            p_.grad = None  # optimizer.zero_grad(set_to_none=True)
        flt = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t = time.perf_counter()
        loss = model(x)
        _sleep_to(t + fwd_s)
        clock["t0"] = t + fwd_s
        clock["overrun"], clock["shift"], clock["ret"] = 0.0, 0.0, None
        loss.backward()
        if not by_duration:
            _sleep_to(clock["t0"] + bwd_s + clock["shift"])
        if a.update_ms > 0:
            time.sleep(a.update_ms / 1e3)
        synchronize(torch, dev)
        dt = (time.perf_counter() - t) * 1e3
        if step == 0:
            first_ms = dt
        if step >= a.warmup:
            times.append(dt)
            faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - flt)
            overruns.append(clock["overrun"] * 1e3)
        if rank == 0:
            print(f"step {step} time_ms {dt:.3f}{' (warmup)' if step < a.warmup else ''}", flush=True)
    if rank == 0:
        rebuilt = None if a.no_ddp else model._get_ddp_logging_data().get("rebuilt_bucket_sizes")
        ordered = sorted(times)
        n = len(ordered)
        median = ordered[n // 2] if n % 2 else 0.5 * (ordered[n // 2 - 1] + ordered[n // 2])
        result = {"framework": "ddp", "model": layout.name, "ranks": dist.get_world_size(), "steps": a.steps,
                  "warmup": a.warmup, "compute_ms": a.compute_ms, "update_ms": a.update_ms,
                  "gradients": f"normal(0, {GRADIENT_STD:g})", "ddp": None if a.no_ddp else cfg.to_dict(),
                  "bytes_per_step": layout.total_bytes, "step_times_ms": [round(v, 3) for v in times],
                  "median_step_time_ms": round(median, 3), "first_step_ms": round(first_ms, 3),
                  "buckets": [int(b) for b in str(rebuilt).split(", ")] if rebuilt else None,
                  "minor_faults_per_step": int(statistics.median(faults)),
                  "stages": a.stages, "stage_overrun_ms": round(statistics.median(overruns), 3),
                  "malloc_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("MALLOC_")},
                  **device_fields(torch, dev)}
        print(f"{RESULT_TAG} {json.dumps(result)}", flush=True)
    barrier(dist, dev)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
