"""Run the long real-run checks (tests marked ``long``) and append their outcomes to a committed record.

README command 2 (what ``.ci/run`` runs) leaves out the tests marked ``long``: each starts real ``horovodrun`` /
``torchrun`` jobs for 40 s to 6.5 min on this project's 2-core CI machines (``pytest -m real
--durations=0``: the all-phases ``measure`` 379 s, ``validate --timeline`` 96 s, a killed ``tune`` resumed 86 s, the
two-host ``measure`` 74 s and ``validate`` 65 s, the hierarchical flags on Gloo 51 s, the page-fault probe 39 s;
together 13 of the suite's 22 minutes of real runs). Long real-run checks run from this script, whose
record is committed and read by a test, while the command keeps the short real jobs.

It runs ``python -m pytest -q -p no:cacheprovider -m long`` (one process: these tests take the machine to
themselves, as under xdist) with a JUnit XML report, and appends one JSON line per test to the record
(``tests/records/long-checks.jsonl`` unless ``--record``; rewritten whole through a temporary file and a rename, so
a killed run loses nothing already recorded):

``{"test": node id, "outcome": "passed" | "failed" | "error" | "skipped", "seconds": float (the test's own time,
s), "tree_sha256": hex digest of everything a long check exercises (:func:`tree_sha256`: the package, the tests
with their fixtures, helpers and ``conftest.py``, and ``pyproject.toml``), "source_sha256": hex digest of the
test function's source (``ast.unparse`` of its definition, decorators included), "commit": the checkout's HEAD,
"tree_clean": whether tracked files matched it, "date": UTC ISO 8601, "cores": os.cpu_count(), "python": version}``

``tests/test_long_checks.py`` (in README command 2) reads it: every test marked ``long`` needs a newest record that
passed on the current tree (the same :func:`tree_sha256`); a change anywhere in ``autotuner/``, ``tests/`` (but
this record) or ``pyproject.toml`` fails there until this script is run again.

Usage: ``python scripts/long_checks.py [--record FILE] [-k EXPR]`` (as root, with Horovod built: the two-host tests
create network namespaces). Exit status: pytest's (0 when every check passed); 2 with one line on bad arguments.
"""
from __future__ import annotations

import argparse
import ast
import datetime as dt
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "tests" / "records" / "long-checks.jsonl"


def _is_long_mark(node: ast.expr) -> bool:
    """``pytest.mark.long`` (a decorator, or an item of a module's ``pytestmark`` list)."""
    return (isinstance(node, ast.Attribute) and node.attr == "long" and isinstance(node.value, ast.Attribute)
            and node.value.attr == "mark")


def long_tests(tests_dir: Path = ROOT / "tests") -> dict[str, str]:
    """Every test function marked ``long`` under ``tests_dir`` (files ``test_*.py``): ``{node id ("tests/FILE.py::
    NAME"): sha256 hex of ast.unparse(its definition)}``. Read from the source, not by pytest's collection (which
    costs ~40 s here); a module-wide ``pytestmark`` holding ``pytest.mark.long`` marks every test in it."""
    found: dict[str, str] = {}
    for path in sorted(tests_dir.glob("test_*.py")):
        tree = ast.parse(path.read_text(), str(path))
        module_long = any(
            isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in n.targets)
            and any(_is_long_mark(e) for e in ([n.value] if not isinstance(n.value, (ast.List, ast.Tuple))
                                                else n.value.elts))
            for n in tree.body)
        for n in tree.body:
            if isinstance(n, ast.FunctionDef) and n.name.startswith("test_") and (
                    module_long or any(_is_long_mark(d) for d in n.decorator_list)):
                node_id = f"{path.relative_to(tests_dir.parent).as_posix()}::{n.name}"
                found[node_id] = hashlib.sha256(ast.unparse(n).encode()).hexdigest()
    return found


#: what a long check exercises, relative to the repository's root: the package, the tests (fixtures, helpers,
#: conftest.py and committed test data) and the project's dependencies; the record itself is left out
TREE_PARTS = ("autotuner", "tests", "pyproject.toml")
TREE_EXCLUDED = ("tests/records/",)


