"""Apply a Horovod pick (the :class:`autotuner.Proposal` :func:`autotuner.integrations.load_pick` returns for
``autotuner suggest --json``) to a Horovod job.

A Horovod pick has two parts, applied in two places:

- the knobs (fusion threshold, cycle time, response cache, hierarchical switches) are launch settings:
  ``horovodrun <flags(pick)> python train.py``, or the ``HOROVOD_*`` variables of :func:`env` in the ranks'
  environment (horovodrun's flags set exactly these: ``horovod/runner/common/util/config_parser.py``
  ``set_env_from_args``); :func:`unapplied` says which of them a running rank's environment lacks;
- the gradient compression is code: ``hvd.DistributedOptimizer(opt, named_parameters=...,
  compression=compression(pick))`` (``horovod/torch/compression.py``: ``Compression.none`` or
  ``Compression.fp16``, which casts each floating-point gradient to float16 before the allreduce and back after).

Horovod is imported only inside :func:`compression`.
"""
from __future__ import annotations

import os
from typing import Any, Mapping

from ..frameworks.horovod.knobs import (DEFAULTS_0_28, KNOBS, Config, config_from_env, horovod_env,
                                        horovodrun_flags)
from ..frameworks.horovod.results import Proposal

__all__ = ["compression", "env", "flags", "unapplied"]


def _config(pick: Any) -> Config:
    if isinstance(pick, Proposal):
        return pick.config
    if isinstance(pick, Config):
        return pick
    raise TypeError(f"a Horovod pick is an autotuner.Proposal (load_pick of suggest --json) or an autotuner.Config, "
                    f"got {type(pick).__name__}")


def env(pick: Proposal | Config) -> dict[str, str]:
    """The ``HOROVOD_*`` environment variables of the pick's knobs (:func:`autotuner.horovod_env`): every knob,
    the fusion threshold in bytes, the cycle time in ms, the cache capacity in entries, the hierarchical
    switches ``0``/``1`` (the names are the knob table's, :data:`autotuner.KNOBS`). Raises TypeError for a pick of another type."""
    return horovod_env(_config(pick))


def flags(pick: Proposal | Config) -> list[str]:
    """The ``horovodrun`` flags of the pick's knobs (:func:`autotuner.horovodrun_flags`: the fusion threshold in
    MiB, the cycle time in ms, the cache capacity in entries); switches that are off have no flag, and a fusion
    threshold that is not a whole MiB has none either (horovodrun's flag takes an integer): give it through
    :func:`env`. Raises TypeError for a pick of another type."""
    return horovodrun_flags(_config(pick))


def compression(pick: Proposal | str) -> Any:
    """The ``horovod.torch.Compression`` member of the pick's gradient compression (``pick.compression``, or the
    name itself): ``hvd.Compression.none`` or ``hvd.Compression.fp16``, for ``hvd.DistributedOptimizer(...,
    compression=...)``.

    Raises TypeError for an :class:`autotuner.Config` (it holds knobs, no compression: pass the Proposal) or
    another type; ValueError (one line) for a compression Horovod 0.28.1 does not ship (``int8``, lossy,
    simulated only) or an unknown name; ImportError when ``horovod.torch`` cannot be imported.
    """
    if isinstance(pick, Proposal):
        name = pick.compression
    elif isinstance(pick, str):
        name = pick
    elif isinstance(pick, Config):
        raise TypeError("a Config holds the knobs, not the compression: pass the Proposal load_pick returns, "
                        "or the compression's name")
    else:
        raise TypeError(f"compression takes a Proposal (load_pick of suggest --json) or a name, "
                        f"got {type(pick).__name__}")
    from ..frameworks.horovod.scenario import COMPRESSIONS, LOSSY, Compression

    try:
        c = Compression(name)
    except ValueError:
        shipped = ", ".join(c.value for c, r in COMPRESSIONS.items() if r.in_horovod)
        raise ValueError(f"compression {name!r}: Horovod has {shipped}") from None
    if not COMPRESSIONS[c].in_horovod:
        raise ValueError(LOSSY.get(c) or f"{c.value} compression is not in Horovod 0.28.1")
    import horovod.torch as hvd

    return getattr(hvd.Compression, c.value)


def unapplied(pick: Proposal | Config, environ: Mapping[str, str] | None = None) -> list[str]:
    """The pick's knobs that ``environ`` (default ``os.environ``: call it in a rank, where horovodrun's flags have
    become ``HOROVOD_*`` variables) does not give, one line each (the variable, the pick's value and
    the environment's); ``[]`` when every knob is the pick's. An unset variable counts as Horovod 0.28's default
    (:data:`autotuner.DEFAULTS_0_28`). Raises TypeError for a pick of another type and KnobError (one line) for a
    ``HOROVOD_*`` value Horovod would not read."""
    want = _config(pick)
    have = config_from_env(os.environ if environ is None else environ, DEFAULTS_0_28)
    want_env, have_env = horovod_env(want), horovod_env(have)
    out = []
    for k in KNOBS:
        if getattr(want, k.field) != getattr(have, k.field):
            out.append(f"{k.env}={want_env[k.env]} (the environment gives {have_env[k.env]})")
    return out

