"""Old keyword names of the public API, still accepted: each warns once per call site (DeprecationWarning) and
passes its value on under the one name every framework now uses (the command line's option of the same name:
``link_gbit`` for ``--link-gbit``, ``wait`` for ``--wait``, ``on_event`` for the event callback, ...).

:func:`renamed_keywords` maps an old keyword to its new one; :func:`link_rates` resolves the real runs' old
``bandwidth_gbit``, whose meaning depended on ``testbed_hosts``.
"""
from __future__ import annotations

import functools
import warnings
from typing import Callable

from .errors import ValidationError


def renamed_keywords(**old_to_new: str) -> Callable:
    """Decorator: ``f(old=v)`` calls ``f(new=v)`` and warns ``DeprecationWarning`` (``"old" is deprecated; use
    "new"``). Giving both raises TypeError, as a duplicated keyword does."""
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kw):
            for old, new in old_to_new.items():
                if old in kw:
                    if new in kw:
                        raise TypeError(f"{fn.__name__}() got both {old!r} (its old name) and {new!r}")
                    warnings.warn(f"{fn.__name__}(): {old!r} is deprecated; use {new!r}", DeprecationWarning,
                                  stacklevel=2)
                    kw[new] = kw.pop(old)
            return fn(*args, **kw)
        wrapper.renamed_keywords = dict(old_to_new)
        return wrapper
    return deco


def link_rates(link_gbit: float | None, loopback_gbit: float | None, bandwidth_gbit: float | None,
               testbed: bool, what: str = "a real run") -> tuple[float | None, float | None]:
    """The emulated network of a real run as the launcher takes it: ``(loopback, host link)``, Gbit/s (None:
    unshaped).

    ``link_gbit`` is the link between the ranks: one shaped loopback, or with an emulated cluster (``testbed``)
    each host's link; ``loopback_gbit`` is each emulated host's loopback (``testbed`` only). The old
    ``bandwidth_gbit`` (DeprecationWarning) meant the loopback: without a testbed that is the link, with one
    each host's loopback. Raises ValidationError (one line) for ``loopback_gbit`` without a testbed or a rate given twice."""
    if bandwidth_gbit is not None:
        warnings.warn(f"{what}: 'bandwidth_gbit' is deprecated; use 'link_gbit' (with testbed_hosts: "
                      "'loopback_gbit')", DeprecationWarning, stacklevel=3)
        if testbed:
            if loopback_gbit is not None:
                raise ValidationError("--loopback-gbit and --bandwidth-gbit (its old name): give one")
            loopback_gbit = bandwidth_gbit
        else:
            if link_gbit is not None:
                raise ValidationError("--link-gbit and --bandwidth-gbit (its old name): give one")
            link_gbit = bandwidth_gbit
    if not testbed:
        if loopback_gbit is not None:
            raise ValidationError("--loopback-gbit needs --testbed-hosts (on one host, --link-gbit shapes its loopback)")
        return link_gbit, None
    return loopback_gbit, link_gbit

