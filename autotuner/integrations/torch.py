"""Apply a DDP pick (:class:`autotuner.DdpConfig`) to PyTorch's ``DistributedDataParallel``.

::

    from torch.nn.parallel import DistributedDataParallel
    from autotuner.integrations import load_pick
    from autotuner.integrations.torch import apply, ddp_kwargs

    pick = load_pick("suggest.json")          # autotuner ddp suggest --env ... --model ... --json > suggest.json
    model = apply(DistributedDataParallel(model, device_ids=[local_rank], **ddp_kwargs(pick)), pick)

or in one call, ``model = wrap(model, pick, device_ids=[local_rank])``. Under ``autotuner ddp validate`` the pick of
each trial comes from the environment: :func:`pick_from_env`.

Sources (torch 2.13.0, ``torch/nn/parallel/distributed.py``): ``DistributedDataParallel.__init__`` takes
``bucket_cap_mb``, ``find_unused_parameters``, ``gradient_as_bucket_view``, ``static_graph`` and
``bucket_cap_mb_list`` (``bucket_cap_mb_list: list[int] | None = None``, pytorch#169026; each cap becomes
``int(cap_mb * 2**20)`` bytes in ``_BucketCapacityConfig.create``, so fractional MiB are kept); the hook is not an
argument but ``DistributedDataParallel.register_comm_hook(state, hook)``, once per model. The hooks:
``torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py`` (``fp16_compress_hook``, ``bf16_compress_hook``:
their state is the process group to allreduce over, ``None`` meaning the default group) and
``torch/distributed/algorithms/ddp_comm_hooks/powerSGD_hook.py`` (``powerSGD_hook`` with a ``PowerSGDState``).

torch is imported inside the functions that need it.
"""
from __future__ import annotations

import os
from typing import Any, Mapping

from ..errors import KnobError
from ..frameworks.ddp.knobs import COMM_HOOKS, DDP_KNOBS, DdpConfig
from ..model.units import MIB

__all__ = ["ENV_VARS", "apply", "ddp_kwargs", "pick_from_env", "wrap"]

#: the environment ``autotuner ddp validate`` sets for each trial of a user's script
#: (:func:`autotuner.frameworks.ddp.realrun.knob_env`): knob field -> variable
ENV_VARS = {"bucket_cap_mb": "AUTOTUNER_DDP_BUCKET_CAP_MB", "bucket_cap_mb_list": "AUTOTUNER_DDP_BUCKET_CAP_MB_LIST",
            "gradient_as_bucket_view": "AUTOTUNER_DDP_GRADIENT_AS_BUCKET_VIEW",
            "comm_hook": "AUTOTUNER_DDP_COMM_HOOK"}

#: comm hook -> (module under ``torch.distributed.algorithms.ddp_comm_hooks``, hook function); ``allreduce`` is
#: DDP's own allreduce, no hook
_HOOKS = {"fp16_compress": ("default_hooks", "fp16_compress_hook"),
          "bf16_compress": ("default_hooks", "bf16_compress_hook"),
          "powerSGD": ("powerSGD_hook", "powerSGD_hook")}


def _pick(pick: Any) -> DdpConfig:
    if not isinstance(pick, DdpConfig):
        raise TypeError(f"a DDP pick is an autotuner.DdpConfig (load_pick of ddp suggest --json), got "
                        f"{type(pick).__name__}")
    return pick


def ddp_kwargs(pick: DdpConfig) -> dict[str, Any]:
    """``DistributedDataParallel``'s keyword arguments for ``pick``: the knobs of :data:`autotuner.DDP_KNOBS` that
    are arguments (not ``comm_hook``, which :func:`apply` registers), each only where ``pick`` differs from DDP's
    default, so that DDP's own default applies to the rest (``bucket_cap_mb`` left out keeps its 1 MiB first
    bucket). Caps are in MiB as DDP takes them; ``bucket_cap_mb_list`` is a list.

    Returns e.g. ``{"bucket_cap_mb": 0.707, "gradient_as_bucket_view": True}``; ``{}`` for DDP's defaults.
    Raises TypeError for a pick that is not a DdpConfig, and ValueError (one line) when the installed torch's
    ``DistributedDataParallel`` has no ``bucket_cap_mb_list`` (torch before 2.13) and the pick sets one.
    """
    pick = _pick(pick)
    kw: dict[str, Any] = {}
    for k in DDP_KNOBS:
        v = getattr(pick, k.field)
        if k.field == "comm_hook" or v == k.default:
            continue
        kw[k.argument] = list(v) if isinstance(v, tuple) else v
    if "bucket_cap_mb_list" in kw:
        import inspect

        try:
            from torch.nn.parallel import DistributedDataParallel
        except ImportError:
            return kw
        if "bucket_cap_mb_list" not in inspect.signature(DistributedDataParallel.__init__).parameters:
            import torch

            raise ValueError(f"torch {torch.__version__}'s DistributedDataParallel has no bucket_cap_mb_list "
                             "(torch 2.13 has): pick a single bucket_cap_mb (ddp suggest's knob_only)")
    return kw


