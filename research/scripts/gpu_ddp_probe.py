"""What PyTorch DDP's Reducer costs on one GPU besides the wire (issue 30: NCCL with CUDA tensors).

One GPU cannot run a two-rank NCCL job (NCCL refuses two ranks on one device), so no cluster's
allreduce is measured here. What one rank *can* measure is everything DDP does on the device
around its collectives, for a world of one (``ProcessGroupNCCL``, one rank: each allreduce is a
launch and a local pass, no peer):

- ``nccl``: ``dist.all_reduce`` of float32 / float16 / bfloat16 tensors, 4 KiB .. 256 MiB, one
  rank: the collective's floor on this GPU (launch + one pass over the buffer), CUDA events,
  median of ``trials`` of the mean of back-to-back calls (ms).
- ``ddp``: real ``DistributedDataParallel`` training steps of torchvision models (``weights=None``,
  3x224x224, batch 64, SGD, float32) against the same module without DDP ("plain"), for DDP's
  default, ``bucket_cap_mb`` 1 / 25 / 100, ``gradient_as_bucket_view=True``,
  ``fp16_compress_hook``, ``bf16_compress_hook`` and (where this torch has it)
  ``bucket_cap_mb_list=[1, 4, 25]``. Each (model, setting) is built afresh from one module copy
  in each of ``rounds`` interleaved rounds; the first 3 steps are timed one by one (the first
  iteration runs with one bucket, the Reducer rebuilds after it: ``reducer.cpp``
  ``rebuild_buckets``), then ``warmup`` steps, then ``steps`` timed steps (CUDA events around
  forward + backward + ``optimizer.step()``, synchronised each step). DDP's own logging data
  (``model._get_ddp_logging_data()``: bucket sizes, sampled compute/comm times) is kept.

  DDP minus plain is what DDP's Reducer adds on this GPU with no wire: the copies into and out
  of the buckets (``mark_variable_ready_dense``, ``finalize_bucket_dense``), the hooks' casts,
  the per-bucket launches and the stream waits.

Needs only torch and torchvision (no autotuner import). Run on a machine with a CUDA GPU::

    python3 research/scripts/gpu_ddp_probe.py --out OUT/ddp-h100.json

``--device cpu --models tiny`` runs the same code on Gloo CPU ranks with a small MLP (a smoke
test; its figures mean nothing). Output: one JSON object (schema ``autotuner.gpu-ddp-probe/1``),
written atomically; progress lines on stdout. Exit 2 with one line for bad input or no CUDA.
"""
from __future__ import annotations

import argparse
import copy
import inspect
import json
import os
import socket
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_fp16_probe import nvidia_smi  # noqa: E402  (the device line both GPU records carry)

