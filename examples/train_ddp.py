"""The small transformer of ``examples/train_horovod.py`` trained with PyTorch DDP on CPU: your own DDP script, as
``autotuner ddp validate`` runs it.

Run it alone (2 ranks on this host, Gloo)::

    torchrun --standalone --nproc-per-node 2 examples/train_ddp.py --steps 10 --warmup 3

or let autotuner run it for each DDP setting it validates::

    autotuner ddp validate --env ddp-2gbit --model my_layout.json --proposals pick.json -- python examples/train_ddp.py

The three things a script needs for autotuner (docs/how-to/apply-in-your-script.md, "PyTorch DDP"), each one call of
:mod:`autotuner.integrations`:

1. Take the DDP setting from the environment (``pick_from_env``, then ``ddp_kwargs`` and ``apply``): ``autotuner ddp
   validate`` sets ``AUTOTUNER_DDP_BUCKET_CAP_MB`` or ``AUTOTUNER_DDP_BUCKET_CAP_MB_LIST`` (MiB, comma-separated),
   ``AUTOTUNER_DDP_GRADIENT_AS_BUCKET_VIEW`` (0/1) and ``AUTOTUNER_DDP_COMM_HOOK`` (``allreduce`` or
   ``fp16_compress``) for each trial; unset ones keep DDP's defaults. Outside a validation, ``--pick suggest.json``
   (``autotuner ddp suggest ... --json`` output) applies its recommended setting (``load_pick``).
2. Rank 0 prints one line ``AUTOTUNER_STEP_TIME_MS <ms>`` per measured step (after warm-up;
   ``--steps``/``--warmup`` from ``AUTOTUNER_STEPS`` / ``AUTOTUNER_WARMUP``), the form
   :mod:`autotuner.readers.replay_output` reads (``StepTimer``). A step is ``zero_grad``, forward, ``backward``
   (DDP's allreduces finish inside it) and the optimizer's step.
3. The model's layout: ``PYTHONPATH=examples autotuner profile --model train_horovod:build_model --input-shape
   64,80 --batch-size 16 --threads 1 --concurrent 2 --out my_layout.json`` (the same model as the Horovod script).

Exit status 2 with one line on stderr for a bad argument, setting or pick file.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_horovod import FEATURES, SEQ, VOCAB, _count, build_model  # noqa: E402  (the same model)

from autotuner import DdpConfig  # noqa: E402
from autotuner.integrations import StepTimer, load_pick  # noqa: E402
from autotuner.integrations.torch import ENV_VARS, apply, pick_from_env  # noqa: E402
from autotuner.integrations.torch import ddp_kwargs as _ddp_kwargs  # noqa: E402


def setting(pick: str | None = None) -> DdpConfig:
    """The DDP setting to train with: ``pick``'s recommended one (a ``ddp suggest --json`` file), else the one
    ``ddp validate`` sets in the environment (DDP's defaults when none is set). Raises ValueError (one line) for a
    bad value, an unreadable pick, or a pick given under ``ddp validate``."""
    if pick is None:
        return pick_from_env()
    given = sorted(v for v in ENV_VARS.values() if os.environ.get(v))
    if given:
        raise ValueError(f"--pick and {given[0]} both given: under ddp validate each trial's setting comes from "
                         "the environment; drop --pick")
    cfg = load_pick(pick)
    if not isinstance(cfg, DdpConfig):
        raise ValueError(f"--pick {pick}: a Horovod suggest answer; give ddp suggest --json output")
    return cfg


def ddp_kwargs() -> dict:
    """``DistributedDataParallel`` keyword arguments of the setting ``ddp validate`` sets in the environment (DDP's
    defaults: ``{}``). Raises ValueError (one line) for a value that is not a number of MiB, 0/1 or a hook name."""
    return _ddp_kwargs(pick_from_env())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", default=None, help="measured steps (default: $AUTOTUNER_STEPS or 10)")
    p.add_argument("--warmup", default=None, help="warm-up steps, not measured (default: $AUTOTUNER_WARMUP or 3)")
    p.add_argument("--batch-size", type=int, default=16, help="sequences per rank per step (default 16)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank (default 1)")
    p.add_argument("--pick", default=None, metavar="FILE",
                   help="train with the recommended setting of this ddp suggest --json output (default: the "
                        "AUTOTUNER_DDP_* environment ddp validate sets, else DDP's defaults)")
    args = p.parse_args(argv)
    steps = _count(args.steps, "AUTOTUNER_STEPS", 10, 1)
    warmup = _count(args.warmup, "AUTOTUNER_WARMUP", 3, 1)
    if args.batch_size < 1 or args.threads < 1:
        print("error: --batch-size and --threads must be >= 1", file=sys.stderr)
        return 2
    try:
        pick = setting(args.pick)
        kw = _ddp_kwargs(pick)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo")
    torch.set_num_threads(args.threads)
    model = apply(DistributedDataParallel(build_model(), **kw), pick)
    opt = torch.optim.SGD(model.parameters(), lr=0.01 * dist.get_world_size())
    gen = torch.Generator().manual_seed(1234 + dist.get_rank())
    frames = torch.randn(args.batch_size, SEQ, FEATURES, generator=gen)
    target = torch.randint(0, VOCAB, (args.batch_size, SEQ), generator=gen)
    loss_fn = torch.nn.CrossEntropyLoss()
    with StepTimer(warmup=warmup) as timer:
        for _ in range(warmup + steps):
            with timer.step():
                opt.zero_grad()
                loss = loss_fn(model(frames).reshape(-1, VOCAB), target.reshape(-1))
                loss.backward()
                opt.step()
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
