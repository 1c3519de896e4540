"""Reader for Horovod's autotune log (``horovodrun --autotune-log-file F`` / ``HOROVOD_AUTOTUNE_LOG``).

Format facts are from ``horovod/common/parameter_manager.cc`` (0.20.0-0.25.0 and 0.26.0-0.28.1):

- Rank 0 (the root) truncates the file and writes a header (``ParameterManager::Initialize``)::

      hierarchical_allreduce,hierarchical_allgather,cache_enabled,cycle_time_ms,tensor_fusion_threshold,score   (0.20-0.25)
      hierarchical_allreduce,hierarchical_allgather,torus_allreduce,cache_enabled,cycle_time_ms,tensor_fusion_threshold,score   (>= 0.26)

- One row per scored sample, after the warm-up samples (``HOROVOD_AUTOTUNE_WARMUP_SAMPLES``,
  default 3), which are not logged (``Tune`` -> ``LogParameters(score)``). Booleans are
  streamed without ``boolalpha`` (``0``/``1``); the >= 0.26 writer puts ``", "`` before the
  cache_enabled value (hence ``skipinitialspace``). ``cycle_time_ms`` is milliseconds,
  ``tensor_fusion_threshold`` is MiB (``TensorFusionThresholdBytes`` multiplies by 1024*1024).
  Numbers use the default ``ostream`` precision (6 significant digits).
- ``score`` (``ParameterManager::Update``): a sample lasts until some tensor has been
  allreduced ``HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE`` (default 10) more times; its score is
  ``total_bytes_ / duration`` where total_bytes_ is the bytes of the ALLREDUCE responses
  processed (``TensorQueue::GetTensorDataForAutotuner``) and duration the wall time in µs
  (``steady_clock``). The logged score is the median of ``SAMPLES = 5`` such scores. Unit:
  bytes per µs = 10^6 bytes/s = MB/s of allreduced gradients.
- When every tunable parameter has finished (``finished_tuning`` in ``Tune``), the root writes
  ``LogBestParameters()`` right after the last sample's row: the ``BestValue()`` of every
  parameter and ``hierarchical_allreduce_.BestScore()``. Best scores propagate up the parameter
  chain as a running maximum (``TunableParameter::UpdateBestValue``), so that final row repeats
  the configuration and score of the best sample exactly (same doubles, same formatting).
  Hence "finished" = the last row duplicates an earlier row's configuration and score, and its
  score is the maximum of all earlier scores.
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ...errors import AutotuneLogError, KnobError
from .knobs import (
    CACHE_ON,
    DEFAULTS_0_28,
    MIB,
    Config,
    config_from_values,
    mib_to_bytes,
)

HEADER_0_20 = ("hierarchical_allreduce", "hierarchical_allgather", "cache_enabled", "cycle_time_ms",
               "tensor_fusion_threshold", "score")
HEADER_0_26 = ("hierarchical_allreduce", "hierarchical_allgather", "torus_allreduce", "cache_enabled",
               "cycle_time_ms", "tensor_fusion_threshold", "score")
_BOOLS = ("hierarchical_allreduce", "hierarchical_allgather", "torus_allreduce", "cache_enabled")
#: Larger files are refused by :func:`read_autotune_log` (bytes). A finished 0.28 run with
#: default settings logs ~21 x 16 rows of ~40 bytes.
MAX_FILE_BYTES = 64 * 1024**2
_MAX_PROBLEMS = 50
#: Largest ``tensor_fusion_threshold`` accepted (MiB): Horovod holds the threshold in bytes as
#: an ``int64_t`` (``ParameterManager::TensorFusionThresholdBytes``).
MAX_FUSION_MB = (2**63 - 1) / MIB


@dataclass(frozen=True)
class AutotuneSample:
    """One row: the configuration tried and its score.

    ``cycle_time_ms`` in ms, ``fusion_threshold_mb`` in MiB (x 1024*1024 bytes),
    ``score_bytes_per_us`` in bytes/µs (= MB/s); ``torus_allreduce`` is None for 0.20-0.25 logs;
    ``line`` is the 1-based line in the file.
    """

    hierarchical_allreduce: bool
    hierarchical_allgather: bool
    torus_allreduce: bool | None
    cache_enabled: bool
    cycle_time_ms: float
    fusion_threshold_mb: float
    score_bytes_per_us: float
    line: int

    @property
    def config(self) -> tuple:
        """The knob values (everything but score and line), for comparing rows."""
        return (self.hierarchical_allreduce, self.hierarchical_allgather, self.torus_allreduce,
                self.cache_enabled, self.cycle_time_ms, self.fusion_threshold_mb)

    @property
    def fusion_threshold_bytes(self) -> int:
        """The threshold in bytes, rounded (:func:`autotuner.frameworks.horovod.knobs.mib_to_bytes`)."""
        return mib_to_bytes(self.fusion_threshold_mb)


@dataclass(frozen=True)
class AutotuneLog:
    """A parsed autotune log.

    ``samples``: the scored samples in file order (without the final best-row when
    ``finished``). ``best``: the final row when ``finished``, else the highest-scoring sample
    so far (None without samples). ``columns_version``: ``"0.20"`` (0.20-0.25 header) or
    ``"0.26"`` (>= 0.26, with torus_allreduce).
    """

    source: str
    samples: list[AutotuneSample]
    best: AutotuneSample | None
    finished: bool
    columns_version: str
    problems: list[str]


def _parse_bool(cell: str, col: str) -> bool:
    if cell in ("0", "1"):
        return cell == "1"
    if cell.lower() in ("true", "false"):
        return cell.lower() == "true"
    raise ValueError(f"{col} is {cell!r}, not 0/1")


def _parse_float(cell: str, col: str) -> float:
    try:
        v = float(cell)
    except ValueError:
        raise ValueError(f"{col} is {cell!r}, not a number") from None
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{col} is {cell!r}, not a finite non-negative number")
    if col == "tensor_fusion_threshold" and v > MAX_FUSION_MB:
        raise ValueError(f"{col} is {cell!r} MiB, over Horovod's int64 byte count")
    return v


def parse_autotune_log(text: str, source: str = "<autotune log>") -> AutotuneLog:
    """Parse autotune-log text (pure). Raises :class:`AutotuneLogError` for an empty text, an
    unknown header, or data rows none of which parse; single bad rows are skipped and
    reported as ``source:line: ...`` in ``problems``."""
    if "\x00" in text:
        raise AutotuneLogError(f"{source}: not a Horovod autotune log (binary data)")
    if not text.strip():
        raise AutotuneLogError(f"{source}: empty file, not a Horovod autotune log")
    try:
        reader = csv.reader(io.StringIO(text, newline=""), skipinitialspace=True)
        rows = []
        for cells in reader:
            rows.append((reader.line_num, cells))
    except csv.Error as e:
        raise AutotuneLogError(f"{source}: not a Horovod autotune log (CSV error: {e})") from None
    rows = [(ln, [c.strip() for c in cells]) for ln, cells in rows if any(c.strip() for c in cells)]
    # Horovod ends every row with a newline (parameter_manager.cc LogParameters); a last row
    # without one was cut by a killed run and may hold a truncated number: never trust it.
    cut_row = len(rows) > 1 and not text.endswith(("\n", "\r"))
    if cut_row:
        rows = rows[:-1]
    if not rows:
        raise AutotuneLogError(f"{source}: no header, not a Horovod autotune log")
    header_line, header = rows[0]
    header_t = tuple(header)
    if header_t == HEADER_0_26:
        version = "0.26"
    elif header_t == HEADER_0_20:
        version = "0.20"
    else:
        shown = ",".join(header)[:120]
        raise AutotuneLogError(f"{source}:{header_line}: not a Horovod autotune log header "
                               f"(got {shown!r}; expected {','.join(HEADER_0_26)!r} or the "
                               f"0.20-0.25 form without torus_allreduce)")
    columns = header_t
    problems: list[str] = []
    dropped = 0
    full_bad = 0  # bad rows that are not just a short (cut-off) line
    parsed: list[AutotuneSample] = []
    for ln, cells in rows[1:]:
        try:
            if len(cells) < len(columns):
                raise ValueError(f"{len(cells)} cells, expected {len(columns)} (line cut short?)")
            full_bad += 1
            if len(cells) != len(columns):
                raise ValueError(f"{len(cells)} cells, expected {len(columns)}")
            v = dict(zip(columns, cells))
            parsed.append(AutotuneSample(
                hierarchical_allreduce=_parse_bool(v["hierarchical_allreduce"], "hierarchical_allreduce"),
                hierarchical_allgather=_parse_bool(v["hierarchical_allgather"], "hierarchical_allgather"),
                torus_allreduce=(_parse_bool(v["torus_allreduce"], "torus_allreduce")
                                 if "torus_allreduce" in v else None),
                cache_enabled=_parse_bool(v["cache_enabled"], "cache_enabled"),
                cycle_time_ms=_parse_float(v["cycle_time_ms"], "cycle_time_ms"),
                fusion_threshold_mb=_parse_float(v["tensor_fusion_threshold"], "tensor_fusion_threshold"),
                score_bytes_per_us=_parse_float(v["score"], "score"),
                line=ln))
            full_bad -= 1
        except ValueError as e:
            if len(problems) < _MAX_PROBLEMS:
                problems.append(f"{source}:{ln}: {e}; row skipped")
            else:
                dropped += 1
    if dropped:
        problems.append(f"{source}: ... and {dropped} more bad rows")
    if cut_row:
        problems.append(f"{source}: last row has no newline (cut by a killed run?); skipped")
    if full_bad and not parsed:
        raise AutotuneLogError(f"{source}: no usable rows ({len(rows) - 1} rows, first problem: "
                               f"{problems[0].split(': ', 1)[1]})")
    finished = False
    best: AutotuneSample | None = None
    if len(parsed) >= 2:
        last, earlier = parsed[-1], parsed[:-1]
        top = max(s.score_bytes_per_us for s in earlier)
        if last.score_bytes_per_us == top and any(
                s.config == last.config and s.score_bytes_per_us == top for s in earlier):
            finished = True
            best = last
            parsed = earlier
    if not finished and parsed:
        best = max(parsed, key=lambda s: s.score_bytes_per_us)
    if not parsed:
        problems.append(f"{source}: header only: no samples were scored (tuning never got past "
                        f"warm-up, or the run ended early)")
    return AutotuneLog(source=source, samples=parsed, best=best, finished=finished,
                       columns_version=version, problems=problems)


def read_autotune_log(path: str | Path, max_bytes: int = MAX_FILE_BYTES) -> AutotuneLog:
    """Read an autotune log file (UTF-8 CSV). Raises :class:`AutotuneLogError` (one line,
    naming the file) when it cannot be read, is over ``max_bytes`` bytes, or is not a log."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > max_bytes:
            raise AutotuneLogError(f"{p}: {size} bytes is over the {max_bytes}-byte limit for an "
                                   f"autotune log")
        text = p.read_bytes().decode("utf-8")
    except OSError as e:
        raise AutotuneLogError(f"{p}: cannot read ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise AutotuneLogError(f"{p}: not a Horovod autotune log (not UTF-8 text at byte {e.start})") from None
    return parse_autotune_log(text, source=str(p))


def row_config(row, base: Config = DEFAULTS_0_28) -> Config:
    """The configuration of one autotune row (an :class:`AutotuneSample`, or a mapping with the same
    fields, as ``validate`` records it): its fusion threshold, cycle time and hierarchical
    switches; the cache at :data:`~autotuner.frameworks.horovod.knobs.CACHE_ON` when enabled, else 0; other knobs
    from ``base``. Raises KnobError when a value is outside the knob table."""
    get = row.get if isinstance(row, Mapping) else (lambda k: getattr(row, k))
    return config_from_values({"fusion_threshold_mb": get("fusion_threshold_mb"), "cycle_time_ms": get("cycle_time_ms"),
                               "cache_capacity": CACHE_ON if get("cache_enabled") else 0,
                               "hierarchical_allreduce": bool(get("hierarchical_allreduce")),
                               "hierarchical_allgather": bool(get("hierarchical_allgather"))}, base)


def best_config(log: AutotuneLog, base: Config = DEFAULTS_0_28) -> Config | None:
    """:func:`row_config` of ``log.best`` (None without a best row).

    Raises :class:`AutotuneLogError` (``source:line: ...``, naming the knob and the value) when
    the row is outside the knob table's ranges (:data:`autotuner.frameworks.horovod.knobs.KNOBS`), e.g. a cycle
    time the user fixed above 100 ms.
    """
    b = log.best
    if b is None:
        return None
    try:
        return row_config(b, base)
    except KnobError as e:
        raise AutotuneLogError(f"{log.source}:{b.line}: best row is not a configuration autotuner can "
                               f"use ({e})") from None


def _fmt_sample(s: AutotuneSample) -> str:
    knobs = [f"fusion threshold {s.fusion_threshold_mb:g} MiB", f"cycle time {s.cycle_time_ms:g} ms",
             f"response cache {'on' if s.cache_enabled else 'off'}",
             f"hierarchical allreduce {'on' if s.hierarchical_allreduce else 'off'}",
             f"hierarchical allgather {'on' if s.hierarchical_allgather else 'off'}"]
    if s.torus_allreduce is not None:
        knobs.append(f"torus allreduce {'on' if s.torus_allreduce else 'off'}")
    return ", ".join(knobs)


def explain(log: AutotuneLog, bytes_per_step: int | None = None) -> list[str]:
    """Plain-language summary lines of an autotune log.

    ``bytes_per_step``: gradient bytes allreduced per training step (bytes); when given, the
    implied communication time per step is ``bytes_per_step / score`` µs, reported in ms.
    """
    fmt = "0.26+ (with torus_allreduce)" if log.columns_version == "0.26" else "0.20-0.25"
    out = [f"{log.source}: Horovod autotune log, {fmt} columns, {len(log.samples)} scored trial(s)."]
    if not log.samples:
        out.append("No trial was scored: tuning never finished its warm-up (the run was too short "
                   "or ended early), so Horovod's defaults were used.")
    elif log.finished:
        same = next(s.line for s in log.samples if s.config == log.best.config
                    and s.score_bytes_per_us == log.best.score_bytes_per_us)
        out.append(f"Tuning finished: the last row (line {log.best.line}) is Horovod's final choice, "
                   f"repeating the best of {len(log.samples)} trials (line {same}); Horovod keeps "
                   f"these settings for the rest of the run.")
    else:
        out.append(f"Tuning did NOT finish (no final best-configuration row); the best trial so "
                   f"far is line {log.best.line}. Horovod was still exploring when the log ended.")
    if log.best is not None:
        b = log.best
        out.append(f"Best: {_fmt_sample(b)}.")
        scores = [s.score_bytes_per_us for s in log.samples]
        out.append(f"Score {b.score_bytes_per_us:g} = {b.score_bytes_per_us:g} bytes of gradients "
                   f"allreduced per microsecond of training wall time (= {b.score_bytes_per_us:g} MB/s; "
                   f"median of 5 measurements); trials ranged {min(scores):g} to {max(scores):g} MB/s. "
                   f"Higher is better.")
        worst = min(log.samples, key=lambda s: s.score_bytes_per_us)
        if worst.score_bytes_per_us > 0 and math.isfinite(b.score_bytes_per_us / worst.score_bytes_per_us):
            out.append(f"The best trial was {b.score_bytes_per_us / worst.score_bytes_per_us:.2f}x "
                       f"the worst (line {worst.line}: {_fmt_sample(worst)}).")
        if bytes_per_step is not None:
            try:
                ms = bytes_per_step / b.score_bytes_per_us / 1000.0 if b.score_bytes_per_us > 0 else math.inf
            except OverflowError:  # a byte count beyond float range
                ms = math.inf
            if math.isfinite(ms):
                shown = f"{ms:.0f}" if ms >= 100 else f"{ms:.3g}"
                out.append(f"With {bytes_per_step} bytes allreduced per step, that score implies "
                           f"about {shown} ms per training step (wall time, compute included) "
                           f"at the best setting.")
            else:
                out.append(f"The best score is {b.score_bytes_per_us:g}, so no time per step can be derived.")
        try:
            best_config(log)
        except AutotuneLogError as e:
            out.append(f"Note: {e}; it cannot be simulated or replayed.")
    for p in log.problems:
        out.append(f"Note: {p}")
    return out
