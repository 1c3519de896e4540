"""Replay workload: a training loop whose gradients have exactly a chosen layout.

Run it under horovodrun, e.g.::

    horovodrun -np 2 -H localhost:2 --gloo python -m autotuner.replay --model resnet50 \\
        --compute-ms 300 --steps 10 --warmup 2

Horovod sees the layout's real tensor names (``allreduce.<name>``), sizes, count and backward
order, because each tensor is a real ``torch.nn.Parameter`` registered with
``hvd.DistributedOptimizer``. Compute is emulated, not run, on deadlines from the step's start, as the simulator
times it: forward lasts ``compute_ms / 3`` (building the emulated graph, then sleeping to that
deadline) and backward ``2 * compute_ms / 3`` from the forward's end (the split :mod:`autotuner.frameworks.horovod.fit.fitters`
assumes), handing tensor ``i`` to Horovod when ``ready_fraction[i]`` of backward has elapsed (the
layout's compute shares). Host work of the harness itself (the graph, autograd's start) runs inside
those deadlines, as a GPU job's host runs ahead of its device.
A layout written by ``autotuner profile`` carries measured times: forward and backward are then
the measured ones (``--compute-ms`` given: that total split in the measured ratio), tensor ``i``
is handed over at its measured ``ready_ms`` (scaled alike), and backward goes on after the last
hand-over until its measured end.
Sleeping leaves the CPU to Horovod's background thread and Gloo, as a GPU computing would.
``--compression fp16`` passes ``hvd.Compression.fp16`` to ``DistributedOptimizer``, as a user's script
does: each gradient is cast to float16 in its hook, allreduced as float16, and cast back to float32
in ``step()``'s synchronize (horovod/torch/optimizer.py ``_allreduce_grad_async`` and ``synchronize``).

Gradients are never zeroed: a stage's backward returns no gradient for its parameter, so
``p.grad`` keeps its buffer and each step Horovod allreduces it in place (the buffer is allocated once, up front: horovod/torch/optimizer.py's hook asserts on
``p.grad``). No per-step allocation or memory traffic is added to the step. Between steps, outside the timed step,
every gradient gets its rank's own values back (:data:`VALUES_RENEWED`): Horovod writes the averaged result into
``p.grad`` (in place, or ``p.grad.set_`` the decompressed output with fp16), so without it every rank would allreduce
the *same* values from the second step on, which no training job does and which Gloo's software float16 sum runs
far faster (``x + x`` rounds exactly; ``research/scripts/fp16_rank_values.py``, docs/explanation/fp16-compression.md).

Output (rank 0, stdout): one ``step N time_ms X`` line per step, then one line
``AUTOTUNER_RESULT {json}`` that :func:`autotuner.readers.replay_output.parse_output` reads. Its keys:
``model, ranks, steps, warmup, compute_ms, update_ms, wait, compression, gradients`` (the gradients' values,
:data:`GRADIENT_STD`), ``bytes_per_step`` (bytes allreduced per
step, all tensors), ``step_times_ms`` (list, measured steps only, ms), ``median_step_time_ms``,
``phases_ms`` (where the step went, medians in ms: :data:`PHASES`).

Errors: an unknown layout or bad argument exits with status 2 and one line on stderr.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

# the result's ``gradients`` ends with it: each rank's own values in every step (renewed between steps), since issue
# 29's fourth pass; a record without it held the ranks' identical averages from its second step on
# (:func:`autotuner.schemas.records.same_values_on_every_rank`)
from .schemas.records import VALUES_RENEWED

RESULT_TAG = "AUTOTUNER_RESULT"
#: ``--compression`` values: Horovod 0.28.1's lossless-enough compressors (horovod/torch/compression.py
#: ``Compression.none`` and ``Compression.fp16``)
COMPRESSIONS = ("none", "fp16")
FORWARD_SHARE = 1.0 / 3.0
#: the gradients' values: N(0, GRADIENT_STD**2), seeded by rank. What a CPU sums in float16 costs depends on the
#: values (Gloo's software ``float16`` conversion, ``gloo/types.h``): 16 MiB of float16 averaged took 71.5 ms
#: (median) on loopback for zeros and 183.5 ms for these values (``research/scripts/fp16_values.py``; docs/explanation/fp16-compression.md,
#: "The values matter"); zeros would time a float16 sum no training job runs. 1e-3 is a typical gradient
#: magnitude.
GRADIENT_STD = 1e-3  # same split as autotuner.frameworks.horovod.fit.fitters (forward 1/3, backward 2/3)


def _build(layout, backward_s: float, seed: int = 0):
    """Parameters (backward order) and a forward function chaining one stage per tensor. Each gradient
    buffer holds :data:`GRADIENT_STD`-scaled standard normal values (``seed``: the rank), not zeros."""
    import torch

    dtypes = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
              "float64": torch.float64}
    params = [torch.nn.Parameter(torch.zeros(shape, dtype=dtypes[dt]))
              for shape, dt in zip(layout.shapes, layout.dtypes)]
    gen = torch.Generator().manual_seed(seed)
    # each rank's own gradient-like values, copied into the gradients before every step (:func:`renew`)
    values = [(torch.randn(prm.shape, generator=gen) * GRADIENT_STD).to(prm.dtype) for prm in params]
    for prm, v in zip(params, values):  # the gradient buffer Horovod allreduces in place every step
        prm.grad = v.clone()
    ready = list(layout.ready_fraction)
    clock = {"t0": 0.0, "first": 0.0}  # backward's start (the caller sets it), its first stage's start

    class Stage(torch.autograd.Function):
        """Identity on the activation; its backward waits until this tensor's ready time."""

        @staticmethod
        def forward(ctx, x, weight, index):  # noqa: ARG004 - weight only links the graph
            ctx.index = index
            return x.clone()

        @staticmethod
        def backward(ctx, grad):
            i = ctx.index
            if i == 0:
                clock["first"] = time.perf_counter()
            _sleep_to(clock["t0"] + ready[i] * backward_s)
            return grad, None, None

    def forward(x):
        # Forward runs the stages in forward order (reverse of backward), so autograd's backward
        # visits them in layout (backward) order.
        for i in range(len(params) - 1, -1, -1):
            x = Stage.apply(x, params[i], i)
        return x.sum()

    return params, forward, clock, values


