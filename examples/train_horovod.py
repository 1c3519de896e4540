"""A small transformer trained with Horovod on CPU: your own training script, as autotuner runs it.

Run it alone (2 ranks on this host, Gloo)::

    horovodrun -np 2 -H localhost:2 --gloo python examples/train_horovod.py --steps 10 --warmup 3

or let autotuner run it for each configuration it validates (``--steps``/``--warmup`` come from
validate through ``AUTOTUNER_STEPS`` / ``AUTOTUNER_WARMUP`` when not given here)::

    autotuner validate --env fresh-poll-2gbit --model examples/layouts/tiny_transformer.json \\
        --proposals suggest.json -- python examples/train_horovod.py

The three things a script needs for autotuner (docs/how-to/apply-in-your-script.md, "Horovod"):

1. ``hvd.DistributedOptimizer`` with ``named_parameters``: Horovod then allreduces each gradient as
   ``allreduce.<name>`` when backward produces it (horovod/torch/optimizer.py, ``_make_hook``), which
   is what the simulator models from the layout.
2. Rank 0 prints one line ``AUTOTUNER_STEP_TIME_MS <ms>`` per measured step (after warm-up), the
   form :mod:`autotuner.readers.replay_output` reads (:class:`autotuner.integrations.StepTimer`).
3. The model's layout: ``PYTHONPATH=examples autotuner profile --model train_horovod:build_model
   --input-shape 64,80 --batch-size 16 --threads 1 --concurrent 2 --out my_layout.json`` writes its
   gradient sizes and backward timings.

To train with an answer of ``autotuner suggest ... --json > suggest.json``: its knobs are horovodrun's flags
(``autotuner.integrations.horovod.flags``), its gradient compression is this script's ``--pick suggest.json``
(``hvd.Compression`` through ``autotuner.integrations.horovod.compression``); rank 0 says on stderr which of the
pick's knobs the launch did not set::

    horovodrun -np 2 -H localhost:2 --gloo --fusion-threshold-mb 64 --cycle-time-ms 5 \\
        python examples/train_horovod.py --pick suggest.json

The model: a speech-recognition-like transformer: 80 features per frame (a mel spectrogram's) projected
to d_model 256, a 4-layer ``torch.nn.TransformerEncoder`` (4 heads, feed-forward 1024) and a linear head
over 8000 tokens per frame. Data are synthetic (random frames and targets, a fixed seed per rank), batch
16 sequences of 64 frames per rank. Compute runs
on the CPU with one torch thread per rank, as ``torch.set_num_threads(1)``, so that two ranks use
this machine's two cores.

Exit status 2 with one line on stderr for a bad argument or pick file.
"""
from __future__ import annotations

import argparse
import os
import sys

FEATURES, VOCAB, D_MODEL, HEADS, FF, LAYERS, SEQ = 80, 8000, 256, 4, 1024, 4, 64


def build_model():
    """The model (``torch.nn.Module``); ``autotuner profile examples/train_horovod.py:build_model`` calls this."""
    import torch

    class TinyTransformer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Linear(FEATURES, D_MODEL)
            layer = torch.nn.TransformerEncoderLayer(D_MODEL, HEADS, FF, dropout=0.0, batch_first=True)
            self.encoder = torch.nn.TransformerEncoder(layer, LAYERS, enable_nested_tensor=False)
            self.head = torch.nn.Linear(D_MODEL, VOCAB)

        def forward(self, frames):
            return self.head(self.encoder(self.embed(frames)))

    torch.manual_seed(0)
    return TinyTransformer()


def _count(text: str, env: str, default: int, minimum: int) -> int:
    raw = text if text is not None else os.environ.get(env, str(default))
    try:
        n = int(raw)
    except ValueError:
        n = minimum - 1
    if n < minimum:
        print(f"error: steps/warmup {raw!r}: give a whole number >= {minimum}", file=sys.stderr)
        sys.exit(2)
    return n


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", default=None, help="measured steps (default: $AUTOTUNER_STEPS or 10)")
    p.add_argument("--warmup", default=None, help="warm-up steps, not measured (default: $AUTOTUNER_WARMUP or 3)")
    p.add_argument("--batch-size", type=int, default=16, help="sequences per rank per step (default 16)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank (default 1)")
    p.add_argument("--pick", default=None, metavar="FILE",
                   help="apply the recommended proposal's gradient compression of this suggest --json output "
                        "(its knobs are horovodrun's flags; default: no compression)")
    args = p.parse_args(argv)
    steps = _count(args.steps, "AUTOTUNER_STEPS", 10, 1)
    warmup = _count(args.warmup, "AUTOTUNER_WARMUP", 3, 0)
    if args.batch_size < 1 or args.threads < 1:
        print("error: --batch-size and --threads must be >= 1", file=sys.stderr)
        return 2
    from autotuner import Proposal
    from autotuner.integrations import StepTimer, load_pick
    from autotuner.integrations import horovod as pick_horovod

    import horovod.torch as hvd
    import torch

    pick, notes, compression = None, [], hvd.Compression.none
    if args.pick is not None:
        try:
            pick = load_pick(args.pick)
            if not isinstance(pick, Proposal):
                raise ValueError(f"--pick {args.pick}: a DDP answer; give suggest --json output")
            notes, compression = pick_horovod.unapplied(pick), pick_horovod.compression(pick)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2

    hvd.init()
    if hvd.rank() == 0 and notes:
        print(f"note: the pick's knobs not set by this launch (give horovodrun "
              f"{' '.join(pick_horovod.flags(pick))}): {'; '.join(notes)}", file=sys.stderr)
    torch.set_num_threads(args.threads)
    model = build_model()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = torch.optim.SGD(model.parameters(), lr=0.01 * hvd.size())
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters(), compression=compression)
    gen = torch.Generator().manual_seed(1234 + hvd.rank())
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
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
