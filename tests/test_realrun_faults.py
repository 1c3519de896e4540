"""Jobs die with their parent: on a normal end, a timeout, an exception, Ctrl-C, SIGTERM and SIGKILL.

Every test marks the processes it starts with a unique value of ``AUTOTUNER_TEST_MARK`` in their environment (which
every descendant inherits, Horovod's ranks included) and asserts that none is left, looking in /proc.
"""
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from autotuner.realrun import testbed as tb
from autotuner.realrun.launcher import run_argv
from tests.cli_helpers import need, need_horovod

ROOT = Path(__file__).resolve().parents[1]
TINY = str(Path(__file__).parent / "data" / "tiny_layout.json")
MARK = "AUTOTUNER_TEST_MARK"

pytestmark = [pytest.mark.real]


@pytest.fixture(autouse=True)
def _proc():
    """What is left running is read from /proc: skipped without it, failed under CI."""
    need("Linux /proc")

# A job whose root starts a child in its process group and one in a session of its own (as Horovod's middlemen
# are), then sleeps argv[1] seconds.  Each of the three command lines holds "sleep(121)".
TREE = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(121)"])
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(121)"], start_new_session=True)
time.sleep(float(sys.argv[1]))
"""


def marked(mark: str) -> list[str]:
    """``pid cmdline`` of every live (not zombie) process carrying ``MARK=mark``."""
    entry = f"{MARK}={mark}".encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X"):
                    continue
            with open(f"/proc/{name}/environ", "rb") as f:
                if entry not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{name} {cmdline[:200]}")
        except (OSError, IndexError):
            pass
    return found


def wait_until(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.1)


def left_after(mark: str, timeout_s: float = 15.0) -> list[str]:
    """What still carries ``mark`` after ``timeout_s`` seconds ([] as soon as nothing does)."""
    deadline = time.monotonic() + timeout_s
    while (left := marked(mark)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@pytest.fixture
def mark():
    """A unique mark; whatever still carries it at teardown is SIGKILLed, so a failure leaves nothing behind."""
    m = uuid.uuid4().hex
    yield m
    for line in marked(m):
        try:
            os.kill(int(line.split()[0]), signal.SIGKILL)
        except OSError:
            pass


def env_with(mark: str) -> dict[str, str]:
    return {**os.environ, MARK: mark, "PYTHONPATH": str(ROOT)}


def test_normal_end_kills_what_the_job_left_behind(mark):
    res = run_argv([sys.executable, "-c", TREE + "print('done')", "0"], 60, env=env_with(mark))
    assert (res.returncode, res.timed_out, res.stdout) == (0, False, "done\n")
    assert res.wall_s < 30  # the job ends with its root, not when its leftovers close the output pipes
    assert marked(mark) == []


def test_timeout_kills_the_whole_job(mark):
    res = run_argv([sys.executable, "-c", TREE, "120"], 1.5, env=env_with(mark))
    assert res.timed_out and res.returncode == -signal.SIGTERM
    assert marked(mark) == []


def test_exception_in_the_parent_kills_the_whole_job(mark):
    class Boom(Exception):
        pass

    def boom(signum, frame):
        raise Boom

    old = signal.signal(signal.SIGALRM, boom)
    signal.setitimer(signal.ITIMER_REAL, 1.5)
    try:
        with pytest.raises(Boom):
            run_argv([sys.executable, "-c", TREE, "120"], 60, env=env_with(mark))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert marked(mark) == []


def test_a_wait_lock_left_held_by_an_interrupted_wait_does_not_hang_the_cleanup(mark):
    """CPython's ``Popen.wait(timeout)`` takes its ``_waitpid_lock`` before its ``try``: an exception from a signal
    handler landing between the two leaves it held, and a later plain ``wait()`` blocks for ever (a fresh-clone CI
    run hung so in the test above). The lock held by hand stands for that moment: the job still ends, is reaped
    and leaves nothing behind, within the grace period."""
    from autotuner.realrun.launcher import OwnedProcess, reap

    t0 = time.monotonic()
    with OwnedProcess([sys.executable, "-c", TREE, "120"], env=env_with(mark), grace_s=1.0) as job:
        assert job.proc._waitpid_lock.acquire(False)  # what the interrupted wait(timeout) left behind
        time.sleep(0.5)
    assert job.proc.returncode is not None and time.monotonic() - t0 < 30
    assert marked(mark) == []
    quick = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    assert quick._waitpid_lock.acquire(False)
    assert reap(quick, 1.0) == 3


def test_output_is_kept_and_bad_utf8_does_not_raise(mark):
    code = "import sys; sys.stdout.buffer.write(b'ok \\xff\\n'); sys.stderr.write('e' * 200000)"
    res = run_argv([sys.executable, "-c", code], 60, env=env_with(mark))
    assert res.returncode == 0 and res.stdout == "ok \ufffd\n" and res.stderr == "e" * 200000


def test_an_escaped_process_holding_the_output_does_not_hang_the_parent(mark):
    """The documented escape (new session and a cleared environment) survives, but run_argv still returns."""
    tag = uuid.uuid4().hex
    code = ("import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', "
            f"'{tag}'], env={{}}, start_new_session=True); print('root done')")
    t0 = time.monotonic()
    try:
        res = run_argv([sys.executable, "-c", code], 60, env=env_with(mark))
        assert res.returncode == 0 and res.stdout == "root done\n" and time.monotonic() - t0 < 20
        assert marked(mark) == []
    finally:
        for name in os.listdir("/proc"):
            try:
                if name.isdigit() and tag.encode() in open(f"/proc/{name}/cmdline", "rb").read():
                    os.kill(int(name), signal.SIGKILL)
            except OSError:
                pass


def test_a_missing_program_raises_and_starts_nothing(mark):
    with pytest.raises(FileNotFoundError):
        run_argv(["/nonexistent/horovodrun"], 5, env=env_with(mark))
    assert marked(mark) == []


# The parent: runs a job with run_argv (SIGINT reset: a shell starts background jobs with it ignored).
PARENT = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
if sys.argv[1] == "sigterm-as-exit":  # what `autotuner validate` does (api._sigterm_as_exit)
    def handler(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, handler)
from autotuner.realrun.launcher import run_argv
run_argv([sys.executable, "-c", sys.argv[2], "120"], 120)
"""


