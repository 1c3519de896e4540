"""Ctrl-C at many moments of a command, as a user presses it: one line on stderr, exit 130.

For each command: time two uninterrupted runs (T: the faster; the first may run cold or on a loaded machine, and
moments spaced over a slow run fall after a faster one has finished), then start it again ``--moments`` times as
the ``autotuner`` program (the console script, as a user runs it) and send SIGINT at evenly spaced
moments from S (the program's first line: the imports) to 0.9 T (the last outputs). S is twice the
slowest of three starts of this Python with nothing to run (``python -c "import re, sys"``, the
console script's first line): before it the interpreter itself is starting (``site``, the
``.pth`` files), no line of the program has run and Python prints its own KeyboardInterrupt; that
window (~20-60 ms here) is reported, not tested. A moment passes
when the process ends with 130 and exactly one non-empty stderr line, without "Traceback"; a run
that ended before its signal (exit 0) is counted as "finished first", not as a pass.

    python scripts/ctrl_c_moments.py --moments 30              # fit, suggest, explore
    python scripts/ctrl_c_moments.py --commands fit --moments 10 --copies 1 --json   # the test's (~1 min on CI)

Used by tests/test_reproducers.py (fewer moments).
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def autotuner_program() -> list[str]:
    """The ``autotuner`` console script beside this Python (as installed by ``pip install -e .``)."""
    exe = Path(sys.executable).parent / "autotuner"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "autotuner.cli"]


def slow_runs(where: Path, copies: int = 8) -> Path:
    """``copies`` renamed copies of runs/local-gloo-1gbit: a ``fit`` of several seconds."""
    runs = where / "runs"
    for i in range(copies):
        d = runs / f"copy-{i}"
        shutil.copytree(ROOT / "runs" / "local-gloo-1gbit", d)
        toml = d / "env.toml"
        toml.write_text(toml.read_text().replace('name = "local-gloo-1gbit"', f'name = "copy-{i}"'))
    return runs


def commands(where: Path, copies: int = 8) -> dict[str, callable]:
    """name -> f(k) giving the k-th run's argv (its own output folder); ``fit`` fits ``copies`` copies of an env."""
    runs = slow_runs(where, copies)
    return {
        "fit": lambda k: ["fit", str(runs), "--out", str(where / f"fit-{k}")],
        "suggest": lambda k: ["suggest", "--model", "vgg16", "--json", "--strategy", "bayes"],
        "explore": lambda k: ["explore", "--model", "resnet50", "--resolution", "16", "--out", str(where / f"ex-{k}")],
    }


def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a background job inherits SIGINT ignored


def one(argv: list[str], delay: float | None) -> dict:
    """Run ``autotuner argv``; SIGINT after ``delay`` s (None: never). Returns rc, seconds, stderr lines."""
    t0 = time.monotonic()
    p = subprocess.Popen(autotuner_program() + argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, preexec_fn=_default_sigint)  # noqa: PLW1509
    try:
        if delay is not None:
            try:
                p.wait(timeout=delay)
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    ok = p.returncode == 130 and len(lines) == 1 and "Traceback" not in err
    if ok:
        verdict = "pass"
    elif p.returncode == 0:
        verdict = "finished first"
    elif before_the_program(err) or (p.returncode == -signal.SIGINT and not err.strip() and not out.strip()):
        # the second: killed by the signal with nothing written, before Python installed its own handler
        verdict = "python's own start"
    else:
        verdict = "FAIL"
    return {"delay_s": delay, "rc": p.returncode, "seconds": round(time.monotonic() - t0, 3),
            "stderr_lines": len(lines), "first_stderr": lines[0][:160] if lines else "", "verdict": verdict,
            # a failure keeps what it printed, so that a rare one can be read (the last 12 lines, 200 characters each)
            **({"stderr_tail": [ln[:200] for ln in lines[-12:]]} if verdict == "FAIL" else {})}


#: a traceback frame in the autotuner package (its own code has run)
_OUR_FRAME = re.compile(r'File "[^"]*[/\\]autotuner[/\\][^"]*\.py"')


def before_the_program(stderr: str) -> bool:
    """Whether a KeyboardInterrupt traceback was raised before any module of the autotuner package ran: Python's
    own start (``site``, the ``.pth`` files, the console script's first imports), which no program can catch
    (it has not started). Such a traceback names no file of the package."""
    return "KeyboardInterrupt" in stderr and not _OUR_FRAME.search(stderr)


def python_start_s() -> float:
    """The slowest of three starts of this Python running only the console script's first line (s)."""
    times = []
    for _ in range(3):
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-c", "import re, sys"], check=True)
        times.append(time.monotonic() - t0)
    return max(times)


def moments(name: str, argv_for, n: int) -> dict:
    fulls = [one(argv_for(f"full-{k}"), None) for k in range(2)]  # the first may be cold (caches), or slowed by load
    bad = [f for f in fulls if f["rc"] != 0]
    if bad:
        return {"command": name, "error": f"uninterrupted run failed: {bad[0]}"}
    t = min(f["seconds"] for f in fulls)
    start = 2 * python_start_s()
    delays = [start + (0.9 * t - start) * k / max(1, n - 1) for k in range(n)]
    runs = [one(argv_for(k), round(d, 3)) for k, d in enumerate(delays)]
    return {"command": name, "uninterrupted_s": t, "python_start_window_s": round(start, 3), "moments": runs,
            "passed": sum(r["verdict"] == "pass" for r in runs),
            "python_start": sum(r["verdict"] == "python's own start" for r in runs),
            "finished_first": sum(r["verdict"] == "finished first" for r in runs),
            "failed": sum(r["verdict"] == "FAIL" for r in runs)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--moments", type=int, default=30)
    ap.add_argument("--commands", default="fit,suggest,explore")
    ap.add_argument("--copies", type=int, default=8,
                    help="copies of runs/local-gloo-1gbit that fit reads (default 8: a fit of several seconds)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.copies < 1:
        print("error: --copies >= 1", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        cmds = commands(Path(tmp), a.copies)
        names = [c for c in a.commands.split(",") if c]
        bad = [c for c in names if c not in cmds]
        if bad or a.moments < 1:
            print(f"error: --commands from {', '.join(cmds)}; --moments >= 1", file=sys.stderr)
            return 2
        res = [moments(c, cmds[c], a.moments) for c in names]
    if a.json:
        print(json.dumps(res, indent=1))
    else:
        for r in res:
            if "error" in r:
                print(f"{r['command']}: {r['error']}")
                continue
            print(f"{r['command']}: {r['passed']} of {len(r['moments'])} moments one line + 130, "
                  f"{r['finished_first']} finished first, {r['python_start']} in Python's own start (before the "
                  f"program's first module: not catchable), {r['failed']} failed (uninterrupted {r['uninterrupted_s']:.1f} s; "
                  f"moments from {r['python_start_window_s']:.3f} s, after Python's own start)")
            for m in r["moments"]:
                if m["verdict"] == "FAIL":
                    print(f"  at {m['delay_s']} s: rc {m['rc']}, {m['stderr_lines']} lines: {m['first_stderr']}")
    return 0 if all(r.get("failed", 1) == 0 for r in res) else 1


if __name__ == "__main__":
    sys.exit(main())
