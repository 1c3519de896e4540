"""Read step times from the stdout of a training command run under horovodrun.

Three forms are understood, checked in this order:

1. The replay workload's summary (:mod:`autotuner.realrun.replay`): one line
   ``AUTOTUNER_RESULT {json}`` with ``step_times_ms`` (list of ms, measured steps only).
2. The protocol for a user's own script: one line per measured step,
   ``AUTOTUNER_STEP_TIME_MS <float>`` (ms, rank 0 only; print warm-up steps without it).
3. Horovod's ``examples/pytorch/pytorch_synthetic_benchmark.py``: per-iteration lines
   ``Iter #N: X img/sec per GPU`` (or ``per CPU``). With ``batch_size`` (images per rank per
   step) each becomes a step time ``1000 * batch_size / X`` ms; without it only throughput is
   known and step times stay empty.

Lines may carry horovodrun's ``[rank]<stdout>:`` prefix; only rank 0's lines are read then.
Raises :class:`ReplayOutputError` (one line) when none of the forms is found.
"""
from __future__ import annotations

import json
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
    """

    step_times_ms: tuple[float, ...]
    img_per_sec: tuple[float, ...] = ()
    form: str = "replay"
    extra: dict = field(default_factory=dict)


def _finite_positive(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < float("inf")


def parse_output(text: str, batch_size: int | None = None) -> StepTimes:
    """Parse a run's stdout (see the module docstring for the forms); pure."""
    step_lines: list[float] = []
    iters: list[float] = []
    for line in text.splitlines():
        m = _RANK_PREFIX.match(line)
        if m:
            if m.group(1) != "0":
                continue  # rank 0 reports for the job
            line = line[m.end():]
        line = line.strip()
        if line.startswith(RESULT_TAG + " "):
            try:
                d = json.loads(line[len(RESULT_TAG) + 1:])
            except json.JSONDecodeError as e:
                raise ReplayOutputError(f"unreadable {RESULT_TAG} line ({e.msg})") from None
            times = d.get("step_times_ms") if isinstance(d, dict) else None
            if not isinstance(times, list) or not times or not all(map(_finite_positive, times)):
                raise ReplayOutputError(f"{RESULT_TAG} line has no positive step_times_ms list")
            extra = {k: v for k, v in d.items() if k != "step_times_ms"}
            return StepTimes(tuple(float(t) for t in times), (), "replay", extra)
        if line.startswith(STEP_TAG):
            try:
                v = float(line[len(STEP_TAG):].strip().lstrip("=:").strip())
            except ValueError:
                continue
            if _finite_positive(v):
                step_lines.append(v)
            continue
        m = _ITER.match(line)
        if m and _finite_positive(float(m.group(1))):
            iters.append(float(m.group(1)))
    if step_lines:
        return StepTimes(tuple(step_lines), (), "step_lines")
    if iters:
        times = tuple(1e3 * batch_size / v for v in iters) if batch_size else ()
        return StepTimes(times, tuple(iters), "synthetic_benchmark")
    raise ReplayOutputError(
        f"no step time in the output: print '{STEP_TAG} <ms>' per step, or the "
        f"'{RESULT_TAG}' line of autotuner.realrun.replay, or pytorch_synthetic_benchmark's 'Iter #' lines")