def tree_files(root: Path = ROOT) -> list[str]:
    """The files :func:`tree_sha256` covers, relative to ``root`` (POSIX, sorted): git's tracked files under
    :data:`TREE_PARTS` (so caches and a test's scratch files never count), less :data:`TREE_EXCLUDED`; where
    ``root`` is not a git checkout, every file under those parts but ``__pycache__``."""
    p = subprocess.run(["git", "ls-files", "-z", "--", *TREE_PARTS], cwd=root, capture_output=True, check=False)
    if p.returncode == 0 and p.stdout:
        names = [n for n in p.stdout.decode().split("\0") if n]
    else:
        names = [f.relative_to(root).as_posix() for part in TREE_PARTS for f in
                 ([root / part] if (root / part).is_file() else sorted((root / part).rglob("*")))
                 if f.is_file() and "__pycache__" not in f.parts]
    return sorted(n for n in names if not n.startswith(TREE_EXCLUDED) and (root / n).is_file())


def tree_sha256(root: Path = ROOT) -> str:
    """sha256 over :func:`tree_files`: each file's path and the sha256 of its content as it is on disk (an edit
    not yet committed counts)."""
    h = hashlib.sha256()
    for name in tree_files(root):
        h.update(name.encode() + b"\0" + hashlib.sha256((root / name).read_bytes()).digest())
    return h.hexdigest()


def read_record(path: Path) -> list[dict]:
    """The record's lines as dicts, oldest first; ``[]`` if the file does not exist. Raises ValueError naming the
    line that is not a JSON object."""
    if not path.exists():
        return []
    rows = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{i}: not JSON ({e.msg})") from None
            if not isinstance(row, dict) or "test" not in row:
                raise ValueError(f"{path}:{i}: not a record of one test")
            rows.append(row)
    return rows


def _junit_outcomes(xml_path: Path) -> list[tuple[str, str, float]]:
    """``(node id, outcome, seconds)`` per test case of pytest's JUnit XML (``classname`` "tests.test_x")."""
    out = []
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        node_id = case.get("classname", "").replace(".", "/") + ".py::" + case.get("name", "")
        kinds = {child.tag for child in case}
        outcome = ("failed" if "failure" in kinds else "error" if "error" in kinds
                   else "skipped" if "skipped" in kinds else "passed")
        out.append((node_id, outcome, float(case.get("time", "0"))))
    return out


def _git(*args: str) -> str:
    p = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    return p.stdout.strip() if p.returncode == 0 else ""


def _append(path: Path, rows: list[dict]) -> None:
    """Append ``rows`` to the JSON-lines file ``path`` atomically: the whole file rewritten by the project's
    :func:`autotuner.writers.atomic.atomic_write_text` (a temporary file beside it, fsync, rename)."""
    from autotuner.writers.atomic import atomic_write_text

    old = path.read_text() if path.exists() else ""
    if old and not old.endswith("\n"):
        old += "\n"
    atomic_write_text(path, old + "".join(json.dumps(r) + "\n" for r in rows))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--record", type=Path, default=RECORD, help="the JSON-lines record to append to")
    ap.add_argument("-k", dest="keyword", default=None, help="pytest's -k: run only the long checks it selects")
    ap.error = lambda msg: (print(f"error: {msg}", file=sys.stderr), sys.exit(2))  # one line, exit 2
    a = ap.parse_args(argv)
    if not a.record.parent.is_dir():
        print(f"error: --record: folder {a.record.parent} does not exist", file=sys.stderr)
        return 2
    try:
        read_record(a.record)
    except (ValueError, OSError) as e:
        print(f"error: --record: {e}", file=sys.stderr)
        return 2
    sources = long_tests()
    tree = tree_sha256()
    commit, clean = _git("rev-parse", "HEAD"), _git("status", "--porcelain", "--untracked-files=no") == ""
    with tempfile.TemporaryDirectory() as tmp:
        xml_path = Path(tmp) / "long.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "long",
               f"--junitxml={xml_path}"] + (["-k", a.keyword] if a.keyword else [])
        rc = subprocess.run(cmd, cwd=ROOT, check=False).returncode
        cases = _junit_outcomes(xml_path) if xml_path.exists() else []
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    if tree_sha256() != tree:
        print("error: autotuner/, tests/ or pyproject.toml changed while the long checks ran: run them again",
              file=sys.stderr)
        return 1
    rows = [{"test": node_id, "outcome": outcome, "seconds": round(seconds, 2), "tree_sha256": tree,
             "source_sha256": sources.get(node_id.split("[", 1)[0]), "commit": commit, "tree_clean": clean,
             "date": now, "cores": os.cpu_count(), "python": platform.python_version()}
            for node_id, outcome, seconds in cases]
    if rows:
        _append(a.record, rows)
    for r in rows:
        print(f"{r['outcome']:>7}  {r['seconds']:7.1f} s  {r['test']}")
    print(f"{len(rows)} record(s) appended to {a.record}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
