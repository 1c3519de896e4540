"""The emulated multi-host cluster for real (root, iproute2, real Horovod): hosts appear, Horovod's own
launcher places ranks on them, traffic crosses the shaped link, and nothing is left behind.

"Nothing left": no ``autotuner-<pid>-*`` namespace of the owner, no ``/etc/netns/autotuner-*`` hosts
file, and no veth or bridge interface in the namespace the tests run in (``ip -o link show type
veth|bridge``), checked after every test here.
"""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from autotuner.realrun import testbed as tb
from tests.cli_helpers import need, need_horovod
from tests.test_testbed import best_gbit, start_holder

ROOT = Path(__file__).resolve().parents[1]
ROOT_DIR = str(ROOT)

pytestmark = [pytest.mark.real]


def _links() -> dict[str, list[str]]:
    return {k: v for k, v in tb.leftovers().items() if k in ("veth", "bridge")}


@pytest.fixture
def nothing_left():
    """Root and iproute2 (skipped without them, failed under CI), and the test starts and ends with no namespace,
    hosts file, veth or bridge of ours. Every test that builds a cluster asks for it."""
    need("root", "iproute2")
    before_links = _links()
    owners = {os.getpid()}
    yield owners
    for name in tb.list_namespaces():
        m = tb._NAME_RE.match(name)
        if m and int(m.group(1)) in owners:
            subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=10)
            pytest.fail(f"namespace {name} was left behind")
    assert tb.leftovers()["netns"] == []
    assert not [n for n in (os.listdir(tb.ETC_NETNS) if os.path.isdir(tb.ETC_NETNS) else [])
                if any(n.startswith(f"{tb.NETNS_PREFIX}-{p}-") for p in owners)]
    assert _links() == before_links == {"veth": [], "bridge": []}


def test_two_hosts_link_is_shaped_and_everything_goes(nothing_left):
    with tb.emulated_cluster(2, 0.5) as bed:
        names = set(tb.list_namespaces())
        assert {h.netns for h in bed.hosts} | {bed.netns} <= names
        assert bed.hosts_arg(2) == "10.77.0.1:2,10.77.0.2:2" and bed.launcher[2] == "autotuner.frameworks.horovod.hostlaunch"
        # the veth pairs and the bridge live inside the cluster's namespaces, never here
        assert _links() == {"veth": [], "bridge": []}
        out = subprocess.run(["ip", "-n", bed.hosts[1].netns, "-o", "-4", "addr", "show", "dev", "eth0"],
                             capture_output=True, text=True, check=True).stdout
        assert "10.77.0.2/24" in out
        got = best_gbit(lambda: tb.measure_link_gbit(bed, max_seconds=0.5), 0.40)
        assert max(got) > 0.40 and all(g < 0.55 for g in got), got  # HTB at 500mbit: TCP through the bridge ~0.47
        assert set(os.listdir(tb.ETC_NETNS)) >= {h.netns for h in bed.hosts}
    assert not {h.netns for h in bed.hosts} & set(tb.list_namespaces())


def test_exception_inside_removes_every_namespace(nothing_left):
    with pytest.raises(RuntimeError, match="boom"):
        with tb.emulated_cluster(3, 1.0) as bed:
            assert len(bed.hosts) == 3
            raise RuntimeError("boom")


def test_failed_step_raises_one_line_and_cleans_up(nothing_left, monkeypatch):
    from autotuner.realrun.testbed import cluster as tbc  # where emulated_cluster runs its steps

    real = tbc._step

    def fail_on_bridge(argv):
        return "`ip link add br0` failed: injected" if "bridge" in argv else real(argv)

    monkeypatch.setattr(tbc, "_step", fail_on_bridge)
    with pytest.raises(tb.TestbedError, match="injected"):
        with tb.emulated_cluster(2, 1.0):
            pass


def test_not_root_is_one_line():
    with pytest.raises(tb.TestbedError, match="cannot build an emulated cluster: not root"):
        with tb.emulated_cluster(2, 1.0, check=lambda: "not root (euid 1000)"):
            pass


HOLD = f"""
import importlib.util, sys, time, signal
sys.path.insert(0, {ROOT_DIR!r})
from autotuner.realrun import testbed as t
signal.signal(signal.SIGINT, signal.default_int_handler)
with t.emulated_cluster(2, 1.0) as bed:
    print(bed.hosts[0].netns, flush=True)
    time.sleep(60)
"""