def renew(params, values) -> None:
    """Copy each rank's own values (:func:`_build`'s ``values``) back into the gradients, between steps: Horovod
    left the ranks' average there (:data:`VALUES_RENEWED`)."""
    for prm, v in zip(params, values):
        prm.grad.copy_(v)


#: where a replay step's time goes (``phases_ms`` in the result, medians over the measured steps, ms):
#: building the emulated forward graph; the whole forward (graph + sleep to its deadline); the first
#: stage's backward starting after the forward (autograd's start); ``loss.backward()`` (every stage and
#: Horovod's hooks); after it, the wait (``--wait sleep``: tail + polling until every allreduce is
#: done; ``spin``: the tail); ``opt.step()`` (Horovod's synchronize of every handle, then the update)
PHASES = ("graph", "forward", "backward_start", "backward", "wait", "step")


#: poll interval of ``--wait sleep`` (s). Horovod's own wait (``hvd.synchronize``, which
#: ``DistributedOptimizer.step`` calls) spins: ``WaitAndClear`` loops on ``PollHandle`` and
#: ``std::this_thread::yield()`` (horovod/torch/mpi_ops_v2.cc L1121-1130, 0.28.1), costing nothing on a
#: host with a core per waiting rank. Emulated hosts share this machine's cores: 4 ranks on 2 cores
#: spinning while they wait steal the CPU their own Gloo threads need (a 1 MiB response measured
#: 75.5 ms on 4x1 spinning vs 15.7 ms polling, research/scripts/wait_modes.py, docs/how-to/validate.md). Sleeping until every handle
#: polls done, then calling Horovod's synchronize (which returns at once), keeps Horovod's work
#: unchanged and gives back the cores a real host would have.
WAIT_POLL_S = 0.0002


def _sleep_to(deadline: float) -> None:
    """Sleep until ``time.perf_counter()`` reaches ``deadline`` (s); return at once if it has."""
    wait = deadline - time.perf_counter()
    if wait > 0:
        time.sleep(wait)


