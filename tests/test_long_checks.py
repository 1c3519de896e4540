"""The long real-run checks (tests marked ``long``), which README command 2 leaves out: ``scripts/long_checks.py``
runs them and appends their outcomes to the committed ``tests/records/long-checks.jsonl``; this module reads that
record (it starts no job)."""
import importlib.util
import subprocess
import sys

from cli_helpers import ROOT

_spec = importlib.util.spec_from_file_location("long_checks", ROOT / "scripts" / "long_checks.py")
LC = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(LC)


def test_every_long_check_passed_on_the_current_tree():
    """Every test marked ``long`` has a newest record that passed on this very tree: the package, the tests and
    their helpers, ``conftest.py`` and ``pyproject.toml`` as they are (:func:`long_checks.tree_sha256`). Any change
    there fails here until ``python scripts/long_checks.py`` runs the long checks again."""
    found = LC.long_tests(ROOT / "tests")
    assert len(found) >= 7, found  # the seven long checks the record began with
    tree = LC.tree_sha256(ROOT)
    newest = {r["test"]: r for r in LC.read_record(LC.RECORD)}
    stale = {t: newest.get(t, {}).get("outcome", "no record") for t in found
             if t not in newest or newest[t]["outcome"] != "passed" or newest[t].get("tree_sha256") != tree}
    assert not stale, (f"the long checks' record is not of this tree ({tree[:12]}): run `python scripts/long_checks.py` "
                       f"(as root, Horovod built): {stale}")
    for t in found:
        assert newest[t]["commit"] and newest[t]["seconds"] > 0 and newest[t]["cores"] >= 1


def test_the_tree_key_covers_the_package_the_tests_and_their_helpers_but_not_the_record(tmp_path):
    """A one-line change to a package module, a test helper or conftest.py changes the key; the record does not."""
    import shutil

    names = LC.tree_files(ROOT)
    for must in ("autotuner/frameworks/horovod/measure.py", "tests/conftest.py", "tests/cli_helpers.py",
                 "tests/test_long_checks.py", "pyproject.toml"):
        assert must in names, must
    assert not any(n.startswith("tests/records/") for n in names)
    copy = tmp_path / "tree"
    for n in names:
        (copy / n).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / n, copy / n)
    before = LC.tree_sha256(copy)
    assert before == LC.tree_sha256(copy)
    (copy / "tests" / "records").mkdir(exist_ok=True)
    (copy / "tests" / "records" / "long-checks.jsonl").write_text('{"test": "x"}\n')
    assert LC.tree_sha256(copy) == before
    for n in ("autotuner/frameworks/horovod/measure.py", "tests/conftest.py"):
        f = copy / n
        text = f.read_text()
        f.write_text(text + "\n# one line\n")
        assert LC.tree_sha256(copy) != before, n
        f.write_text(text)
    assert LC.tree_sha256(copy) == before


def test_the_scan_finds_decorated_and_module_wide_marks(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text(
        "import pytest\n\n@pytest.mark.real\n@pytest.mark.long\ndef test_one():\n    pass\n\n"
        "def test_two():\n    pass\n")
    (tmp_path / "tests" / "test_b.py").write_text(
        "import pytest\npytestmark = [pytest.mark.real, pytest.mark.long]\n\ndef test_three():\n    pass\n")
    found = LC.long_tests(tmp_path / "tests")
    assert sorted(found) == ["tests/test_a.py::test_one", "tests/test_b.py::test_three"]
    before = found["tests/test_a.py::test_one"]
    (tmp_path / "tests" / "test_a.py").write_text(
        "import pytest\n\n@pytest.mark.real\n@pytest.mark.long\ndef test_one():\n    assert 1\n")
    assert LC.long_tests(tmp_path / "tests")["tests/test_a.py::test_one"] != before


def test_bad_arguments_are_one_line_and_exit_2(tmp_path):
    bad_json = tmp_path / "r.jsonl"
    bad_json.write_text('{"test": "x"}\nnot json\n')
    for args in (["--record", str(tmp_path / "no" / "r.jsonl")], ["--bogus"], ["--record", str(bad_json)]):
        p = subprocess.run([sys.executable, str(ROOT / "scripts" / "long_checks.py"), *args], cwd=ROOT,
                           capture_output=True, text=True, timeout=60, check=False)
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, (args, p.stderr)