def _holder(owners):
    """A child holding a 2-host cluster (tests/test_testbed.py's ``start_holder``); returns it and the
    cluster's base name (``autotuner-<pid>-<n>``)."""
    proc, name = start_holder(owners, code=HOLD)
    return proc, name[: -len("-h0")]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_removes_cluster(nothing_left, sig):
    proc, base = _holder(nothing_left)
    proc.send_signal(sig)
    proc.wait(timeout=20)
    assert not [n for n in tb.list_namespaces() if n.startswith(base)]
    assert not os.path.isdir(os.path.join(tb.ETC_NETNS, f"{base}-h0"))


def test_sigkill_leftovers_go_with_cleanup_stale(nothing_left):
    proc, base = _holder(nothing_left)
    proc.kill()
    proc.wait(timeout=10)
    assert f"{base}-sw" in tb.list_namespaces()  # SIGKILL cannot be caught: left behind
    deleted = tb.cleanup_stale()
    assert {f"{base}-sw", f"{base}-h0", f"{base}-h1"} <= set(deleted)
    assert not os.path.isdir(os.path.join(tb.ETC_NETNS, f"{base}-h0"))


PROBE = ("import json, socket, horovod.torch as hvd, torch; hvd.init(); "
         "x = hvd.allreduce(torch.ones(1 << 16) * (hvd.rank() + 1), op=hvd.Sum); "
         "print('AT', json.dumps([hvd.rank(), hvd.local_rank(), hvd.cross_rank(), hvd.size(), hvd.local_size(), "
         "socket.gethostbyname(socket.gethostname()), float(x[0])]))")


def test_horovods_launcher_places_ranks_on_hosts(nothing_left):
    """2 hosts x 2 ranks through hostlaunch (Horovod's launch_gloo): rank, local rank, cross rank are
    Horovod's, each rank runs in its host's namespace, and a real allreduce crosses the link."""
    need_horovod()
    from autotuner.frameworks.horovod.launch import Job, run_job

    with tb.emulated_cluster(2, 1.0) as bed:
        job = Job(np=4, hosts=bed.hosts_arg(2), command=(sys.executable, "-c", PROBE), prefix=bed.prefix,
                  launcher=bed.launcher)
        res = run_job(job, timeout_s=120)
    assert res.returncode == 0, res.stderr[-2000:]
    rows = sorted(json.loads(line.split("AT ", 1)[1]) for line in res.stdout.splitlines() if "AT [" in line)
    assert [r[:5] for r in rows] == [[0, 0, 0, 4, 2], [1, 1, 0, 4, 2], [2, 0, 1, 4, 2], [3, 1, 1, 4, 2]]
    assert [r[5] for r in rows] == ["10.77.0.1", "10.77.0.1", "10.77.0.2", "10.77.0.2"]
    assert all(r[6] == 1 + 2 + 3 + 4 for r in rows)


def test_a_failing_rank_fails_the_job(nothing_left):
    need_horovod()
    from autotuner.frameworks.horovod.launch import Job, run_job

    with tb.emulated_cluster(2, 1.0) as bed:
        res = run_job(Job(np=2, hosts=bed.hosts_arg(1), command=(sys.executable, "-c", "import sys; sys.exit(3)"),
                          prefix=bed.prefix, launcher=bed.launcher), timeout_s=60)
    assert res.returncode == 1 and "one or more processes exited with non-zero status" in res.stderr


