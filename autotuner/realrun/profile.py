"""``autotuner profile``: when each gradient of a real ``torch.nn.Module`` becomes ready.

Runs the model's forward and backward ``warmup + steps`` times on a random input and registers
``Tensor.register_post_accumulate_grad_hook`` (torch >= 2.1) on every trainable parameter. The
moment that hook runs is the moment Horovod 0.28's ``DistributedOptimizer`` hook (a hook on
the parameter's gradient accumulator, ``horovod/torch/optimizer.py``) hands the gradient to
Horovod. Times, per measured step:

- CPU: ``time.perf_counter_ns()`` at the start of forward, at the end of forward (loss
  computed), in each hook, and when ``loss.backward()`` returns. CPU kernels run
  synchronously, so the hook's time is when the gradient exists.
- CUDA: a CUDA event recorded on the current stream at the same points (in the hook:
  ``torch.cuda.current_stream()`` of the autograd thread), read after
  ``torch.cuda.synchronize()`` at the end of the step: the time the GPU produced the
  gradient, not when the host (which runs ahead) queued its kernels.

Reported: medians over the measured steps (warm-up steps dropped) of forward, backward and each
gradient's ready time (ms after the end of forward). The loss is ``out.float().sum()`` of the
model's output (a tensor, or the first floating-point tensor of a tuple, list or dict output);
no optimizer runs (gradients are set to None before each step, as ``zero_grad()`` does).

torch is imported only inside the functions here (and this module only by ``autotuner profile``
and ``research/scripts/profile_gradient_readiness.py``); :func:`measure` needs nothing but torch and
this package's :mod:`autotuner.errors`, so it also runs on a machine with only torch installed.
"""
from __future__ import annotations

import contextlib
import math
import platform
import re
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import AutotunerError

#: ``profiled_with`` in the layouts written here
PROFILER = "autotuner profile"
#: the most input elements a profile allocates (2**31 float32 = 8 GiB): a typo fails fast
MAX_INPUT_ELEMENTS = 2**31
DEVICES = ("cpu", "cuda")


class ProfileError(AutotunerError):
    """A model cannot be profiled (bad input shape, no device, its forward or backward fails)."""


def parse_shape(text: str, what: str = "--input-shape") -> tuple[int, ...]:
    """``"3,224,224"`` (or ``3x224x224``) -> ``(3, 224, 224)``; ProfileError for anything else."""
    t = re.sub(r"\s+", "", str(text))
    dims = tuple(int(p) for p in re.split(r"[,x×]", t)) if re.fullmatch(r"\d+([,x×]\d+)*", t, re.ASCII) else ()
    if not dims or any(d < 1 for d in dims):
        raise ProfileError(f"{what} {text!r}: expected whole numbers >= 1 separated by commas, e.g. 3,224,224")
    return dims


@dataclass
class Measurement:
    """What :func:`measure` recorded, per measured step (ms).

    ``names``: the trainable parameters (``named_parameters()`` order); ``ready[name]``: its ready
    times in the steps where its hook ran; ``orders``: hook order per step; ``update_ms`` only
    when an optimizer ran.
    """

    names: list[str]
    forward_ms: list[float] = field(default_factory=list)
    backward_ms: list[float] = field(default_factory=list)
    update_ms: list[float] = field(default_factory=list)
    orders: list[tuple[str, ...]] = field(default_factory=list)
    ready: dict[str, list[float]] = field(default_factory=dict)
    tails_ms: list[float] = field(default_factory=list)

    @property
    def order_stable(self) -> bool:
        return all(o == self.orders[0] for o in self.orders)

    def ready_order(self) -> tuple[list[str], list[float], list[str]]:
        """(names whose hook ran, in order of median ready time; those medians (ms), made
        non-decreasing and at most the median backward; names whose hook never ran)."""
        first = {n: i for i, n in enumerate(self.orders[0])} if self.orders else {}
        med = {n: statistics.median(v) for n, v in self.ready.items() if v}
        fired = sorted(med, key=lambda n: (med[n], first.get(n, len(first))))
        bwd = statistics.median(self.backward_ms)
        out, prev = [], 0.0
        for n in fired:
            prev = min(max(med[n], prev), bwd)
            out.append(prev)
        return fired, out, [n for n in self.names if n not in med]


