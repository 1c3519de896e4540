"""The shaped-network testbed for real (root, iproute2): namespaces appear, shape lo, and always go away."""
import os
import selectors
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from autotuner.realrun import testbed as tb
from tests.cli_helpers import need

ROOT = Path(__file__).resolve().parents[1]
ROOT_DIR = str(ROOT)

pytestmark = [pytest.mark.real]


@pytest.fixture(autouse=True)
def _root_and_iproute2():
    """Network namespaces need root and iproute2 (ip, tc): skipped without them, failed under CI."""
    need("root", "iproute2")

# Children import the testbed package alone (stdlib only, ~20 ms: `autotuner` itself imports nothing eagerly).
LOAD = f"""
import importlib.util, sys, time
sys.path.insert(0, {ROOT_DIR!r})
from autotuner.realrun import testbed as tb
"""
# SIGINT is reset because a shell starts background jobs with it ignored, and the child would inherit that.
HOLD = LOAD + """
import signal
signal.signal(signal.SIGINT, signal.default_int_handler)
with tb.shaped_network(1.0) as bed:
    print(bed.netns, flush=True)
    time.sleep(60)
"""


@pytest.fixture
def owner_pids():
    """Pids whose autotuner-<pid>-* namespaces this test may create; all of them are deleted at teardown."""
    pids = {os.getpid()}
    yield pids
    for name in tb.list_namespaces():
        m = tb._NAME_RE.match(name)
        if m and int(m.group(1)) in pids:
            subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=10)


def best_gbit(probe, floor: float, tries: int = 3) -> list[float]:
    """Up to ``tries`` readings of ``probe()`` (Gbit/s), stopping at the first above ``floor``.

    A link's rate is the most it carries: a test worker beside the probe on this machine's 2 cores only takes
    throughput away (the CI run of 839e91b read 0.394 Gbit/s through a 500 mbit HTB class that reads ~0.47
    alone), never adds it. So a test asserts its floor on the best reading and its ceiling (the shaping) on
    every one."""
    got: list[float] = []
    while len(got) < tries and (not got or max(got) <= floor):
        got.append(probe())
    return got


