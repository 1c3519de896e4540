"""DDP on several hosts: ``--hosts h1:8,h2:8`` starts one torchrun per host through a remote shell (``--rsh``, default
ssh), the emulated cluster's hosts through the same code path (their remote shell ``ip netns exec <netns> sh -c``);
``--print-launch`` prints that launch (or a SLURM batch script) and runs nothing; ``--device cuda`` refusals; and
nothing is left on any host after a job, a killed host or Ctrl-C.

The per-node torchrun lines are parsed with torch's own launcher parser (``torch.distributed.run.get_args_parser``),
so a misspelt flag fails. The real runs need root and iproute2 (the emulated hosts are network namespaces) and run
real torchrun jobs on Gloo; each is short (a 1-round sweep, a 3-step replay).
"""
from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_helpers import assert_one_line_error, need, need_cuda, run

from autotuner.frameworks.ddp.launch import (JOB_VAR, RDZV_PORT, REACH_TIMEOUT_S, Node, emulated_nodes, kill_argv,
                                             new_job_id, node_argvs, parse_hosts, run_ddp)
from autotuner.realrun import testbed as tb

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "data" / "tiny_layout.json"
#: a 1-round sweep with nothing else: the shortest measure
SHORT = ["--sweep-rounds", "1", "--repeats", "1", "--burst-rounds", "0", "--first-touch-rounds", "0",
         "--cpu-rounds", "0", "--host-rounds", "0"]


def _torchrun_args(command_line: str):
    """torchrun's parsed arguments from one host's command line ``cd <cwd> && exec env VAR=... <torchrun> ...``
    (or ``srun ... <torchrun> ...``), by torch's own parser; and the variables set before it."""
    from torch.distributed.run import get_args_parser

    words = shlex.split(command_line)
    if words[0] == "cd":
        assert words[2:5] == ["&&", "exec", "env"], words[:5]
        words = words[5:]
    elif words[0] == "srun":
        words = words[1:]
        while words[0].startswith("--"):  # srun's own options come first
            words.pop(0)
        if words[0] == "env":
            words = words[1:]
    elif words[0] == "env":
        words = words[1:]
    env = {}
    while "=" in words[0] and not words[0].startswith("-"):
        k, v = words.pop(0).split("=", 1)
        env[k] = v
    assert Path(words[0]).name == "torchrun" or words[1:3] == ["-m", "torch.distributed.run"], words[:3]
    argv = words[1:] if Path(words[0]).name == "torchrun" else words[3:]
    return get_args_parser().parse_args(argv), env


# --------------------------------------------------------------------------- the launch, without running it

def test_each_hosts_torchrun_line_is_torchruns_documented_multi_node_launch():
    """``--hosts h1:8,h2:8``: one line per host through ssh, the same torchrun arguments on both (torch/distributed/
    run.py, "Multi-node multi-worker"): c10d at the first host, one unique rdzv id, 2 nodes x 8 ranks."""
    nodes = parse_hosts("h1:8,h2:8")
    assert [n.rsh for n in nodes] == [("ssh", "h1"), ("ssh", "h2")] and [n.slots for n in nodes] == [8, 8]
    argvs = node_argvs("autotuner.frameworks.ddp.replay", ["--model", "resnet50"], nodes, job_id="job-1",
                       env={**os.environ, "AUTOTUNER_DDP_BUCKET_CAP_MB": "4"}, cwd="/some dir")
    assert [a[:2] for a in argvs] == [["ssh", "h1"], ["ssh", "h2"]] and all(len(a) == 3 for a in argvs)
    assert all(a[2].startswith("cd '/some dir' && exec env ") for a in argvs)
    parsed = [_torchrun_args(a[2]) for a in argvs]
    for args, env in parsed:
        assert (args.nnodes, args.nproc_per_node, args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id) == \
            ("2", "8", "c10d", f"h1:{RDZV_PORT}", "job-1")
        assert args.module and args.training_script == "autotuner.frameworks.ddp.replay"
        assert args.training_script_args == ["--model", "resnet50"] and args.max_restarts == 0
        assert not args.standalone and args.local_addr is None
        # a remote shell carries no environment: the job's variables are on its command line
        assert env["AUTOTUNER_DDP_BUCKET_CAP_MB"] == "4" and env[JOB_VAR] == "job-1" and env["PYTHONUNBUFFERED"] == "1"
    assert parsed[0][0] == parsed[1][0]  # the same arguments on every node
    # the remote shell as given: words then the host, or {host} where it stands
    assert parse_hosts("a:1", "ssh -p 2222")[0].rsh == ("ssh", "-p", "2222", "a")
    assert parse_hosts("a:1", "ip netns exec {host} sh -c")[0].rsh == ("ip", "netns", "exec", "a", "sh", "-c")