def _check_built(ddp_model: Any, pick: DdpConfig) -> None:
    """ValueError (one line) when ``ddp_model`` was built with other buckets than ``pick``'s (its attributes set in
    ``DistributedDataParallel.__init__``: ``bucket_bytes_cap``, ``bucket_bytes_cap_list`` in bytes,
    ``gradient_as_bucket_view``); an attribute the installed torch lacks is not looked at."""
    want = {"bucket_bytes_cap": pick.cap_bytes(),
            "bucket_bytes_cap_list": [int(c * MIB) for c in pick.bucket_cap_mb_list or ()],
            "gradient_as_bucket_view": pick.gradient_as_bucket_view}
    for attr, v in want.items():
        have = getattr(ddp_model, attr, None)
        if have is not None and have != v:
            raise ValueError(f"the model was built with {attr}={have!r}, the pick has {v!r}: build it as "
                             "DistributedDataParallel(module, **ddp_kwargs(pick))")


def apply(ddp_model: Any, pick: DdpConfig) -> Any:
    """Register ``pick.comm_hook`` on ``ddp_model`` (a ``torch.nn.parallel.DistributedDataParallel`` built with
    :func:`ddp_kwargs` of the same pick) and return ``ddp_model``.

    - ``allreduce``: nothing (DDP's own allreduce);
    - ``fp16_compress`` / ``bf16_compress``: ``default_hooks.fp16_compress_hook`` / ``bf16_compress_hook`` with
      the model's own process group as state (``ddp_model.process_group``; the hook allreduces over it);
    - ``powerSGD``: ``powerSGD_hook.powerSGD_hook`` with ``PowerSGDState(process_group=ddp_model.process_group)``
      (torch's defaults: rank 1, plain allreduce for the first 1000 iterations; lossy, never proposed).

    Call it once, before the first backward (DDP allows one hook per model). Raises TypeError for a pick that is
    not a DdpConfig or a model without ``register_comm_hook``; ValueError (one line) when the model's buckets are
    not the pick's (built without :func:`ddp_kwargs`).
    """
    pick = _pick(pick)
    if not callable(getattr(ddp_model, "register_comm_hook", None)):
        raise TypeError(f"apply takes the DistributedDataParallel model, got {type(ddp_model).__name__}")
    _check_built(ddp_model, pick)
    if pick.comm_hook == "allreduce":
        return ddp_model
    import importlib

    module, name = _HOOKS[pick.comm_hook]
    hooks = importlib.import_module(f"torch.distributed.algorithms.ddp_comm_hooks.{module}")
    group = getattr(ddp_model, "process_group", None)
    state = hooks.PowerSGDState(process_group=group) if pick.comm_hook == "powerSGD" else group
    ddp_model.register_comm_hook(state, getattr(hooks, name))
    return ddp_model


def wrap(module: Any, pick: DdpConfig, **ddp_args: Any) -> Any:
    """``apply(DistributedDataParallel(module, **ddp_args, **ddp_kwargs(pick)), pick)``: ``ddp_args`` are your
    own arguments (``device_ids``, ``process_group``, ...). Raises ValueError (one line) for an argument of
    ``ddp_args`` the pick sets too, and as :func:`ddp_kwargs` and :func:`apply`."""
    from torch.nn.parallel import DistributedDataParallel

    kw = ddp_kwargs(pick)
    both = sorted(set(kw) & set(ddp_args))
    if both:
        raise ValueError(f"{', '.join(both)} given and set by the pick too: drop it from the arguments")
    return apply(DistributedDataParallel(module, **ddp_args, **kw), pick)


def _mib(text: str, var: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise KnobError(f"{var}={text!r}: not a number of MiB") from None


def pick_from_env(environ: Mapping[str, str] | None = None) -> DdpConfig:
    """The DDP setting ``autotuner ddp validate`` gives a user's script for one trial, from ``environ`` (default
    ``os.environ``): the variables of :data:`ENV_VARS` (``AUTOTUNER_DDP_BUCKET_CAP_MB`` or
    ``AUTOTUNER_DDP_BUCKET_CAP_MB_LIST``, MiB, comma-separated; ``AUTOTUNER_DDP_GRADIENT_AS_BUCKET_VIEW``, 0 or 1;
    ``AUTOTUNER_DDP_COMM_HOOK``, a hook name). Unset or empty ones keep DDP's defaults, so outside a validation
    this is ``DdpConfig()``. Raises KnobError (a ValueError, one line) for a value that is not a number of MiB,
    0/1 or a hook name."""
    env = os.environ if environ is None else environ
    get = lambda field: env.get(ENV_VARS[field]) or None  # noqa: E731
    kw: dict[str, Any] = {}
    if get("bucket_cap_mb_list"):
        var = ENV_VARS["bucket_cap_mb_list"]
        kw["bucket_cap_mb_list"] = tuple(_mib(c.strip(), var) for c in get("bucket_cap_mb_list").split(","))
    elif get("bucket_cap_mb"):
        kw["bucket_cap_mb"] = _mib(get("bucket_cap_mb"), ENV_VARS["bucket_cap_mb"])
    view = get("gradient_as_bucket_view") or "0"
    if view not in ("0", "1"):
        raise KnobError(f"{ENV_VARS['gradient_as_bucket_view']}={view!r}: give 0 or 1")
    kw["gradient_as_bucket_view"] = view == "1"
    hook = get("comm_hook") or "allreduce"
    if hook not in COMM_HOOKS:
        raise KnobError(f"{ENV_VARS['comm_hook']}={hook!r}: give one of {', '.join(COMM_HOOKS)}")
    kw["comm_hook"] = hook
    try:
        return DdpConfig(**kw)
    except KnobError as e:
        var = ENV_VARS["bucket_cap_mb_list" if "bucket_cap_mb_list" in kw else "bucket_cap_mb"]
        raise KnobError(f"{var}: {e}") from None
