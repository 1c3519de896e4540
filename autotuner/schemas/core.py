"""The shared pieces of the schemas: the one-line error, field types, plain names."""
from __future__ import annotations

import math
import re
from enum import StrEnum
from typing import Annotated, Any, Mapping

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
)
from pydantic import ValidationError as PydanticValidationError
from pydantic_core import PydanticCustomError

from ..errors import AutotunerError, SchemaError


LAYOUT_SCHEMA = "autotuner.layout/1"
MODEL_SCHEMA = "autotuner.model/1"


class Format(StrEnum):
    """``format`` of an env.toml: what kind of measurements ``source`` holds."""

    RESPONSES = "responses"    # per-run response-size tables (lab report 000)
    BREAKDOWN = "breakdown"    # per-model tables, one column per cluster shape (lab report 001)
    VALIDATION = "validation"  # ``autotuner validate`` records (JSON Lines)
    SWEEP = "sweep"            # ``autotuner measure`` records (JSON Lines) and its kept timelines
    NCCL_TESTS = "nccl-tests"  # nccl-tests ``all_reduce_perf`` output, one file per tier
    TIMELINES = "timelines"    # any number of HOROVOD_TIMELINE files of a user's training job
    BACKEND_RUNS = "backend-runs"          # wall times per backend and process count (lab report 002)
    CPU_SCALING = "cpu-scaling"            # step times of CPU ranks on one host (lab report 003)
    COMPRESSION_RUNS = "compression-runs"  # wall times with and without gradient compression (lab report 004)


# --- the one-line error -------------------------------------------------------------------

_ADAPTERS: dict[Any, TypeAdapter] = {}


