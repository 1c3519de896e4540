"""Start real jobs (``horovodrun``'s, :mod:`autotuner.frameworks.horovod.launch`; ``torchrun``'s,
:mod:`autotuner.frameworks.ddp.launch`): the only code in autotuner that runs training processes, and the testbed they
run on (:func:`testbed_for`).

Every command is an argument list (never a shell string). A job never outlives the process that started it
(:class:`OwnedProcess`): it runs in its own session, which is killed (SIGTERM, then SIGKILL) on every exit of
:func:`run_argv`; a guard process does the same if the parent dies without cleaning up (even by SIGKILL); and on
Linux horovodrun gets a parent-death SIGKILL. Horovod starts each rank under a middleman in a session of its
own (horovod/runner/common/util/safe_shell_exec.py), so the ranks are found by a token in their environment.
"""
from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from .testbed import die_with_parent


@dataclass(frozen=True)
class JobResult:
    """What a finished (or killed) job left: exit status, output, wall time in seconds."""

    returncode: int | None
    stdout: str
    stderr: str
    wall_s: float
    timed_out: bool


JOB_TOKEN_VAR = "AUTOTUNER_JOB_TOKEN"
_GRACE_S = 5.0  # SIGTERM -> SIGKILL; Horovod's own (horovod/runner/common/util/safe_shell_exec.py) is also 5 s

# The guard: a small process beside each job (one per job, in its own session, SIGINT ignored).  Its stdin is a
# pipe whose only writer is the parent, so it reads EOF when the parent closes it or dies in any way (SIGKILL
# included).  Then it sends SIGTERM to the job's process group and to every process whose environment holds the
# job's token (Horovod's per-rank middlemen and ranks run in sessions of their own), waits until they are gone
# (at most `grace` s; a zombie does not count), and sends SIGKILL to whatever is left.  argv: pgid, token, grace.
_GUARD = r"""
import os, signal, sys, time
pgid, token, grace = int(sys.argv[1]), os.fsencode(sys.argv[2]), float(sys.argv[3])
class Stop(Exception):
    pass
def stop(signum, frame):
    raise Stop
signal.signal(signal.SIGINT, signal.SIG_IGN)
for s in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, stop)
try:
    while os.read(0, 64):
        pass
except (Stop, OSError):
    pass
for s in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
def members():
    # live (not zombie) processes in the group or carrying the token; None where there is no /proc
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    found = []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open("/proc/" + name + "/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if fields[0] in (b"Z", b"X"):
                continue
            if int(fields[2]) != pgid:
                with open("/proc/" + name + "/environ", "rb") as f:
                    if token not in f.read().split(b"\0"):
                        continue
            found.append(int(name))
        except (OSError, IndexError, ValueError):
            pass
    return found
def send(sig):
    # signal every member (sig 0: none); True while any is alive
    pids = members()
    if pids is None:
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return False
        except OSError:
            pass
        return True
    for pid in pids if sig else ():
        try:
            os.kill(pid, sig)
        except OSError:
            pass
    return bool(pids)
if send(signal.SIGTERM):
    deadline = time.monotonic() + grace
    while send(0):
        if time.monotonic() > deadline:
            send(signal.SIGKILL)
            break
        time.sleep(0.05)
"""


