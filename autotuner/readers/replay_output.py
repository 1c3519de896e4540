"""Read step times from the stdout of a training command run under horovodrun.

Three forms are understood, checked in this order:

1. The replay workload's summary (:mod:`autotuner.frameworks.horovod.replay`): one line
   ``AUTOTUNER_RESULT {json}`` with ``step_times_ms`` (list of ms, measured steps only).
2. The protocol for a user's own script: one line per measured step,
   ``AUTOTUNER_STEP_TIME_MS <float>`` (ms, rank 0 only; print warm-up steps without it).
3. Horovod's ``examples/pytorch/pytorch_synthetic_benchmark.py``: per-iteration lines
   ``Iter #N: X img/sec per GPU`` (or ``per CPU``). With ``batch_size`` (images per rank per
   step) each becomes a step time ``1000 * batch_size / X`` ms; without it only throughput is
   known and step times stay empty.

Lines may carry horovodrun's ``[rank]<stdout>:`` prefix; only rank 0's lines are read then.
Raises :class:`ReplayOutputError` (one line) when none of the forms is found, or when the
``AUTOTUNER_RESULT`` line is unreadable or holds a step time, ``bytes_per_step`` or other number
that is not finite. Step and ``Iter`` lines that cannot be read are skipped and named in
:attr:`StepTimes.problems`.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

from ..errors import ReplayOutputError

RESULT_TAG = "AUTOTUNER_RESULT"
STEP_TAG = "AUTOTUNER_STEP_TIME_MS"
_RANK_PREFIX = re.compile(r"^\[(\d+)\]<std(?:out|err)>:")  # horovodrun's per-rank line prefix
_ITER = re.compile(r"^Iter #\d+: ([0-9.]+(?:[eE][-+]?\d+)?) img/sec per (?:GPU|CPU)\s*$")


@dataclass(frozen=True)
class StepTimes:
    """Measured step times of one run.

    Attributes:
        step_times_ms: per measured step, ms (may be empty when only throughput is known).
        img_per_sec: per-rank throughput samples (img/s), from the synthetic benchmark form.
        form: ``"replay"``, ``"step_lines"`` or ``"synthetic_benchmark"``.
        extra: the replay summary's other keys (``bytes_per_step``, ``ranks``, ...).
        problems: ``line N: ...`` for each step or ``Iter`` line that was skipped.
    """

    step_times_ms: tuple[float, ...]
    img_per_sec: tuple[float, ...] = ()
    form: str = "replay"
    extra: dict = field(default_factory=dict)
    problems: tuple[str, ...] = ()


def _finite_positive(v: object) -> bool:
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return False
    try:
        return 0 < float(v) < math.inf
    except OverflowError:  # an int beyond float range
        return False


def _shown(v: object) -> str:
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def _no_constant(name: str):
    raise ValueError(f"{name} is not a finite number")


def _result(payload: str) -> StepTimes:
    """The ``AUTOTUNER_RESULT`` JSON object (see the module docstring), checked."""
    try:
        d = json.loads(payload, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise ReplayOutputError(f"unreadable {RESULT_TAG} line ({e.msg})") from None
    except (ValueError, RecursionError) as e:  # NaN/Infinity, int digit limit, deep nesting
        msg = str(e).splitlines()[0][:80] if isinstance(e, ValueError) else "nesting too deep"
        raise ReplayOutputError(f"unreadable {RESULT_TAG} line ({msg})") from None
    times = d.get("step_times_ms") if isinstance(d, dict) else None
    if not isinstance(times, list) or not times:
        raise ReplayOutputError(f"{RESULT_TAG} line has no positive step_times_ms list")
    for i, t in enumerate(times):
        if not _finite_positive(t):
            raise ReplayOutputError(f"{RESULT_TAG} line: step_times_ms[{i}] is {_shown(t)}, not a positive "
                                    f"finite number of ms")
    extra = {k: v for k, v in d.items() if k != "step_times_ms"}
    for k, v in extra.items():
        if isinstance(v, float) and not math.isfinite(v):  # 1e999 reads as inf
            raise ReplayOutputError(f"{RESULT_TAG} line: {k} is {_shown(v)}, not finite")
    nb = extra.get("bytes_per_step")
    if nb is not None:
        if isinstance(nb, bool) or not isinstance(nb, (int, float)) or not 0 <= nb < 2**63 or nb != int(nb):
            raise ReplayOutputError(f"{RESULT_TAG} line: bytes_per_step is {_shown(nb)}, not a whole number "
                                    f"of bytes in 0..2**63")
        extra["bytes_per_step"] = int(nb)
    return StepTimes(tuple(float(t) for t in times), (), "replay", extra)


def parse_output(text: str, batch_size: int | None = None) -> StepTimes:
    """Parse a run's stdout (see the module docstring for the forms); pure."""
    step_lines: list[float] = []
    iters: list[float] = []
    problems: list[str] = []
    for no, line in enumerate(text.splitlines(), start=1):
        m = _RANK_PREFIX.match(line)
        if m:
            if m.group(1) != "0":
                continue  # rank 0 reports for the job
            line = line[m.end():]
        line = line.strip()
        if line.startswith(RESULT_TAG + " "):
            return _result(line[len(RESULT_TAG) + 1:])
        if line.startswith(STEP_TAG):
            cell = line[len(STEP_TAG):].strip().lstrip("=:").strip()
            try:
                v = float(cell)
            except ValueError:
                v = math.nan
            if _finite_positive(v):
                step_lines.append(v)
            else:
                problems.append(f"line {no}: {STEP_TAG} {cell[:40]!r} is not a positive finite number of ms; "
                                f"skipped")
            continue
        m = _ITER.match(line)
        if m:
            v = float(m.group(1))
            try:
                ok = _finite_positive(v) and (not batch_size or math.isfinite(1e3 * batch_size / v))
            except OverflowError:  # a batch size beyond float range
                ok = False
            if ok:
                iters.append(v)
            else:
                problems.append(f"line {no}: 'Iter' throughput {m.group(1)[:40]!r} img/sec gives no finite "
                                f"step time; skipped")
    if step_lines:
        return StepTimes(tuple(step_lines), (), "step_lines", problems=tuple(problems))
    if iters:
        times = tuple(1e3 * batch_size / v for v in iters) if batch_size else ()
        return StepTimes(times, tuple(iters), "synthetic_benchmark", problems=tuple(problems))
    raise ReplayOutputError(
        f"no step time in the output: print '{STEP_TAG} <ms>' per step, or the "
        f"'{RESULT_TAG}' line of autotuner.frameworks.horovod.replay, or pytorch_synthetic_benchmark's 'Iter #' lines"
        + (f" ({len(problems)} line(s) skipped; first: {problems[0]})" if problems else ""))