def test_print_launch_commands_prints_each_hosts_line_and_runs_nothing(tmp_path):
    p = run("ddp", "measure", "--env", "printed", "--hosts", "h1:8,h2:8", "--rsh", "ssh -p 2222", "--device", "cuda",
            "--sweep-rounds", "2", "--burst-rounds", "1", "--host-rounds", "0", "--print-launch", "commands",
            "--runs-dir", tmp_path)
    assert p.returncode == 0, p.stderr
    assert not (tmp_path / "printed").exists()  # nothing ran, nothing was written
    lines = [x for x in p.stdout.splitlines() if not x.startswith("#")]
    comments = [x for x in p.stdout.splitlines() if x.startswith("#")]
    assert len(lines) == 4 and any("sweep phase, 2 round(s)" in c for c in comments), p.stdout  # 2 jobs x 2 hosts
    words = [shlex.split(x) for x in lines]
    assert [w[:4] for w in words] == [["ssh", "-p", "2222", h] for h in ("h1", "h2", "h1", "h2")]
    sweep, burst = _torchrun_args(words[0][4])[0], _torchrun_args(words[2][4])[0]
    assert sweep.training_script == "autotuner.frameworks.ddp.sweepprobe" and sweep.nnodes == "2"
    assert burst.training_script == "autotuner.frameworks.ddp.burstprobe"
    # --device cuda reaches every probe; the CPU ranks' phases (first-touch, cpu) are not launched
    assert sweep.training_script_args[-2:] == ["--device", "cuda"] == burst.training_script_args[-2:]
    assert "firsttouchprobe" not in p.stdout and "cpuprobe" not in p.stdout
    assert sweep.rdzv_id != burst.rdzv_id  # each job its own rendezvous


def test_print_launch_sbatch_is_a_slurm_batch_script_of_the_same_torchrun(tmp_path):
    p = run("ddp", "measure", "--env", "slurmed", "--hosts", "h1:4,h2:4,h3:4", "--device", "cuda",
            "--sweep-rounds", "2", "--burst-rounds", "0", "--host-rounds", "0", "--print-launch", "sbatch",
            "--runs-dir", tmp_path)
    assert p.returncode == 0, p.stderr
    script = p.stdout
    assert script.startswith("#!/bin/bash\n")
    for line in ("#SBATCH --nodes=3", "#SBATCH --ntasks-per-node=1", "#SBATCH --gpus-per-node=4",
                 'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)'):
        assert line in script.splitlines(), line
    assert subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True).returncode == 0  # parses
    sruns = [x for x in script.splitlines() if x.startswith("srun ")]
    assert len(sruns) == 2 and all("--nodes=3 --ntasks-per-node=1" in x for x in sruns)
    args = [_torchrun_args(x)[0] for x in sruns]
    assert all((a.nnodes, a.nproc_per_node, a.rdzv_backend, a.rdzv_endpoint) == ("3", "4", "c10d",
                                                                              f"$head:{RDZV_PORT}") for a in args)
    assert args[0].rdzv_id != args[1].rdzv_id and "$SLURM_JOB_ID" in args[0].rdzv_id
    # where the records land and the command that brings them back
    assert "--from-output" in script and "autotuner ddp measure --env slurmed --hosts h1:4,h2:4,h3:4" in script
    # without a GPU, no GPU request; validate prints one per setting
    q = run("ddp", "validate", "--env", "slurmed", "--model", str(TINY), "--hosts", "h1:2,h2:2", "--print-launch",
            "sbatch", "--repeats", "1", "--runs-dir", tmp_path)
    assert q.returncode == 0, q.stderr
    assert "--gpus-per-node" not in q.stdout and "#SBATCH --nodes=2" in q.stdout
    assert len([x for x in q.stdout.splitlines() if x.startswith("srun ")]) == 11  # DEFAULT_SETTINGS
    assert "--rsh 'srun --nodes=1 --ntasks=1 --overlap -w {host} bash -c'" in q.stdout