def _sleep_until_done(hvd, opt) -> None:
    """Sleep in :data:`WAIT_POLL_S` steps until every gradient allreduce the optimizer started
    (``opt._handles``, horovod/torch/optimizer.py L252) polls done (``hvd.poll``)."""
    handles = [h for h, _ in opt._handles.values() if h is not None]
    while not all(hvd.poll(h) for h in handles):
        time.sleep(WAIT_POLL_S)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m autotuner.replay", description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="layout: shipped name, .json path or pkg.mod:factory")
    p.add_argument("--compute-ms", type=float, default=None,
                   help="forward+backward compute per step, ms (forward 1/3, backward 2/3; default 300, or "
                        "a profiled layout's measured times, split in their ratio)")
    p.add_argument("--update-ms", type=float, default=0.0, help="optimizer update per step, ms")
    p.add_argument("--steps", type=int, default=10, help="measured steps")
    p.add_argument("--warmup", type=int, default=2, help="steps run before measuring")
    p.add_argument("--wait", choices=("spin", "sleep"), default="spin",
                   help="how the step waits for its allreduces: spin = Horovod's own synchronize (a busy "
                        "loop of PollHandle + yield, horovod/torch/mpi_ops_v2.cc WaitAndClear); sleep = "
                        "hvd.poll every 0.2 ms first (emulated hosts sharing few cores: see WAIT_POLL_S)")
    p.add_argument("--compression", choices=COMPRESSIONS, default="none",
                   help="gradient compression DistributedOptimizer applies (horovod/torch/compression.py: fp16 "
                        "casts each gradient to float16 before its allreduce and back after it)")
    args = p.parse_args(argv)
    if (args.compute_ms is not None and args.compute_ms < 0) or args.update_ms < 0 or args.steps < 1 or args.warmup < 0:
        print("error: --compute-ms/--update-ms must be >= 0, --steps >= 1, --warmup >= 0",
              file=sys.stderr)
        return 2

    from ...readers.layouts import load_layout
    try:
        layout = load_layout(args.model)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    try:
        import horovod.torch as hvd
        import torch
    except ImportError as e:
        print(f"error: the replay workload needs torch and horovod ({e}); "
              "run scripts/install_horovod.sh", file=sys.stderr)
        return 2

    hvd.init()
    torch.set_num_threads(1)
    if layout.measured:  # `autotuner profile`: measured forward/backward and ready times
        fwd_ms, bwd_ms = layout.measured_split(args.compute_ms)
        args.compute_ms = fwd_ms + bwd_ms
        forward_s, backward_s = fwd_ms / 1e3, bwd_ms / 1e3
    else:
        if args.compute_ms is None:
            args.compute_ms = 300.0
        forward_s = args.compute_ms * FORWARD_SHARE / 1e3
        backward_s = args.compute_ms * (1 - FORWARD_SHARE) / 1e3
    update_s = args.update_ms / 1e3
    params, forward, clock, values = _build(layout, backward_s, seed=hvd.rank())

    class EmulatedUpdate(torch.optim.Optimizer):
        """An optimizer whose step only waits ``update_ms`` (the update is emulated, not run)."""

        def __init__(self, ps):
            super().__init__(ps, {})

        def step(self, closure=None):  # noqa: ARG002
            if update_s > 0:
                time.sleep(update_s)

    compression = {"none": hvd.Compression.none, "fp16": hvd.Compression.fp16}[args.compression]
    opt = hvd.DistributedOptimizer(EmulatedUpdate(params), named_parameters=list(zip(layout.names, params)),
                                   compression=compression)
    x = torch.ones(1, requires_grad=True)
    times_ms: list[float] = []
    phases: dict[str, list[float]] = {k: [] for k in PHASES}
    for step in range(args.warmup + args.steps):
        renew(params, values)  # outside the timed step: a training step's backward writes fresh gradients
        t = time.perf_counter()
        # The forward lasts forward_s, host work included: a GPU job's host builds its graph (launches
        # kernels) while the device computes, so building the emulated graph (~55 µs per stage here,
        # 8 ms for 158 stages) is not added on top of the emulated compute.
        loss = forward(x)
        tg = time.perf_counter()
        _sleep_to(t + forward_s)
        tf = time.perf_counter()
        # the emulated device's backward starts when its forward ends; autograd's own start (~1.3 ms
        # for 158 Python stages here) runs meanwhile, as a GPU job's host does, not before it
        clock["t0"] = t + forward_s
        loss.backward()
        tb = time.perf_counter()
        _sleep_to(clock["t0"] + backward_s)  # a profiled backward goes on after its last hand-over
        if args.wait == "sleep":
            _sleep_until_done(hvd, opt)
        ts = time.perf_counter()
        opt.step()
        end = time.perf_counter()
        dt = (end - t) * 1e3
        if step >= args.warmup:
            times_ms.append(dt)
            for k, v in zip(PHASES, (tg - t, tf - t, clock["first"] - tf, tb - tf, ts - tb, end - ts)):
                phases[k].append(v * 1e3)
        if hvd.rank() == 0:
            print(f"step {step} time_ms {dt:.3f}{' (warmup)' if step < args.warmup else ''}",
                  flush=True)
    if hvd.rank() == 0:
        ordered = sorted(times_ms)
        n = len(ordered)
        median = ordered[n // 2] if n % 2 else 0.5 * (ordered[n // 2 - 1] + ordered[n // 2])
        result = {"model": layout.name, "ranks": hvd.size(), "steps": args.steps,
                  "warmup": args.warmup, "compute_ms": args.compute_ms, "update_ms": args.update_ms,
                  "wait": args.wait, "compression": args.compression,
                  "gradients": f"normal(0, {GRADIENT_STD:g}), {VALUES_RENEWED}",
                  "bytes_per_step": layout.total_bytes, "step_times_ms": [round(v, 3) for v in times_ms],
                  "median_step_time_ms": round(median, 3),
                  "phases_ms": {k: round(sorted(v)[n // 2], 3) for k, v in phases.items()}}
        print(f"{RESULT_TAG} {json.dumps(result)}", flush=True)
    # Horovod's timeline is written by a background thread; give it a moment to drain before
    # shutdown, or the last step's records may be missing from the file.
    time.sleep(0.5)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
