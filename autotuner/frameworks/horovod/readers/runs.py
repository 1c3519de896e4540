"""Read a ``runs/`` tree: one folder per environment with ``env.toml`` and its measurements.

``env.toml`` is checked by :func:`autotuner.schemas.check_env_toml` and each validation record
by :class:`autotuner.schemas.Record`; the checked dicts are handed on unchanged. Raises
:class:`RunsError` (one line) for a missing or empty runs dir, a folder without a readable
``env.toml``, or a source file that is missing or has no usable table, and
:class:`SchemaError` (one line: file, field, value, reason) for an env.toml that does not
match its schema.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ....errors import AutotunerError, RunsError, SchemaError
from ....readers.files import read_text, read_toml
from ....schemas import Format, check, is_plain_name
from ..schemas import EnvToml, Record, check_env_toml
from ....readers.labreport import (
    BreakdownCell,
    ReportError,
    ResponseBucket,
    RunStepTime,
    parse_breakdown,
    parse_responses,
)


@dataclass
class EnvData:
    """Everything measured for one environment (records keep their source line numbers)."""

    name: str
    path: Path
    meta: dict[str, Any]
    buckets: list[ResponseBucket] = field(default_factory=list)
    step_times: list[RunStepTime] = field(default_factory=list)
    breakdown: list[BreakdownCell] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def source_file(self) -> str:
        return str(self.path / self.meta["source"])


def parse_records(text: str, source: str, *, strict: bool = False) -> tuple[list[dict[str, Any]], list[str]]:
    """Trial records of ``autotuner validate`` (JSON Lines, :mod:`autotuner.frameworks.horovod.validation`).

    Returns (records, problems): a line that is not JSON, or not a record
    (:class:`autotuner.schemas.Record`: a ``trial`` id, a ``status``, a ``setup``, finite
    numbers, ...), is skipped and reported as ``source:line: field: value: reason``.

    ``strict`` (a fit's own records): a JSON record that does not match raises SchemaError
    (the first such line, and how many more) instead; a line that is not JSON (a write cut
    short) is still skipped and reported.
    """
    records, problems, bad = [], [], []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            problems.append(f"{source}:{n}: skipped unreadable record ({e.msg})")
            continue
        try:
            check(Record, rec, f"{source}:{n}")
        except SchemaError as e:
            bad.append(str(e))
            problems.append(f"{e} (record skipped)")
            continue
        records.append(rec)
    if strict and bad:
        more = f" (and {len(bad) - 1} more bad record(s))" if len(bad) > 1 else ""
        raise SchemaError(bad[0] + more)
    return records, problems


def read_validation_records(runs_dir: Path | Sequence[Path], env: str,
                            problems: list[str] | None = None) -> list[tuple[str, dict]]:
    """Every record of ``<runs>/<env>/validation/*.jsonl`` as (file stem, record), read only;
    ``runs_dir`` is one folder or several (:func:`autotuner.paths.runs_search_path`: the records
    of every one, in order).

    Records are checked by :class:`autotuner.schemas.Record`. Unreadable files and lines, and
    records that do not match, are skipped (a view must not fail on them, nor repair them: the
    writer, :class:`autotuner.frameworks.horovod.validation.TrialStore`, does that) and named in
    ``problems`` when a list is given (``file:line: field: value: reason``). [] when there is
    no folder, or when ``env`` is not a plain name.
    """
    notes = problems if problems is not None else []
    out: list[tuple[str, dict]] = []
    if not is_plain_name(env):
        return out
    dirs = [runs_dir] if isinstance(runs_dir, (str, Path)) else list(runs_dir)
    for d in dirs:
        out += [(path.stem, rec) for path, recs in read_validation_files(Path(d) / env, notes) for rec in recs]
    return out


def read_validation_files(env_dir: Path, problems: list[str] | None = None) -> list[tuple[Path, list[dict]]]:
    """Every ``validation/*.jsonl`` of one environment folder, sorted by name, as (path, its
    records), read only and checked as :func:`read_validation_records` does (unreadable files and
    lines skipped and named in ``problems``). [] when there is no such folder."""
    notes = problems if problems is not None else []
    out: list[tuple[Path, list[dict]]] = []
    for path in sorted((Path(env_dir) / "validation").glob("*.jsonl")):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError as e:
            notes.append(f"{path}: cannot read ({e.strerror or e}); skipped")
            continue
        recs, bad = parse_records(text, path.name)
        notes += bad
        out.append((path, recs))
    return out


def read_env_meta(path: Path) -> tuple[dict[str, Any], EnvToml]:
    """``path/env.toml`` parsed and checked: (the parsed dict, unchanged; its schema object).

    Raises RunsError when the file is missing or cannot be read or parsed (not UTF-8, not
    TOML), SchemaError (``<file>: <field>: <value>: <reason>``) when it does not match
    :data:`autotuner.schemas.ENV_SCHEMAS` for its ``format``.
    """
    meta_path = path / "env.toml"
    if not meta_path.exists():
        raise RunsError(f"{path}: no env.toml")
    meta = read_toml(meta_path, RunsError)
    return meta, check_env_toml(meta, str(meta_path))


def read_env(path: Path) -> EnvData:
    """Read one environment folder (see :func:`read_env_meta` for the errors)."""
    meta_path = path / "env.toml"
    meta, schema = read_env_meta(path)
    env = EnvData(name=schema.name or path.name, path=path, meta=meta)
    if schema.format is Format.TIMELINES:  # a glob: the fitter reads the files (readers.timeline)
        if not sorted(path.glob(meta["source"])):
            raise RunsError(f"{meta_path}: source: {meta['source']!r}: no file matches in {path}")
        return env
    src = path / meta["source"]
    if not src.exists():
        raise RunsError(f"{meta_path}: source: {meta['source']!r}: file not found ({src})")
    if schema.format in (Format.SWEEP, Format.NCCL_TESTS, Format.BACKEND_RUNS, Format.CPU_SCALING,
                         Format.COMPRESSION_RUNS):  # parsed by the format's fitter
        return env
    text = read_text(src, RunsError)
    rel = f"{path.name}/{meta['source']}"
    try:
        if schema.format is Format.RESPONSES:
            env.buckets, env.step_times, env.problems = parse_responses(text, rel)
        elif schema.format is Format.BREAKDOWN:
            env.breakdown, env.problems = parse_breakdown(text, [c.key for c in schema.column], rel)
        else:
            env.records, env.problems = parse_records(text, rel, strict=True)
    except ReportError as e:
        raise RunsError(str(e)) from None
    return env


def read_runs(root: Path) -> tuple[list[EnvData], list[str]]:
    """Read every environment under ``root`` (folders holding ``env.toml``), sorted by name; or, where ``root``
    itself holds ``env.toml`` (``autotuner fit runs/mycluster``, the folder ``measure --env mycluster`` wrote), that
    one environment.

    Returns (environments, problems). A folder without ``env.toml`` is skipped silently
    (``validation/`` and other side folders); a broken environment is reported in problems (an environment named
    by its own folder raises instead). Raises RunsError when ``root`` is missing, not a directory, or yields no
    environment.
    """
    if not root.exists():
        raise RunsError(f"runs directory not found: {root}")
    if not root.is_dir():
        raise RunsError(f"not a directory: {root}")
    if (root / "env.toml").exists():
        return [read_env(root)], []
    envs: list[EnvData] = []
    problems: list[str] = []
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        if not (d / "env.toml").exists():
            continue
        try:
            envs.append(read_env(d))
        except AutotunerError as e:
            problems.append(f"skipped environment {d.name}: {e}")
    if not envs:
        detail = f" ({'; '.join(problems)})" if problems else ""
        raise RunsError(f"no environment (folder with env.toml) found in {root}{detail}")
    return envs, problems
