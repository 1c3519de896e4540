"""Read a ``runs/`` tree: one folder per environment with ``env.toml`` and its measurements.

Raises :class:`RunsError` (one line) for a missing or empty runs dir, a folder without a
readable ``env.toml``, or a source file that is missing or has no usable table.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from ..errors import RunsError
from .labreport import (
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


def parse_records(text: str, source: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Trial records of ``autotuner validate`` (JSON Lines, :mod:`autotuner.realrun.validation`).

    Returns (records, problems): a line that is not a JSON object with a ``trial`` key is
    skipped and reported as ``source:line: ...``.
    """
    records, problems = [], []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            problems.append(f"{source}:{n}: skipped unreadable record ({e.msg})")
            continue
        if not isinstance(rec, dict) or not isinstance(rec.get("trial"), str):
            problems.append(f"{source}:{n}: skipped record without a trial id")
            continue
        records.append(rec)
    return records, problems


def read_env(path: Path) -> EnvData:
    """Read one environment folder."""
    meta_path = path / "env.toml"
    try:
        meta = tomllib.loads(meta_path.read_text())
    except FileNotFoundError:
        raise RunsError(f"{path}: no env.toml") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise RunsError(f"{meta_path}: cannot read ({e})") from None
    for key in ("source", "format"):
        if key not in meta:
            raise RunsError(f"{meta_path}: missing key {key!r}")
    name = meta.get("name", path.name)
    env = EnvData(name=name, path=path, meta=meta)
    src = path / meta["source"]
    try:
        text = src.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise RunsError(f"{src}: cannot read ({e})") from None
    rel = f"{path.name}/{meta['source']}"
    try:
        if meta["format"] == "responses":
            env.buckets, env.step_times, env.problems = parse_responses(text, rel)
        elif meta["format"] == "breakdown":
            cols = [c["key"] for c in meta.get("column", [])]
            if not cols:
                raise RunsError(f"{meta_path}: format 'breakdown' needs [[column]] entries")
            env.breakdown, env.problems = parse_breakdown(text, cols, rel)
        elif meta["format"] == "validation":
            env.records, env.problems = parse_records(text, rel)
        else:
            raise RunsError(f"{meta_path}: unknown format {meta['format']!r}")
    except ReportError as e:
        raise RunsError(str(e)) from None
    return env


def read_runs(root: Path) -> tuple[list[EnvData], list[str]]:
    """Read every environment under ``root`` (folders holding ``env.toml``), sorted by name.

    Returns (environments, problems). A folder without ``env.toml`` is skipped silently
    (``validation/`` and other side folders); a broken environment is reported in problems.
    Raises RunsError when ``root`` is missing, not a directory, or yields no environment.
    """
    if not root.exists():
        raise RunsError(f"runs directory not found: {root}")
    if not root.is_dir():
        raise RunsError(f"not a directory: {root}")
    envs: list[EnvData] = []
    problems: list[str] = []
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        if not (d / "env.toml").exists():
            continue
        try:
            envs.append(read_env(d))
        except RunsError as e:
            problems.append(f"skipped environment {d.name}: {e}")
    if not envs:
        detail = f" ({'; '.join(problems)})" if problems else ""
        raise RunsError(f"no environment (folder with env.toml) found in {root}{detail}")
    return envs, problems
