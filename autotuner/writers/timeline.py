"""Write timeline events in the byte layout of Horovod's ``TimelineWriter`` (v0.28.1).

``horovod/common/timeline.cc``: ``WriteAtFileStart`` writes ``[`` + newline and the pid-0
metadata; every metadata record is followed by ``,`` + newline, every event or marker by ``]``,
which the next record overwrites with ``,``. So the file is ``[\\n{M},\\n{M},\\n{ev},{ev},...{ev}]``
with ``, `` / ``: `` separators (the header's ``start_time_since_epoch_in_micros`` has no space
after its colon). A name ending in ``.gz`` is written gzip-compressed, atomically
(:mod:`autotuner.writers.atomic`).
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

from .atomic import atomic_write_bytes


def format_timeline(events: list[dict]) -> str:
    """The file text for ``events`` (dicts in file order, keys in Horovod's order)."""
    parts = ["[\n"]
    for ev in events:
        text = json.dumps(ev, ensure_ascii=False)
        if ev.get("ph") == "M" and "start_time_since_epoch_in_micros" in (ev.get("args") or {}):
            text = text.replace('"start_time_since_epoch_in_micros": ', '"start_time_since_epoch_in_micros":')
        parts.append(text)
        parts.append(",\n" if ev.get("ph") == "M" else ",")
    if len(parts) > 1:
        parts[-1] = "]" if parts[-1] == "," else "\n]"  # Horovod ends on an event: ``}]``
    else:
        parts.append("]")
    return "".join(parts)


def write_timeline(path: str | Path, events: list[dict]) -> Path:
    """Write ``events`` to ``path`` (gzip when it ends in ``.gz``), atomically.

    Raises :class:`~autotuner.errors.OutputError` (one line naming the file) when it cannot be
    written (:func:`autotuner.writers.atomic.atomic_write_bytes`).
    """
    p = Path(path)
    data = format_timeline(events).encode("utf-8")
    if p.name.endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    return atomic_write_bytes(p, data)
