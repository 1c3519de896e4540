"""Seeded mutators for the fuzz harness: text, bytes, JSON and TOML inputs.

Every function takes a ``random.Random`` and is deterministic for a given generator state.
Mutations aim at the faults bad input brings: non-finite and huge numbers, negative and
fractional shapes, wrong types, missing or renamed keys, truncation, non-UTF-8 bytes, and
strings that look like paths or ``module:factory`` specs.
"""
from __future__ import annotations

import gzip
import json
import math
import random
import re
import tomllib
from typing import Any

#: numbers as they may appear in text (JSON, TOML, CSV, Markdown)
NUMBER_TOKENS = ["nan", "NaN", "inf", "-inf", "Infinity", "-Infinity", "-1", "-4", "0", "-0", "0.0", "1e300",
                 "-1e300", "1e309", "1e-320", "99999999999999999999999999999", "1000000000000000000000000000000",
                 "1.7", "2.9", "", "x", "null", "true", "[]", "{}", '"s"', "1,5", "0x10", "1e", "--1", "١٢"]
#: module:factory specs and path-like strings that a data file must never act on
SENTINEL_MODULES = ("this", "os", "autotuner_fuzz_sentinel")
STRING_VALUES = ["", " ", "x", "../x", "../../escape", "/tmp/autotuner-fuzz-abs", "a/b", "..", ".", "this:s", "os:getpid",
                 "autotuner_fuzz_sentinel:boom", ":", ":x", ".rel:x", "resnet50", "vgg16", "nope", "none", "fp16",
                 "validation", "responses", "breakdown", "ok", "failed", "float64", "int3", "\x00", "é" * 3,
                 "x" * 300]
SPECIAL_VALUES: list[Any] = [math.nan, math.inf, -math.inf, 1e300, -1e300, 10 ** 30, -(10 ** 30), 2 ** 63, -1, -4, 0,
                             -0.0, 1.7, 0.5, 1, 2, 3, True, False, None, [], {}, [-4], [1.7, 2.9], [0], [10 ** 30],
                             ["a", "b"], {"a": 1}, *STRING_VALUES]
_NUM_RE = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")


def special_value(rng: random.Random, no_none: bool = False) -> Any:
    """A value of a wrong type, out of range, non-finite or path-like."""
    while True:
        v = rng.choice(SPECIAL_VALUES)
        if not (no_none and v is None):
            return json.loads(json.dumps(v)) if isinstance(v, (list, dict)) else v


# --------------------------------------------------------------------------- text and bytes


def mutate_text(rng: random.Random, text: str, n: int | None = None) -> str:
    """Apply 1-3 text-level mutations (numbers, lines, words, characters, truncation)."""
    for _ in range(n or rng.randint(1, 3)):
        op = rng.randrange(10)
        lines = text.splitlines(keepends=True)
        if op in (0, 1, 2):  # replace a number
            nums = list(_NUM_RE.finditer(text))
            if nums:
                m = rng.choice(nums)
                text = text[:m.start()] + rng.choice(NUMBER_TOKENS) + text[m.end():]
        elif op == 3 and lines:  # delete a line
            del lines[rng.randrange(len(lines))]
            text = "".join(lines)
        elif op == 4 and lines:  # duplicate a line
            i = rng.randrange(len(lines))
            lines.insert(i, lines[i])
            text = "".join(lines)
        elif op == 5 and len(lines) > 1:  # swap two lines
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
            text = "".join(lines)
        elif op == 6:  # typo in an identifier (a header, a key, a run id)
            words = list(_WORD_RE.finditer(text))
            if words:
                m = rng.choice(words)
                w = list(m.group())
                k = rng.randrange(len(w))
                w[k] = rng.choice("O0l1_xZ")
                text = text[:m.start()] + "".join(w) + text[m.end():]
        elif op == 7 and text:  # truncate
            text = text[:rng.randrange(len(text))]
        elif op == 8 and text:  # replace a character
            i = rng.randrange(len(text))
            text = text[:i] + rng.choice(["", "|", ",", "\n", '"', "{", "]", "-", "\x00", "\u00e9", "\ufeff"]) + text[i + 1:]
        else:  # insert a special token at a random place
            i = rng.randrange(len(text) + 1)
            text = text[:i] + rng.choice(NUMBER_TOKENS + STRING_VALUES) + text[i:]
    return text


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    """Byte-level damage: non-UTF-8 bytes, BOM, NULs, truncation, emptiness, gzip (or a cut gzip)."""
    op = rng.randrange(7)
    if op == 0:
        return b""
    if op == 1 and data:
        i = rng.randrange(len(data))
        return data[:i] + bytes([rng.choice([0xff, 0xfe, 0xc3, 0x80, 0x00])]) + data[i + 1:]
    if op == 2:
        return b"\xef\xbb\xbf" + data
    if op == 3 and data:
        return data[:rng.randrange(len(data))]
    if op == 4:
        z = gzip.compress(data, mtime=0)
        return z if rng.random() < 0.5 else z[:max(1, rng.randrange(len(z)))]
    if op == 5:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
    return data + b"\n" + data[: rng.randrange(len(data) + 1)]


# --------------------------------------------------------------------------- JSON


def _paths(obj: Any, path: tuple = (), out: list | None = None, limit: int = 20000) -> list[tuple]:
    """Every node's path (keys and indices), depth first, at most ``limit``."""
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    out.append(path)
    if isinstance(obj, dict):
        for k, v in obj.items():
            _paths(v, path + (k,), out, limit)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            _paths(v, path + (i,), out, limit)
    return out


