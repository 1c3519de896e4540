"""The command line's numeric options, checked by pydantic at the edge (one line per failure).

Each kind of option is one annotated type (finite, with its range); :func:`checked` turns it
into a typer callback, so a bad value stops the command before any work with
``error: --nodes: 0: must be >= 1`` (exit status 2, :func:`autotuner.cli.main`). The knob
options are generated from :data:`autotuner.frameworks.horovod.knobs.KNOBS` and checked there.

Bounds that are not physics are sanity limits, chosen so that a typo fails fast instead of
running for hours: at most 100,000 nodes and 1,024 GPUs per node; link rates up to 10 Tbit/s;
compute up to one hour per step.
"""
from __future__ import annotations

from typing import Annotated, Any, Callable, Literal

from pydantic import Field, TypeAdapter
from pydantic import ValidationError as PydanticValidationError

from .errors import AutotunerError
from .schemas import Count, GpusPerNode, LinkGbit, PlainName  # noqa: F401 (the files' bounds, shared)

#: a count that may be 0 (warm-up steps, steps to skip)
Index = Annotated[int, Field(ge=0, le=100_000)]
#: a duration in ms (compute time per step)
Millis = Annotated[float, Field(gt=0, le=3_600_000, allow_inf_nan=False)]
#: a duration in s (timeouts)
Seconds = Annotated[float, Field(gt=0, le=7 * 86_400, allow_inf_nan=False)]
#: a random seed (numpy's generators take 0..2**32 - 1)
Seed = Annotated[int, Field(ge=0, le=2**32 - 1)]
#: Bayesian-optimization proposals: each refits a Gaussian process on every point so far
#: (cubic cost), so a few hundred is already minutes
Calls = Annotated[int, Field(ge=1, le=500)]
#: explorer points per axis
Resolution = Annotated[int, Field(ge=2, le=200)]
#: the replay workload's wait (``validate --wait``)
ReplayWait = Literal["spin", "sleep"]

_ADAPTERS: dict[Any, TypeAdapter] = {}


def check(kind: Any, value: Any, name: str) -> Any:
    """``value`` validated as ``kind``; raises :class:`AutotunerError` ``name: value: reason``."""
    if value is None:
        return None
    ad = _ADAPTERS.setdefault(kind, TypeAdapter(kind))
    try:
        return ad.validate_python(value)
    except PydanticValidationError as e:
        raise AutotunerError(f"{name}: {value!r}: {_reason(e.errors()[0])}") from None


def _reason(err: dict) -> str:
    """pydantic's first error as a short phrase (``must be >= 1``)."""
    ctx, kind = err.get("ctx") or {}, err.get("type", "")
    for key, op in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
        if key in ctx:
            return f"must be {op} {ctx[key]}"
    if kind == "finite_number":
        return "must be a finite number"
    if kind == "string_pattern_mismatch":
        return "must be a plain name (letters, digits, '.', '_', '-'; no path separators, not starting with '.')"
    msg = err.get("msg", "invalid").removeprefix("Value error, ")
    return msg[0].lower() + msg[1:]


def checked(kind: Any, name: str) -> Callable[[Any], Any]:
    """A typer callback that validates one option as ``kind`` (see :func:`check`)."""
    return lambda value: check(kind, value, name)


def horovod_release(name: str) -> Callable[[Any], Any]:
    """A typer callback: the option's value if it names a Horovod release (``0.20.3``; None passes),
    else AutotunerError naming ``name`` (:func:`autotuner.frameworks.horovod.knobs.check_horovod_version`)."""
    def cb(value: Any) -> Any:
        from .frameworks.horovod.knobs import check_horovod_version

        return None if value is None else check_horovod_version(value, name)
    return cb


def _number_list(text: str, what: str, cast, kind: str, ok, bound: str) -> list:
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(p == "" for p in parts):
        raise AutotunerError(f"{what}: expected a comma-separated list of positive {kind}s, got {text!r}")
    try:
        vals = [cast(p) for p in parts]
    except ValueError:
        raise AutotunerError(f"{what}: not a{'n' if kind[0] in 'aeiou' else ''} {kind} list: {text!r}") from None
    if not all(ok(v) for v in vals):
        raise AutotunerError(f"{what}: values must be {bound}, got {text!r}")
    return sorted(set(vals))


def int_list(text: str, what: str) -> list[int]:
    """``"1,2,4"`` -> [1, 2, 4]; each > 0, sorted, deduplicated. Raises AutotunerError (one line
    naming ``what``)."""
    return _number_list(text, what, int, "integer", lambda v: v >= 1, ">= 1")


def float_list(text: str, what: str) -> list[float]:
    """``"1,10,25"`` -> [1.0, 10.0, 25.0]; each finite and > 0, sorted, deduplicated. Raises
    AutotunerError (one line naming ``what``)."""
    import math

    return _number_list(text, what, float, "number", lambda v: math.isfinite(v) and v > 0, "> 0")