def field_path(loc: tuple) -> str:
    """``('run', 0, 'model')`` -> ``run[0].model``; ``()`` -> ``(top level)``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _short(value: Any, limit: int = 60) -> str:
    s = repr(value)
    return s if len(s) <= limit else s[:limit - 3] + "..."


def one_line(e: PydanticValidationError, where: str) -> str:
    """``<where>: <field path>: <value>: <reason>`` for the first error of ``e``, plus
    ``(and N more)``. A missing field's value reads ``(missing)``; a single value checked on its
    own (no field path) gives ``<where>: <value>: <reason>``."""
    errs = e.errors(include_url=False)
    first = errs[0]
    loc, value = tuple(first["loc"]), first.get("input")
    ctx = first.get("ctx") or {}
    if "at" in ctx:  # a list-level check that names the element (see _fail)
        loc, value = loc + tuple(ctx["at"]), ctx.get("value")
    shown = "(missing)" if first["type"] == "missing" else _short(value)
    msg = str(first["msg"])
    msg = re.sub(r"^(Value error|Assertion failed), ", "", msg)
    msg = re.sub(r" or instance of \w+$", "", msg)
    msg = msg[:1].lower() + msg[1:]
    more = f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""
    if not loc and not isinstance(value, (Mapping, list, tuple)):  # a single value: ``where`` names it
        return f"{where}: {shown}: {msg}{more}"
    return f"{where}: {field_path(loc)}: {shown}: {msg}{more}"


def check(schema: Any, data: Any, where: str, error: type[AutotunerError] = SchemaError) -> Any:
    """``data`` validated as ``schema`` (a model class or any annotated type).

    Raises ``error`` (a :class:`SchemaError` unless given) with one line:
    ``<where>: <field path>: <value>: <reason>`` (the first error, plus ``(and N more)``).
    """
    ad = _ADAPTERS.get(schema)
    if ad is None:
        ad = _ADAPTERS.setdefault(schema, TypeAdapter(schema))
    try:
        return ad.validate_python(data)
    except PydanticValidationError as e:
        raise error(one_line(e, where)) from None


def _fail(kind: str, message: str, at: tuple = (), value: Any = None) -> PydanticCustomError:
    """An error a validator raises; ``at`` extends the field path to the element it names."""
    return PydanticCustomError(kind, message, {"at": at, "value": value})


def _unique(items: list, key: str, what: str) -> None:
    """Fail (at the repeated item) when two of ``items`` share attribute ``key`` (``what`` names it)."""
    seen: set = set()
    for i, it in enumerate(items):
        v = getattr(it, key)
        if v in seen:
            raise _fail("duplicate", f"duplicate {what}", (i, key), v)
        seen.add(v)


def find_nonfinite(obj: Any, loc: tuple = ()) -> tuple[tuple, float] | None:
    """(location, value) of the first float in ``obj`` (nested dicts and lists) that is NaN or
    infinite, or None. :func:`field_path` renders the location."""
    if isinstance(obj, float):
        return None if math.isfinite(obj) else (loc, obj)
    if isinstance(obj, Mapping):
        items = ((loc + (k,), v) for k, v in obj.items())
    elif isinstance(obj, (list, tuple)):
        items = ((loc + (i,), v) for i, v in enumerate(obj))
    else:
        return None
    for p, v in items:
        bad = find_nonfinite(v, p)
        if bad:
            return bad
    return None


# --- field types ----------------------------------------------------------------------------

Finite = Annotated[float, Field(allow_inf_nan=False)]
#: a finite number >= 0 (durations, shares, byte counts)
NonNeg = Annotated[float, Field(ge=0, allow_inf_nan=False)]
#: a finite number > 0 (rates, scales)
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
#: whole nodes, ranks, steps (>= 1)
Count = Annotated[int, Field(ge=1, le=100_000)]
GpusPerNode = Annotated[int, Field(ge=1, le=1024)]
Index = Annotated[int, Field(ge=0)]
#: a link rate in Gbit/s (10**9 bit/s): 10 Mbit/s to 10 Tbit/s (below, a 100 MB model's allreduce takes
#: minutes and a traced step millions of cycles; nothing measured here is that slow)
LinkGbit = Annotated[float, Field(ge=0.01, le=10_000, allow_inf_nan=False)]
#: a duration in ms, up to one hour
Millis = Annotated[float, Field(ge=0, le=3_600_000, allow_inf_nan=False)]
Text = Annotated[str, Field(min_length=1)]

_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,99}")


def is_plain_name(s: Any) -> bool:
    """True for a name that is safe as a file name: letters, digits, ``.``, ``_``, ``-``, not
    starting with ``.`` (so no path separator, no ``..``, not absolute), 1-100 characters."""
    return isinstance(s, str) and _PLAIN.fullmatch(s) is not None


def _plain_name(s: str) -> str:
    if not is_plain_name(s):
        raise ValueError("must be a plain name (letters, digits, '.', '_', '-'; not starting with '.'; "
                         "no path separators)")
    return s


def _rel_path(s: str) -> str:
    parts = s.split("/")
    if not s or s.startswith("/") or "\\" in s or "\0" in s or ":" in s or any(p in ("", ".", "..") for p in parts):
        raise ValueError("must be a relative path inside the environment's folder (no '..', ':' or leading '/')")
    return s


def _layout_ref(s: str) -> str:
    if ":" in s:
        raise ValueError("a data file names a shipped layout or a .json file in its own folder, "
                         "not module:factory (only the command line's --model imports code)")
    _rel_path(s)
    if not (s.endswith(".json") or is_plain_name(s)):
        raise ValueError("must be a shipped layout name or a relative .json path")
    return s


#: a name that becomes a file name (see :func:`is_plain_name`)
PlainName = Annotated[str, AfterValidator(_plain_name)]
#: a relative path inside the data file's folder
RelPath = Annotated[str, AfterValidator(_rel_path)]
#: a layout named in a data file: a shipped name, or a ``.json`` path inside the file's folder
LayoutRef = Annotated[str, AfterValidator(_layout_ref)]


class _Schema(BaseModel):
    """Strict (no str -> number, no float -> int, no 0/1 -> bool) and closed (unknown keys fail)."""

    model_config = ConfigDict(strict=True, extra="forbid", defer_build=True)  # built on first use: imports stay light
