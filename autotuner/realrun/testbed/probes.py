"""Link probes run inside a testbed: TCP throughput on one loopback, between hosts, around a ring."""
from __future__ import annotations

import subprocess
import sys

from .bed import Testbed
from .process import die_with_parent


# Runs in a child under the testbed prefix: a TCP pair on 127.0.0.1, receiver times the bytes that arrive.
_PROBE = r"""
import socket, sys, threading, time
nbytes, max_s = int(sys.argv[1]), float(sys.argv[2])
srv = socket.create_server(("127.0.0.1", 0))
tx = socket.create_connection(srv.getsockname())
rx, _ = srv.accept()
rx.settimeout(5)
def send():
    chunk = memoryview(b"\0" * (1 << 20))
    left = nbytes
    try:
        while left > 0:
            left -= tx.send(chunk[:min(left, len(chunk))])
    except OSError:
        pass
threading.Thread(target=send, daemon=True).start()
buf = bytearray(1 << 20)
got = rx.recv_into(buf)
t0 = time.perf_counter()
first, now = got, t0
while got < nbytes and now - t0 < max_s:
    n = rx.recv_into(buf)
    if not n:
        break
    got += n
    now = time.perf_counter()
print((got - first) * 8 / max(now - t0, 1e-9) / 1e9)
"""


def measure_bandwidth_gbit(testbed: Testbed, nbytes: int = 200_000_000, *, max_seconds: float = 1.0) -> float:
    """Measured TCP throughput in Gbit/s (1e9 bit/s) between two sockets on 127.0.0.1 inside ``testbed``.

    A child ``python`` runs under ``testbed.prefix`` and pushes up to ``nbytes`` bytes through one connection,
    stopping after ``max_seconds`` of transfer, so a call takes about max_seconds + 0.1 s at most.  The clock
    starts at the first received chunk, so connection setup is not counted.
    Raises RuntimeError if the probe fails, subprocess.TimeoutExpired if it hangs (> max_seconds + 10 s).
    """
    argv = testbed.wrap([sys.executable, "-I", "-c", _PROBE, str(int(nbytes)), str(float(max_seconds))])
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=max_seconds + 10, preexec_fn=die_with_parent())
    if proc.returncode != 0:
        raise RuntimeError(f"bandwidth probe failed (exit {proc.returncode}): {' '.join(proc.stderr.split())[-300:]}")
    return float(proc.stdout.strip())


# Runs in host B: listen on its address, print the port, time what arrives (Gbit/s).
_RECV = r"""
import socket, sys, time
srv = socket.create_server((sys.argv[1], 0))
print(srv.getsockname()[1], flush=True)
srv.settimeout(10)
rx, _ = srv.accept()
rx.settimeout(5)
max_s = float(sys.argv[2])
buf = bytearray(1 << 20)
got = rx.recv_into(buf)
t0 = time.perf_counter()
first, now = got, t0
while now - t0 < max_s:
    n = rx.recv_into(buf)
    if not n:
        break
    got += n
    now = time.perf_counter()
print((got - first) * 8 / max(now - t0, 1e-9) / 1e9, flush=True)
"""
_SEND = r"""
import socket, sys
tx = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
chunk = memoryview(b"\0" * (1 << 20))
try:
    for _ in range(int(sys.argv[3]) >> 20):
        tx.sendall(chunk)
except OSError:
    pass
"""


def _flows(testbed: Testbed, pairs: list[tuple[int, int]], nbytes: int, max_seconds: float) -> list[float]:
    """TCP throughput in Gbit/s of one connection per (sender host, receiver host) index pair, all at
    once: a receiver in each target namespace (:data:`_RECV`, about ``max_seconds`` of transfer), then the
    senders (:data:`_SEND`, up to ``nbytes``). Raises RuntimeError if a probe fails."""
    hs, rxs, ports = testbed.hosts, [], []
    try:
        for _, j in pairs:
            rx = subprocess.Popen(["ip", "netns", "exec", hs[j].netns, sys.executable, "-I", "-c", _RECV,
                                   hs[j].address, str(float(max_seconds))], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, preexec_fn=die_with_parent())
            rxs.append(rx)
            port = rx.stdout.readline().strip()
            if not port.isdigit():
                raise RuntimeError(f"link probe receiver failed: {' '.join(rx.stderr.read().split())[-300:]}")
            ports.append(port)
        txs = [subprocess.Popen(["ip", "netns", "exec", hs[i].netns, sys.executable, "-I", "-c", _SEND,
                                 hs[j].address, port, str(int(nbytes))],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent())
               for (i, j), port in zip(pairs, ports)]
        outs = [rx.communicate(timeout=max_seconds + 30) for rx in rxs]
        for tx in txs:
            tx.kill()
            tx.wait()
    finally:
        for rx in rxs:
            if rx.poll() is None:
                rx.kill()
                rx.wait()
    try:
        return [float(out.strip().splitlines()[-1]) for out, _ in outs]
    except (ValueError, IndexError):
        errs = " ".join(" ".join(err.split()) for _, err in outs)
        raise RuntimeError(f"link probe failed: a receiver printed no rate ({errs[-300:]})") from None


def measure_ring_gbit(testbed: Testbed, *, nbytes: int = 400_000_000, max_seconds: float = 2.0) -> list[float]:
    """Measured TCP throughput in Gbit/s of each flow when every host ``i`` of a cluster sends to host
    ``i+1`` (mod H) at the same time, as a ring allreduce does: one number per flow, in host order.
    On a real switch each flow gets its own link's rate; here every packet also crosses this
    machine's software bridge, so the sum shows what the emulation itself can carry. Raises
    ValueError for fewer than 2 hosts, RuntimeError if a probe fails."""
    n = len(testbed.hosts)
    if n < 2:
        raise ValueError("measure_ring_gbit needs an emulated cluster of at least 2 hosts")
    return _flows(testbed, [(i, (i + 1) % n) for i in range(n)], nbytes, max_seconds)


def measure_link_gbit(testbed: Testbed, *, nbytes: int = 200_000_000, max_seconds: float = 1.0) -> float:
    """Measured TCP throughput in Gbit/s from a cluster's first host to its second (one connection
    through the bridge, about ``max_seconds`` of transfer). Raises ValueError for a testbed with
    fewer than 2 hosts, RuntimeError if the probe fails."""
    if len(testbed.hosts) < 2:
        raise ValueError("measure_link_gbit needs an emulated cluster of at least 2 hosts")
    return _flows(testbed, [(0, 1)], nbytes, max_seconds)[0]
