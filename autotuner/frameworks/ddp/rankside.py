"""What every DDP program run under torchrun starts with (:mod:`.sweepprobe`, :mod:`.burstprobe`, :mod:`.replay`,
:mod:`.firsttouchprobe`): the sizes or layout argument read, and the rank's Gloo process group (one torch thread,
as the replays run). Errors are one
line on stderr and ``None``, for the caller to exit with status 2."""
from __future__ import annotations

import os
import sys


def parse_sizes(text: str) -> list[int] | None:
    """``--sizes``: comma-separated whole bytes, each >= 4; None (and one line on stderr) otherwise."""
    try:
        sizes = [int(x) for x in text.split(",")]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 4:
        print(f"error: --sizes {text!r}: give whole numbers of bytes >= 4, comma-separated", file=sys.stderr)
        return None
    return sizes


def load_rank_layout(name: str):
    """``--model``: the layout (:func:`autotuner.readers.layouts.load_layout`: a shipped name, a .json path or
    pkg.mod:factory), or None (and the error's first line on stderr)."""
    from ...readers.layouts import load_layout

    try:
        return load_layout(name)
    except ValueError as e:
        print(f"error: {str(e).splitlines()[0]}", file=sys.stderr)
        return None


def init_gloo_rank():
    """This rank's Gloo process group (``torch.distributed.init_process_group("gloo")``, one torch thread): returns
    ``(torch, torch.distributed, rank)``, or None (and one line on stderr) outside torchrun (no ``RANK``)."""
    if "RANK" not in os.environ:
        print("error: run it under torchrun (no RANK in the environment)", file=sys.stderr)
        return None
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    torch.set_num_threads(1)
    return torch, dist, dist.get_rank()