def _get(obj: Any, path: tuple) -> Any:
    for k in path:
        obj = obj[k]
    return obj


def mutate_tree(rng: random.Random, obj: Any, n: int | None = None, no_none: bool = False,
                prefer: tuple[str, ...] = ()) -> Any:
    """Apply 1-3 structural mutations to a parsed JSON/TOML value (in place when possible);
    returns the (possibly new) root. ``prefer``: key names to aim at half of the time."""
    for _ in range(n or rng.randint(1, 3)):
        paths = _paths(obj)
        if prefer and rng.random() < 0.5:
            aimed = [p for p in paths if p and isinstance(p[-1], str) and p[-1] in prefer]
            paths = aimed or paths
        path = rng.choice(paths)
        if not path:
            if rng.random() < 0.2:
                obj = special_value(rng, no_none)
            continue
        parent, key = _get(obj, path[:-1]), path[-1]
        cur = parent[key]
        op = rng.randrange(8)
        if op in (0, 1, 2):  # replace with a special value
            parent[key] = special_value(rng, no_none)
        elif op == 3:  # delete
            del parent[key]
        elif op == 4 and isinstance(parent, dict):  # rename (a typo in a key)
            v = parent.pop(key)
            parent[str(key)[:-1] + rng.choice("O0_x") if key else "x"] = v
        elif op == 5 and isinstance(cur, (int, float)) and not isinstance(cur, bool):  # scale a number
            try:
                parent[key] = type(cur)(cur * rng.choice([-1, 0, 10 ** 12, 1e-12, 1.5]))
            except (OverflowError, ValueError):
                parent[key] = -1
        elif op == 6 and isinstance(cur, list):  # empty, duplicate or reverse a list
            k = rng.randrange(3)
            parent[key] = [] if k == 0 else cur + cur if k == 1 else cur[::-1]
        else:  # change the type
            parent[key] = ([cur] if not isinstance(cur, list) else (cur[0] if cur else None)) if rng.random() < 0.5 \
                else str(cur)
            if no_none and parent[key] is None:
                parent[key] = 0
    return obj


def mutate_json_text(rng: random.Random, text: str, prefer: tuple[str, ...] = ()) -> str:
    """Structural mutation (70%), text mutation (25%) or a cut (5%) of a JSON document."""
    r = rng.random()
    if r < 0.7:
        try:
            obj = json.loads(text)
        except ValueError:
            return mutate_text(rng, text)
        obj = mutate_tree(rng, obj, prefer=prefer)
        return json.dumps(obj, indent=rng.choice([None, 1]), allow_nan=True)
    if r < 0.95:
        return mutate_text(rng, text)
    return text[:rng.randrange(len(text) + 1)]


# --------------------------------------------------------------------------- TOML


def _toml_key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    if v is None:
        return '""'
    raise TypeError(type(v))


def dump_toml(d: dict[str, Any]) -> str:
    """A minimal TOML writer: scalars first, then ``[table]``s and ``[[array of tables]]``."""
    head, tail = [], []
    for k, v in d.items():
        if isinstance(v, dict):
            tail.append(f"\n[{_toml_key(k)}]")
            tail += [f"{_toml_key(a)} = {_toml_value(b)}" for a, b in v.items()]
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for x in v:
                tail.append(f"\n[[{_toml_key(k)}]]")
                tail += [f"{_toml_key(a)} = {_toml_value(b)}" for a, b in x.items()]
        else:
            head.append(f"{_toml_key(k)} = {_toml_value(v)}")
    return "\n".join(head + tail) + "\n"


ENV_KEYS = ("name", "source", "format", "nodes", "gpus_per_node", "link_gbps", "model", "layout", "id",
            "fusion_threshold_mb", "cycle_time_ms", "host_backward_ms", "column", "run", "key", "steps", "batch_size",
            "reference", "default", "horovod_version", "backend")


def mutate_toml_text(rng: random.Random, text: str) -> str:
    """Structural mutation of an env.toml (75%, aimed at its keys half of the time), else a text mutation."""
    if rng.random() < 0.75:
        try:
            d = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            return mutate_text(rng, text)
        d = mutate_tree(rng, d, no_none=True, prefer=ENV_KEYS)
        if not isinstance(d, dict):
            return _toml_value(d)
        try:
            return dump_toml(d)
        except TypeError:
            return text
    return mutate_text(rng, text)


def mutate_jsonl_text(rng: random.Random, text: str) -> str:
    """JSON Lines: mutate one or two records structurally, or the text; sometimes drop the last newline."""
    lines = text.splitlines()
    if lines and rng.random() < 0.8:
        for _ in range(rng.randint(1, 2)):
            i = rng.randrange(len(lines))
            try:
                obj = json.loads(lines[i])
            except ValueError:
                continue
            obj = mutate_tree(rng, obj, prefer=("setup", "samples", "timeline", "status", "trial", "config",
                                                "compute_ms", "model", "memcpy", "measured_step_time_ms",
                                                "cycle_time_ms", "fusion_threshold_mb", "step_times_ms"))
            lines[i] = json.dumps(obj, allow_nan=True)
        text = "\n".join(lines) + ("\n" if rng.random() < 0.8 else "")
    else:
        text = mutate_text(rng, text)
    return text
