"""Reader for the Horovod timeline (``horovodrun --timeline-filename F`` / ``HOROVOD_TIMELINE=F``).

The timeline is written by rank 0 only, in Chrome-trace JSON. Every format fact below is from
Horovod's ``horovod/common/timeline.cc`` (0.20.0 and 0.28.1) unless stated otherwise.

File layout
    ``[`` + newline, then one JSON object per record. Two writer forms exist:

    - **closed** (>= 0.20.1, ``TimelineWriter::DoWriteEvent``): every record is followed by ``]``;
      the next record seeks back one byte and overwrites the ``]`` with ``,``. The file is a
      valid JSON array after every record (ends ``}]``).
    - **unclosed** (<= 0.20.0): every record is followed by ``,`` + newline and the array is
      never closed (ends ``},``).

    A run killed mid-write leaves a **truncated** file: the last record is cut, or a complete
    record lacks its ``]``/``,``. The partial record is dropped and reported in ``problems``.

Records (``ts`` is an integer, microseconds since the timeline started)
    - ``{"name": "process_name", "ph": "M", "pid": N, "args": {"name": TENSOR}}``: tensor
      TENSOR is modelled as "process" N (pid 0 is the file header, whose ``args`` hold
      ``start_time_since_epoch_in_micros``); a ``process_sort_index`` record follows each.
    - ``{"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "ts": T, "pid": N}`` ... ``{"ph": "E", ...}``:
      negotiation (``Timeline::NegotiateStart/End``), with ``{"ph": "X", "name": "1", "ts": T,
      "pid": N, "dur": 0}`` for each rank that reported the tensor ready
      (``NegotiateRankReady``; the name is the rank).
    - ``{"ph": "B", "name": "ALLREDUCE", ...}``: the top-level operation (``Timeline::Start``;
      the name is ``Response::ResponseType_Name`` from ``message.cc``: ALLREDUCE, ALLGATHER,
      BROADCAST, ...). Nested ``B``/``E`` pairs are activities (``ActivityStart/End``; names
      from ``common.h``: MEMCPY_IN_FUSION_BUFFER, GLOO_ALLREDUCE, NCCL_ALLREDUCE,
      MPI_ALLREDUCE, MEMCPY_OUT_FUSION_BUFFER, WAIT_FOR_DATA, QUEUE, ...). The top-level ``E``
      carries ``"args": {"dtype": "float32", "shape": "[64, 32]"}`` (``Timeline::End``: dtype is
      ``DataType_Name`` from ``message.cc``, shape is ``TensorShape::DebugString`` from
      ``common.cc``); the args are absent when the op failed. ``E`` records have no ``name``.
    - ``{"ph": "i", "name": "CYCLE_START", "ts": T, "s": "g"}``: background-loop cycle marks,
      only with ``HOROVOD_TIMELINE_MARK_CYCLES=1`` (``--timeline-mark-cycles``).

Fused responses
    One Horovod response may carry several tensors (tensor fusion). The timeline has no
    response id, so tensors are grouped by their collective activity (``GLOO_*``, ``MPI_*``,
    ``NCCL_*``, ``CCL_*``): ``ActivityStartAll`` writes the ``B`` of every tensor of a response
    before ``ActivityEndAll`` writes any ``E``, and Gloo/MPI run one response at a time. So
    intervals are taken in *record order* (exact; timestamps have 1 µs ties), sorted by start,
    and a new group starts when a start comes after the current group's earliest end.
"""
from __future__ import annotations

import gzip
import itertools
import json
import math
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..errors import TimelineError