def default_loss(out: Any):
    """``out.float().sum()`` of the model's output: a tensor, or the first floating-point tensor of
    a tuple, list or dict (e.g. a Hugging Face ``ModelOutput``). ProfileError otherwise."""
    import torch

    t = out
    if isinstance(out, (tuple, list)):
        t = next((v for v in out if isinstance(v, torch.Tensor) and v.is_floating_point()), None)
    elif isinstance(out, dict) or hasattr(out, "values") and not isinstance(out, torch.Tensor):
        t = next((v for v in out.values() if isinstance(v, torch.Tensor) and v.is_floating_point()), None)
    if not isinstance(t, torch.Tensor) or not t.is_floating_point():
        raise ProfileError(f"the model's forward returned {type(out).__name__}"
                           + (f" of dtype {t.dtype}" if isinstance(t, torch.Tensor) else "")
                           + ", not a floating-point tensor (or a tuple/dict holding one) to take the loss of")
    if not t.requires_grad:
        raise ProfileError("the model's output does not depend on any trainable parameter (no gradient to time)")
    return t.float().sum()


def _user_call(what: str, fn: Callable, *args):
    """Run user code; any exception becomes one ProfileError line naming ``what``."""
    try:
        return fn(*args)
    except ProfileError:
        raise
    except Exception as e:  # user code: report type and message, never a traceback
        msg = " ".join(str(e).split())
        if len(msg) > 300:
            msg = msg[:297] + "..."
        raise ProfileError(f"{what} failed: {type(e).__name__}: {msg}") from None


def measure(module, x, *, cuda: bool = False, amp_dtype=None, steps: int = 10, warmup: int = 3,
            loss_fn: Callable | None = None, optimizer=None, what: str = "the model") -> Measurement:
    """Run ``warmup + steps`` training steps of ``module`` (already on its device, in train mode) on
    input ``x`` and time forward, backward, each parameter's post-accumulate-grad hook and, with
    an ``optimizer``, its ``step()`` (gradients then set to None, as ``zero_grad()`` does).

    ``amp_dtype``: None, or the ``torch.autocast`` dtype for forward and loss. ``loss_fn(out)``:
    the scalar to differentiate (default :func:`default_loss`). CPU times from
    ``time.perf_counter_ns``; with ``cuda``, CUDA events on the current stream, read after
    ``torch.cuda.synchronize()``. Raises ProfileError (one line) when forward, the loss or
    backward raises, or when the module has no trainable parameter.
    """
    import torch

    loss_fn = loss_fn or default_loss
    params = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
    if not params:
        raise ProfileError(f"{what} has no trainable parameters (requires_grad=True): no gradient to time")
    m = Measurement(names=[n for n, _ in params], ready={n: [] for n, _ in params})
    fired: dict[str, Any] = {}
    order: list[str] = []

    def now():
        if cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record(torch.cuda.current_stream())
            return ev
        return time.perf_counter_ns()

    def make_hook(name):
        def hook(_p):
            fired[name] = now()  # the last accumulation of this step counts
            order.append(name)
        return hook

    def ms(a, b) -> float:
        return a.elapsed_time(b) if cuda else (b - a) / 1e6

    handles = [p.register_post_accumulate_grad_hook(make_hook(n)) for n, p in params]
    device_type = "cuda" if cuda else "cpu"
    shape = list(x.shape)

    def forward():
        with torch.autocast(device_type, dtype=amp_dtype) if amp_dtype is not None else contextlib.nullcontext():
            out = _user_call(f"forward of {what} on a random input of shape {shape}", module, x)
            return _user_call(f"the loss of {what}'s output", loss_fn, out)

    try:
        for step in range(warmup + steps):
            fired.clear()
            order.clear()
            for _, p in params:
                p.grad = None
            t0 = now()
            loss = forward()
            t1 = now()
            _user_call(f"backward of {what}", loss.backward)
            t2 = now()
            t3 = None
            if optimizer is not None:
                optimizer.step()
                t3 = now()
                optimizer.zero_grad(set_to_none=True)
            if cuda:
                torch.cuda.synchronize()
            if step < warmup:
                continue
            m.forward_ms.append(ms(t0, t1))
            m.backward_ms.append(ms(t1, t2))
            if t3 is not None:
                m.update_ms.append(ms(t2, t3))
            m.orders.append(tuple(order))
            for n, t in fired.items():
                m.ready[n].append(ms(t1, t))
            if order:
                m.tails_ms.append(ms(t1, t2) - ms(t1, fired[order[-1]]))
    finally:
        for h in handles:
            h.remove()
    return m


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