@pytest.mark.parametrize("how", ["sigint", "sigterm-as-exit", "sigterm", "sigkill"])
def test_the_job_dies_with_its_parent(mark, how):
    parent = subprocess.Popen([sys.executable, "-c", PARENT, how, TREE], env=env_with(mark),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: sum("sleep(121)" in p for p in marked(mark)) == 3, 30, "the job's three processes")
    sig = {"sigint": signal.SIGINT, "sigkill": signal.SIGKILL}.get(how, signal.SIGTERM)
    parent.send_signal(sig)
    _, err = parent.communicate(timeout=30)
    assert parent.returncode != 0
    if how == "sigterm-as-exit":
        assert parent.returncode == 128 + signal.SIGTERM, err
    assert left_after(mark) == []  # the job, its two children and the guard


def test_die_with_parent_kills_a_plain_child(mark):
    """testbed's children (ip, tc, the bandwidth probe) get a parent-death SIGKILL."""
    code = ("import subprocess, sys, time; sys.path.insert(0, sys.argv[1]); "
            "from autotuner.realrun.testbed import die_with_parent; "
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(121)'], preexec_fn=die_with_parent()); "
            "time.sleep(120)")
    parent = subprocess.Popen([sys.executable, "-c", code, str(ROOT)], env=env_with(mark))
    wait_until(lambda: any("sleep(121)" in p and not p.startswith(f"{parent.pid} ") for p in marked(mark)), 30,
               "the child")
    parent.kill()
    parent.wait(timeout=10)
    assert left_after(mark, 5) == []


def _ranks(mark: str) -> int:
    return sum("autotuner.frameworks.horovod.replay" in p and "horovodrun" not in p and "/bin/sh" not in p
               for p in marked(mark))


HOROVOD_PARENT = f"""
from autotuner.frameworks.horovod.launch import Job, replay_command, run_job
run_job(Job(np=2, command=replay_command({TINY!r}, 20.0, 10000, 1)), 300)
"""


def test_sigkilled_parent_leaves_no_horovodrun_and_no_rank(mark):
    need_horovod()
    parent = subprocess.Popen([sys.executable, "-c", HOROVOD_PARENT], env=env_with(mark),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until(lambda: _ranks(mark) == 2, 90, "2 replay ranks under horovodrun")
    assert any("horovodrun" in p for p in marked(mark))
    parent.kill()
    parent.wait(timeout=10)
    assert left_after(mark) == []  # horovodrun, Horovod's middlemen and shells, both ranks, the guard


def test_sigkilled_validate_leaves_nothing_running(mark, tmp_path):
    """The issue's reproducer: ``autotuner validate`` SIGKILLed mid-trial (in the shaped testbed when root)."""
    need_horovod()
    proposals = tmp_path / "p.json"
    proposals.write_text('[{"fusion_threshold_mb": 1, "cycle_time_ms": 2}]')
    shaped = tb.why_not_shaped() is None
    argv = [sys.executable, "-m", "autotuner.cli", "validate", "--env", "ci-kill", "--model", TINY,
            "--compute-ms", "20", "--steps", "10000", "--warmup", "1", "--repeats", "1", "--no-autotune",
            "--proposals", str(proposals), "--runs-dir", str(tmp_path / "runs"), "--timeout", "300",
            *(["--link-gbit", "1"] if shaped else [])]
    validate = subprocess.Popen(argv, env=env_with(mark), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
    try:
        wait_until(lambda: _ranks(mark) == 2 or validate.poll() is not None, 90, "2 replay ranks")
        assert validate.poll() is None, validate.communicate()[1][-2000:]
        if shaped:  # the ranks run in the testbed's namespace
            here = os.readlink("/proc/self/ns/net")
            assert all(os.readlink(f"/proc/{p.split()[0]}/ns/net") != here
                       for p in marked(mark) if "autotuner.frameworks.horovod.replay" in p and "/bin/sh" not in p)
        validate.kill()
        validate.communicate(timeout=10)
        assert left_after(mark) == []
    finally:
        if shaped:  # a SIGKILL cannot run the namespace's cleanup; the next run's cleanup_stale does
            tb.cleanup_stale()
            assert not [n for n in tb.list_namespaces() if n.startswith(f"{tb.NETNS_PREFIX}-{validate.pid}-")]
