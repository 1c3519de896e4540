"""What every DDP program run under torchrun starts with (:mod:`.sweepprobe`, :mod:`.burstprobe`, :mod:`.replay`,
:mod:`.firsttouchprobe`, :mod:`.cpuprobe`): the sizes or layout argument read, and the rank's process group: Gloo on
CPU ranks (one torch thread, as the replays run), or with ``--device cuda`` NCCL on the GPU ``LOCAL_RANK`` names
(``torch.cuda.set_device``, as a DDP training script does). Errors are one line on stderr and ``None``, for the
caller to exit with status 2; a CUDA rank's refusal (:func:`refuse`) also prints its line behind
:data:`REFUSED_TAG` on stdout, which torchrun's own report of the failed rank does not bury."""
from __future__ import annotations

import os
import sys

#: where a probe's ranks run (``--device``): CPU tensors over Gloo, or CUDA tensors over NCCL
DEVICES = ("cpu", "cuda")
#: the stdout tag of a rank's refusal (:func:`refuse`): ``AUTOTUNER_DDP_REFUSED error: <one line>``
REFUSED_TAG = "AUTOTUNER_DDP_REFUSED"
DEVICE_HELP = ("where the ranks run: cpu (CPU tensors, Gloo) or cuda (the GPU LOCAL_RANK names, CUDA tensors, NCCL; "
               "timings bracketed by torch.cuda.synchronize())")


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
    started = init_rank("cpu")
    return None if started is None else started[:3]


def add_device_option(parser) -> None:
    """``--device {cpu,cuda}`` on an argparse parser (default cpu: :data:`DEVICE_HELP`)."""
    parser.add_argument("--device", choices=DEVICES, default="cpu", help=DEVICE_HELP)


def refuse(message: str) -> None:
    """A rank's refusal: ``error: <message>`` as one line on stderr, and behind :data:`REFUSED_TAG` on stdout (the
    launcher shows it: under torchrun, stderr's last lines are torchrun's report of the failed rank)."""
    line = f"error: {message}"
    print(f"{REFUSED_TAG} {line}", flush=True)
    print(line, file=sys.stderr, flush=True)


def cuda_refusal() -> str | None:
    """Why this rank cannot run with ``--device cuda`` (one line), or None: this torch sees no CUDA device
    (``torch.cuda.is_available()``: a CPU build, no driver, no GPU), it has no NCCL
    (``torch.distributed.is_nccl_available()``), or ``LOCAL_RANK`` names a GPU this host has not
    (``>= torch.cuda.device_count()``: more ranks per host than GPUs)."""
    import torch
    import torch.distributed as dist

    if not torch.cuda.is_available():
        build = "a CPU build" if torch.version.cuda is None else f"CUDA {torch.version.cuda}, no device visible"
        return f"--device cuda: torch {torch.__version__} sees no CUDA device ({build})"
    if not dist.is_nccl_available():
        return f"--device cuda: torch {torch.__version__} was built without NCCL (torch.distributed.is_nccl_available())"
    local = os.environ.get("LOCAL_RANK")
    n = torch.cuda.device_count()
    if local is not None and (not local.isdigit() or int(local) >= n):
        return (f"--device cuda: LOCAL_RANK {local} but this host has {n} GPU(s): at most {n} ranks per host "
                "(--nproc-per-node)")
    return None


def init_rank(device: str = "cpu"):
    """This rank's process group on ``device`` (one of :data:`DEVICES`): ``"cpu"``: Gloo
    (``init_process_group("gloo")``); ``"cuda"``: ``torch.cuda.set_device(LOCAL_RANK)`` then NCCL
    (``init_process_group("nccl")``). One torch thread either way. Returns ``(torch, torch.distributed, rank,
    torch.device)``, or None after one line on stderr: outside torchrun (no ``RANK``), or a CUDA rank's
    :func:`cuda_refusal` (also on stdout, :func:`refuse`)."""
    if device not in DEVICES:
        print(f"error: --device {device}: one of {', '.join(DEVICES)}", file=sys.stderr)
        return None
    if device == "cuda":
        why = cuda_refusal()
        if why is not None:
            refuse(why)
            return None
    if "RANK" not in os.environ:
        print("error: run it under torchrun (no RANK in the environment)", file=sys.stderr)
        return None
    import torch
    import torch.distributed as dist

    if device == "cuda":
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl")
    else:
        dev = torch.device("cpu")
        dist.init_process_group("gloo")
    torch.set_num_threads(1)
    return torch, dist, dist.get_rank(), dev


def barrier(dist, dev) -> None:
    """``dist.barrier()``, on a CUDA rank over its own GPU (``device_ids=[index]``: NCCL's barrier is an allreduce on
    a device, which it would otherwise guess)."""
    if dev.type == "cuda":
        dist.barrier(device_ids=[dev.index])
    else:
        dist.barrier()


def synchronize(torch, dev) -> None:
    """Wait for the work queued on ``dev`` (``torch.cuda.synchronize``); nothing on a CPU rank, whose calls return
    when their work is done."""
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def device_fields(torch, dev) -> dict:
    """The result keys a CUDA rank adds (a CPU rank's results stay as they were: {}): ``device`` ("cuda"),
    ``gpu`` (``torch.cuda.get_device_name``), ``cuda`` (``torch.version.cuda``), ``nccl``
    (``torch.cuda.nccl.version()``, dotted)."""
    if dev.type != "cuda":
        return {}
    return {"device": "cuda", "gpu": torch.cuda.get_device_name(dev), "cuda": torch.version.cuda,
            "nccl": ".".join(map(str, torch.cuda.nccl.version()))}