#: a concurrent copy prints this once its first forward + backward is done (it then computes until killed)
COPY_READY = "AUTOTUNER_PROFILE_COPY_READY"


def _copy_main(spec: str, input_shape: str, batch_size: int, threads: int) -> None:
    """A concurrent copy (``python -m autotuner.realrun.profile``): the model's forward + backward
    in a loop, as another rank on the same host would compute, until the profiling process kills it."""
    import sys

    import torch

    from ..readers.layouts import build_module

    torch.set_num_threads(threads)
    _, module = build_module(spec)
    module.train()
    x = torch.randn(batch_size, *parse_shape(input_shape), generator=torch.Generator().manual_seed(1))
    first = True
    while True:
        default_loss(module(x)).backward()
        for p in module.parameters():
            p.grad = None
        if first:
            print(COPY_READY, flush=True)
            sys.stdout.close()
            first = False


@contextlib.contextmanager
def _concurrent_copies(n: int, spec: str, input_shape: str, batch_size: int, threads: int):
    """``n`` copies of the model computing in other processes while the block runs (CPU only):
    started, each waited for until its first step is done, killed on exit. Raises ProfileError
    when one exits before it is ready."""
    import os
    import subprocess
    import sys

    import tempfile

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    procs, errs = [], []
    try:
        for _ in range(n):
            errs.append(tempfile.TemporaryFile())  # a file, not a pipe: a chatty copy never blocks on it
            procs.append(subprocess.Popen([sys.executable, "-m", "autotuner.realrun.profile", spec, input_shape,
                                           str(batch_size), str(threads)], stdout=subprocess.PIPE,
                                          stderr=errs[-1], env=env, text=True))
        for pr, err in zip(procs, errs):
            for line in pr.stdout:  # the model may print first; EOF: the copy ended
                if COPY_READY in line:
                    break
            else:
                pr.wait(timeout=5)
                err.seek(0)
                text = err.read().decode(errors="replace")
                tail = [ln for ln in text.splitlines() if ln.strip()][-1:] or ["no output"]
                raise ProfileError(f"--concurrent: a copy of {spec} exited before its first step: {tail[0][-300:]}")
        yield
    finally:
        for pr in procs:
            pr.kill()
        for pr in procs:
            pr.wait()
            if pr.stdout:
                pr.stdout.close()
        for err in errs:
            err.close()