def start_holder(owner_pids, code=HOLD, preexec=()):
    proc = subprocess.Popen([*preexec, sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    owner_pids.add(proc.pid)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(timeout=15):
        proc.kill()
        pytest.fail("child printed no namespace name within 15 s")
    name = proc.stdout.readline().strip()
    assert name.startswith(f"autotuner-{proc.pid}-"), (name, proc.stderr.read() if proc.poll() is not None else "")
    assert name in tb.list_namespaces()
    return proc, name


def test_shaped_success_path(owner_pids):
    with tb.shaped_network(1.0) as bed:
        assert bed.shaped and bed.bandwidth_gbit == 1.0
        assert bed.prefix == ("ip", "netns", "exec", bed.netns)
        assert bed.netns.startswith(f"autotuner-{os.getpid()}-")
        assert bed.netns in tb.list_namespaces()
        assert "1 Gbit/s HTB" in bed.note and bed.netns in bed.note
        shown = subprocess.run(bed.wrap(["tc", "class", "show", "dev", "lo"]), capture_output=True, text=True,
                               timeout=10, check=True).stdout
        assert "htb 1:10" in shown and "rate 1Gbit" in shown and "ceil 1Gbit" in shown
        got = best_gbit(lambda: tb.measure_bandwidth_gbit(bed), 0.8)
        assert max(got) >= 0.8 and all(g <= 1.1 for g in got), got
        # the host's own lo is untouched
        host = subprocess.run(["tc", "class", "show", "dev", "lo"], capture_output=True, text=True, timeout=10)
        assert "rate 1Gbit" not in host.stdout
    assert bed.netns not in tb.list_namespaces()


def test_half_gbit_is_shaped_too(owner_pids):
    with tb.shaped_network(0.5) as bed:
        got = best_gbit(lambda: tb.measure_bandwidth_gbit(bed, max_seconds=0.5), 0.4)
        assert max(got) >= 0.4 and all(g <= 0.55 for g in got), got


def test_no_bandwidth_is_plain_loopback():
    with tb.shaped_network(None) as bed:
        assert bed == tb.Testbed((), None, False, bed.note) and "plain loopback" in bed.note
        got = best_gbit(lambda: tb.measure_bandwidth_gbit(bed, max_seconds=0.3), 1.1)
        assert max(got) > 1.1, got  # unshaped lo is far faster than 1 Gbit/s


def test_rate_strings_and_bad_input():
    assert tb.htb_rate(1.0) == "1000mbit" and tb.htb_rate(0.5) == "500mbit" and tb.htb_rate(0.0123456) == "12346kbit"
    for bad in (0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError):
            with tb.shaped_network(bad):
                pass
    with pytest.raises(ValueError):
        with tb.shaped_network(1.0, name="a/b"):
            pass


def test_exception_in_body_removes_namespace(owner_pids):
    with pytest.raises(RuntimeError, match="boom"):
        with tb.shaped_network(1.0) as bed:
            assert bed.netns in tb.list_namespaces()
            raise RuntimeError("boom")
    assert bed.netns not in tb.list_namespaces()


def test_sigterm_handler_is_restored(owner_pids):
    before = signal.getsignal(signal.SIGTERM)
    with tb.shaped_network(1.0):
        assert signal.getsignal(signal.SIGTERM) is tb._raise_exit
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.parametrize("sig, returncode", [(signal.SIGINT, -signal.SIGINT), (signal.SIGTERM, 128 + signal.SIGTERM)])
def test_signal_removes_namespace(owner_pids, sig, returncode):
    proc, name = start_holder(owner_pids)
    proc.send_signal(sig)
    assert proc.wait(timeout=10) == returncode, proc.stderr.read()
    assert name not in tb.list_namespaces()


def test_sigkill_leaves_namespace_that_cleanup_stale_removes(owner_pids):
    proc, name = start_holder(owner_pids)
    proc.kill()
    proc.wait(timeout=10)
    assert name in tb.list_namespaces()  # SIGKILL cannot be caught
    assert name in tb.cleanup_stale()
    assert name not in tb.list_namespaces()


def test_cleanup_stale_spares_live_owners(owner_pids):
    with tb.shaped_network(1.0) as bed:
        assert bed.netns not in tb.cleanup_stale()
        assert bed.netns in tb.list_namespaces()


def test_injected_check_falls_back(owner_pids):
    before = tb.list_namespaces()
    with tb.shaped_network(1.0, check=lambda: "not root (pretend)") as bed:
        assert (bed.prefix, bed.shaped, bed.bandwidth_gbit, bed.netns) == ((), False, None, None)
        assert bed.note.startswith("not root (pretend): plain loopback, no shaping")
    assert tb.list_namespaces() == before


def test_failed_create_falls_back_and_leaves_foreign_namespace(owner_pids):
    with tb.shaped_network(1.0) as other:
        with tb.shaped_network(1.0, name=other.netns) as bed:  # name taken: `ip netns add` fails
            assert not bed.shaped and bed.prefix == () and f"could not build netns {other.netns}" in bed.note
        assert other.netns in tb.list_namespaces()  # not ours to delete


NOBODY = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")


@pytest.fixture
def readable_package():
    """The modules the nobody child imports (the testbed package and what ``import autotuner`` runs: stdlib only),
    copied to a folder nobody can read: a clone in ``mktemp -d`` (mode 0700) is not, and the child would fail
    to import ``autotuner`` for a reason that is not the test's."""
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="autotuner-nobody-"))
    try:
        for rel in ["autotuner/__init__.py", "autotuner/_sigint.py", "autotuner/realrun/__init__.py",
                    *(str(f.relative_to(ROOT)) for f in sorted((ROOT / "autotuner" / "realrun" / "testbed").glob("*.py")))]:
            (d / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / rel, d / rel)
        for q in [d, *d.rglob("*")]:
            q.chmod(0o755 if q.is_dir() else 0o644)
        yield str(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_unprivileged_user_falls_back_for_real(owner_pids, readable_package):
    need("setpriv")  # to drop to nobody
    code = LOAD.replace(repr(ROOT_DIR), repr(readable_package)) + """
import os
assert os.geteuid() == 65534
with tb.shaped_network(1.0) as bed:                          # default check: not root
    print(bed.shaped, bed.prefix, bed.note, sep="|")
with tb.shaped_network(1.0, check=lambda: None) as bed:      # pretend allowed: `ip netns add` itself fails
    print(bed.shaped, bed.prefix, bed.note, sep="|")
"""
    out = subprocess.run([*NOBODY, sys.executable, "-c", code], capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.splitlines()
    assert first == "False|()|not root (euid 65534): plain loopback, no shaping (1 Gbit/s asked)"
    assert second.startswith("False|()|could not build netns autotuner-") and "ip netns add" in second
    assert "plain loopback, no shaping" in second