def test_print_launch_of_a_tune_on_the_users_script(tmp_path):
    """``ddp tune -- python examples/train_ddp.py``: the script under torchrun, its setting in AUTOTUNER_DDP_*."""
    p = run("ddp", "tune", "--env", "any", "--model", str(TINY), "--hosts", "h1:2,h2:2", "--print-launch", "commands",
            "--runs-dir", tmp_path, "--", "python", "examples/train_ddp.py")
    assert p.returncode == 0, p.stderr
    lines = [x for x in p.stdout.splitlines() if not x.startswith("#")]
    assert len(lines) == 2
    args, env = _torchrun_args(shlex.split(lines[0])[2])
    assert not args.module and args.training_script == str(ROOT / "examples" / "train_ddp.py")
    assert env["AUTOTUNER_DDP_COMM_HOOK"] == "allreduce" and env["AUTOTUNER_STEPS"] == "5"


@pytest.mark.parametrize("args, needle", [
    (["--hosts", "h1"], "host:slots"), (["--hosts", "h1:0"], "host:slots"), (["--hosts", "h1:8,"], "host:slots"),
    (["--hosts", ":8"], "host:slots"), (["--hosts", "h1:8,h1:8"], "given twice"),
    (["--hosts", "h1:8,h2:4"], "same slots"), (["--hosts", "h1:2", "--testbed-hosts", "2"], "exclude each other"),
    (["--hosts", "h1:2", "--rsh", ""], "--rsh is empty"),
    (["--testbed-hosts", "2", "--print-launch", "commands"], "exists only while it runs"),
    (["--np", "1"], ">= 2 ranks (1 with --device cuda)")])
def test_bad_hosts_and_launch_options_are_one_line(tmp_path, args, needle):
    assert_one_line_error(run("ddp", "measure", "--env", "bad", *args, "--runs-dir", tmp_path), needle)


def test_an_unreachable_host_is_refused_in_one_line(tmp_path):
    """A host whose remote shell cannot run ``true``: ``--rsh false``, or an unknown network namespace."""
    assert_one_line_error(run("ddp", "measure", "--env", "far", "--hosts", "h1:1,h2:1", "--rsh", "false",
                              "--runs-dir", tmp_path), "host h1 cannot be reached: `false h1 true` gave exit 1")
    # a remote shell that never answers: refused after REACH_TIMEOUT_S, nothing left running
    assert_one_line_error(run("ddp", "measure", "--env", "far", "--hosts", "h1:1", "--rsh", "sh -c 'sleep 60' {host}",
                              "--runs-dir", tmp_path), "host h1 cannot be reached: `sh -c 'sleep 60' h1 true` gave no "
                                                       f"answer within {REACH_TIMEOUT_S:g} s")
    assert subprocess.run(["pgrep", "-f", "sleep 60"], capture_output=True).returncode == 1
    need("root", "iproute2")
    p = run("ddp", "measure", "--env", "far", "--hosts", "autotuner-no-such-netns:1", "--rsh", "ip netns exec",
            "--runs-dir", tmp_path)
    assert p.returncode == 2 and "host autotuner-no-such-netns cannot be reached" in p.stderr, p.stderr
    assert not (tmp_path / "far").exists()


