"""Reading a file's bytes, text, JSON or TOML, with every failure as one line.

The one place that turns OS, decoding and parsing errors into the caller's
:class:`~autotuner.errors.AutotunerError` subclass, naming the file: ``<where>: not found``,
``<where>: cannot read (<reason>)``, ``<where>: not UTF-8 (byte N)``, ``<where>: not JSON
(<msg> at line L column C)``, ``<where>: not TOML (<msg>)``, ``<where>: nested too deeply``.
What the data must look like is the schemas' business (:mod:`autotuner.schemas`).
"""
from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from ..errors import AutotunerError


def read_text(path: Path, error: type[AutotunerError], where: str | None = None) -> str:
    """``path`` decoded as UTF-8. Raises ``error`` (one line starting with ``where``, default the path)."""
    w = where or str(path)
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise error(f"{w}: not found") from None
    except OSError as e:
        raise error(f"{w}: cannot read ({e.strerror or e})") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{w}: not UTF-8 (byte {e.start})") from None


def read_json(path: Path, error: type[AutotunerError], where: str | None = None) -> Any:
    """``path`` parsed as JSON. Raises ``error`` as :func:`read_text` does, and for text that is
    not JSON or is nested too deeply (NaN and Infinity parse: the schemas name the field)."""
    w = where or str(path)
    return parse_json(read_text(path, error, w), error, w)


def parse_json(text: str, error: type[AutotunerError], where: str) -> Any:
    """JSON text to Python; ``error`` naming ``where`` for text that is not JSON."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{where}: not JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except RecursionError:
        raise error(f"{where}: nested too deeply") from None


def read_toml(path: Path, error: type[AutotunerError], where: str | None = None) -> dict[str, Any]:
    """``path`` parsed as TOML. Raises ``error`` as :func:`read_text` does, and for text that is not TOML."""
    w = where or str(path)
    try:
        return tomllib.loads(read_text(path, error, w))
    except tomllib.TOMLDecodeError as e:
        raise error(f"{w}: not TOML ({e})") from None
    except RecursionError:
        raise error(f"{w}: nested too deeply") from None
