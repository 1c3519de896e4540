"""The small transformer of ``examples/train_horovod.py`` trained with PyTorch DDP on CPU: your own DDP script, as
``autotuner ddp validate`` runs it.

Run it alone (2 ranks on this host, Gloo)::

    torchrun --standalone --nproc-per-node 2 examples/train_ddp.py --steps 10 --warmup 3

or let autotuner run it for each DDP setting it validates::

    autotuner ddp validate --env ddp-2gbit --model my_layout.json --proposals pick.json -- python examples/train_ddp.py

The three things a script needs for autotuner (docs/ddp.md, "Your own script"):

1. Take the bucket setting from the environment (:func:`ddp_kwargs`, :func:`register_hook`): ``autotuner ddp
   validate`` sets ``AUTOTUNER_DDP_BUCKET_CAP_MB`` or ``AUTOTUNER_DDP_BUCKET_CAP_MB_LIST`` (MiB, comma-separated),
   ``AUTOTUNER_DDP_GRADIENT_AS_BUCKET_VIEW`` (0/1) and ``AUTOTUNER_DDP_COMM_HOOK`` (``allreduce`` or
   ``fp16_compress``) for each trial; unset ones keep DDP's defaults.
2. Rank 0 prints one line ``AUTOTUNER_STEP_TIME_MS <ms>`` per measured step (after warm-up;
   ``--steps``/``--warmup`` from ``AUTOTUNER_STEPS`` / ``AUTOTUNER_WARMUP``), the form
   :mod:`autotuner.readers.replay_output` reads. A step is ``zero_grad``, forward, ``backward`` (DDP's allreduces
   finish inside it) and the optimizer's step.
3. The model's layout: ``PYTHONPATH=examples autotuner profile --model train_horovod:build_model --input-shape
   64,80 --batch-size 16 --threads 1 --concurrent 2 --out my_layout.json`` (the same model as the Horovod script).

Exit status 2 with one line on stderr for a bad argument or setting.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_horovod import FEATURES, SEQ, VOCAB, _count, build_model  # noqa: E402  (the same model)


def ddp_kwargs() -> dict:
    """``DistributedDataParallel`` keyword arguments from ``AUTOTUNER_DDP_*`` (unset: DDP's defaults). Raises
    ValueError (one line) for a value that is not a number of MiB or 0/1."""
    kw: dict = {}
    caps = os.environ.get("AUTOTUNER_DDP_BUCKET_CAP_MB_LIST")
    cap = os.environ.get("AUTOTUNER_DDP_BUCKET_CAP_MB")
    if caps:
        kw["bucket_cap_mb_list"] = [int(c) if float(c).is_integer() else float(c) for c in caps.split(",")]
    elif cap:
        kw["bucket_cap_mb"] = float(cap)
    view = os.environ.get("AUTOTUNER_DDP_GRADIENT_AS_BUCKET_VIEW", "0")
    if view not in ("0", "1"):
        raise ValueError(f"AUTOTUNER_DDP_GRADIENT_AS_BUCKET_VIEW={view!r}: give 0 or 1")
    kw["gradient_as_bucket_view"] = view == "1"
    return kw


def register_hook(model) -> None:
    """Register ``AUTOTUNER_DDP_COMM_HOOK``'s hook (``fp16_compress``), or none (``allreduce``, unset)."""
    hook = os.environ.get("AUTOTUNER_DDP_COMM_HOOK", "allreduce")
    if hook == "allreduce":
        return
    if hook != "fp16_compress":
        raise ValueError(f"AUTOTUNER_DDP_COMM_HOOK={hook!r}: allreduce or fp16_compress")
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    model.register_comm_hook(None, default_hooks.fp16_compress_hook)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", default=None, help="measured steps (default: $AUTOTUNER_STEPS or 10)")
    p.add_argument("--warmup", default=None, help="warm-up steps, not measured (default: $AUTOTUNER_WARMUP or 3)")
    p.add_argument("--batch-size", type=int, default=16, help="sequences per rank per step (default 16)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank (default 1)")
    args = p.parse_args(argv)
    steps = _count(args.steps, "AUTOTUNER_STEPS", 10, 1)
    warmup = _count(args.warmup, "AUTOTUNER_WARMUP", 3, 1)
    if args.batch_size < 1 or args.threads < 1:
        print("error: --batch-size and --threads must be >= 1", file=sys.stderr)
        return 2
    try:
        kw = ddp_kwargs()
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo")
    torch.set_num_threads(args.threads)
    model = DistributedDataParallel(build_model(), **kw)
    try:
        register_hook(model)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    opt = torch.optim.SGD(model.parameters(), lr=0.01 * dist.get_world_size())
    gen = torch.Generator().manual_seed(1234 + dist.get_rank())
    frames = torch.randn(args.batch_size, SEQ, FEATURES, generator=gen)
    target = torch.randint(0, VOCAB, (args.batch_size, SEQ), generator=gen)
    loss_fn = torch.nn.CrossEntropyLoss()
    for step in range(warmup + steps):
        t = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(model(frames).reshape(-1, VOCAB), target.reshape(-1))
        loss.backward()
        opt.step()
        ms = (time.perf_counter() - t) * 1e3
        if dist.get_rank() == 0:
            tag = "warmup_step_ms" if step < warmup else "AUTOTUNER_STEP_TIME_MS"
            print(f"{tag} {ms:.3f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