class OwnedProcess:
    """A child process tree that cannot outlive this process: the one way autotuner starts a job.

    The child runs in a new session (its own process group) with ``JOB_TOKEN_VAR`` set to a token unique to it,
    which its descendants inherit.  It dies with this process in three ways:

    - :meth:`stop` (called on every exit of :func:`run_argv`: normal return, timeout, exception, Ctrl-C, and
      SIGTERM where the caller turns it into SystemExit, as ``autotuner validate`` does) sends SIGTERM to the
      group and to every process carrying the token, then SIGKILL after ``grace_s`` seconds;
    - the guard (``_GUARD``, a process of its own) does the same when this process dies without running
      :meth:`stop` (SIGKILL, os._exit, a crash);
    - on Linux the child also gets a parent-death SIGKILL (:func:`autotuner.realrun.testbed.die_with_parent`).

    What can escape: a descendant that both leaves the process group (setsid/setpgid) and clears its
    environment, or a process on another host (``-H`` with remote hosts: Horovod's ssh ends them; DDP's hosts:
    :func:`autotuner.frameworks.ddp.launch.kill_argv`).  If the guard cannot start, only :meth:`stop` and the death
    signal remain.  Output is read by two threads (:meth:`output`); ``stdin`` as :class:`subprocess.Popen`'s
    (default: this process's; ``subprocess.DEVNULL`` for a remote shell, which would otherwise read the terminal).
    Raises OSError (FileNotFoundError when ``argv[0]`` is missing) if the child cannot start.
    """

    def __init__(self, argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None,
                 grace_s: float = _GRACE_S, stdin=None):
        self.token = f"{os.getpid()}-{secrets.token_hex(8)}"
        self.grace_s = grace_s
        env = dict(os.environ if env is None else env)
        env[JOB_TOKEN_VAR] = self.token
        self.proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=stdin, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True, preexec_fn=die_with_parent())
        self.guard: subprocess.Popen | None = None
        self._w: int | None = None
        self._stopped = False
        # Read both pipes in threads: the job is over when its first process exits, not when the last holder
        # of its output pipes (a leftover it started) closes them.
        self._chunks: tuple[list[bytes], list[bytes]] = ([], [])
        self._readers = [threading.Thread(target=_read_all, args=(f, buf), daemon=True)
                         for f, buf in zip((self.proc.stdout, self.proc.stderr), self._chunks)]
        for t in self._readers:
            t.start()
        try:
            r, self._w = os.pipe()
            try:
                self.guard = subprocess.Popen(
                    [sys.executable, "-I", "-S", "-c", _GUARD, str(self.proc.pid), f"{JOB_TOKEN_VAR}={self.token}",
                     str(grace_s)], stdin=r, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    start_new_session=True)
            finally:
                os.close(r)
        except OSError:  # no guard (out of processes?): stop() kills the group itself, the death signal stays
            self.guard = None
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Kill the job's group and token carriers (SIGTERM, then SIGKILL after ``grace_s``); idempotent.

        Waits for the guard to finish (at most ``grace_s + 5`` s), reaping the child meanwhile; kills the group
        itself if the guard did not start or did not finish.
        """
        if self._stopped:
            return
        self._stopped = True
        if self._w is not None:
            os.close(self._w)
            self._w = None
        if self.guard is not None:
            deadline = time.monotonic() + self.grace_s + 5
            while self.guard.poll() is None and time.monotonic() < deadline:
                self.proc.poll()  # reap the child as soon as it is gone
                time.sleep(0.02)
            if self.guard.poll() is None:
                self.guard.kill()
                self.guard.wait()
            if self.proc.poll() is None:
                _kill_group(self.proc, 0.0)
        else:
            _kill_group(self.proc, self.grace_s)

    def stdout_so_far(self) -> bytes:
        """Everything the job has written on stdout until now (while it runs, too)."""
        return b"".join(list(self._chunks[0]))

    def output(self, timeout_s: float = 5.0) -> tuple[str, str]:
        """(stdout, stderr) read so far, decoded as UTF-8 (bad bytes replaced); call after :meth:`stop`.

        Waits up to ``timeout_s`` seconds for the pipes to reach EOF (a survivor may hold them open).
        """
        deadline = time.monotonic() + timeout_s
        for t in self._readers:
            t.join(max(0.0, deadline - time.monotonic()))
        return tuple(b"".join(list(buf)).decode("utf-8", "replace") for buf in self._chunks)

    def __enter__(self) -> "OwnedProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
        self.output()
        reap(self.proc, 10.0)
        for t, f in zip(self._readers, (self.proc.stdout, self.proc.stderr)):
            if not t.is_alive():  # else a survivor holds the pipe: closing it would wait for that reader
                f.close()


def _read_all(f, buf: list[bytes]) -> None:
    try:
        while chunk := f.read1(1 << 16):
            buf.append(chunk)
    except (OSError, ValueError):
        pass


def run_argv(argv: list[str], timeout_s: float, *, env: dict[str, str] | None = None, cwd: Path | None = None,
             grace_s: float = _GRACE_S) -> JobResult:
    """Run ``argv`` as an :class:`OwnedProcess` until it ends or ``timeout_s`` seconds pass; nothing it started
    is left running when this returns or raises.

    Raises FileNotFoundError (``argv[0]`` missing); re-raises KeyboardInterrupt/SystemExit after the kill.
    """
    t0 = time.monotonic()
    with OwnedProcess(argv, env=env, cwd=cwd, grace_s=grace_s) as job:
        try:
            job.proc.wait(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
        job.stop()  # also after a normal end: its leftovers (a daemonised child, a resource tracker) go too
        out, err = job.output()
    return JobResult(job.proc.returncode, out, err, time.monotonic() - t0, timed_out)


def _kill_group(proc: subprocess.Popen, grace_s: float) -> None:
    """Without a guard: SIGTERM to ``proc``'s process group, SIGKILL to it after ``grace_s`` seconds or once
    ``proc`` has exited, whichever comes first (0: SIGKILL at once); then reap ``proc``."""
    for sig in ((signal.SIGTERM, signal.SIGKILL) if grace_s > 0 else (signal.SIGKILL,)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        except PermissionError:
            pass
        reap(proc, grace_s if sig == signal.SIGTERM else 5.0)  # then SIGKILL the group's leftovers too


def reap(proc: subprocess.Popen, timeout_s: float) -> int | None:
    """``proc``'s exit status once it has exited, waiting at most ``timeout_s`` seconds (then None: still running).

    ``Popen.wait()`` alone can block for ever: an exception raised by a signal handler (Ctrl-C's
    KeyboardInterrupt, an alarm) that lands inside an earlier ``wait(timeout=...)`` just after CPython took the
    Popen's internal ``_waitpid_lock`` leaves that lock held (``subprocess.py`` ``Popen._wait``: the busy loop's
    ``acquire(False)`` comes before its ``try``), and every later ``wait()`` waits on the lock, not the child
    (seen once in a fresh-clone CI run: ``test_exception_in_the_parent_kills_the_whole_job`` hung on that lock
    while its child sat as a zombie). Here the bounded ``wait(timeout)`` never blocks on the lock, and when it gives up the child is reaped
    with ``os.waitpid`` directly and its status recorded in ``proc.returncode``."""
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        pass
    if proc.returncode is None:
        try:
            pid, status = os.waitpid(proc.pid, os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere: its status is lost, and stays unknown (None)
            return None
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode


@contextmanager
def testbed_for(topology: tuple[int, int] | None, bandwidth_gbit: float | None, link_gbit: float | None):
    """The testbed real runs use, with one line saying what it is (and what was measured of it):
    an emulated cluster of ``topology`` = (hosts, ranks per host) with ``link_gbit`` host links and
    ``bandwidth_gbit`` on each host's loopback (:func:`autotuner.realrun.testbed.emulated_cluster`),
    else one loopback shaped to ``bandwidth_gbit`` (:func:`~autotuner.realrun.testbed.shaped_network`).
    Yields ``(Testbed, note)``. Raises ValidationError when a cluster cannot be built."""
    from ..errors import ValidationError
    from .testbed import TestbedError, emulated_cluster, measure_bandwidth_gbit, measure_link_gbit, shaped_network

    if topology is None:
        with shaped_network(bandwidth_gbit) as tb:
            measured = measure_bandwidth_gbit(tb) if tb.shaped else None
            yield tb, tb.note + (f"; measured {measured:.2f} Gbit/s" if measured else "")
        return
    with ExitStack() as stack:
        try:
            tb = stack.enter_context(emulated_cluster(topology[0], link_gbit, intra_gbit=bandwidth_gbit))
        except (TestbedError, ValueError) as e:
            raise ValidationError(str(e)) from None
        measured = measure_link_gbit(tb) if len(tb.hosts) > 1 else None
        yield tb, tb.note + (f"; host link measured {measured:.2f} Gbit/s (TCP, host 1 -> host 2)" if measured else "")
