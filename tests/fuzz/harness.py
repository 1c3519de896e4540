"""Seeded fuzz harness for the command line and the readers.

Run it from the repository root::

    python tests/fuzz/harness.py --cli 2000 --readers 10000 --seed 0
    python tests/fuzz/harness.py --cli-case 123 --seed 0      # one CLI case, verbose
    python tests/fuzz/harness.py --reader-case 456 --seed 0   # one reader case, verbose

**CLI.** Each invocation calls :func:`autotuner.cli.main` in-process with an argv drawn from
the commands' options (valid values, 0, negatives, nan, inf, 1e300, huge ints, empty strings,
non-numbers, missing or damaged files; files are mutations of the committed fixtures) in a
sandbox (a copy of the shipped ``autotuner/models`` as ``model/``, and of ``runs/``; outputs go to
per-case folders). The contract:

- exit 0, or exit 2 with exactly one non-empty stderr line starting with ``error:``;
- no exception escapes ``main()`` and no traceback is printed; no invocation runs past the
  timeout (``signal`` alarm, 20 s);
- on exit 2 no file in the sandbox changed (an empty output folder may be created: outputs are
  checked before work starts);
- an option value that is certainly wrong (nan, inf, a negative size, 0 nodes, ...) is not
  accepted (exit 0);
- ``--json`` output is strict JSON (no NaN/Infinity); ``fit`` writes only under ``--out`` and
  never a model holding a non-finite number;
- a data file never makes the tool import code (``layout = "os:getpid"``);
- ``validate`` never starts a process (``subprocess.Popen`` is replaced while it runs, and
  every validate case holds at least one certainly-wrong value).

**Readers.** Each input is a mutation of a committed fixture fed to a reader in-process, then to
the code that consumes what it read (timeline -> ``samples``/``split_steps``/``host_samples``;
autotune log -> ``explain``; lab report, env.toml and records -> ``fit_env``; layout and model
-> a simulated step). Only subclasses of :class:`autotuner.errors.AutotunerError` may escape;
nothing may hang; an accepted layout has positive integer shapes and finite non-negative
shares, an accepted timeline finite non-negative durations, and a simulated step of accepted
data a finite positive time.

Each case draws from ``random.Random(f"{seed}:cli:{i}")`` (or ``:reader:``), so a case is
replayed by its index alone. Exit status: 0 when no case failed, 1 otherwise.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import math
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
import traceback
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _load_mutate():
    """tests/fuzz/mutate.py under a name of its own (tests/ is not a package)."""
    import importlib.util

    name = "autotuner_fuzz_mutate"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE / "mutate.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


mu = _load_mutate()

CLI_TIMEOUT_S = 30.0
READER_TIMEOUT_S = 10.0
FIX = ROOT / "runs" / "local-gloo-1gbit" / "fixtures"
VALID_DIR = ROOT / "runs" / "local-gloo-1gbit" / "validation"
NCCL_ENV = ROOT / "tests" / "data" / "nccl_tests" / "format" / "generated-2x8"
#: failure categories; every one of them fails the run
CLI_FAILURES = ("traceback", "hang", "malformed-error", "bad-exit", "wrote-on-error", "accepted-bad",
                "non-json-output", "wrote-outside-out", "non-finite-model", "imported-data-code", "launched")
READER_FAILURES = ("escape", "hang", "accepted-invalid", "imported-data-code")


class Hang(BaseException):
    """Raised by the alarm: the case ran past its timeout."""


class Launched(BaseException):
    """Raised instead of starting a process during a ``validate`` case."""


@contextlib.contextmanager
def deadline(seconds: float):
    """Raise :class:`Hang` in the main thread after ``seconds``; yields a list whose first item
    says whether the alarm fired (even if the code under test swallowed the exception)."""
    fired = [False]

    def on_alarm(signum, frame):
        fired[0] = True
        raise Hang()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def import_guard(allowed: tuple[str, ...] = ()):
    """Record ``importlib.import_module`` calls of the sentinel modules (``this``, ``os``, ...)
    not named in ``allowed``; yields the list of recorded names."""
    seen: list[str] = []
    real = importlib.import_module

    def guarded(name, package=None):
        top = str(name).split(".")[0]
        if top in mu.SENTINEL_MODULES and not any(str(name) in a for a in allowed):
            seen.append(str(name))
        return real(name, package)

    importlib.import_module = guarded
    try:
        yield seen
    finally:
        importlib.import_module = real


def _where(exc: BaseException) -> str:
    """``file:line in func`` of the innermost frame inside the autotuner package (else the last)."""
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if "/autotuner/" in f.filename.replace(os.sep, "/")] or frames
    if not mine:
        return "?"
    f = mine[-1]
    fn = f.filename.replace(os.sep, "/")
    fn = fn[fn.rindex("/autotuner/") + 1:] if "/autotuner/" in fn else fn
    return f"{fn}:{f.lineno} in {f.name}"


@dataclass
class Failure:
    category: str
    kind: str  # command or reader kind
    index: int
    detail: str  # exception type and message, or what was wrong
    where: str  # innermost autotuner frame, or the option
    reproducer: str

    def key(self) -> tuple:
        return (self.category, self.kind, self.detail.split(":")[0], self.where)


@dataclass
class Report:
    name: str
    counts: Counter = field(default_factory=Counter)
    failures: list[Failure] = field(default_factory=list)
    seconds: float = 0.0

    def distinct(self) -> list[tuple[Failure, int]]:
        seen: dict[tuple, list] = {}
        for f in self.failures:
            seen.setdefault(f.key(), [f, 0])[1] += 1
        return [(f, n) for f, n in seen.values()]

    def summary(self, max_distinct: int = 60) -> str:
        c = self.counts
        if self.name == "cli":
            head = (f"CLI: {c['total']} invocations, {c['clean-error']} clean errors, {c['success']} successes, "
                    f"{c['traceback']} tracebacks, {c['hang']} hangs")
            rest = [k for k in CLI_FAILURES if k not in ("traceback", "hang")]
        else:
            head = (f"readers: {c['total']} inputs, {c['rejected']} rejected (AutotunerError), {c['accepted']} accepted, "
                    f"{c['escape']} escapes (tracebacks), {c['hang']} hangs")
            rest = [k for k in READER_FAILURES if k not in ("escape", "hang")]
        head += "".join(f", {c[k]} {k}" for k in rest) + f" ({self.seconds:.0f} s)"
        per_kind = ", ".join(f"{k} {n}" for k, n in sorted(c.items()) if k.startswith("kind:"))
        lines = [head, "  per kind: " + per_kind.replace("kind:", "")]
        d = self.distinct()
        if d:
            lines.append(f"  {len(d)} distinct failure(s):")
            for f, n in d[:max_distinct]:
                lines.append(f"  - [{f.category}] {f.kind} x{n}: {f.detail[:300]}\n      at {f.where}\n"
                             f"      reproduce: {f.reproducer}")
            if len(d) > max_distinct:
                lines.append(f"  ... {len(d) - max_distinct} more")
        return "\n".join(lines)

    @property
    def n_failures(self) -> int:
        return len(self.failures)


# =========================================================================== readers


class _Bases:
    """Committed fixtures, read once."""

    def __init__(self) -> None:
        self.timelines = [p.read_text() for p in sorted(FIX.glob("timeline-*.json"))]
        self.autotune_logs = [p.read_text() for p in [FIX / "autotune-log-hvd0.28.1-gloo-2ranks.csv",
                                                      *sorted(VALID_DIR.glob("*autotune*.csv"))]]
        self.reports = {"v100-16gbit": (ROOT / "runs/v100-16gbit/report-000.md").read_text(),
                        "v100-5gbit": (ROOT / "runs/v100-5gbit/report-001.md").read_text()}
        self.env_tomls = {p.parent.name: p.read_text() for p in sorted((ROOT / "runs").glob("*/env.toml"))}
        self.metas = {k: tomllib.loads(v) for k, v in self.env_tomls.items()}
        self.layouts = {p.stem: p.read_text() for p in sorted((ROOT / "autotuner/layouts").glob("*.json"))}
        self.layouts["resnet50-as-recorded"] = (ROOT / "runs/local-gloo-1gbit/layouts/resnet50-as-recorded.json").read_text()
        self.models = {p.stem: p.read_text() for p in sorted((ROOT / "autotuner" / "models").glob("*.json"))}
        self.records = {p.name: p.read_text() for p in sorted(VALID_DIR.glob("*.jsonl"))}
        self.sweep = (ROOT / "runs/local-gloo-1gbit-sweep/sweep.jsonl").read_text()
        self.nccl = {p.name: p.read_text() for p in sorted(NCCL_ENV.glob("all_reduce_perf-*"))}
        self.reports_002_004 = {"002": (ROOT / "runs/t4x4-pcie/report-002.md").read_text(),
                                "003": (ROOT / "runs/laptop-cpu/report-003.md").read_text(),
                                "004": (ROOT / "runs/t4x4-compression/report-004.md").read_text()}


_BASES: _Bases | None = None


def bases() -> _Bases:
    global _BASES
    if _BASES is None:
        _BASES = _Bases()
    return _BASES


def _check_layout(lay) -> str | None:
    for s in lay.shapes:
        if not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in s):
            return f"layout accepted with shape {s!r}"
    for c in lay.compute_share:
        if not (math.isfinite(c) and c >= 0):
            return f"layout accepted with compute_share {c!r}"
    return None


def _check_step(r) -> str | None:
    t = r.step_time_s
    if not (isinstance(t, float) and math.isfinite(t) and t > 0):
        return f"simulated step time {t!r} from accepted data"
    return None


def _simulate_default(model_dir: Path, env: str | None, model: str, compute_ms: float | None) -> str | None:
    from autotuner.frameworks.horovod.predict import make_scenario
    from autotuner.frameworks.horovod.knobs import DEFAULTS_0_28

    sc, _ = make_scenario(model_dir, env, model, compute_ms=compute_ms)
    return _check_step(sc.simulate(DEFAULTS_0_28))


def _r_timeline(rng: random.Random, work: Path) -> tuple[str, callable]:
    from autotuner.readers.timeline import parse_timeline, read_timeline, samples
    from autotuner.readers.timeline_steps import host_samples, split_steps

    text = mu.mutate_json_text(rng, rng.choice(bases().timelines),
                               prefer=("ts", "dur", "ph", "name", "args", "shape", "dtype", "pid"))
    as_file = rng.random() < 0.15
    path = work / ("t.json.gz" if as_file and rng.random() < 0.3 else "t.json")
    if as_file:
        data = text.encode()
        path.write_bytes(mu.mutate_bytes(rng, data) if rng.random() < 0.5 else data)
    cycle = rng.choice([None, 1.0, 5.0, 0.0, -1.0, math.nan])

    def go():
        tl = read_timeline(path) if as_file else parse_timeline(text, "fuzz.json")
        for r in tl.responses:
            if not (math.isfinite(r.duration_us) and r.duration_us >= 0 and math.isfinite(r.start_us) and r.nbytes >= 0):
                return f"timeline accepted with a response of duration {r.duration_us!r} µs, start {r.start_us!r}, " \
                       f"{r.nbytes!r} bytes"
        samples(tl)
        samples(tl, None)
        split_steps(tl, skip=rng.choice([0, 1]))
        host_samples(tl, cycle_time_ms=cycle)
        return None
    return (str(path) if as_file else text), go


def _r_autotune(rng: random.Random, work: Path):
    from autotuner.frameworks.horovod.autotune_log import (
        explain,
        parse_autotune_log,
        read_autotune_log,
    )

    text = mu.mutate_text(rng, rng.choice(bases().autotune_logs))
    as_file = rng.random() < 0.15
    path = work / "log.csv"
    if as_file:
        path.write_bytes(mu.mutate_bytes(rng, text.encode()))
    nbytes = rng.choice([None, 102_228_128, 0, 1])

    def go():
        log = read_autotune_log(path) if as_file else parse_autotune_log(text, "fuzz.csv")
        explain(log, nbytes)
    return (str(path) if as_file else text), go


def _r_labreport(rng: random.Random, work: Path):
    """A mutated lab report as the source of a copy of its environment: read_env, then fit_env."""
    from autotuner.frameworks.horovod.fit.fitters import fit_env
    from autotuner.frameworks.horovod.readers.runs import read_env

    env = rng.choice(["v100-16gbit", "v100-5gbit"])
    text = mu.mutate_text(rng, bases().reports[env])
    d = work / "envs" / env
    shutil.rmtree(work / "envs", ignore_errors=True)
    _copy_env(env, d)
    (d / bases().metas[env]["source"]).write_text(text)

    def go():
        fit_env(read_env(d))
    return text, go


def _r_layout(rng: random.Random, work: Path):
    from autotuner.readers.layouts import layout_from_dict, load_layout

    text = mu.mutate_json_text(rng, rng.choice(list(bases().layouts.values())),
                               prefer=("shape", "compute_share", "dtype", "tensors", "name"))
    path = work / "layout.json"
    data = text.encode()
    path.write_bytes(mu.mutate_bytes(rng, data) if rng.random() < 0.1 else data)

    def go():
        try:
            d = json.loads(text)
        except ValueError:
            d = None
        if d is not None:
            problem = None
            try:
                problem = _check_layout(layout_from_dict(d, "fuzz.json"))
            except _autotuner_error():
                pass
            if problem:
                return problem
        lay = load_layout(str(path))
        problem = _check_layout(lay)
        return problem or _simulate_default(ROOT / "autotuner" / "models", "v100-16gbit", str(path), 100.0)
    return text, go


def _r_model(rng: random.Random, work: Path):
    from autotuner.frameworks.horovod.fit.store import env_from_dict, load_env

    name = rng.choice(list(bases().models))
    text = mu.mutate_json_text(rng, bases().models[name],
                               prefer=("workloads", "layout", "forward_ms", "backward_ms", "comm_scale", "overlap",
                                       "host_backward_ms", "nodes", "gpus_per_node", "cluster", "cost_model",
                                       "alpha_us", "bandwidth_gbps", "measured_config", "schema", "env"))
    md = work / "md"
    shutil.rmtree(md, ignore_errors=True)
    md.mkdir()
    data = text.encode()
    (md / f"{name}.json").write_bytes(mu.mutate_bytes(rng, data) if rng.random() < 0.1 else data)

    def go():
        try:
            d = json.loads(text)
        except ValueError:
            d = None
        if isinstance(d, dict):
            try:
                env_from_dict(d, "fuzz.json")
            except _autotuner_error():
                pass
        fenv = load_env(md, name)
        model = next(iter(fenv.workloads), "resnet50")
        return _simulate_default(md, name, model, None if model in fenv.workloads else 100.0)
    return text, go


def _copy_env(env: str, dest: Path, damage_timelines: bool = False, timelines: str = "link") -> None:
    """A copy of runs/<env> in ``dest`` (validation envs: the fit sweep and its kept timelines,
    linked, copied when they are to be damaged, or left out with ``timelines="none"``)."""
    src = ROOT / "runs" / env
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy(src / "env.toml", dest / "env.toml")
    meta = bases().metas[env]
    if meta["format"] != "validation":
        shutil.copy(src / meta["source"], dest / meta["source"])
        return
    (dest / "validation").mkdir(exist_ok=True)
    shutil.copy(VALID_DIR / "fit-sweep.jsonl", dest / "validation" / "fit-sweep.jsonl")
    if timelines == "none" and not damage_timelines:
        return
    tl = dest / "validation" / "timelines"
    tl.mkdir(exist_ok=True)
    if damage_timelines:
        shutil.copytree(VALID_DIR / "timelines" / "fit-sweep", tl / "fit-sweep")
    else:
        (tl / "fit-sweep").symlink_to(VALID_DIR / "timelines" / "fit-sweep")


def _r_envtoml(rng: random.Random, work: Path):
    from autotuner.frameworks.horovod.fit.fitters import fit_env
    from autotuner.frameworks.horovod.readers.runs import read_env

    env = rng.choice(list(bases().env_tomls))
    text = mu.mutate_toml_text(rng, bases().env_tomls[env])
    d = work / "envs" / env
    shutil.rmtree(work / "envs", ignore_errors=True)
    _copy_env(env, d)
    data = text.encode()
    (d / "env.toml").write_bytes(mu.mutate_bytes(rng, data) if rng.random() < 0.05 else data)

    def go():
        fit_env(read_env(d))
    return text, go


def _r_records(rng: random.Random, work: Path):
    """Mutated validation records: parse_records (lenient), read_validation_records (a view's
    reader), and as the source of a copy of the validation env (with its kept timelines 30% of
    the time): read_env, then fit_env."""
    from autotuner.frameworks.horovod.readers.runs import read_validation_records
    from autotuner.frameworks.horovod.fit.fitters import fit_env
    from autotuner.frameworks.horovod.readers.runs import parse_records, read_env

    text = mu.mutate_jsonl_text(rng, bases().records["fit-sweep.jsonl" if rng.random() < 0.6
                                                     else rng.choice(list(bases().records))])
    runs = work / "runs"
    shutil.rmtree(runs, ignore_errors=True)
    d = runs / "local-gloo-1gbit"
    _copy_env("local-gloo-1gbit", d, timelines="link" if rng.random() < 0.3 else "none")
    (d / "validation" / "fit-sweep.jsonl").write_text(text)

    def go():
        parse_records(text, "fuzz.jsonl")
        read_validation_records(runs, "local-gloo-1gbit")
        fit_env(read_env(d))
    return text, go


def _r_sweep(rng: random.Random, work: Path):
    """Mutated ``autotuner measure`` records: parsed, then the per-tensor negotiation fit on them."""
    from autotuner.frameworks.horovod.fit.phase_fused import _per_tensor
    from autotuner.frameworks.horovod.readers.sweep import parse_sweep_records

    text = mu.mutate_jsonl_text(rng, bases().sweep)

    def go():
        recs, _ = parse_sweep_records(text, "fuzz.jsonl")
        info = _per_tensor(recs)
        if info["per_tensor_us"] is not None and not (info["per_tensor_us"] > 0 and math.isfinite(info["per_tensor_us"])):
            return f"sweep accepted with a per-tensor cost of {info['per_tensor_us']!r} µs"
    return text, go


def _r_nccl(rng: random.Random, work: Path):
    """A mutated nccl-tests output (stdout table or -J JSON) as the source of a copy of the example
    env (tests/data/nccl_tests/format, generated): read_env, then fit_env."""
    from autotuner.frameworks.horovod.fit.fitters import fit_env
    from autotuner.frameworks.horovod.readers.runs import read_env

    name = rng.choice(sorted(bases().nccl))
    text = mu.mutate_text(rng, bases().nccl[name])
    d = work / "envs" / "nccl"
    shutil.rmtree(work / "envs", ignore_errors=True)
    shutil.copytree(NCCL_ENV, d)
    (d / name).write_text(text)

    def go():
        fit_env(read_env(d))
    return text, go


def _r_labreport_002_004(rng: random.Random, work: Path):
    """Mutated lab reports 002/003/004 through their parsers (autotuner.readers.labreport)."""
    from autotuner.readers import labreport as lr

    which = rng.choice(sorted(bases().reports_002_004))
    text = mu.mutate_text(rng, bases().reports_002_004[which])

    def go():
        if which == "002":
            lr.parse_backend_runs(text, "fuzz.md")
        elif which == "003":
            lr.parse_cpu_scaling(text, ["resnet50", "resnet18"], "fuzz.md")
        else:
            lr.parse_compression_runs(text, "fuzz.md")
    return text, go


READERS = {"timeline": (_r_timeline, 25), "autotune_log": (_r_autotune, 12), "labreport": (_r_labreport, 15),
           "layout": (_r_layout, 12), "model": (_r_model, 12), "env.toml": (_r_envtoml, 12),
           "records": (_r_records, 12), "sweep": (_r_sweep, 8), "nccl-tests": (_r_nccl, 8),
           "labreport-002-004": (_r_labreport_002_004, 8)}


def _autotuner_error():
    from autotuner.errors import AutotunerError

    return AutotunerError


def _pick(rng: random.Random, table: dict) -> str:
    names = list(table)
    return rng.choices(names, weights=[table[n][1] for n in names])[0]


def reader_case(seed: int, i: int, work: Path) -> tuple[str, str, str | None, str, str]:
    """Run reader case ``i``. Returns (kind, outcome, detail, where, input)."""
    rng = random.Random(f"{seed}:reader:{i}")
    kind = _pick(rng, READERS)
    work.mkdir(parents=True, exist_ok=True)
    inp, go = READERS[kind][0](rng, work)
    AErr = _autotuner_error()
    with warnings.catch_warnings(), import_guard() as imported, contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        try:
            with deadline(READER_TIMEOUT_S) as fired:
                problem = go()
            outcome, detail, where = ("accepted-invalid", problem, "") if problem else ("accepted", None, "")
        except Hang:
            outcome, detail, where = "hang", f"no result after {READER_TIMEOUT_S:g} s", ""
        except KeyboardInterrupt:
            raise
        except AErr:
            outcome, detail, where = "rejected", None, ""
        except (Exception, Launched) as e:  # noqa: BLE001 - everything else is a bug
            outcome, detail, where = "escape", f"{type(e).__name__}: {e}", _where(e)
        if fired[0] and outcome != "hang":
            outcome, detail, where = "hang", f"alarm after {READER_TIMEOUT_S:g} s was swallowed", ""
    if imported and outcome not in ("escape", "hang"):
        outcome, detail, where = "imported-data-code", f"imported {imported} named in a data file", ""
    return kind, outcome, detail, where, inp


def run_readers(n: int, seed: int = 0, work: Path | None = None, save: Path | None = None,
                progress: bool = False) -> Report:
    """Run reader cases 0..n-1; failing inputs are saved under ``save`` (when given)."""
    rep = Report("readers")
    t0 = time.perf_counter()
    own = work is None
    work = Path(tempfile.mkdtemp(prefix="autotuner-fuzz-readers-")) if own else work
    try:
        for i in range(n):
            kind, outcome, detail, where, inp = reader_case(seed, i, work / "case")
            rep.counts["total"] += 1
            rep.counts[f"kind:{kind}"] += 1
            rep.counts[outcome] += 1
            if outcome in READER_FAILURES:
                repro = f"python tests/fuzz/harness.py --reader-case {i} --seed {seed}"
                if save is not None:
                    save.mkdir(parents=True, exist_ok=True)
                    p = save / f"reader-{i}-{kind.replace('.', '_')}.txt"
                    p.write_text(inp if isinstance(inp, str) else repr(inp))
                    repro += f"  (input: {p})"
                rep.failures.append(Failure(outcome, kind, i, detail or "", where, repro))
            if progress and (i + 1) % 500 == 0:
                print(f"  readers {i + 1}/{n} ({time.perf_counter() - t0:.0f} s, {rep.n_failures} failures)",
                      file=sys.stderr, flush=True)
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)
    rep.seconds = time.perf_counter() - t0
    return rep


# =========================================================================== CLI

BAD_FLOAT = ["nan", "NaN", "inf", "-inf", "Infinity", "-1", "-0.001", "1e309", "", "abc", "1,5", "--"]
BAD_POS_FLOAT = BAD_FLOAT + ["0"]
BAD_COUNT = ["0", "-1", "nan", "x", "", "2.5", "1e3", "inf"]
ODD_FLOAT = ["0", "1e-9", "1e300", "1e-300", "99999999999999999999999"]
ODD_INT = ["99999999999999999999999", "9223372036854775808", "100000000"]
ENVS = ["v100-16gbit", "v100-5gbit", "local-gloo-1gbit"]
BAD_ENV = ["nope", "../x", "", "/etc/passwd", "v100-16gbit/../v100-5gbit"]
MODEL_SPECS_BAD = [":", ":x", ".rel:x", "nope", "", "missing.json", "autotuner_fuzz_sentinel:boom", "os:getpid",
                   "json:loads", "/nonexistent/x.json"]
CALIBRATED = ["resnet50", "vgg16"]
SHIPPED = ["resnet18", "resnet101", "vgg16_bn"]


@dataclass
class Case:
    """One CLI invocation being built: argv, the certainly-wrong values put in, files to check."""

    rng: random.Random
    dir: Path
    argv: list[str] = field(default_factory=list)
    bad: list[str] = field(default_factory=list)  # "--opt=value" of each certainly-wrong value
    out: Path | None = None  # --out of fit
    cmd: str = ""

    def opt(self, flag: str, value: str, bad: bool = False) -> None:
        self.argv += [flag, value]
        if bad:
            self.bad.append(f"{flag}={value!r}")

    def numeric(self, flag: str, valid: list[str], bad: list[str], odd: list[str] = (), p_bad: float = 0.12,
                p_set: float = 0.3) -> None:
        """Set ``flag`` to a certainly-wrong value (p_bad), an odd one (5%), a valid one (p_set) or leave it."""
        r = self.rng.random()
        if r < p_bad:
            self.opt(flag, self.rng.choice(bad), bad=True)
        elif r < p_bad + 0.05 and odd:
            self.opt(flag, self.rng.choice(odd))
        elif r < p_bad + 0.05 + p_set:
            self.opt(flag, self.rng.choice(valid))

    def file(self, name: str, data: bytes | str) -> Path:
        p = self.dir / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)
        return p


def _layout_file(c: Case, mutated: bool) -> str:
    text = c.rng.choice(list(bases().layouts.values()))
    if mutated:
        text = mu.mutate_json_text(c.rng, text, prefer=("shape", "compute_share", "dtype", "tensors"))
    return str(c.file(f"layout-{len(c.argv)}.json", text))


def _model_opt(c: Case, calibrated_ok: bool = True) -> None:
    """--model: a calibrated name, a shipped layout, a layout file (maybe mutated), or a bad spec."""
    r = c.rng.random()
    if r < 0.45 and calibrated_ok:
        c.opt("--model", c.rng.choice(CALIBRATED))
    elif r < 0.55:
        c.opt("--model", c.rng.choice(SHIPPED))
    elif r < 0.8:
        c.opt("--model", _layout_file(c, mutated=c.rng.random() < 0.8))
    else:
        c.opt("--model", c.rng.choice(MODEL_SPECS_BAD))


def _model_dir_opt(c: Case) -> None:
    r = c.rng.random()
    if r < 0.25:
        name = c.rng.choice(list(bases().models))
        text = mu.mutate_json_text(c.rng, bases().models[name],
                                   prefer=("workloads", "layout", "forward_ms", "backward_ms", "comm_scale", "nodes",
                                           "gpus_per_node", "cluster", "alpha_us", "bandwidth_gbps", "overlap"))
        data = text.encode()
        if c.rng.random() < 0.1:
            data = mu.mutate_bytes(c.rng, data)
        c.file(f"md/{name}.json", data)
        c.opt("--model-dir", str(c.dir / "md"))
        if c.rng.random() < 0.7:
            c.opt("--env", name)
    elif r < 0.3:
        c.opt("--model-dir", c.rng.choice([str(c.dir / "missing-dir"), str(c.file("afile", "x")), ""]))
    else:
        if c.rng.random() < 0.3:
            c.opt("--model-dir", "model")
        r2 = c.rng.random()
        if r2 < 0.3:
            c.opt("--env", c.rng.choice(ENVS))
        elif r2 < 0.35:
            c.opt("--env", c.rng.choice(BAD_ENV))


def _what_ifs(c: Case, nodes: bool = True) -> None:
    if nodes:
        c.numeric("--nodes", ["1", "2", "4"], ["0", "-1", "nan", "x", "", "2.5"], ODD_INT)
    c.numeric("--gpus-per-node", ["1", "2", "8"], ["0", "-1", "nan", "x", ""], ODD_INT)
    c.numeric("--link-gbit", ["1", "16", "0.5", "100"], BAD_POS_FLOAT, ["1e300", "1e-300"])
    r = c.rng.random()
    if r < 0.1:
        c.opt("--compression", c.rng.choice(["bogus", "", "FP16"]), bad=True)
    elif r < 0.3:
        c.opt("--compression", c.rng.choice(["none", "fp16"]))


def _compute_ms(c: Case) -> None:
    c.numeric("--compute-ms", ["100", "300", "42.5"], BAD_POS_FLOAT, ["1e300", "1e-300"], p_set=0.25)


def _out_opt(c: Case, flag: str = "--out") -> Path:
    r = c.rng.random()
    if r < 0.8:
        p = c.dir / "out"
    elif r < 0.87:
        p = c.dir / "out" / "nested" / "deep"
    elif r < 0.93:
        p = c.file("outfile", "x") / "sub"
    else:
        p = c.file("outfile", "x")
    c.opt(flag, str(p))
    return p


def _knobs(c: Case, p_set: float = 0.3) -> None:
    """The knob options (bounds from the knob table: fusion 0-512 MiB, cycle 0.1-100 ms, cache 0-1048576)."""
    c.numeric("--fusion-threshold-mb", ["0", "1", "64", "128", "0.5"], BAD_FLOAT + ["1e300", "513", "1e6"],
              ["1e-9", "512"], p_set=p_set)
    c.numeric("--cycle-time-ms", ["1", "5", "0.5", "25"], BAD_FLOAT + ["0", "1e300", "1e6", "0.01"], ["0.1", "100"],
              p_set=p_set)
    c.numeric("--cache-capacity", ["0", "1024", "1"], ["-1", "nan", "x", "2.5", "", "1048577"] + ODD_INT[:2],
              ["1048576"], p_set=p_set)
    if c.rng.random() < 0.2:
        c.argv.append(c.rng.choice(["--hierarchical-allreduce", "--no-hierarchical-allreduce",
                                    "--hierarchical-allgather"]))


def g_simulate(c: Case) -> None:
    _model_opt(c)
    _model_dir_opt(c)
    _knobs(c)
    _what_ifs(c)
    _compute_ms(c)
    r = c.rng.random()
    if r < 0.1:
        c.opt("--timeline-filename", str(c.dir / c.rng.choice(["t.json", "t.json.gz", "sub/t.json"])))
        c.numeric("--timeline-steps", ["1", "2", "3"], ["0", "-1", "x", "nan"], p_bad=0.2)
    elif r < 0.13:
        c.opt("--timeline-filename", c.rng.choice([str(c.dir), str(c.file("f", "x") / "t.json")]))
    if c.rng.random() < 0.5:
        c.argv.append("--json")


def g_suggest(c: Case) -> None:
    _model_opt(c)
    _model_dir_opt(c)
    c.numeric("--top", ["1", "2", "3"], ["0", "-1", "x", ""])
    c.numeric("--n-calls", ["1", "2", "4", "8"], ["0", "-1", "x", "nan"], p_set=0.6)
    c.numeric("--seed", ["0", "1", "7"], ["x", "nan", ""], ["-1", "99999999999999999999999"])
    _knobs(c, p_set=0.1)
    _what_ifs(c)
    _compute_ms(c)
    if "--n-calls" not in c.argv:
        c.opt("--n-calls", "2")
    r = c.rng.random()
    if r < 0.3:
        c.opt("--strategy", c.rng.choice(["grid", "bayes"]))
    elif r < 0.36:
        c.opt("--strategy", c.rng.choice(["Bayes", "random", ""]), bad=True)
    if c.rng.random() < 0.6:
        c.argv.append("--json")


def g_env(c: Case) -> None:
    """``env new NAME``: shapes, links and rates drawn valid and wrong; output into the case folder."""
    c.argv.append("new")
    r = c.rng.random()
    if r < 0.85:
        c.argv.append(c.rng.choice(["dgx", "my-cluster.1", "a"]))
    elif r < 0.93:
        c.argv.append(c.rng.choice(["", "../x", "a/b", ".hidden"]))
        c.bad.append("name")
    else:
        c.argv.append("local-gloo-1gbit")  # a measured env: refused
        c.opt("--model-dir", "model")
    c.numeric("--nodes", ["1", "2", "8"], ["0", "-1", "nan", "x", "", "2.5"], ODD_INT, p_set=0.95)
    c.numeric("--gpus-per-node", ["1", "4", "8"], ["0", "-1", "nan", "x", ""], ODD_INT, p_set=0.95)
    r = c.rng.random()
    if r < 0.7:
        c.opt("--intra", c.rng.choice(["nvlink2", "nvlink3", "nvlink4", "pcie3", "pcie4", "pcie5"]))
    elif r < 0.78:
        c.opt("--intra", c.rng.choice(["nvlink9", "", "NVLINK3", "pcie"]), bad=True)
    c.numeric("--link-gbit", ["10", "100", "200", "0.5"], BAD_POS_FLOAT, ["1e300", "1e-300"], p_set=0.7)
    r = c.rng.random()
    if r < 0.3:
        c.opt("--backend", c.rng.choice(["nccl", "mpi", "gloo"]))
    elif r < 0.36:
        c.opt("--backend", c.rng.choice(["rdma", "", "NCCL"]), bad=True)
    if c.rng.random() < 0.3:
        c.opt("--gpu", c.rng.choice(["A100", "", "H100 SXM"]))
    _out_opt(c)


def g_envs(c: Case) -> None:
    """``envs``: the shipped models, or a mutated model file among them."""
    if c.rng.random() < 0.5:
        _model_dir_opt(c)
        if "--env" in c.argv:  # envs takes no --env
            i = c.argv.index("--env")
            del c.argv[i:i + 2]
    if c.rng.random() < 0.5:
        c.argv.append("--json")


def g_accuracy(c: Case) -> None:
    """``accuracy``: one env or all, the shipped or mutated models, --cost-model."""
    r = c.rng.random()
    if r < 0.5:
        c.opt("--env", c.rng.choice(ENVS))
    elif r < 0.6:
        c.opt("--env", c.rng.choice(BAD_ENV), bad=True)
    r = c.rng.random()
    if r < 0.15:
        c.opt("--cost-model", c.rng.choice(["local-gloo-1gbit-sweep", "fresh-poll-2gbit"]))
    elif r < 0.2:
        c.opt("--cost-model", c.rng.choice(["", "../x", "nope"]), bad=True)
    if c.rng.random() < 0.3:
        c.opt("--model-dir", "model")
    if c.rng.random() < 0.5:
        c.argv.append("--json")


def g_explore(c: Case) -> None:
    _model_opt(c)
    _model_dir_opt(c)
    c.numeric("--resolution", ["2", "3"], ["0", "-1", "1", "x", "nan", ""], p_bad=0.3, p_set=0.7)
    if "--resolution" not in c.argv:
        c.opt("--resolution", "2")
    r = c.rng.random()
    if r < 0.35:
        d = {"proposals": [{"config": {"fusion_threshold_mb": 64.0, "cycle_time_ms": 5.0, "cache_capacity": 1024,
                                       "hierarchical_allreduce": False, "hierarchical_allgather": False}}]}
        text = mu.mutate_json_text(c.rng, json.dumps(d), prefer=("cycle_time_ms", "fusion_threshold_mb",
                                                                 "cache_capacity", "config", "proposals"))
        c.opt("--proposals", str(c.file("pick.json", text)))
    elif r < 0.4:
        c.opt("--proposals", str(c.dir / "missing.json"))
    else:
        c.argv.append("--no-suggest")
    _knobs(c, p_set=0.1)
    _what_ifs(c)
    _compute_ms(c)
    _out_opt(c)
    if c.rng.random() < 0.1:
        c.opt("--runs-dir", c.rng.choice([str(c.dir / "missing"), str(c.file("rf", "x"))]))
    if c.rng.random() < 0.5:
        c.argv.append("--json")


def g_scale(c: Case) -> None:
    _model_opt(c)
    _model_dir_opt(c)
    r = c.rng.random()
    if r < 0.3:
        c.opt("--nodes", c.rng.choice(["0", "-1", "1,,2", "nan", "x", "", "1,0", "2.5", "inf"]), bad=True)
    else:
        c.opt("--nodes", c.rng.choice(["1,2", "1,2,4", "2", "4,1"]))
    r = c.rng.random()
    if r < 0.15:
        c.opt("--link-gbit", c.rng.choice(["nan", "inf", "0", "-1", "x", "", "1,,2", "1,nan"]), bad=True)
    elif r < 0.3:
        c.opt("--link-gbit", c.rng.choice(["1,10", "5", "0.5"]))
    c.numeric("--gpus-per-node", ["1", "2", "8"], ["0", "-1", "nan", "x", ""])
    c.numeric("--batch-size", ["32", "1"], ["0", "-1", "x", "nan"])
    _compute_ms(c)
    if c.rng.random() < 0.15:
        c.opt("--compression", c.rng.choice(["bogus", ""]), bad=True)
    _out_opt(c)
    if c.rng.random() < 0.1:
        c.opt("--runs-dir", c.rng.choice([str(c.dir / "missing"), str(c.file("rf", "x"))]))
    if c.rng.random() < 0.5:
        c.argv.append("--json")


def g_inspect(c: Case) -> None:
    r = c.rng.random()
    base = c.rng.choice(bases().autotune_logs)
    if r < 0.65:
        data = mu.mutate_text(c.rng, base).encode()
        if c.rng.random() < 0.15:
            data = mu.mutate_bytes(c.rng, data)
        c.argv.append(str(c.file("log.csv", data)))
    elif r < 0.8:
        c.argv.append(str(c.file("log.csv", base)))
    else:
        c.argv.append(c.rng.choice([str(c.dir / "missing.csv"), str(c.dir), "", str(FIX / "README.md")]))
    if c.rng.random() < 0.4:
        _model_opt(c)


def _timeline_arg(c: Case, name: str) -> str:
    r = c.rng.random()
    base = c.rng.choice(bases().timelines)
    if r < 0.6:
        text = mu.mutate_json_text(c.rng, base, prefer=("ts", "dur", "ph", "name", "args", "shape", "dtype"))
        data = text.encode()
        if c.rng.random() < 0.15:
            data = mu.mutate_bytes(c.rng, data)
        return str(c.file(name, data))
    if r < 0.9:
        return str(c.file(name, base))
    return c.rng.choice([str(c.dir / "missing.json"), str(c.dir), ""])


def g_compare(c: Case) -> None:
    c.argv += [_timeline_arg(c, "real.json"), _timeline_arg(c, "sim.json")]
    c.numeric("--skip-real", ["0", "1", "2"], ["-1", "x", "nan", ""], ["1000000"])
    c.numeric("--skip-sim", ["0", "1"], ["-1", "x", "nan", ""], ["1000000"])
    c.numeric("--top", ["0", "3", "10"], ["-1", "x", "nan", ""], ["1000000"])
    if c.rng.random() < 0.5:
        c.argv.append("--json")


def g_fit(c: Case) -> None:
    r = c.rng.random()
    runs = c.dir / "runs"
    if r < 0.06:
        c.argv.append(c.rng.choice([str(c.dir / "missing"), str(c.file("rf", "x")), ""]))
    else:
        env = c.rng.choice(ENVS)
        what = c.rng.random()
        damage_tl = env == "local-gloo-1gbit" and what > 0.85
        _copy_env(env, runs / env, damage_timelines=damage_tl)
        meta = bases().metas[env]
        if what < 0.45:
            text = mu.mutate_toml_text(c.rng, bases().env_tomls[env])
            (runs / env / "env.toml").write_text(text)
        elif what < 0.85:
            src = runs / env / meta["source"]
            if meta["format"] == "validation":
                src.write_text(mu.mutate_jsonl_text(c.rng, src.read_text()))
            else:
                src.write_text(mu.mutate_text(c.rng, src.read_text()))
        elif damage_tl:
            for gz in sorted((runs / env / "validation/timelines/fit-sweep").glob("*.json.gz")):
                if c.rng.random() < 0.5:
                    b = gz.read_bytes()
                    gz.write_bytes(b[:len(b) // 2])
        if c.rng.random() < 0.25:
            _copy_env("v100-16gbit", runs / "v100-16gbit-sane")
        c.argv.append(str(runs))
    c.out = _out_opt(c)


def g_validate(c: Case) -> None:
    """Always holds one certainly-wrong value: a validate case must never start horovodrun."""
    bads = [("--np", ["0", "-1", "x", "nan"]), ("--steps", ["0", "-1", "x"]), ("--warmup", ["-1", "x"]),
            ("--repeats", ["0", "-1"]), ("--top", ["0", "-1"]), ("--timeout", ["nan", "-1", "0", "inf", "x"]),
            ("--link-gbit", ["nan", "0", "-1", "inf", "x"]), ("--compute-ms", ["nan", "-1", "inf", "x"]),
            ("--batch-size", ["0", "-1", "x"]), ("--env", ["../x", "", "/abs", "a/b"]),
            ("--model", [":", ":x", ".rel:x", "nope", "", "missing.json"])]
    chosen = c.rng.sample(bads, c.rng.randint(1, 2))
    bad_flags = {f for f, _ in chosen}
    if "--env" not in bad_flags:
        c.opt("--env", c.rng.choice(["fuzz-env", "local-gloo-1gbit"]))
    if "--model" not in bad_flags:
        c.opt("--model", c.rng.choice(["resnet50", "vgg16", "resnet18"]))
    for f, vals in chosen:
        c.opt(f, c.rng.choice(vals), bad=True)
    c.opt("--runs-dir", str(c.dir / "runs"))
    if c.rng.random() < 0.2:
        c.opt("--proposals", str(c.file("p.json", mu.mutate_json_text(c.rng, '[{"fusion_threshold_mb": 64, '
                                                                          '"cycle_time_ms": 5}]'))))
    if c.rng.random() < 0.2:
        c.argv.append("--no-autotune")


def g_measure(c: Case) -> None:
    """Like validate: always one certainly-wrong value, so a measure case never starts horovodrun."""
    bads = [("--np", ["0", "-1", "x", "nan", "1"]), ("--repeats", ["0", "-1", "x"]), ("--warmup", ["-1", "x"]),
            ("--timeout", ["nan", "-1", "0", "inf"]), ("--link-gbit", ["nan", "0", "-1", "inf"]),
            ("--sizes", ["", "x", "1K:", "0:4K", "4K:1K", "1,,2", "-1"]), ("--wait", ["busy", ""]),
            ("--cpu-rounds", ["-1", "x"]), ("--trickle-rounds", ["-1", "nan"]), ("--idle-rounds", ["-3", "x"]),
            ("--env", ["../x", "", "/abs", "a/b"]), ("--hosts", ["a:0", ":", "a:x,b", "a:2,a:2,"])]
    chosen = c.rng.sample(bads, c.rng.randint(1, 2))
    if "--env" not in {f for f, _ in chosen}:
        c.opt("--env", "fuzz-env")
    for f, vals in chosen:
        c.opt(f, c.rng.choice(vals), bad=True)
    c.opt("--runs-dir", str(c.dir / "runs"))


def g_profile(c: Case) -> None:
    """Bad factories and shapes (a profile never starts a process; a bad value never computes)."""
    bads = [("--model", [":", ":x", ".rel:x", "nope", "", "os:getpid", "autotuner.frameworks.horovod.knobs:MIB"]),
            ("--input-shape", ["", "x", "0,3", "3,-1", "3,,4", "nan"]), ("--batch-size", ["0", "-1", "x"]),
            ("--steps", ["0", "-1"]), ("--warmup", ["-1", "x"]), ("--threads", ["0", "-1"]),
            ("--concurrent", ["0", "-1", "x"]), ("--device", ["tpu", ""])]
    chosen = c.rng.sample(bads, c.rng.randint(1, 2))
    flags = {f for f, _ in chosen}
    if "--model" not in flags:
        c.opt("--model", "tests.factory_models:small_cnn")
    if "--input-shape" not in flags:
        c.opt("--input-shape", "1,8,8")
    for f, vals in chosen:
        c.opt(f, c.rng.choice(vals), bad=True)
    _out_opt(c)


def g_ddp(c: Case) -> None:
    """``ddp suggest|simulate`` with values drawn valid and wrong (the committed DDP envs); ``ddp
    measure|validate|tune`` like validate: always one certainly-wrong value, so no torchrun starts."""
    sub = c.rng.choice(["suggest", "simulate", "simulate", "measure", "validate", "tune"])
    c.argv.append(sub)
    envs = sorted(p.parent.name for p in (ROOT / "runs").glob("*/ddp-sweep.jsonl")) or ["none"]
    if sub in ("suggest", "simulate"):
        r = c.rng.random()
        if r < 0.85:
            c.opt("--env", c.rng.choice(envs))
        else:
            c.opt("--env", c.rng.choice(["nope", "../x", "", "local-gloo-1gbit"]), bad=True)
        c.opt("--model", c.rng.choice(["resnet18", "mnist", "resnet50", "resnet18", "nope", ""]))
        if c.argv[-1] in ("nope", ""):
            c.bad.append("model")
        c.numeric("--compute-ms", ["50", "100", "300"], ["0", "-1", "nan", "inf", "x"], p_set=0.6)
        c.opt("--runs-dir", str(c.dir.parents[1] / "runs"))
        if sub == "simulate":
            r = c.rng.random()
            if r < 0.3:
                c.numeric("--bucket-cap-mb", ["1", "4", "25", "0.5"], ["0", "-1", "nan", "inf", "x", "1e300"], p_set=1.0)
            elif r < 0.5:
                v = c.rng.choice(["1,4,25", "2", "0.5,64", "1,,2", "x", "0", "-1,4", "nan"])
                c.opt("--bucket-cap-mb-list", v, bad=v in ("1,,2", "x", "0", "-1,4", "nan"))
            if c.rng.random() < 0.3:
                h = c.rng.choice(["allreduce", "fp16_compress", "powerSGD", "int8", ""])
                c.opt("--comm-hook", h, bad=h not in ("allreduce", "fp16_compress"))
            if c.rng.random() < 0.3:
                c.argv.append("--gradient-as-bucket-view")
        if c.rng.random() < 0.5:
            c.argv.append("--json")
        return
    bads = [("--steps", ["0", "-1", "x"]), ("--warmup", ["0", "-1", "x"]), ("--np", ["0", "-1", "x"]),
            ("--link-gbit", ["nan", "0", "-1", "inf"]), ("--compute-ms", ["nan", "-1", "0", "x"]),
            ("--env", ["../x", "", "/abs", "a/b"])]
    if sub == "measure":
        bads = [("--np", ["0", "-1", "x"]), ("--sweep-rounds", ["0", "-1", "x"]), ("--repeats", ["0", "x"]),
                ("--link-gbit", ["nan", "0", "-1", "inf"]), ("--env", ["../x", "", "/abs", "a/b"])]
    chosen = c.rng.sample(bads, c.rng.randint(1, 2))
    flags = {f for f, _ in chosen}
    if "--env" not in flags:
        c.opt("--env", c.rng.choice(envs + ["fuzz-env"]))
    if sub != "measure":
        c.opt("--model", c.rng.choice(["resnet18", "mnist"]))
    for f, vals in chosen:
        c.opt(f, c.rng.choice(vals), bad=True)
    c.opt("--runs-dir", str(c.dir.parents[1] / "runs"))


HELP_CMDS = ["fit", "simulate", "suggest", "explore", "scale", "inspect", "compare", "validate", "accuracy", "envs",
             "measure", "profile", "ddp"]


def g_usage(c: Case) -> None:
    """--help (exit 0) or a usage error: unknown command/option, a missing argument (exit 2, one line)."""
    r = c.rng.random()
    cmd = c.rng.choice(HELP_CMDS)
    if r < 0.3:
        c.argv += c.rng.choice([["--help"], ["--version"], ["env", "--help"], ["env", "new", "--help"]]) \
            if c.rng.random() < 0.3 else [cmd, "--help"]
    elif r < 0.5:
        c.argv.append(c.rng.choice(["bogus", "Simulate", "fit2", "-x"]))
        c.bad.append("command")
    elif r < 0.7:
        if cmd in ("envs", "accuracy"):  # no required argument: an option without its value
            c.argv += ["accuracy", "--env"]
        elif cmd == "ddp":  # a command group: its subcommand without its required options
            c.argv += ["ddp", c.rng.choice(["suggest", "simulate", "validate", "tune", "measure"])]
        else:
            c.argv.append(cmd)  # the required argument or --model missing
        c.bad.append("missing argument")
    else:
        c.argv += [cmd, "--model", "resnet50", c.rng.choice(["--bogus", "--nodes", "--json=1", "--fusion", "-z"])]
        c.bad.append("option")


COMMANDS = {"simulate": (g_simulate, 28), "inspect": (g_inspect, 12), "compare": (g_compare, 12), "fit": (g_fit, 14),
            "usage": (g_usage, 6), "scale": (g_scale, 7), "explore": (g_explore, 5), "suggest": (g_suggest, 9),
            "validate": (g_validate, 7), "env": (g_env, 5), "envs": (g_envs, 2), "accuracy": (g_accuracy, 2),
            "measure": (g_measure, 3), "profile": (g_profile, 3), "ddp": (g_ddp, 6)}
JSON_CMDS = ("simulate", "suggest", "compare", "explore", "scale", "envs", "accuracy", "ddp")


def _snapshot(root: Path) -> dict[str, tuple]:
    """Files (not folders: an output folder may be created before work starts) under ``root``."""
    out = {}
    for dp, dns, fns in os.walk(root):
        for n in fns:
            p = os.path.join(dp, n)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            out[os.path.relpath(p, root)] = (st.st_size, st.st_mtime_ns, st.st_mode)
    return out


def _strict_json(text: str):
    def bad(c):
        raise ValueError(f"non-finite number {c}")
    return json.loads(text, parse_constant=bad)


def invoke(argv: list[str], timeout: float = CLI_TIMEOUT_S, allow_launch: bool = True) -> dict:
    """``autotuner.cli.main(argv)`` in-process, stdout/stderr captured, under an alarm.

    Returns {rc, stdout, stderr, exc (escaped exception or None), where, tb, hung}.
    """
    from autotuner import cli

    o, e = io.StringIO(), io.StringIO()
    res = {"rc": None, "exc": None, "where": "", "tb": "", "hung": False}
    real_popen = subprocess.Popen

    def no_popen(*a, **k):
        raise Launched(f"validate tried to start {a[0] if a else k.get('args')!r}")

    if not allow_launch:
        subprocess.Popen = no_popen
    try:
        with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e), warnings.catch_warnings():
            warnings.simplefilter("default")  # each case shows its warnings, as a fresh process would
            try:
                with deadline(timeout) as fired:
                    try:
                        rc = cli.main(argv)
                    except SystemExit as x:
                        rc = x.code if isinstance(x.code, int) else (0 if x.code is None else 1)
                res["rc"] = rc
            except Hang:
                res["hung"] = True
            except KeyboardInterrupt:
                raise
            except BaseException as x:  # noqa: BLE001 - anything escaping main() is a traceback
                res.update(exc=x, where=_where(x), tb=traceback.format_exc())
            res["hung"] = res["hung"] or fired[0]
    finally:
        subprocess.Popen = real_popen
    res["stdout"], res["stderr"] = o.getvalue(), e.getvalue()
    return res


def _classify(c: Case, res: dict, before: dict, after: dict, sandbox: Path, imported: list[str]) -> list[tuple]:
    """Failures of one invocation: [(category, detail, where)]."""
    fails = []
    err_lines = [ln for ln in res["stderr"].splitlines() if ln.strip()]
    if res["hung"]:
        return [("hang", f"no exit after {CLI_TIMEOUT_S:g} s", "")]
    if res["exc"] is not None:
        x = res["exc"]
        cat = "launched" if isinstance(x, Launched) else "traceback"
        return [(cat, f"{type(x).__name__}: {x}", res["where"])]
    if "Traceback (most recent call last)" in res["stderr"] or "Traceback" in res["stdout"]:
        last = err_lines[-1] if err_lines else ""
        return [("traceback", f"printed traceback: {last}", "stderr")]
    rc = res["rc"]
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    if imported:
        fails.append(("imported-data-code", f"imported {imported} named in a data file", ""))
    if rc == 2:
        if len(err_lines) != 1 or not err_lines[0].startswith("error:"):
            shown = " | ".join(err_lines[:4])[:240]
            fails.append(("malformed-error", f"exit 2 with {len(err_lines)} stderr line(s): {shown}", c.cmd))
        if changed:
            fails.append(("wrote-on-error", f"exit 2 but changed {changed[:3]}", c.cmd))
    elif rc == 0:
        if c.bad:
            fails.append(("accepted-bad", f"exit 0 with {', '.join(c.bad)}", c.cmd + " " + c.bad[0].split("=")[0]))
        if "--json" in c.argv and c.cmd in JSON_CMDS:
            try:
                _strict_json(res["stdout"])
            except ValueError as x:
                fails.append(("non-json-output", f"--json printed invalid JSON ({x})", c.cmd))
        if c.cmd == "fit" and c.out is not None:
            out_rel = os.path.relpath(c.out, sandbox)
            outside = [k for k in changed if not (k == out_rel or k.startswith(out_rel + os.sep)
                                                  or out_rel.startswith(k + os.sep))]
            if outside:
                fails.append(("wrote-outside-out", f"fit wrote {outside[:3]} outside --out {out_rel}", "fit"))
            for k in changed:
                if k.endswith(".json") and (sandbox / k).is_file():
                    try:
                        _strict_json((sandbox / k).read_text())
                    except ValueError as x:
                        fails.append(("non-finite-model", f"fit wrote {k}: {x}", "fit"))
    else:
        fails.append(("bad-exit", f"exit status {rc!r}: {' | '.join(err_lines[-2:])[:240]}", c.cmd))
    return fails


def _sandbox() -> Path:
    s = Path(tempfile.mkdtemp(prefix="autotuner-fuzz-cli-"))
    shutil.copytree(ROOT / "autotuner" / "models", s / "model")
    shutil.copytree(ROOT / "runs", s / "runs", symlinks=True)
    (s / "cases").mkdir()
    return s


def cli_case(seed: int, i: int, sandbox: Path) -> tuple[Case, dict, list[tuple]]:
    """Build and run CLI case ``i`` in ``sandbox`` (cwd). Returns (case, result, failures)."""
    rng = random.Random(f"{seed}:cli:{i}")
    cmd = _pick(rng, COMMANDS)
    c = Case(rng, sandbox / "cases" / str(i), cmd=cmd)
    shutil.rmtree(c.dir, ignore_errors=True)
    c.dir.mkdir(parents=True)
    if cmd != "usage":
        c.argv.append(cmd)
    COMMANDS[cmd][0](c)
    before = _snapshot(sandbox)
    cwd = os.getcwd()
    os.chdir(sandbox)
    try:
        allowed = tuple(a for a in c.argv if ":" in a)  # --model pkg.mod:factory on the command line may import
        with import_guard(allowed) as imported:
            res = invoke(c.argv, allow_launch=cmd not in ("validate", "measure", "profile", "ddp"))
    finally:
        os.chdir(cwd)
    after = _snapshot(sandbox)
    return c, res, _classify(c, res, before, after, sandbox, imported)


def run_cli(n: int, seed: int = 0, keep: bool = False, progress: bool = False) -> Report:
    """Run CLI cases 0..n-1 in a fresh sandbox; failing cases' folders are kept (and the sandbox
    is left in place) so that their reproducers can be run."""
    rep = Report("cli")
    t0 = time.perf_counter()
    sandbox = _sandbox()
    try:
        for i in range(n):
            c, res, fails = cli_case(seed, i, sandbox)
            rep.counts["total"] += 1
            rep.counts[f"kind:{c.cmd}"] += 1
            rc = res["rc"]
            if not fails:
                rep.counts["success" if rc == 0 else "clean-error"] += 1
                shutil.rmtree(c.dir, ignore_errors=True)
            else:
                for cat, detail, where in fails:
                    rep.counts[cat] += 1
                    repro = (f"cd {shlex.quote(str(sandbox))} && python -m autotuner.cli "
                             f"{' '.join(shlex.quote(a) for a in c.argv)}   # or: python tests/fuzz/harness.py "
                             f"--cli-case {i} --seed {seed}")
                    rep.failures.append(Failure(cat, c.cmd, i, detail, where, repro))
            if progress and (i + 1) % 100 == 0:
                print(f"  cli {i + 1}/{n} ({time.perf_counter() - t0:.0f} s, {rep.n_failures} failures)",
                      file=sys.stderr, flush=True)
    finally:
        if rep.failures or keep:
            rep.counts["sandbox kept"] = 1
            print(f"CLI sandbox (reproducers run here): {sandbox}", file=sys.stderr)
        else:
            shutil.rmtree(sandbox, ignore_errors=True)
    rep.seconds = time.perf_counter() - t0
    return rep


# =========================================================================== main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", type=int, default=0, help="CLI invocations")
    ap.add_argument("--readers", type=int, default=0, help="reader inputs")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cli-case", type=int, help="run one CLI case and show it")
    ap.add_argument("--reader-case", type=int, help="run one reader case and show it")
    ap.add_argument("--save", type=Path, default=None, help="folder for failing reader inputs")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    os.chdir(ROOT)
    if a.cli_case is not None:
        sandbox = _sandbox()
        c, res, fails = cli_case(a.seed, a.cli_case, sandbox)
        print(f"cd {shlex.quote(str(sandbox))} && python -m autotuner.cli {' '.join(shlex.quote(x) for x in c.argv)}")
        print(f"exit {res['rc']}, hung {res['hung']}, certainly-wrong values: {c.bad}")
        print("--- stdout\n" + res["stdout"][-3000:] + "--- stderr\n" + res["stderr"][-3000:] + res["tb"])
        for f in fails:
            print("FAIL", *f)
        return 1 if fails else 0
    if a.reader_case is not None:
        with tempfile.TemporaryDirectory() as t:
            kind, outcome, detail, where, inp = reader_case(a.seed, a.reader_case, Path(t))
        print(f"{kind}: {outcome} {detail or ''} {where}")
        print("--- input (first 3000 chars)\n" + (inp if isinstance(inp, str) else repr(inp))[:3000])
        return 1 if outcome in READER_FAILURES else 0
    failed = 0
    if a.cli:
        rep = run_cli(a.cli, a.seed, progress=not a.quiet)
        print(rep.summary(), flush=True)
        failed += rep.n_failures
    if a.readers:
        rep = run_readers(a.readers, a.seed, save=a.save, progress=not a.quiet)
        print(rep.summary(), flush=True)
        failed += rep.n_failures
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