def test_cuda_without_nccl_is_refused_in_one_line(tmp_path):
    """``--device cuda`` on a torch without NCCL (this CPU build): refused before anything starts, on this host and on
    each emulated host (asked through its remote shell)."""
    import torch.distributed as dist

    if dist.is_nccl_available():
        pytest.skip("this torch has NCCL: the refusal needs a torch without it")
    assert_one_line_error(run("ddp", "measure", "--env", "gpu", "--device", "cuda", "--np", "1", "--runs-dir",
                              tmp_path), "this host: its torch has no NCCL")
    need("root", "iproute2")
    p = run("ddp", "measure", "--env", "gpu", "--device", "cuda", "--testbed-hosts", "2", *SHORT, "--runs-dir",
            tmp_path)
    assert_one_line_error(p, "host 10.77.0.1: its torch has no NCCL")
    assert not (tmp_path / "gpu" / "ddp-sweep.jsonl").exists()


def test_more_ranks_than_gpus_is_refused_in_one_line(tmp_path):
    need_cuda()
    import torch

    n = torch.cuda.device_count()
    assert_one_line_error(run("ddp", "measure", "--env", "gpu", "--device", "cuda", "--np", str(n + 1), "--runs-dir",
                              tmp_path), f"this host: {n + 1} rank(s) asked, {n} GPU(s) visible")


# --------------------------------------------------------------------------- real runs on 2 emulated hosts

def _ours() -> list[str]:
    """Live processes of a multi-host job (the job's mark in their environment) or of torchrun, as 'pid cmdline'."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X"):
                    continue
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{name}/environ", "rb") as f:
                marked = any(v.startswith(JOB_VAR.encode() + b"=") for v in f.read().split(b"\0"))
        except OSError:
            continue
        if marked or "torch.distributed.run" in cmd or "/torchrun " in cmd:
            found.append(f"{name} {cmd}")
    return found


def _namespaces_of(pid: int) -> list[str]:
    return [n for n in tb.list_namespaces() if (m := tb._NAME_RE.match(n)) and int(m.group(1)) == pid]


@pytest.fixture
def nothing_left():
    """Root and iproute2; no job process before the test, none and no namespace of ours after it."""
    need("root", "iproute2")
    assert _ours() == [], "a torchrun job is running already"
    owners = {os.getpid()}
    yield owners
    deadline = time.monotonic() + 10
    while _ours() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _ours() == []
    for pid in owners:
        left = _namespaces_of(pid)
        for name in left:
            subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=10)
        assert left == [], f"namespaces left behind: {left}"


@pytest.mark.real
def test_the_hosts_code_path_runs_a_replay_on_two_emulated_hosts(nothing_left):
    """run_ddp on explicit nodes (what --hosts gives), each an emulated host reached by ``ip netns exec <ns> sh -c``:
    a 2-rank replay's result comes back; then no process of the job is left on either host."""
    with tb.emulated_cluster(2, None) as bed:
        nodes = emulated_nodes(bed, 1)
        assert all(isinstance(n, Node) and n.rsh[:3] == ("ip", "netns", "exec") for n in nodes)
        r = run_ddp("autotuner.frameworks.ddp.replay", ["--model", str(TINY), "--compute-ms", "20", "--steps", "3",
                                                        "--warmup", "2"], ranks_per_host=1, nodes=nodes,
                    env={**os.environ, "GLOO_SOCKET_IFNAME": "eth0"}, timeout_s=120)
        res = next(json.loads(x.split(" ", 1)[1]) for x in r.stdout.splitlines() if x.startswith("AUTOTUNER_RESULT "))
        assert res["ranks"] == 2 and len(res["step_times_ms"]) == 3, r.stderr[-800:]
        assert r.failed == "" and not r.timed_out