@pytest.mark.long
def test_validate_on_two_hosts_records_the_topology(nothing_left, tmp_path):
    """``autotuner validate --testbed-hosts 2 --ranks-per-host 1``: a short real run whose records carry
    the topology and a prediction for that shape (the shipped local-gloo-2x2 model)."""
    need_horovod()
    proc = subprocess.run([sys.executable, "-m", "autotuner.cli", "validate", "--env", "local-gloo-2x2", "--model", "mnist",
                           "--compute-ms", "20", "--testbed-hosts", "2", "--ranks-per-host", "1", "--link-gbit", "1",
                           "--steps", "3", "--warmup", "1", "--repeats", "1", "--no-autotune", "--wait", "sleep",
                           "--runs-dir", str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    recs = [json.loads(line) for line in (tmp_path / "local-gloo-2x2" / "validation" / "mnist.jsonl").read_text().splitlines()]
    assert recs and all(r["status"] == "ok" for r in recs)
    for r in recs:
        assert (r["setup"]["testbed_hosts"], r["setup"]["ranks_per_host"], r["setup"]["np"]) == (2, 1, 2)
        assert r["setup"]["hosts"] == "10.77.0.1:1,10.77.0.2:1" and r["setup"]["link_gbit"] == 1.0
        assert r["setup"]["replay_wait"] == "sleep"
        assert "2 emulated host(s)" in r["testbed"] and r["predicted_step_time_ms"] > 0
    assert "host link measured" in recs[0]["testbed"]


@pytest.mark.long
def test_hierarchical_flags_on_gloo_run_and_change_nothing(nothing_left, tmp_path):
    """Horovod 0.28.1 on Gloo, 2 hosts x 2 ranks (local size 2 < size 4, so the flags are not
    dropped for being on one host): ``--hierarchical-allreduce --hierarchical-allgather`` start
    and finish normally, and every allreduce is still Gloo's flat one (timeline activity
    GLOO_ALLREDUCE; the hierarchical ops are NCCL_/MPI_ ones: docs/reference/knobs.md)."""
    need_horovod()
    from autotuner.frameworks.horovod.knobs import Config
    from autotuner.readers.timeline import read_timeline
    from autotuner.frameworks.horovod.launch import Job, replay_command, run_job

    tiny = str(ROOT / "tests" / "data" / "tiny_layout.json")
    tl = tmp_path / "timeline.json"
    with tb.emulated_cluster(2, 1.0) as bed:
        job = Job(np=4, hosts=bed.hosts_arg(2), command=replay_command(tiny, 20.0, 2, 1), prefix=bed.prefix,
                  launcher=bed.launcher, timeline=tl,
                  config=Config(hierarchical_allreduce=True, hierarchical_allgather=True))
        assert "--hierarchical-allreduce" in job.argv() and "--hierarchical-allgather" in job.argv()
        res = run_job(job, timeout_s=120)
    assert res.returncode == 0, res.stderr[-2000:]
    acts = {r.activity for r in read_timeline(tl).responses if r.op == "allreduce"}
    assert acts == {"GLOO_ALLREDUCE"}, acts


@pytest.mark.long
def test_measure_on_two_emulated_hosts_records_the_topology(nothing_left, tmp_path):
    """A short ``measure`` on 2 emulated hosts x 2 ranks: both tiers run (intra: the first host's 2
    ranks; inter: one rank per host), every record carries the topology, env.toml the cluster."""
    need_horovod()
    from autotuner.frameworks.horovod.readers.sweep import parse_sweep_records
    from autotuner.frameworks.horovod import measure as M
    from autotuner.realrun.testbed import cluster_hosts

    env_dir = tmp_path / "runs" / "two-hosts"
    setup = M.SweepSetup(np=4, hosts=cluster_hosts(2, 2), bandwidth_gbit=None, repeats=2, warmup=1,
                         testbed_hosts=2, ranks_per_host=2, link_gbit=1.0)
    s = M.run_measure(env_dir, setup, timeout_s=300, sizes=(4096, 65536), fusion_sizes=(65536,), tiny_counts=(1,),
                      unfused_sizes=(1024,), cpu_repeats=0, trickle_repeats=0, idle_repeats=0,
                      fp16_repeats=0, burst_repeats=0, step_repeats=0, mid_repeats=0,
                      fused_repeats=0)
    recs, _ = parse_sweep_records((env_dir / "sweep.jsonl").read_text(), "sweep.jsonl")
    assert s["items_new"] == len(recs) == 2 * (2 + 1 + 1 + 1 + 1)
    assert {r["tier"] for r in recs} == {"intra", "inter"}
    assert all(r["topology"] == {"hosts": 2, "ranks_per_host": 2} and r["setup"]["testbed_hosts"] == 2 for r in recs)
    toml = (env_dir / "env.toml").read_text()
    assert "nodes = 2" in toml and "gpus_per_node = 2" in toml and "link_gbps = 1" in toml
    assert "2 emulated host(s)" in s["network"] and "host link measured" in s["network"]