MODELS = ("resnet50", "resnet101", "vgg16")
HAS_LIST = "bucket_cap_mb_list" in inspect.signature(DDP.__init__).parameters
#: setting name -> (DDP keyword arguments, comm hook or None); "plain" is the module without DDP
SETTINGS = {
    "plain": None,
    "default": ({}, None),
    "cap1": ({"bucket_cap_mb": 1}, None),
    "cap25": ({"bucket_cap_mb": 25}, None),
    "cap100": ({"bucket_cap_mb": 100}, None),
    "view": ({"gradient_as_bucket_view": True}, None),
    "fp16_hook": ({}, default_hooks.fp16_compress_hook),
    "bf16_hook": ({}, default_hooks.bf16_compress_hook),
}
if HAS_LIST:
    SETTINGS["list_1_4_25"] = ({"bucket_cap_mb_list": [1, 4, 25]}, None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Timer:
    """Times a callable on the device: CUDA events (ms) or perf_counter on CPU."""

    def __init__(self, cuda: bool):
        self.cuda = cuda

    def one(self, fn) -> float:
        if self.cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            torch.cuda.synchronize()
            return a.elapsed_time(b)
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3

    def mean_of(self, fn, reps: int) -> float:
        if self.cuda:
            torch.cuda.synchronize()
        return self.one(lambda: [fn() for _ in range(reps)]) / reps


def nccl_floor(dev, timer: Timer, trials: int) -> list[dict]:
    rows = []
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        esz = torch.tensor([], dtype=dtype).element_size()
        for k in range(12, 29, 2):  # 4 KiB .. 256 MiB
            nbytes = 2 ** k
            t = torch.randn(nbytes // esz, device=dev).to(dtype)
            for _ in range(3):
                dist.all_reduce(t)
            reps = max(5, min(200, 2 ** 27 // nbytes))
            ts = [timer.mean_of(lambda: dist.all_reduce(t), reps) for _ in range(trials)]
            rows.append({"dtype": str(dtype).replace("torch.", ""), "bytes": nbytes, "reps": reps,
                         "ms": statistics.median(ts), "ms_min": min(ts), "ms_max": max(ts)})
            del t
    return rows


def build(name: str, dev):
    torch.manual_seed(0)
    if name == "tiny":
        m = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(8)], torch.nn.Linear(256, 10))
        return m.to(dev), (16, 256)
    import torchvision

    return getattr(torchvision.models, name)(weights=None).to(dev), (64, 3, 224, 224)


def run_setting(base, shape, setting: str, dev, timer: Timer, warmup: int, steps: int) -> dict:
    module = copy.deepcopy(base)
    spec = SETTINGS[setting]
    if spec is None:
        model = module
    else:
        kw, hook = spec
        model = DDP(module, device_ids=[dev.index] if dev.type == "cuda" else None, **kw)
        if hook is not None:
            model.register_comm_hook(None, hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randn(*shape, generator=gen).to(dev)
    y = torch.randint(0, 10, (shape[0],), generator=gen).to(dev)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()

    first = [timer.one(step) for _ in range(3)]
    for _ in range(warmup):
        step()
    ts = [timer.one(step) for _ in range(steps)]
    out = {"first_steps_ms": first, "step_ms": statistics.median(ts), "step_ms_min": min(ts),
           "step_ms_max": max(ts), "steps": steps}
    if spec is not None:
        log = model._get_ddp_logging_data()
        out["ddp_logging"] = {k: v for k, v in log.items() if isinstance(v, (int, float, str))}
    del model, opt, module
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma list of torchvision models or 'tiny' ({','.join(MODELS)})")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--trials", type=int, default=7)
    ap.add_argument("--settings", default=",".join(SETTINGS), help="comma list of the settings to run (plain always)")
    ap.add_argument("--no-floor", action="store_true", help="skip the one-rank allreduce floor")
    a = ap.parse_args()
    if min(a.rounds, a.steps, a.trials) < 1 or a.warmup < 0:
        print("error: --rounds, --steps and --trials must be >= 1, --warmup >= 0", file=sys.stderr)
        return 2
    cuda = a.device == "cuda"
    if cuda and not torch.cuda.is_available():
        print("error: no CUDA device: this probe measures a GPU (--device cpu for a smoke test)", file=sys.stderr)
        return 2
    models = [m.strip() for m in a.models.split(",") if m.strip()]
    wanted = {"plain", *(x.strip() for x in a.settings.split(",") if x.strip())}
    if wanted - set(SETTINGS):
        print(f"error: --settings {sorted(wanted - set(SETTINGS))[0]}: one of {', '.join(SETTINGS)}", file=sys.stderr)
        return 2
    dev = torch.device("cuda", 0) if cuda else torch.device("cpu")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(_free_port()))
    dist.init_process_group("nccl" if cuda else "gloo", rank=0, world_size=1)
    if cuda:
        torch.backends.cudnn.benchmark = False  # the first steps time DDP, not cuDNN's algorithm search
    timer = Timer(cuda)
    smi = nvidia_smi() if cuda else ""
    t0 = time.time()
    floor = nccl_floor(dev, timer, a.trials) if cuda and not a.no_floor else []
    for r in floor:
        if r["dtype"] == "float32":
            print(f"allreduce 1 rank {r['bytes']:>10,} B float32: {r['ms'] * 1e3:8.1f} us", flush=True)
    ddp = []

    def write(done: bool) -> dict:
        """The record so far, written atomically after each model (a run cut short keeps what it measured)."""
        rec = {"schema": "autotuner.gpu-ddp-probe/1", "device": torch.cuda.get_device_name(0) if cuda else "cpu",
               "nvidia_smi": smi, "torch": torch.__version__, "cuda": torch.version.cuda,
               "nccl": ".".join(map(str, torch.cuda.nccl.version())) if cuda else None,
               "has_bucket_cap_mb_list": HAS_LIST, "complete": done,
               "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "seconds": round(time.time() - t0, 1),
               "command": "python3 research/scripts/gpu_ddp_probe.py " + " ".join(sys.argv[1:]),
               "rounds": a.rounds, "warmup": a.warmup, "steps": a.steps, "nccl_one_rank": floor, "ddp": ddp}
        a.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = a.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(rec, indent=1) + "\n")
        os.replace(tmp, a.out)
        return rec

    for name in models:
        base, shape = build(name, dev)
        n_t = sum(1 for p in base.parameters() if p.requires_grad)
        n_e = sum(p.numel() for p in base.parameters() if p.requires_grad)
        rows = {s: [] for s in SETTINGS if s in wanted and (cuda or s != "bf16_hook")}  # no bf16 on Gloo CPU
        for rnd in range(a.rounds):
            order = list(rows) if rnd % 2 == 0 else list(reversed(rows))
            for s in order:
                rows[s].append(run_setting(base, shape, s, dev, timer, a.warmup, a.steps))
        for s, rs in rows.items():
            meds = [r["step_ms"] for r in rs]
            print(f"{name} ({n_t} tensors, {n_e:,} elements) {s:>12}: step {statistics.median(meds):8.2f} ms "
                  f"(rounds {min(meds):.2f}-{max(meds):.2f}), first {rs[0]['first_steps_ms'][0]:.1f} ms", flush=True)
        ddp.append({"model": name, "tensors": n_t, "elements": n_e, "batch": shape[0], "settings": rows})
        del base
        write(False)
    dist.destroy_process_group()
    rec = write(True)
    print(f"wrote {a.out} ({rec['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