@pytest.mark.real
def test_ddp_measure_and_validate_on_two_emulated_hosts(nothing_left, tmp_path):
    """``ddp measure`` (a 1-round sweep) and ``ddp validate`` (DDP's defaults, 1 round, 3 steps) on 2 emulated hosts:
    records written with the topology; nothing left behind."""
    p = run("ddp", "measure", "--env", "two", "--testbed-hosts", "2", *SHORT, "--runs-dir", tmp_path, timeout=120)
    assert p.returncode == 0, p.stderr
    rec = json.loads((tmp_path / "two" / "ddp-sweep.jsonl").read_text().splitlines()[0])
    assert rec["ranks"] == 2 and rec["setup"]["testbed_hosts"] == 2 and "hosts" not in rec["setup"]
    settings = tmp_path / "settings.json"
    settings.write_text("[{}]")
    q = run("ddp", "validate", "--env", "two", "--model", str(TINY), "--proposals", settings, "--repeats", "1",
            "--steps", "3", "--warmup", "2", "--compute-ms", "20", "--testbed-hosts", "2", "--runs-dir", tmp_path,
            "--json", timeout=120)
    assert q.returncode == 0, q.stderr
    recs = [json.loads(x) for x in (tmp_path / "two" / "ddp-validation" / "tiny.jsonl").read_text().splitlines()]
    ddp = [r for r in recs if r["ddp"] is not None]  # (beside the replay without DDP, where validate runs one)
    assert len(ddp) == 1 and all(r["status"] == "ok" and r["setup"]["np"] == 2 for r in recs), recs


@pytest.mark.real
def test_ddp_measure_on_hosts_through_a_remote_shell_that_runs_a_command_line(nothing_left, tmp_path):
    """``--hosts localhost:1,127.0.0.1:1`` through a remote shell that, as ssh does, runs the command line it is given
    (``env AUTOTUNER_TEST_HOST={host} sh -c``; both hosts are this machine): two torchruns, one per host, meet at the
    first host's c10d rendezvous; the record carries the hosts; nothing is left."""
    p = run("ddp", "measure", "--env", "hosts", "--hosts", "localhost:1,127.0.0.1:1", "--rsh",
            "env AUTOTUNER_TEST_HOST={host} sh -c", *SHORT, "--runs-dir", tmp_path, timeout=120)
    assert p.returncode == 0, p.stderr
    rec = json.loads((tmp_path / "hosts" / "ddp-sweep.jsonl").read_text().splitlines()[0])
    assert rec["ranks"] == 2 and rec["exit"] == [0, 0], rec["exit"]
    assert {k: rec["setup"][k] for k in ("hosts", "nodes", "ranks_per_host", "np", "testbed_hosts")} == \
        {"hosts": "localhost:1,127.0.0.1:1", "nodes": 2, "ranks_per_host": 1, "np": 2, "testbed_hosts": None}
    from autotuner.frameworks.ddp.records import env_cluster

    assert (env_cluster(rec["setup"]).nodes, env_cluster(rec["setup"]).gpus_per_node) == (2, 1)


@pytest.mark.real
def test_printed_commands_run_as_printed_and_their_output_imports(nothing_left, tmp_path):
    """What ``--print-launch commands`` prints for this host runs as printed (a shell runs the line), and
    ``--from-output`` appends the result rank 0 printed as the measure's record, once."""
    p = run("ddp", "measure", "--env", "here", "--np", "2", *SHORT, "--print-launch", "commands", "--runs-dir",
            tmp_path)
    assert p.returncode == 0, p.stderr
    lines = [x for x in p.stdout.splitlines() if not x.startswith("#")]
    assert len(lines) == 1 and _torchrun_args(lines[0])[0].standalone
    out = tmp_path / "job.out"
    with out.open("w") as f:
        subprocess.run(["bash", "-c", lines[0]], stdout=f, stderr=subprocess.DEVNULL, timeout=120, cwd=ROOT)
    for _ in range(2):  # the second import finds the line imported already
        q = run("ddp", "measure", "--env", "here", "--np", "2", "--from-output", out, "--runs-dir", tmp_path)
        assert q.returncode == 0, q.stderr
    recs = [json.loads(x) for x in (tmp_path / "here" / "ddp-sweep.jsonl").read_text().splitlines()]
    assert len(recs) == 1 and recs[0]["ranks"] == 2 and recs[0]["imported_from"].startswith("job.out:")
    assert recs[0]["setup"]["np"] == 2 and len(recs[0]["fp32_ms"]) == len(recs[0]["sizes"])


