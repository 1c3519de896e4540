"""Short, seeded run of the fuzz harness (tests/fuzz/harness.py): the CI version of the
full fuzz run (the full run is ``python tests/fuzz/harness.py --cli 2000 --readers 10000 --seed 0``).

On failure the message lists each distinct failure with its exception, where it was raised and
a reproducer (``python tests/fuzz/harness.py --cli-case I --seed 0`` replays one case).
"""
from pathlib import Path

import pytest

from tests.cli_helpers import fuzz_harness

_PATH = Path(__file__).resolve().parent / "fuzz" / "harness.py"


@pytest.fixture(autouse=True)
def _cwd(monkeypatch):
    monkeypatch.chdir(_PATH.parents[2])


def test_cli_fuzz_short():
    rep = fuzz_harness().run_cli(50, seed=0)
    assert rep.counts["total"] == 50
    assert rep.n_failures == 0, rep.summary()


def test_reader_fuzz_short():
    rep = fuzz_harness().run_readers(500, seed=0)
    assert rep.counts["total"] == 500
    assert rep.n_failures == 0, rep.summary()


def test_fuzz_cases_replay_identically(tmp_path):
    """A case is a function of (seed, index): the reproducer printed for a failure replays it."""
    h = fuzz_harness()
    a = [h.reader_case(0, i, tmp_path / "a")[::2] for i in range(20)]
    b = [h.reader_case(0, i, tmp_path / "b")[::2] for i in range(20)]
    assert [x[0] for x in a] == [x[0] for x in b] and [x[2] for x in a] == [x[2] for x in b]