def profile_layout(spec: str, *, input_shape: str, batch_size: int, device: str = "cpu", amp: bool = False,
                   steps: int = 10, warmup: int = 3, threads: int | None = None,
                   concurrent: int = 1) -> tuple[dict, list[str]]:
    """Profile the ``torch.nn.Module`` that ``spec`` (``pkg.mod:factory``) builds: returns (an
    ``autotuner.layout/1`` dict with the measured times, warnings).

    CPU only: ``threads`` sets torch's intra-op threads (None: torch's default; a training script
    usually sets its own, and the times follow it); ``concurrent`` N > 1 runs N - 1 copies of the
    same forward + backward in other processes meanwhile (:func:`_concurrent_copies`), as the other
    ranks on one host compute during training: cores, caches and memory bandwidth are then
    shared as they will be (measured on this 2-core machine: +2 to +5 % for two copies of a small
    transformer, research/notes/fresh-environments.md section 8). Both are recorded in the layout.

    The module is put in train mode on ``device``; the input is ``torch.randn(batch_size,
    *input_shape)`` (seed 0). ``amp``: autocast forward + loss in bfloat16 on CPU; on CUDA in
    bfloat16 where the GPU supports it, else float16 (no gradient scaling: only times count).
    The dict is checked by :func:`autotuner.readers.layouts.layout_from_dict` before it is
    returned. Raises ProfileError / LayoutError (one line) for bad input or a model that fails.
    """
    from ..readers.layouts import build_module, layout_from_dict
    from ..schemas import LAYOUT_SCHEMA

    shape = parse_shape(input_shape)
    if device not in DEVICES:
        raise ProfileError(f"--device {device!r}: use one of {', '.join(DEVICES)}")
    if math.prod(shape) * batch_size > MAX_INPUT_ELEMENTS:
        raise ProfileError(f"--input-shape {input_shape!r} x --batch-size {batch_size}: "
                           f"over {MAX_INPUT_ELEMENTS} input elements")
    try:
        import torch
    except ImportError as e:
        raise ProfileError(f"profile needs torch ({e}); pip install torch") from None
    if not hasattr(torch.Tensor, "register_post_accumulate_grad_hook"):
        raise ProfileError(f"profile needs torch >= 2.1 (post-accumulate-grad hooks); this is {torch.__version__}")
    cuda = device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise ProfileError("--device cuda: CUDA is not available")
    if concurrent < 1 or (threads is not None and threads < 1):
        raise ProfileError("--concurrent and --threads must be >= 1")
    if cuda and (concurrent > 1 or threads is not None):
        raise ProfileError("--concurrent and --threads are for --device cpu (ranks sharing a host's cores)")
    if threads is not None:
        torch.set_num_threads(threads)
    attr, module = build_module(spec)
    trainable = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
    if not trainable:
        raise ProfileError(f"model factory {spec!r} returned a module without trainable parameters")
    dev = torch.device(device)
    if cuda:
        torch.backends.cudnn.benchmark = True  # as a training run would; warm-up steps absorb the search
    amp_dtype = None
    if amp:
        amp_dtype = torch.bfloat16 if not cuda or torch.cuda.is_bf16_supported() else torch.float16
    module = _user_call(f"moving {spec} to {device}", lambda: module.to(dev).train())
    gen = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(batch_size, *shape, generator=gen).to(dev)
    copies = (_concurrent_copies(concurrent - 1, spec, input_shape, batch_size, torch.get_num_threads())
              if concurrent > 1 else contextlib.nullcontext())
    with copies:
        m = measure(module, x, cuda=cuda, amp_dtype=amp_dtype, steps=steps, warmup=warmup, what=spec)

    names, ready, unused = m.ready_order()
    params = dict(trainable)
    fwd, bwd = statistics.median(m.forward_ms), statistics.median(m.backward_ms)
    warnings, notes = [], []
    if unused:
        w = (f"{len(unused)} trainable parameter(s) got no gradient in any measured step (unused in forward): "
             f"{', '.join(unused[:5])}{' ...' if len(unused) > 5 else ''}; listed last with ready_ms = backward_ms, "
             "since Horovod 0.28's DistributedOptimizer allreduces them (as zeros) in optimizer.step()")
        warnings.append(w)
        notes.append(w)
    partial = [n for n in names if len(m.ready[n]) < steps]
    if partial:
        notes.append(f"{len(partial)} parameter(s) got a gradient in only some measured steps "
                     f"(median over those): {', '.join(partial[:5])}")
    if not m.order_stable:
        notes.append("the hook order differed between measured steps; tensors are in order of median ready time")
    r4 = lambda v: round(v, 4)  # noqa: E731 - 0.1 µs; rounding keeps the order and ready <= backward
    all_names = names + unused
    ready_ms = [r4(r) for r in ready] + [r4(bwd)] * len(unused)
    last = ready_ms[-1]
    shares, prev = [], 0.0
    for r in ready_ms:
        shares.append(round((r - prev) / last, 10) if last > 0 else 1.0 / len(ready_ms))
        prev = r
    dtypes = {n: str(p.dtype).replace("torch.", "") for n, p in params.items()}
    from ..model.layout import DTYPE_BYTES

    bad = sorted({dtypes[n] for n in all_names} - set(DTYPE_BYTES))
    if bad:
        raise ProfileError(f"parameters of dtype {bad[0]} cannot be a layout (use one of {', '.join(DTYPE_BYTES)})")
    compute_dtype = str(amp_dtype).replace("torch.", "") if amp_dtype is not None else \
        statistics.mode(dtypes[n] for n in all_names)
    dev_name = torch.cuda.get_device_name(dev) if cuda else _cpu_name()
    prec = f"amp-{compute_dtype}" if amp else compute_dtype
    d = {
        "schema": LAYOUT_SCHEMA,
        "name": f"{attr}-{device}-{prec}-b{batch_size}",
        "source": (f"{PROFILER}: {spec}, input {list(shape)} x batch {batch_size}, {device} ({dev_name}), "
                   f"{'autocast ' + compute_dtype if amp else compute_dtype}, torch {torch.__version__}; "
                   f"median of {steps} steps after {warmup} warm-up"
                   f"{f', {concurrent - 1} concurrent copy(ies) computing' if concurrent > 1 else ''}; tensors in order of the "
                   "post-accumulate-grad hooks; ready_ms = ms from the end of forward to the hook "
                   f"({'CUDA events' if cuda else 'time.perf_counter_ns'}); compute_share = increment of "
                   "ready_ms over the last one"),
        "order": "backward",
        "profiled_with": PROFILER,
        "torch": torch.__version__,
        "device": device,
        "device_name": dev_name,
        "dtype": compute_dtype,
        "amp": amp,
        "batch_size": batch_size,
        "input_shape": list(shape),
        "steps": steps,
        "warmup": warmup,
        "forward_ms": r4(fwd),
        "backward_ms": r4(bwd),
        "forward_ms_range": [r4(min(m.forward_ms)), r4(max(m.forward_ms))],
        "backward_ms_range": [r4(min(m.backward_ms)), r4(max(m.backward_ms))],
        "tail_ms": r4(statistics.median(m.tails_ms)) if m.tails_ms else None,
        "order_stable": m.order_stable,
        "tensors": [{"name": n, "shape": list(params[n].shape), "dtype": dtypes[n], "compute_share": s,
                     "ready_ms": r} for n, s, r in zip(all_names, shares, ready_ms)],
    }
    if not cuda:
        d["threads"] = torch.get_num_threads()
        d["concurrent"] = concurrent
    if notes:
        d["notes"] = notes
    if d["tail_ms"] is None:
        del d["tail_ms"]
    if not d["forward_ms"] > 0 or not d["backward_ms"] > 0:  # a clock that did not move: 0.1 µs resolution
        raise ProfileError(f"measured forward {fwd} ms / backward {bwd} ms: too short to time; "
                           "use a larger --batch-size or input")
    layout_from_dict(d, f"profile of {spec}")  # what is written loads back
    return d, warnings


if __name__ == "__main__":  # a concurrent copy (_concurrent_copies): spec, input shape, batch size, threads
    import sys as _sys

    _copy_main(_sys.argv[1], _sys.argv[2], int(_sys.argv[3]), int(_sys.argv[4]))
