"""autotuner.integrations: a suggest answer applied in a training script. ``load_pick`` against real ``suggest
--json`` and ``ddp suggest --json`` output; ``ddp_kwargs``/``apply`` against torch's real DistributedDataParallel
(Gloo, 2 ranks under torchrun); ``horovod.flags``/``env``/``compression`` against a real horovodrun job (Gloo, 2
ranks); ``StepTimer``'s lines read back by autotuner's own reader.

The real jobs run this file as their worker (``python tests/test_integrations.py ddp-worker OUT``).
"""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]
MIB = 1 << 20


def need_torch():
    """Skip the calling test when torch (with Gloo) is missing; fail it under CI, where it must be installed
    (tests/cli_helpers.py :func:`need`)."""
    from tests.cli_helpers import missing, need

    need("torch")
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_gloo_available()):
        missing("torch's Gloo backend", "a torch build with torch.distributed and Gloo (the CPU wheels have it)")


def _one_line(e: BaseException) -> bool:
    return len(str(e).strip().splitlines()) == 1


# --------------------------------------------------------------------------- the workers of the real jobs

def _ddp_worker(out: Path) -> None:
    """Under torchrun (2 ranks, Gloo): DistributedDataParallel built from each pick, one backward, what DDP made of
    it; then a StepTimer around 5 steps. Writes ``rank<r>.json``."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from autotuner import DdpConfig
    from autotuner.integrations import StepTimer
    from autotuner.integrations.torch import apply, ddp_kwargs, wrap

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    gen = torch.Generator().manual_seed(100 + rank)
    x, y = torch.randn(16, 64, generator=gen), torch.randn(16, 10, generator=gen)

    def module():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                                   torch.nn.ReLU(), torch.nn.Linear(256, 10))

    def backward(model):
        model.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        return [p.grad.detach().clone() for p in model.parameters()]

    picks = {"fp16": DdpConfig(bucket_cap_mb=0.0625, gradient_as_bucket_view=True, comm_hook="fp16_compress"),
             "list": DdpConfig(bucket_cap_mb_list=(0.0625, 0.25)),
             "default": DdpConfig(),
             "powerSGD": DdpConfig(comm_hook="powerSGD")}
    res: dict = {}
    for name, pick in picks.items():
        kw = ddp_kwargs(pick)
        model = apply(DDP(module(), **kw), pick)
        grads = backward(model)
        gathered = [None, None]
        dist.all_gather_object(gathered, [g.tolist() for g in grads])
        res[name] = {"kwargs": kw, "bucket_bytes_cap": model.bucket_bytes_cap,
                     "bucket_bytes_cap_list": list(model.bucket_bytes_cap_list),
                     "gradient_as_bucket_view": model.gradient_as_bucket_view,
                     "comm_hook": model._get_ddp_logging_data().get("comm_hook", ""),
                     "fp16_exact": all(torch.equal(g, g.half().float()) for g in grads),
                     "same_on_ranks": gathered[0] == gathered[1]}
    try:
        apply(DDP(module()), DdpConfig(comm_hook="bf16_compress"))
        res["bf16"] = "registered"
    except TypeError as e:  # torch refuses it without CUDA + NCCL (DistributedDataParallel._check_comm_hook)
        res["bf16"] = f"TypeError: {e}"
    errors = {}
    for what, call in {"apply_other_buckets": lambda: apply(DDP(module()), picks["fp16"]),
                       "wrap_twice_given": lambda: wrap(module(), picks["fp16"], bucket_cap_mb=4)}.items():
        try:
            call()
            errors[what] = None
        except ValueError as e:
            errors[what] = str(e)
    res["errors"] = errors
    wrapped = wrap(module(), picks["fp16"], broadcast_buffers=False)
    res["wrap"] = {"bucket_bytes_cap": wrapped.bucket_bytes_cap,
                   "comm_hook": wrapped._get_ddp_logging_data().get("comm_hook", "")}
    opt = torch.optim.SGD(wrapped.parameters(), lr=0.01)
    with StepTimer(warmup=2) as timer:
        for _ in range(5):
            with timer.step():
                opt.zero_grad()
                torch.nn.functional.mse_loss(wrapped(x), y).backward()
                opt.step()
    res["timer"] = {"warmup": len(timer.warmup_ms), "measured": len(timer.measured_ms)}
    (out / f"rank{rank}.json").write_text(json.dumps(res))
    dist.barrier()
    dist.destroy_process_group()


def _hvd_worker(pick_path: str, out: Path) -> None:
    """Under horovodrun (2 ranks, Gloo, the pick's flags): what the rank's environment says of the knobs, one
    backward through hvd.DistributedOptimizer with ``compression(pick)``, then a StepTimer. Writes
    ``rank<r>.json``."""
    import horovod.torch as hvd
    import torch

    from autotuner.frameworks.horovod.knobs import config_from_env
    from autotuner.integrations import StepTimer, load_pick
    from autotuner.integrations import horovod as ih

    pick = load_pick(pick_path)
    hvd.init()
    gen = torch.Generator().manual_seed(100 + hvd.rank())
    x, y = torch.randn(16, 64, generator=gen), torch.randn(16, 10, generator=gen)

    def run(compression, prefix):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
        opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01), compression=compression,
                                       named_parameters=[(f"{prefix}.{n}", p) for n, p in model.named_parameters()])
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.synchronize()
        with opt.skip_synchronize():
            opt.step()
        return model, opt, all(torch.equal(p.grad, p.grad.half().float()) for p in model.parameters())

    comp = ih.compression(pick)
    model, opt, exact = run(comp, "picked")
    _, _, plain_exact = run(hvd.Compression.none, "plain")
    with StepTimer(warmup=1) as timer:
        for _ in range(3):
            with timer.step():
                opt.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                opt.step()
    res = {"config_from_env": config_from_env(os.environ).to_dict(), "unapplied": ih.unapplied(pick),
           "compression": comp.__name__, "fp16_exact": exact, "plain_fp16_exact": plain_exact,
           "measured": len(timer.measured_ms)}
    (out / f"rank{hvd.rank()}.json").write_text(json.dumps(res))
    hvd.shutdown()


# --------------------------------------------------------------------------- real suggest answers

@pytest.fixture(scope="module")
def answers(tmp_path_factory):
    """``autotuner suggest --model vgg16 --json`` and ``autotuner ddp suggest --env ddp-2x1-3gbit --model resnet50
    --json``, written to files: (horovod path, ddp path)."""
    from tests.cli_helpers import run

    d = tmp_path_factory.mktemp("answers")
    out = []
    for name, args in (("hvd.json", ("suggest", "--model", "vgg16", "--json")),
                       ("ddp.json", ("ddp", "suggest", "--env", "ddp-2x1-3gbit", "--model", "resnet50", "--json"))):
        p = run(*args, timeout=300)
        assert p.returncode == 0, p.stderr
        (d / name).write_text(p.stdout)
        out.append(d / name)
    return tuple(out)


def _code_kwargs(code: str) -> dict:
    """The keyword arguments of the ``DistributedDataParallel(...)`` call in an answer's ``code``."""
    import ast

    call = ast.parse(code.splitlines()[0]).body[0].value
    return {k.arg: ast.literal_eval(k.value) for k in call.keywords}


def test_importing_the_integrations_needs_neither_torch_nor_horovod():
    code = ("import sys, autotuner.integrations, autotuner.integrations.torch, autotuner.integrations.horovod\n"
            "print(sorted(m for m in ('torch', 'horovod', 'numpy') if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 0 and p.stdout.strip() == "[]", (p.stdout, p.stderr)


def test_load_pick_takes_a_ddp_answers_settings(answers):
    from autotuner import DdpConfig
    from autotuner.integrations import DDP_WHICH, load_pick
    from autotuner.integrations.torch import ddp_kwargs

    path = answers[1]
    d = json.loads(path.read_text())
    for which in DDP_WHICH:
        pick = load_pick(path, which)
        cfg = {k: tuple(v) if isinstance(v, list) else v for k, v in d[which]["config"].items()}
        assert isinstance(pick, DdpConfig) and pick == DdpConfig.from_dict(cfg)
        assert pick.label() == d[which]["label"]
        # the integration passes DDP exactly what the answer's pasted code does, the hook included
        assert ddp_kwargs(pick) == _code_kwargs(d[which]["code"]), which
        hook = d[which]["code"].splitlines()[1:]
        assert (pick.comm_hook != "allreduce") == bool(hook) and all(pick.comm_hook + "_hook" in h for h in hook)
    assert load_pick(path) == load_pick(path, "recommended") == load_pick(d)
    assert load_pick(path).comm_hook == d["recommended"]["config"]["comm_hook"]
    assert (load_pick(path) == load_pick(path, "default")) == d["keep_defaults"]


def test_load_pick_takes_a_horovod_answers_proposal(answers):
    import autotuner
    from autotuner import Config, Proposal
    from autotuner.integrations import HOROVOD_WHICH, horovod, load_pick

    path = answers[0]
    d = json.loads(path.read_text())
    entries = {"recommended": d["proposals"][0], "default": d["default"], "knob_only": d["knob_only"]}
    assert set(entries) == set(HOROVOD_WHICH)
    for which, e in entries.items():
        pick = load_pick(path, which)
        assert isinstance(pick, Proposal) and pick.config == Config.from_dict(e["config"])
        assert pick.compression == e["compression"]
        # flags and variables: autotuner's own functions, and what the answer printed
        assert horovod.flags(pick) == autotuner.horovodrun_flags(pick.config) == e["horovodrun_flags"]
        assert horovod.env(pick) == autotuner.horovod_env(pick.config) == e["env_vars"]
        assert horovod.flags(pick.config) == e["horovodrun_flags"]
        assert horovod.unapplied(pick, e["env_vars"]) == []
    assert load_pick(d) == load_pick(path)
    # vgg16 on v100-16gbit recommends fp16 compression over the 0.20 reference's knobs
    assert load_pick(path).compression == "fp16" and load_pick(path, "knob_only").compression == "none"
    lines = horovod.unapplied(load_pick(path), {})
    assert lines == ["HOROVOD_FUSION_THRESHOLD=67108864 (the environment gives 134217728)",
                     "HOROVOD_CYCLE_TIME=5 (the environment gives 1)"]


def test_bad_picks_are_one_line_errors(tmp_path, answers):
    from autotuner.errors import AutotunerError
    from autotuner.integrations import load_pick

    ddp, hvd = json.loads(answers[1].read_text()), json.loads(answers[0].read_text())
    files = {"not-json.json": "{nope", "list.json": "[1, 2]", "empty.json": "{}"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    bad_cap = json.loads(json.dumps(ddp))
    bad_cap["recommended"]["config"]["bucket_cap_mb"] = -1
    bad_hook = json.loads(json.dumps(ddp))
    bad_hook["recommended"]["config"]["comm_hook"] = "zstd"
    no_fp16 = {**ddp, "fp16": None}
    bad_threshold = json.loads(json.dumps(hvd))
    bad_threshold["proposals"][0]["config"]["fusion_threshold_bytes"] = -5
    cases = [(tmp_path / "gone.json", "recommended", "gone.json"), (tmp_path / "not-json.json", "recommended", "JSON"),
             (tmp_path / "list.json", "recommended", "got a list"), (tmp_path / "empty.json", "recommended", "neither"),
             (str(answers[1]), "best", "which='best'"), (answers[0], "fp16", "which='fp16'"),
             (bad_cap, "recommended", "bucket_cap_mb"), (bad_hook, "recommended", "comm_hook"),
             (no_fp16, "fp16", "fp16 is null"), (bad_threshold, "recommended", "fusion_threshold_bytes"),
             ({**hvd, "proposals": []}, "recommended", "proposals"),
             ({**hvd, "proposals": [{"config": {}}]}, "recommended", "no 'compression'"),
             (42, "recommended", "takes a path"), (answers[1], 3, "which must be")]
    for source, which, needle in cases:
        with pytest.raises(AutotunerError) as e:
            load_pick(source, which)
        assert isinstance(e.value, ValueError) and _one_line(e.value) and needle in str(e.value), (needle, e.value)


def test_ddp_kwargs_are_ddps_own_arguments_and_never_the_hook():
    import inspect

    from autotuner import DDP_KNOBS, DdpConfig
    from autotuner.integrations.torch import ddp_kwargs

    need_torch()
    from torch.nn.parallel import DistributedDataParallel

    params = inspect.signature(DistributedDataParallel.__init__).parameters
    every = DdpConfig(bucket_cap_mb_list=(1, 4.5), gradient_as_bucket_view=True, comm_hook="fp16_compress",
                      static_graph=True, find_unused_parameters=True)
    kw = ddp_kwargs(every)
    assert kw == {"bucket_cap_mb_list": [1.0, 4.5], "gradient_as_bucket_view": True, "static_graph": True,
                  "find_unused_parameters": True}
    assert set(kw) <= set(params) and "comm_hook" not in kw
    assert set(kw) == {k.argument for k in DDP_KNOBS} - {"register_comm_hook", "bucket_cap_mb"}
    assert ddp_kwargs(DdpConfig()) == {} and ddp_kwargs(DdpConfig(bucket_cap_mb=25)) == {"bucket_cap_mb": 25.0}
    assert ddp_kwargs(DdpConfig(comm_hook="fp16_compress")) == {}
    with pytest.raises(TypeError):
        ddp_kwargs(every.to_dict())


def test_pick_from_env_reads_what_ddp_validate_sets():
    from autotuner import DdpConfig
    from autotuner.errors import KnobError
    from autotuner.frameworks.ddp.realrun import knob_env
    from autotuner.integrations.torch import pick_from_env

    for cfg in (DdpConfig(), DdpConfig(bucket_cap_mb=0.707, gradient_as_bucket_view=True, comm_hook="fp16_compress"),
                DdpConfig(bucket_cap_mb_list=(1, 4, 25), gradient_as_bucket_view=True), DdpConfig(bucket_cap_mb=25),
                DdpConfig(comm_hook="powerSGD")):
        assert pick_from_env(knob_env(cfg, 5, 3)) == cfg
    assert pick_from_env({}) == DdpConfig()
    for var, value, needle in (("AUTOTUNER_DDP_GRADIENT_AS_BUCKET_VIEW", "yes", "0 or 1"),
                               ("AUTOTUNER_DDP_BUCKET_CAP_MB", "lots", "not a number"),
                               ("AUTOTUNER_DDP_BUCKET_CAP_MB", "-3", "AUTOTUNER_DDP_BUCKET_CAP_MB"),
                               ("AUTOTUNER_DDP_BUCKET_CAP_MB_LIST", "1,,4", "not a number"),
                               ("AUTOTUNER_DDP_COMM_HOOK", "zstd", "fp16_compress")):
        with pytest.raises(KnobError) as e:
            pick_from_env({var: value})
        assert _one_line(e.value) and needle in str(e.value), e.value


def test_horovod_helpers_refuse_what_they_cannot_apply():
    from autotuner import Config, DdpConfig
    from autotuner.errors import KnobError
    from autotuner.integrations import horovod

    with pytest.raises(TypeError):
        horovod.env(DdpConfig())
    with pytest.raises(TypeError):
        horovod.flags({"fusion_threshold_bytes": 1})
    with pytest.raises(TypeError):
        horovod.compression(Config())  # knobs only: the compression would be lost
    for name, needle in (("int8", "not in Horovod"), ("zstd", "Horovod has none, fp16")):
        with pytest.raises(ValueError) as e:
            horovod.compression(name)
        assert _one_line(e.value) and needle in str(e.value), e.value
    with pytest.raises(KnobError):
        horovod.unapplied(Config(), {"HOROVOD_CYCLE_TIME": "soon"})
    assert horovod.unapplied(Config(), {}) == []
    # a threshold that is not a whole MiB has no flag but has its variable
    half = Config(fusion_threshold_bytes=MIB // 2)
    assert "--fusion-threshold-mb" not in horovod.flags(half) and horovod.env(half)["HOROVOD_FUSION_THRESHOLD"] == \
        str(MIB // 2)


def test_compression_gives_horovods_own_compressors():
    from tests.cli_helpers import need_horovod

    need_horovod()
    import horovod.torch as hvd

    from autotuner.integrations import horovod

    assert horovod.compression("fp16") is hvd.Compression.fp16 and horovod.compression("none") is hvd.Compression.none


# --------------------------------------------------------------------------- the step timer

def test_step_timer_lines_are_read_back_by_autotuners_reader(monkeypatch):
    from autotuner.integrations import StepTimer
    from autotuner.readers.replay_output import parse_output

    out = io.StringIO()
    with StepTimer(warmup=2, rank=0, out=out) as timer:
        for _ in range(5):
            with timer.step():
                time.sleep(0.003)
    text = out.getvalue()
    st = parse_output(text)
    assert st.form == "step_lines" and len(st.step_times_ms) == 3 and not st.problems
    assert all(3.0 <= t < 1000 for t in st.step_times_ms) and st.step_times_ms == tuple(
        float(f"{t:.3f}") for t in timer.measured_ms)
    assert [line.split()[0] for line in text.splitlines()] == ["warmup_step_ms"] * 2 + ["AUTOTUNER_STEP_TIME_MS"] * 3
    # another rank records and prints nothing; the rank comes from the launcher's environment when not given
    for env in ({"RANK": "1"}, {"HOROVOD_RANK": "1"}):
        for var in ("RANK", "HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
            monkeypatch.delenv(var, raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        quiet = io.StringIO()
        with StepTimer(warmup=0, out=quiet) as t:
            with t.step():
                pass
        assert quiet.getvalue() == "" and len(t.measured_ms) == 1 and t.rank == 1
    # a step that raises is not a step
    t = StepTimer(rank=0, out=io.StringIO())
    with pytest.raises(RuntimeError):
        with t.step():
            raise RuntimeError("boom")
    assert t.measured_ms == [] and t.out.getvalue() == ""
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(ValueError):
            StepTimer(warmup=bad)


# --------------------------------------------------------------------------- real DDP (torchrun, Gloo, 2 ranks)

@pytest.fixture(scope="module")
def ddp_job(tmp_path_factory):
    """This file's DDP worker under ``torchrun --standalone --nproc-per-node 2``: (per-rank results, stdout)."""
    need_torch()
    out = tmp_path_factory.mktemp("ddp-job")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                        str(HERE), "ddp-worker", str(out)], capture_output=True, text=True, timeout=120, env=env,
                       cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)], p.stdout


@pytest.mark.real
def test_ddp_takes_the_kwargs_and_builds_the_picks_buckets(ddp_job):
    from autotuner import DdpConfig

    ranks, _ = ddp_job
    for res in ranks:
        fp16, lst, default = res["fp16"], res["list"], res["default"]
        assert fp16["kwargs"] == {"bucket_cap_mb": 0.0625, "gradient_as_bucket_view": True}
        assert fp16["bucket_bytes_cap"] == DdpConfig(bucket_cap_mb=0.0625).cap_bytes() == 64 * 1024
        assert fp16["gradient_as_bucket_view"] is True and default["gradient_as_bucket_view"] is False
        assert lst["kwargs"] == {"bucket_cap_mb_list": [0.0625, 0.25]}
        assert lst["bucket_bytes_cap_list"] == [64 * 1024, 256 * 1024] and lst["bucket_bytes_cap"] == 256 * 1024
        assert default["kwargs"] == {} and default["bucket_bytes_cap"] == 25 * MIB
        assert default["bucket_bytes_cap_list"] == []


@pytest.mark.real
def test_apply_registers_the_picks_hook(ddp_job):
    ranks, _ = ddp_job
    for res in ranks:
        # fp16_compress_hook: every gradient comes back rounded to float16; DDP's own allreduce does not round
        assert res["fp16"]["comm_hook"] == "fp16_compress_hook" and res["fp16"]["fp16_exact"]
        assert res["default"]["comm_hook"] == "" and not res["default"]["fp16_exact"]
        assert res["list"]["comm_hook"] == "" and not res["list"]["fp16_exact"]
        assert res["powerSGD"]["comm_hook"] == "powerSGD_hook"
        assert all(res[k]["same_on_ranks"] for k in ("fp16", "list", "default", "powerSGD"))
        # this CPU build of torch refuses the bf16 hook (it needs CUDA and NCCL): torch's error, not ours
        assert res["bf16"].startswith("TypeError: BF16 all reduce communication hook required CUDA")
        assert res["wrap"] == {"bucket_bytes_cap": 64 * 1024, "comm_hook": "fp16_compress_hook"}
        errors = res["errors"]
        assert "bucket_bytes_cap=26214400, the pick has 65536" in errors["apply_other_buckets"]
        assert "bucket_cap_mb given and set by the pick too" in errors["wrap_twice_given"]
        assert all(len(e.splitlines()) == 1 for e in errors.values())


@pytest.mark.real
def test_the_timer_prints_on_rank_0_only_what_ddp_validate_reads(ddp_job):
    from autotuner.readers.replay_output import parse_output

    ranks, stdout = ddp_job
    st = parse_output(stdout)
    assert st.form == "step_lines" and len(st.step_times_ms) == 3, stdout
    assert stdout.count("warmup_step_ms") == 2  # rank 1 printed nothing
    assert all(r["timer"] == {"warmup": 2, "measured": 3} for r in ranks)


@pytest.mark.real
def test_the_ddp_example_trains_with_a_ddp_suggest_answer(answers):
    """``torchrun ... examples/train_ddp.py --pick ddp.json``: the answer's recommended setting (0.707 MiB, view,
    fp16_compress_hook) applied, one warm-up and one measured step of the example's model."""
    need_torch()
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                        str(ROOT / "examples" / "train_ddp.py"), "--steps", "1", "--warmup", "1", "--batch-size", "2",
                        "--pick", str(answers[1])], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "OMP_NUM_THREADS": "1"}, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    from autotuner.readers.replay_output import parse_output

    assert len(parse_output(p.stdout).step_times_ms) == 1 and p.stdout.count("warmup_step_ms") == 1


def test_the_examples_refuse_a_bad_pick_in_one_line(tmp_path, answers):
    from tests.cli_helpers import need_horovod

    script = ROOT / "examples" / "train_ddp.py"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTOTUNER_DDP_")}
    cases = [([str(tmp_path / "gone.json")], env, "gone.json"), ([str(answers[0])], env, "Horovod suggest answer"),
             ([str(answers[1])], {**env, "AUTOTUNER_DDP_COMM_HOOK": "allreduce"}, "drop --pick")]
    for args, e, needle in cases:
        p = subprocess.run([sys.executable, str(script), "--pick", *args], capture_output=True, text=True,
                           timeout=60, env=e, cwd=ROOT)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1 and needle in lines[0], p.stderr
    need_horovod()
    p = subprocess.run([sys.executable, str(ROOT / "examples" / "train_horovod.py"), "--pick", str(answers[1])],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and "a DDP answer" in lines[0], p.stderr


# --------------------------------------------------------------------------- real Horovod (horovodrun, Gloo, 2 ranks)

@pytest.mark.real
def test_horovodrun_takes_the_flags_and_hvd_the_compression(tmp_path, answers):
    """horovodrun with ``flags(pick)`` of the real vgg16 answer (64 MiB, 5 ms, fp16): each rank's environment
    holds the pick's knobs (Horovod's own parsing of the flags), ``compression(pick)`` rounds every averaged gradient
    to float16 where ``Compression.none`` does not, and the timer's lines reach the reader through horovodrun."""
    from tests.cli_helpers import need_horovod

    need_horovod()
    from autotuner.frameworks.horovod.knobs import KNOBS
    from autotuner.frameworks.horovod.launch import Job, run_argv
    from autotuner.integrations import horovod, load_pick
    from autotuner.readers.replay_output import parse_output

    pick = load_pick(answers[0])
    argv = Job(np=2, command=()).argv() + horovod.flags(pick) + [sys.executable, str(HERE), "hvd-worker",
                                                                  str(answers[0]), str(tmp_path)]
    env = {k: v for k, v in os.environ.items() if k not in {knob.env for knob in KNOBS}}
    env.update(PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    res = run_argv(argv, 150, env=env, cwd=ROOT)
    assert res.returncode == 0 and not res.timed_out, res.stderr[-3000:]
    for r in (0, 1):
        d = json.loads((tmp_path / f"rank{r}.json").read_text())
        assert d["config_from_env"] == pick.config.to_dict() and d["unapplied"] == []
        assert d["compression"] == "FP16Compressor" and d["fp16_exact"] and not d["plain_fp16_exact"]
        assert d["measured"] == 2
    st = parse_output(res.stdout)
    assert st.form == "step_lines" and len(st.step_times_ms) == 2, res.stdout[-2000:]


if __name__ == "__main__":
    if sys.argv[1] == "ddp-worker":
        _ddp_worker(Path(sys.argv[2]))
    elif sys.argv[1] == "hvd-worker":
        _hvd_worker(sys.argv[2], Path(sys.argv[3]))