#: Bytes per element for ``DataType_Name`` strings (``horovod/common/message.cc``,
#: ``DataType_Size``). bfloat16 is added for later Horovod versions.
DTYPE_BYTES = {"uint8": 1, "int8": 1, "uint16": 2, "int16": 2, "int32": 4, "int64": 8,
               "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "bool": 1}

#: A collective activity's name starts with one of these (GLOO_ALLREDUCE, NCCL_ALLREDUCE, ...; common.h).
_COLLECTIVE_PREFIXES = ("GLOO_", "MPI_", "NCCL_", "CCL_", "DDL_")
# A record boundary as Horovod writes it: the end of an object, then ``,`` or ``]``.
_BOUNDARY_RE = re.compile(r"\}\s*[,\]]")
_MAX_PROBLEMS = 50
# A cut-off tail longer than this is not one partial Horovod record but garbage (characters).
_MAX_RECORD_CHARS = 65536
#: Files larger than this are refused by :func:`read_timeline` (bytes).
MAX_FILE_BYTES = 1024**3
#: Largest timestamp accepted (µs): Horovod writes ``ts`` as whole µs since the timeline started
#: (never negative); above 2**53 a float64 no longer holds every whole µs (~285 years).
MAX_TS_US = 2.0**53
#: Largest tensor accepted (bytes, prod(shape) x dtype size): 1 TiB, over any GPU's memory (an
#: H200 has 141 GB); keeps every response's byte count well inside int64 (:func:`samples`).
MAX_TENSOR_BYTES = 1 << 40


@dataclass(frozen=True)
class TensorOp:
    """One tensor's passage through one top-level operation (times in µs since start).

    ``collective_*`` is the span of its collective activities (None if it had none);
    ``activities`` are ``(name, start_us, end_us)`` in order.
    """

    tensor: str
    op: str
    start_us: float
    end_us: float
    dtype: str
    shape: tuple[int, ...]
    nbytes: int  # prod(shape) x dtype size, bytes
    activities: tuple[tuple[str, float, float], ...]
    collectives: tuple[str, ...]
    collective_start_us: float | None
    collective_end_us: float | None
    first_seq: int  # record index of the first collective activity's B (-1: none)
    end_seq: int    # record index of the first collective activity's E (-1: none)


@dataclass(frozen=True)
class FusedResponse:
    """One Horovod response: the tensors reduced by one collective call.

    ``op`` is lower-case (``"allreduce"``, ``"allgather"``, ``"broadcast"``, ...);
    ``nbytes`` = sum of ``tensor_nbytes`` (bytes, = prod(shape) x dtype size);
    ``start_us``/``duration_us``: span of the collective activity (``activity``, e.g.
    ``"GLOO_ALLREDUCE"``; several joined by ``+`` for hierarchical algorithms), µs;
    ``memcpy_in_us``/``memcpy_out_us``: span of MEMCPY_IN_*/MEMCPY_OUT_* activities (µs, 0 when
    the response was not copied through the fusion buffer, e.g. a single tensor).
    """

    op: str
    tensors: tuple[str, ...]
    tensor_nbytes: tuple[int, ...]
    nbytes: int
    start_us: float
    duration_us: float
    activity: str
    memcpy_in_us: float
    memcpy_out_us: float


@dataclass(frozen=True)
class Negotiation:
    """A tensor's negotiation phase (``NEGOTIATE_<OP>``): µs since start; ``ready`` is
    ``(rank, ts_us)`` for each rank-ready mark seen on rank 0's timeline."""

    tensor: str
    op: str
    start_us: float
    duration_us: float
    ready: tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class Timeline:
    """A parsed timeline. ``horovod_form``: ``"closed"`` (>= 0.20.1), ``"unclosed"``
    (<= 0.20.0) or ``"truncated"`` (cut mid-write). ``problems`` are one-line notes about
    records that were skipped. ``start_time_since_epoch_us`` is from the header record
    (>= 0.23-ish writers; None when absent)."""

    source: str
    responses: list[FusedResponse]
    negotiations: list[Negotiation]
    cycle_starts_us: list[float]
    tensor_ops: list[TensorOp]
    problems: list[str]
    horovod_form: str
    n_records: int
    start_time_since_epoch_us: float | None = None

    @property
    def total_bytes(self) -> int:
        return sum(r.nbytes for r in self.responses)


# --------------------------------------------------------------------------- record stream


def _iter_records(text: str, source: str, problems: list[str]):
    """Yield ``(index, byte_offset, record)`` for each JSON object; returns the form via
    StopIteration value. Raises TimelineError for anything that is not a timeline array."""
    dec = json.JSONDecoder()
    n = len(text)
    i = 0
    while i < n and text[i] in " \t\r\n\ufeff":
        i += 1
    if i >= n:
        raise TimelineError(f"{source}: empty file, not a Horovod timeline")
    if text[i] != "[":
        raise TimelineError(f"{source}: not a Horovod timeline (does not start with a JSON array '[')")
    i += 1
    idx = 0
    compact = False  # seen an event record followed by ',' without a newline (>=0.20.1 writer)
    while True:
        while i < n and text[i] in " \t\r\n":
            i += 1
        if i >= n:
            # ``[`` alone (nothing written yet) or the <=0.20.0 form, where every record is
            # followed by ``,`` + newline. The >=0.20.1 writer puts ``,`` straight before the next
            # event record, so a file of that form ending in ``,`` was cut mid-write.
            if compact or (idx and not text.endswith("\n")):
                problems.append(f"{source}: file ends after ',' without the closing ']' of the "
                                f">=0.20.1 writer (run cut short?)")
                return "truncated"
            return "unclosed"
        if text[i] == "]":
            rest = text[i + 1:].strip()
            if rest:
                raise TimelineError(f"{source}: not a Horovod timeline (data after the closing ']' "
                                    f"at offset {i})")
            return "closed"
        try:
            obj, end = dec.raw_decode(text, i)
        except (ValueError, RecursionError) as e:  # JSONDecodeError, int digit limit
            tail = text[i:]
            if (tail.startswith("{") and len(tail) <= _MAX_RECORD_CHARS
                    and not _BOUNDARY_RE.search(tail)):
                problems.append(f"{source}: file ends inside a record at offset {i} "
                                f"({len(tail)} bytes dropped; run cut short?)")
                return "truncated"
            msg = (e.msg if isinstance(e, json.JSONDecodeError)
                   else "nesting too deep" if isinstance(e, RecursionError) else str(e).splitlines()[0][:80])
            raise TimelineError(f"{source}: not a Horovod timeline (invalid JSON record at offset {i}, "
                                f"line {text.count(chr(10), 0, i) + 1}: {msg})") from None
        if not isinstance(obj, dict):
            raise TimelineError(f"{source}: not a Horovod timeline (element {idx} at offset {i} is "
                                f"{type(obj).__name__}, not an event object)")
        if not isinstance(obj.get("ph"), str):
            raise TimelineError(f"{source}: not a Horovod timeline (element {idx} at offset {i} has "
                                f"no 'ph' phase)")
        yield idx, i, obj
        idx += 1
        i = end
        while i < n and text[i] in " \t\r\n":
            i += 1
        if i >= n:
            problems.append(f"{source}: last record at offset {end} has no ',' or ']' after it "
                            f"(run cut short?)")
            return "truncated"
        if text[i] == ",":
            i += 1
            if obj["ph"] != "M" and i < n and text[i] != "\n":
                compact = True
        elif text[i] == "]":
            continue  # handled at the top of the loop
        else:
            raise TimelineError(f"{source}: not a Horovod timeline (expected ',' or ']' at offset {i})")


# --------------------------------------------------------------------------- event state


@dataclass
class _Open:
    """A tensor's open top-level op (or negotiation) while its events stream in."""

    name: str
    start: float
    negotiation: bool
    bad: str | None = None  # why the op is unusable (an event ended before it began), if it is
    ready: list = field(default_factory=list)
    activities: list = field(default_factory=list)  # [name, start, end, b_seq, e_seq]
    stack: list = field(default_factory=list)       # open activities


def _num(v) -> float | None:
    """``v`` as a finite float, or None (not a number, a bool, inf/nan, or an int too large)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:  # an int beyond float range
        return None
    return f if math.isfinite(f) else None


def _ts(v) -> float | None:
    """A record's ``ts`` (µs) when it is a number in 0..:data:`MAX_TS_US`, else None."""
    f = _num(v)
    return f if f is not None and 0 <= f <= MAX_TS_US else None


def _shown(v) -> str:
    """``v`` for a one-line message (long values cut)."""
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def _parse_shape(s) -> tuple[int, ...] | None:
    if not isinstance(s, str):
        return None
    try:
        v = json.loads(s)
    except (ValueError, RecursionError):
        return None
    if not isinstance(v, list) or not all(isinstance(d, int) and not isinstance(d, bool)
                                          and 0 <= d <= MAX_TENSOR_BYTES for d in v):
        return None
    return tuple(v)


def _nbytes(shape: tuple[int, ...], size: int) -> int | None:
    """prod(shape) x ``size`` (bytes), or None when it is over :data:`MAX_TENSOR_BYTES`."""
    n = size
    for d in shape:
        n *= d
        if n > MAX_TENSOR_BYTES:
            return None if all(shape) else 0
    return n


class _Problems:
    def __init__(self, sink: list[str], source: str):
        self.sink, self.source, self.dropped = sink, source, 0

    def add(self, msg: str) -> None:
        if len(self.sink) < _MAX_PROBLEMS:
            self.sink.append(f"{self.source}: {msg}")
        else:
            self.dropped += 1


def _closed_array(text: str) -> list | None:
    """The records of a closed timeline (``[ ... ]``, every element an event object with a string ``ph``) parsed
    by one ``json.loads`` of the whole text (3x faster than :func:`_iter_records`' record-by-record decoding,
    which keeps each record's offset for the problem messages), or None for anything else: an unclosed or cut
    file, invalid JSON, a byte-order mark, an element that is not an event. The caller then parses record by
    record, which names what is wrong."""
    try:
        records = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(records, list) or not all(isinstance(r, dict) and isinstance(r.get("ph"), str)
                                                for r in records):
        return None
    return records


class _Stream:
    """Iterates ``gen``'s ``(index, offset, record)`` and keeps its return value (the file's form) in ``form``;
    ``located`` becomes True when a problem message names a record's offset."""

    located = False

    def __init__(self, gen):
        self.gen, self.form = gen, None

    def __iter__(self):
        self.form = yield from self.gen


class _Indexed:
    """``(index, None, record)`` for each of ``records``, as :func:`_iter_records` yields with an offset, by C
    iterators (no generator frame per record); its form is "closed"."""

    form = "closed"
    located = False  # True once a problem message names a record's offset (here always None)

    def __init__(self, records: list):
        self.records = records

    def __iter__(self):
        return zip(itertools.count(), itertools.repeat(None), self.records)


def parse_timeline(text: str, source: str = "<timeline>") -> Timeline:
    """Parse timeline text (pure; see the module docstring for the format).

    Returns a :class:`Timeline` whose ``responses`` are the fused responses in start order
    (bytes, µs). Raises :class:`TimelineError` for an empty text, a text that is not a JSON
    array of event objects, or one with invalid JSON before its last record.

    Bad values are dropped and counted in ``problems``, never passed on: a ``B``/``E``/``X``
    record (or a CYCLE_START mark) whose ``ts`` is not a number in 0..:data:`MAX_TS_US`, an
    ``X`` whose ``dur`` is not, an operation with any event that ends before it begins
    (negative duration: the whole tensor operation or negotiation is dropped), a tensor over
    :data:`MAX_TENSOR_BYTES`. When such drops leave no usable event at all, the file is
    unusable: :class:`TimelineError` names the first bad record, field and value.

    A closed file is decoded by one ``json.loads`` (:func:`_closed_array`); where that reading finds a problem
    whose message names a record's offset, or raises, the text is parsed again record by record, so that every
    message names its record's offset: the result is the same either way.
    """
    records = _closed_array(text)
    if records is not None:
        stream = _Indexed(records)
        try:
            tl = _parse_events(stream, source, [])
        except TimelineError:
            tl = None
        if tl is not None and not stream.located:  # its problems (if any) name no offset: the same either way
            return tl
    problems: list[str] = []
    return _parse_events(_Stream(_iter_records(text, source, problems)), source, problems)


def _parse_events(stream, source: str, problems: list[str]) -> Timeline:
    """The event logic of :func:`parse_timeline` over ``stream``'s ``(index, offset, record)`` (a :class:`_Stream`
    or :class:`_Indexed`: its ``form`` after the iteration is the file's), appending to ``problems``."""
    probs = _Problems(problems, source)
    names: dict[int, str] = {}
    open_: dict[int, _Open] = {}
    ops: list[TensorOp] = []
    negotiations: list[Negotiation] = []
    cycles: list[float] = []
    start_epoch: float | None = None
    no_collective: dict[str, int] = {}
    no_args: dict[str, tuple[int, str]] = {}
    backwards: list = [0, ""]  # operations dropped for a negative duration: [count, first example]
    bad_times: list = [0, ""]  # records dropped for a missing/bad 'ts' or 'dur': [count, first example]
    n_records = 0
    shapes: dict = {}  # shape string -> _parse_shape's answer: a file repeats each shape every step

    def at(seq: int, off: int | None) -> str:
        """``record N at offset O``: a message naming where a record is (noted in ``stream.located``)."""
        stream.located = True
        return f"record {seq} at offset {off}"

    def bad_time(where: str, fld: str, value) -> None:
        bad_times[0] += 1
        bad_times[1] = bad_times[1] or f"{where}, field {fld!r}, value {_shown(value)}"
        probs.add(f"{where}: {fld!r} is {_shown(value)}, not a time in 0..2**53 µs; skipped")

    for seq, off, r in stream:
        n_records += 1
        ph = r["ph"]
        pid = r.get("pid")
        ts = r.get("ts")  # _ts, inlined for what Horovod writes (whole µs: an int); the same answer
        if type(ts) is int and 0 <= ts <= MAX_TS_US:  # int against float compares exactly
            ts = float(ts)
        elif type(ts) is not float or not 0 <= ts <= MAX_TS_US:
            ts = _ts(ts)
        if ph == "M":
            args = r.get("args")
            if r.get("name") == "process_name" and isinstance(args, dict) and isinstance(pid, int):
                if isinstance(args.get("name"), str):
                    names[pid] = args["name"]
                elif pid == 0 and _num(args.get("start_time_since_epoch_in_micros")) is not None:
                    start_epoch = _num(args["start_time_since_epoch_in_micros"])
            continue
        if ph not in ("B", "E", "X", "i"):
            continue  # other phases (C, s, f, ...) are not written by Horovod; ignore silently
        if ts is None:
            if ph != "i" or r.get("name") == "CYCLE_START":
                bad_time(f"{at(seq, off)} ({ph!r})", "ts", r.get("ts", "<missing>"))
            continue
        if ph == "i":
            if r.get("name") == "CYCLE_START":
                cycles.append(ts)
            continue
        if not isinstance(pid, int):
            probs.add(f"{at(seq, off)} ({ph!r}): 'pid' is {_shown(pid)}, not an integer; skipped")
            continue
        tensor = names.get(pid)
        if tensor is None:
            probs.add(f"{at(seq, off)}: pid {pid} has no process_name; skipped")
            continue
        cur = open_.get(pid)
        if ph == "B":
            name = r.get("name")
            if not isinstance(name, str):
                probs.add(f"{at(seq, off)}: 'B' without a name; skipped")
                continue
            if cur is None:
                open_[pid] = _Open(name=name, start=ts, negotiation=name.startswith("NEGOTIATE_"))
            elif cur.negotiation:
                probs.add(f"{tensor}: {name!r} began at {ts:.0f} µs inside {cur.name}; skipped")
            else:
                cur.stack.append([name, ts, None, seq, None])
        elif ph == "X":
            # Horovod writes "dur": 0 on rank-ready marks (Timeline::NegotiateRankReady)
            if "dur" in r and (_num(r["dur"]) is None or not 0 <= r["dur"] <= MAX_TS_US):
                bad_time(f"{at(seq, off)} ({ph!r})", "dur", r["dur"])
                continue
            if cur is not None and cur.negotiation:
                try:
                    cur.ready.append((int(r.get("name")), ts))
                except (TypeError, ValueError, OverflowError):
                    probs.add(f"{at(seq, off)}: rank-ready mark with name "
                              f"{r.get('name')!r}; skipped")
        elif ph == "E":
            if cur is None:
                probs.add(f"{at(seq, off)}: 'E' for {tensor} with nothing open; skipped")
                continue
            if cur.stack:
                act = cur.stack.pop()
                if ts < act[1]:
                    cur.bad = cur.bad or (f"{tensor}, record {seq}: {act[0]} ended at {ts:.0f} µs, "
                                          f"before its start at {act[1]:.0f} µs")
                    continue
                act[2], act[4] = ts, seq
                cur.activities.append(act)
                continue
            del open_[pid]
            if ts < cur.start:
                cur.bad = cur.bad or (f"{tensor}, record {seq}: {cur.name} ended at {ts:.0f} µs, "
                                      f"before its start at {cur.start:.0f} µs")
            if cur.bad:
                backwards[0] += 1
                backwards[1] = backwards[1] or cur.bad
                continue
            if cur.negotiation:
                negotiations.append(Negotiation(tensor=tensor, op=cur.name[len("NEGOTIATE_"):].lower(),
                                                start_us=cur.start, duration_us=ts - cur.start,
                                                ready=tuple(cur.ready)))
                continue
            op = _finish_op(tensor, cur, ts, r.get("args"), probs, no_args, shapes)
            if op is None:
                continue
            if op.collective_start_us is None:
                no_collective[op.op] = no_collective.get(op.op, 0) + 1
                continue
            ops.append(op)

    form = stream.form
    if backwards[0]:
        probs.add(f"{backwards[0]} operation(s) had an event that ended before it began (negative "
                  f"duration; e.g. {backwards[1]}); dropped")
    if (backwards[0] or bad_times[0]) and not (ops or negotiations or cycles or no_args or no_collective):
        first = bad_times[1] or backwards[1]
        raise TimelineError(f"{source}: no usable event: {backwards[0] + bad_times[0]} dropped for a bad "
                            f"time or a negative duration, none left (first: {first})")
    if n_records == 0:
        problems.append(f"{source}: no events (timeline opened but nothing recorded)")
    for op_name, (count, example) in sorted(no_args.items()):
        # Timeline::End writes dtype/shape only when the op has an output tensor: not for a
        # failed op, nor for a broadcast on its root rank (torch/mpi_ops_v2.cc DoBroadcast).
        probs.add(f"{count} {op_name} operation(s) ended without dtype/shape args (e.g. {example}; "
                  f"failed op, or broadcast on the root rank): size unknown, skipped")
    for op_name, count in sorted(no_collective.items()):
        probs.add(f"{count} {op_name} operation(s) had no collective activity (GLOO_/MPI_/NCCL_/CCL_); "
                  f"not counted as responses")
    if open_:
        still = sorted(names.get(p, str(p)) for p in open_)
        probs.add(f"{len(still)} tensor(s) still in flight at the end of the file "
                  f"(e.g. {still[0]}); dropped")
    if probs.dropped:
        problems.append(f"{source}: ... and {probs.dropped} more problems")
    return Timeline(source=source, responses=_group(ops), negotiations=negotiations,
                    cycle_starts_us=cycles, tensor_ops=ops, problems=problems, horovod_form=form,
                    n_records=n_records, start_time_since_epoch_us=start_epoch)


def _finish_op(tensor: str, cur: _Open, end: float, args, probs: _Problems,
               no_args: dict[str, tuple[int, str]], shapes: dict) -> TensorOp | None:
    dtype = shape = None
    if isinstance(args, dict):
        dtype = args.get("dtype") if isinstance(args.get("dtype"), str) else None
        text = args.get("shape")
        if type(text) is str:  # answers are tuples (immutable): one parse per distinct shape string
            shape = shapes.get(text, shapes)
            if shape is shapes:
                shape = shapes[text] = _parse_shape(text)
        else:
            shape = _parse_shape(text)
    if dtype is None or shape is None:
        key = cur.name.lower()
        count, example = no_args.get(key, (0, f"{tensor} at {end:.0f} µs"))
        no_args[key] = (count + 1, example)
        return None
    if dtype not in DTYPE_BYTES:
        probs.add(f"{tensor}: unknown dtype {dtype!r}; skipped")
        return None
    nbytes = _nbytes(shape, DTYPE_BYTES[dtype])
    if nbytes is None:
        probs.add(f"{tensor}: shape {list(shape)} of {dtype} is over {MAX_TENSOR_BYTES} bytes; skipped")
        return None
    acts = sorted(cur.activities, key=lambda a: a[3])
    coll = [a for a in acts if a[0].startswith(_COLLECTIVE_PREFIXES)]
    return TensorOp(
        tensor=tensor, op=cur.name.lower(), start_us=cur.start, end_us=end, dtype=dtype,
        shape=shape, nbytes=nbytes,
        activities=tuple((a[0], a[1], a[2]) for a in acts),
        collectives=tuple(dict.fromkeys(a[0] for a in coll)),
        collective_start_us=min(a[1] for a in coll) if coll else None,
        collective_end_us=max(a[2] for a in coll) if coll else None,
        first_seq=coll[0][3] if coll else -1, end_seq=coll[0][4] if coll else -1)


def _span(ops: list[TensorOp], prefix: str) -> float:
    """Latest end - earliest start of ``ops``' activities named ``prefix...`` (µs; 0.0 when none)."""
    lo = hi = None
    for o in ops:
        for n, s, e in o.activities:
            if n.startswith(prefix):
                if lo is None or s < lo:
                    lo = s
                if hi is None or e > hi:
                    hi = e
    return 0.0 if lo is None else hi - lo


def _group(ops: list[TensorOp]) -> list[FusedResponse]:
    """Group tensor ops whose first collective activity intervals overlap in record order."""
    groups: list[list[TensorOp]] = []
    min_end = -1
    for op in sorted(ops, key=lambda o: o.first_seq):
        g = groups[-1] if groups else None
        if (g is not None and op.first_seq < min_end and op.op == g[0].op
                and op.collectives[0] == g[0].collectives[0]):
            g.append(op)
            min_end = min(min_end, op.end_seq)
        else:
            groups.append([op])
            min_end = op.end_seq
    out = []
    for g in groups:
        acts = list(dict.fromkeys(n for o in g for n in o.collectives))
        start = min(o.collective_start_us for o in g)
        out.append(FusedResponse(
            op=g[0].op, tensors=tuple(o.tensor for o in g),
            tensor_nbytes=tuple(o.nbytes for o in g), nbytes=sum(o.nbytes for o in g),
            start_us=start, duration_us=max(o.collective_end_us for o in g) - start,
            activity="+".join(acts), memcpy_in_us=_span(g, "MEMCPY_IN_"),
            memcpy_out_us=_span(g, "MEMCPY_OUT_")))
    out.sort(key=lambda r: r.start_us)
    return out


# --------------------------------------------------------------------------- file + samples


def _open_timeline(p: Path):
    """Binary file object for ``p``: gzip-decompressed when it starts with the gzip magic."""
    f = open(p, "rb")
    if f.peek(2)[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=f, mode="rb"), f, True
    return f, f, False


def read_timeline(path: str | Path, max_bytes: int = MAX_FILE_BYTES) -> Timeline:
    """Read a Horovod timeline file (UTF-8 JSON, see module docstring), plain or gzipped
    (recognised by the gzip magic bytes, e.g. ``autotuner validate --keep-timelines`` files).

    The first 64 KiB are checked before the rest is read, so a large non-timeline file fails
    fast. Raises :class:`TimelineError` (one line, naming the file) when the file cannot be
    read, is over ``max_bytes`` bytes (uncompressed), is not UTF-8, is a corrupt gzip file, or
    is not a timeline.
    """
    p = Path(path)
    try:
        f, raw, gz = _open_timeline(p)
        with raw, f:
            head = f.read(65536)
            stripped = head.lstrip(b" \t\r\n")
            if stripped.startswith(b"\xef\xbb\xbf"):
                stripped = stripped[3:].lstrip(b" \t\r\n")
            if not head.strip():
                if len(head) < 65536:
                    raise TimelineError(f"{p}: empty file, not a Horovod timeline")
            elif not stripped.startswith(b"["):
                raise TimelineError(f"{p}: not a Horovod timeline (does not start with a JSON array '[')")
            if gz:
                data = head + f.read(max_bytes + 1 - len(head))
                size = len(data)
            else:
                size = p.stat().st_size
                data = None
            if size > max_bytes:
                raise TimelineError(f"{p}: {size}{'+' if gz else ''} bytes is over the {max_bytes}-byte "
                                    f"limit for a timeline")
            if data is None:
                f.seek(0)
                data = f.read()
    except OSError as e:  # gzip.BadGzipFile and EOFError-free OSErrors
        raise TimelineError(f"{p}: cannot read ({e.strerror or e})") from None
    except (EOFError, zlib.error) as e:
        raise TimelineError(f"{p}: cannot read (corrupt gzip data: {str(e) or 'cut short'})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TimelineError(f"{p}: not a Horovod timeline (not UTF-8 text at byte {e.start})") from None
    del data
    return parse_timeline(text, source=str(p))


def samples(timeline: Timeline, op: str | None = "allreduce") -> pd.DataFrame:
    """Bandwidth-vs-size samples, one row per fused response of ``op`` (None: all ops).

    Columns: ``nbytes`` (int, bytes), ``duration_s`` (float, seconds; the collective
    activity's span, 1 µs resolution so tiny responses may read 0), ``n_tensors`` (int).
    Raises :class:`TimelineError` when a response's byte count does not fit int64 (only a
    hand-made timeline with millions of 1-TiB tensors in one response can do that).
    """
    rows = [(r.nbytes, r.duration_us / 1e6, len(r.tensors))
            for r in timeline.responses if op is None or r.op == op]
    big = next((r for r in timeline.responses if r.nbytes >= 2**63), None)
    if big is not None:
        raise TimelineError(f"{timeline.source}: response at {big.start_us:.0f} µs has {big.nbytes} bytes, "
                            f"over the int64 limit")
    df = pd.DataFrame(rows, columns=["nbytes", "duration_s", "n_tensors"])
    return df.astype({"nbytes": "int64", "duration_s": "float64", "n_tensors": "int64"})
