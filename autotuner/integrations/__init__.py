"""Apply an answer of autotuner in your own training script.

``autotuner suggest --json`` (Horovod) and ``autotuner ddp suggest --json`` (PyTorch DDP) answer with a setting;
this package turns that answer into the objects a training script passes on, and times the script's steps in the
form ``autotuner validate`` and ``autotuner ddp validate`` read back::

    from autotuner.integrations import StepTimer, load_pick
    from autotuner.integrations.torch import ddp_kwargs, apply

    pick = load_pick("suggest.json")                      # autotuner ddp suggest ... --json > suggest.json
    model = apply(DistributedDataParallel(model, **ddp_kwargs(pick)), pick)
    with StepTimer(warmup=3) as timer:
        for batch in data:
            with timer.step():
                train_step(batch)

- :func:`load_pick`: a ``suggest --json`` answer of either framework to its pick (this module);
- :mod:`autotuner.integrations.torch`: ``DistributedDataParallel``'s keyword arguments and comm hook;
- :mod:`autotuner.integrations.horovod`: ``HOROVOD_*`` variables, ``horovodrun`` flags and ``hvd.Compression``;
- :class:`~autotuner.integrations.timer.StepTimer`: the step-time lines the validate commands read.

torch and Horovod are imported only inside the functions that need them: ``import autotuner.integrations`` works
without either.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Union

from ..errors import KnobError, SchemaError
from ..frameworks.ddp.knobs import DdpConfig
from ..frameworks.horovod.results import Proposal
from . import horovod, torch  # noqa: F401  (autotuner.integrations.torch / .horovod after one import)
from .timer import StepTimer

__all__ = ["DDP_WHICH", "HOROVOD_WHICH", "StepTimer", "load_pick"]

#: ``which`` for a ``ddp suggest --json`` answer: its entries of that name (``recommended``: DDP's defaults
#: themselves when ``keep_defaults`` is true; ``fp16`` is null when the env has no float16 measurements)
DDP_WHICH = ("recommended", "default", "knob_only", "fp16", "per_bucket")
#: ``which`` for a ``suggest --json`` answer: ``recommended`` is ``proposals[0]`` (the reference itself when
#: ``keep_defaults`` is true), ``default`` the reference, ``knob_only`` the best proposal without compression
HOROVOD_WHICH = ("recommended", "default", "knob_only")

Pick = Union[DdpConfig, Proposal]


def _one_line(e: BaseException) -> str:
    return (str(e).splitlines() or [type(e).__name__])[0]


def _read(source: Any) -> tuple[Any, str]:
    """(parsed JSON, where) of a path or an already parsed answer."""
    if isinstance(source, Mapping):
        return source, "pick"
    if isinstance(source, (str, os.PathLike)):
        from ..readers.files import read_json

        return read_json(Path(source), SchemaError, f"pick {source}"), f"pick {source}"
    raise SchemaError(f"load_pick takes a path or the parsed JSON object of a suggest --json answer, "
                      f"got {type(source).__name__}")


def _ddp(d: Mapping[str, Any], which: str, where: str) -> DdpConfig:
    if which not in DDP_WHICH:
        raise SchemaError(f"{where}: which={which!r}: a ddp suggest answer has {', '.join(DDP_WHICH)}")
    entry = d.get(which)
    if entry is None and which == "fp16":
        raise SchemaError(f"{where}: fp16 is null: this answer searched no fp16 hook (the env has no float16 "
                          "measurements)")
    cfg = entry.get("config") if isinstance(entry, Mapping) else None
    if not isinstance(cfg, Mapping):
        raise SchemaError(f"{where}: {which} has no config object: not ddp suggest --json output")
    try:
        return DdpConfig.from_dict({k: tuple(v) if isinstance(v, list) else v for k, v in cfg.items()})
    except (KnobError, TypeError) as e:
        raise SchemaError(f"{where}: {which}: {_one_line(e)}") from None


def _horovod(d: Mapping[str, Any], which: str, where: str) -> Proposal:
    if which not in HOROVOD_WHICH:
        raise SchemaError(f"{where}: which={which!r}: a suggest answer has {', '.join(HOROVOD_WHICH)}")
    if which == "recommended":
        props = d.get("proposals")
        if not isinstance(props, list) or not props:
            raise SchemaError(f"{where}: proposals is not a non-empty list: not suggest --json output")
        entry = props[0]
    else:
        entry = d.get(which)
    if not isinstance(entry, Mapping):
        raise SchemaError(f"{where}: {which} is not an object: not suggest --json output")
    try:
        return Proposal.from_dict(entry)
    except KeyError as e:
        raise SchemaError(f"{where}: {which} has no {e.args[0]!r}: not suggest --json output") from None
    except (ValueError, TypeError) as e:  # KnobError is a ValueError
        raise SchemaError(f"{where}: {which}: {_one_line(e)}") from None


def load_pick(source: str | os.PathLike | Mapping[str, Any], which: str = "recommended") -> Pick:
    """The setting a ``suggest --json`` answer picks, as the framework's own type.

    Args:
        source: the path of a file holding ``autotuner ddp suggest ... --json`` or ``autotuner suggest ... --json``
            output, or that output already parsed (a dict). The framework is told by the answer's keys: a DDP
            answer has ``recommended``, a Horovod one ``proposals``.
        which: the entry to take. DDP: one of :data:`DDP_WHICH` (default ``recommended``: the answer's setting,
            which is DDP's defaults when ``keep_defaults`` is true; ``knob_only``: the best without a compress hook).
            Horovod: one of :data:`HOROVOD_WHICH` (default ``recommended``: ``proposals[0]``).

    Returns:
        DDP: a :class:`autotuner.DdpConfig` (its ``comm_hook`` included): pass it to
        :func:`autotuner.integrations.torch.ddp_kwargs` and :func:`~autotuner.integrations.torch.apply`.
        Horovod: the :class:`autotuner.Proposal`, whose ``config`` is the :class:`autotuner.Config` of the knobs
        (fusion threshold in bytes, cycle time in ms) and ``compression`` the gradient compression (``none`` or
        ``fp16``, set in the script, not by a flag): pass it to :mod:`autotuner.integrations.horovod`'s functions.

    Raises:
        SchemaError (an :class:`autotuner.AutotunerError`, so a ``ValueError``), one line: a file that cannot be
        read or is not JSON, an answer of neither command, an unknown ``which``, a knob value out of range.
    """
    d, where = _read(source)
    if not isinstance(d, Mapping):
        raise SchemaError(f"{where}: expected the JSON object of autotuner suggest --json or ddp suggest --json, "
                          f"got a {type(d).__name__}")
    if not isinstance(which, str):
        raise SchemaError(f"{where}: which must be a name such as 'recommended', got {which!r}")
    if "recommended" in d:
        return _ddp(d, which, where)
    if "proposals" in d:
        return _horovod(d, which, where)
    raise SchemaError(f"{where}: neither suggest --json output (no 'proposals') nor ddp suggest --json output "
                      "(no 'recommended')")