@pytest.mark.real
def test_the_kill_through_each_hosts_remote_shell_ends_the_job_there(nothing_left):
    """The job's processes on a host outlive its launcher (a killed ssh client leaves them running): the kill run
    through each host's remote shell (:func:`kill_argv`) ends every process carrying the job's mark, ranks included."""
    with tb.emulated_cluster(2, None) as bed:
        nodes = emulated_nodes(bed, 1)
        job = new_job_id()
        argvs = node_argvs("autotuner.frameworks.ddp.replay", ["--model", str(TINY), "--compute-ms", "20", "--steps",
                                                               "2000", "--warmup", "2"], nodes, job_id=job,
                           env={**os.environ, "GLOO_SOCKET_IFNAME": "eth0"})
        procs = [subprocess.Popen(a, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
                 for a in argvs]
        try:
            deadline = time.monotonic() + 60
            while sum(" -m autotuner.frameworks.ddp.replay" in x and "torchrun" not in x for x in _ours()) < 2:
                assert time.monotonic() < deadline, _ours()
                time.sleep(0.2)
            for p in procs:  # the launchers die: the ranks they started go on
                p.kill()
                p.wait()
            time.sleep(0.5)
            assert sum("autotuner.frameworks.ddp.replay" in x for x in _ours()) >= 2
            for n in nodes:
                assert subprocess.run(kill_argv(n, job, 2.0), timeout=30).returncode == 0
            assert _ours() == []
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()


def _start_measure(tmp_path, env: str) -> subprocess.Popen:
    """A long-ish ``ddp measure`` on 2 emulated hosts (a 20-repeat sweep) as its own program."""
    return subprocess.Popen([sys.executable, "-m", "autotuner.cli", "ddp", "measure", "--env", env,
                             "--testbed-hosts", "2", *SHORT[:2], "--repeats", "20", *SHORT[4:], "--runs-dir",
                             str(tmp_path)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_ranks(proc: subprocess.Popen, n: int = 2, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while sum("sweepprobe" in x and "torch.distributed.run" not in x and "torchrun" not in x for x in _ours()) < n:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)


@pytest.mark.real
def test_a_killed_host_stops_the_job_names_the_host_and_leaves_nothing(nothing_left, tmp_path):
    proc = _start_measure(tmp_path, "killed")
    nothing_left.add(proc.pid)
    try:
        _wait_for_ranks(proc)
        victim = [int(x.split()[0]) for x in _ours() if "--local-addr 10.77.0.2" in x and "sweepprobe" in x
                  and ("torchrun" in x or "torch.distributed.run" in x)]
        assert len(victim) == 1, _ours()
        os.kill(victim[0], signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    lines = [x for x in err.splitlines() if x.startswith("error:")]
    assert proc.returncode == 2 and len(lines) == 1, err
    assert "host 10.77.0.2 failed (torchrun exit -9)" in lines[0] and "stopped" in lines[0], lines
    assert not (tmp_path / "killed" / "ddp-sweep.jsonl").exists()


@pytest.mark.real
def test_ctrl_c_leaves_nothing_on_any_host(nothing_left, tmp_path):
    proc = _start_measure(tmp_path, "interrupted")
    nothing_left.add(proc.pid)
    try:
        _wait_for_ranks(proc)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1].startswith("interrupted"), err
