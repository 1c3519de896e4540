"""``autotuner profile``: measured gradient readiness of a real torch.nn.Module on this CPU, and the
layout JSON it writes used by simulate / suggest / explore / validate without --compute-ms."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cli_helpers import ROOT, assert_one_line_error, need_cuda, need_horovod, need_module, run

torch = need_module("torch")

from autotuner.frameworks.horovod.predict import make_scenario  # noqa: E402
from autotuner.frameworks.horovod.realruns import validation_setup  # noqa: E402
from autotuner.errors import LayoutError  # noqa: E402
from autotuner.model.layout import Layout  # noqa: E402
from autotuner.paths import shipped_models  # noqa: E402
from autotuner.readers.layouts import layout_from_dict, load_layout  # noqa: E402

TESTS = Path(__file__).resolve().parent
ENV = "local-gloo-1gbit"
TOL_MS = 1e-3  # ready_ms and backward_ms are rounded to 0.1 µs


def _env(mp):
    """The factories of tests/factory_models.py importable in the subprocess; one intra-op thread,
    so CPU times stay steady on a shared machine (OpenMP threads spin-wait under load)."""
    mp.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), *filter(None, [os.environ.get("PYTHONPATH")])]))
    mp.setenv("OMP_NUM_THREADS", "1")


@pytest.fixture(autouse=True)
def _factories(monkeypatch):
    _env(monkeypatch)
    monkeypatch.syspath_prepend(str(TESTS))


def _profile(out: Path, model: str, shape: str, batch: int, *extra: str):
    p = run("profile", "--model", model, "--input-shape", shape, "--batch-size", str(batch), "--steps", "5",
            "--warmup", "2", "--out", str(out), "--json", *extra)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout), json.loads(out.read_text()), p


@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    """Profiled once for the module: the conv net (batch 8), the MLP at batch 1 and 256."""
    d = tmp_path_factory.mktemp("profiles")
    with pytest.MonkeyPatch.context() as mp:
        _env(mp)
        return {"cnn": (d / "cnn.json", *_profile(d / "cnn.json", "factory_models:small_cnn", "3,8,8", 8)),
                "mlp1": (d / "mlp1.json", *_profile(d / "mlp1.json", "factory_models:mlp", "256", 1)),
                "mlp256": (d / "mlp256.json", *_profile(d / "mlp256.json", "factory_models:mlp", "256", 256))}


def _trainable(factory):
    return {n: list(p.shape) for n, p in factory().named_parameters() if p.requires_grad}


@pytest.mark.parametrize("key, factory, shape, batch", [
    ("cnn", "small_cnn", [3, 8, 8], 8), ("mlp1", "mlp", [256], 1), ("mlp256", "mlp", [256], 256)])
def test_profile_writes_a_measured_layout(profiles, key, factory, shape, batch):
    import factory_models

    path, summary, d, _ = profiles[key]
    names = [t["name"] for t in d["tensors"]]
    trainable = _trainable(getattr(factory_models, factory))
    assert sorted(names) == sorted(trainable) and len(names) == len(set(names))  # each parameter once
    assert all(t["shape"] == trainable[t["name"]] and t["dtype"] == "float32" for t in d["tensors"])
    ready = [t["ready_ms"] for t in d["tensors"]]
    assert all(b >= a for a, b in zip(ready, ready[1:]))  # readiness order
    assert ready[0] >= 0 and ready[-1] <= d["backward_ms"] + TOL_MS
    assert d["forward_ms"] > 0 and d["backward_ms"] > 0
    assert d["device"] == "cpu" and d["batch_size"] == batch and d["input_shape"] == shape
    assert d["dtype"] == "float32" and d["amp"] is False and d["torch"] == torch.__version__
    assert d["profiled_with"] == "autotuner profile" and d["steps"] == 5 and d["warmup"] == 2
    assert d["threads"] == 1  # OMP_NUM_THREADS above
    # the file loads as a layout with the measured readiness
    layout = load_layout(str(path))
    assert layout.measured and layout.forward_ms == d["forward_ms"]
    assert np.allclose(layout.ready_fraction, np.array(ready) / d["backward_ms"])
    # the --json summary matches the file
    assert summary["out"] == str(path) and summary["tensors"] == len(names)
    assert summary["bytes"] == layout.total_bytes and summary["backward_ms"] == d["backward_ms"]
    assert summary["warnings"] == []


def test_measured_order_is_the_real_backward_order(profiles):
    # on this CPU, float32: the order load_layout infers for a factory is the hooks' order
    assert [t["name"] for t in profiles["cnn"][2]["tensors"]] == list(load_layout("factory_models:small_cnn").names)
    assert [t["name"] for t in profiles["mlp1"][2]["tensors"]] == list(load_layout("factory_models:mlp").names)


def _simulate(model: str, *extra: str) -> dict:
    p = run("simulate", "--model", model, "--env", ENV, "--json", *extra)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_simulate_takes_the_profile_without_compute_ms(profiles):
    small, big = profiles["mlp1"], profiles["mlp256"]
    assert big[2]["backward_ms"] > 2 * small[2]["backward_ms"]  # batch 256 vs 1: far more backward work
    t_small = _simulate(str(small[0]))["step_time_ms"]
    t_big = _simulate(str(big[0]))["step_time_ms"]
    assert t_big > t_small
    assert t_small >= small[2]["forward_ms"] + small[2]["backward_ms"] - TOL_MS


def test_step_time_grows_with_the_measured_backward(profiles, tmp_path):
    d = profiles["cnn"][2]
    times = []
    for scale in (1, 10, 100):
        slow = {**d, "backward_ms": d["backward_ms"] * scale,
                "tensors": [{**t, "ready_ms": t["ready_ms"] * scale} for t in d["tensors"]]}
        f = tmp_path / f"x{scale}.json"
        f.write_text(json.dumps(slow))
        times.append(_simulate(str(f))["step_time_ms"])
    assert times[0] < times[1] < times[2]


def test_compute_ms_overrides_the_measured_total_in_the_measured_ratio(profiles):
    path, _, d, _ = profiles["cnn"]
    sc, _ = make_scenario(shipped_models(), ENV, str(path))
    assert sc.workload.forward_s == pytest.approx(d["forward_ms"] / 1e3)
    assert sc.workload.backward_s == pytest.approx(d["backward_ms"] / 1e3)
    sc2, _ = make_scenario(shipped_models(), ENV, str(path), compute_ms=90.0)
    assert (sc2.workload.forward_s + sc2.workload.backward_s) * 1e3 == pytest.approx(90.0)
    assert sc2.workload.forward_s / sc2.workload.backward_s == pytest.approx(d["forward_ms"] / d["backward_ms"])
    assert np.array_equal(sc2.layout.ready_fraction, sc.layout.ready_fraction)  # readiness scales with backward
    assert _simulate(str(path), "--compute-ms", "90")["step_time_ms"] >= 90.0


def test_suggest_and_explore_take_the_profile(profiles, tmp_path):
    path = str(profiles["mlp256"][0])
    p = run("suggest", "--model", path, "--env", ENV, "--json", "--n-calls", "6")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["proposals"]
    p = run("explore", "--model", path, "--env", ENV, "--no-suggest", "--resolution", "3", "--out", str(tmp_path),
            "--json")
    assert p.returncode == 0, p.stderr
    assert all(Path(f).exists() for f in json.loads(p.stdout)["files"])


def test_validate_setup_takes_the_measured_compute(profiles):
    path, _, d, _ = profiles["cnn"]
    s = validation_setup(env=ENV, model=str(path), compute_ms=None)
    assert s.compute_ms == pytest.approx(d["forward_ms"] + d["backward_ms"], abs=1e-3)
    assert validation_setup(env=ENV, model="resnet50", compute_ms=None).compute_ms == 300.0  # unchanged
    assert validation_setup(env=ENV, model=str(path), compute_ms=42.0).compute_ms == 42.0


@pytest.mark.real
def test_replay_uses_the_measured_times(tmp_path):
    """The replay workload (what validate runs) with a measured layout and no --compute-ms."""
    need_horovod()
    from autotuner.readers.replay_output import parse_output
    from autotuner.frameworks.horovod.launch import Job, run_job

    tiny = json.loads((TESTS / "data" / "tiny_layout.json").read_text())
    ready = [2.0, 2.5, 10.0, 12.0, 12.5, 20.0]  # the last gradient 20 ms before backward ends
    f = tmp_path / "measured.json"
    f.write_text(json.dumps({**tiny, "forward_ms": 15.0, "backward_ms": 40.0,
                             "tensors": [{**t, "ready_ms": r} for t, r in zip(tiny["tensors"], ready)]}))
    job = Job(np=2, command=(sys.executable, "-m", "autotuner.replay", "--model", str(f), "--steps", "3",
                             "--warmup", "1"))
    res = run_job(job, timeout_s=110)
    assert res.returncode == 0 and not res.timed_out, res.stderr[-2000:]
    out = parse_output(res.stdout)
    assert out.extra["compute_ms"] == pytest.approx(55.0)
    assert all(t >= 55.0 for t in out.step_times_ms)  # forward 15 + backward 40, tail included


def test_amp_on_cpu_is_bfloat16(tmp_path):
    _, d, _ = _profile(tmp_path / "amp.json", "factory_models:small_cnn", "3,8,8", 4, "--amp", "--steps", "2")
    assert d["amp"] is True and d["dtype"] == "bfloat16" and d["name"].endswith("amp-bfloat16-b4")
    assert all(t["dtype"] == "float32" for t in d["tensors"])  # gradients keep the parameters' dtype


def test_unused_parameters_are_reported_and_frozen_ones_left_out(tmp_path):
    _, d, p = _profile(tmp_path / "u.json", "factory_models:with_unused", "8", 2)
    names = [t["name"] for t in d["tensors"]]
    assert names[:2] == ["used.bias", "used.weight"] and sorted(names[2:]) == ["unused.bias", "unused.weight"]
    assert all(t["ready_ms"] == d["backward_ms"] for t in d["tensors"][2:])
    assert not any(n.startswith("frozen.") for n in names)
    assert "warning: 2 trainable parameter(s) got no gradient" in p.stderr and "unused.weight" in p.stderr
    assert any("unused in forward" in n for n in d["notes"])


@pytest.mark.parametrize("model, shape, extra, needle", [
    ("factory_models:missing", "3", (), "cannot import model factory 'factory_models:missing'"),
    ("no_such_module_xyz:f", "3", (), "cannot import model factory"),
    ("factory_models:broken", "3", (), "model factory 'factory_models:broken' failed: RuntimeError: cannot build"),
    ("factory_models:not_a_module", "3", (), "returned a str, not a torch.nn.Module"),
    ("factory_models:frozen_only", "2", (), "without trainable parameters"),
    ("resnet50", "3,224,224", (), "not pkg.mod:factory"),
    ("factory_models:small_cnn", "3,x", (), "--input-shape '3,x': expected whole numbers >= 1"),
    ("factory_models:small_cnn", "3,0,8", (), "--input-shape '3,0,8'"),
    ("factory_models:small_cnn", "5", (), "forward of factory_models:small_cnn on a random input of shape [2, 5] "
                                          "failed: RuntimeError"),
    ("factory_models:small_cnn", "3,8,8", ("--batch-size", "0"), "--batch-size: 0: must be >= 1"),
    ("factory_models:small_cnn", "3,8,8", ("--steps", "0"), "--steps: 0: must be >= 1"),
    ("factory_models:small_cnn", "3,8,8", ("--device", "tpu"), "'tpu' is not one of 'cpu', 'cuda'"),
    ("factory_models:small_cnn", "3,8,8", ("--concurrent", "0"), "--concurrent: 0: must be >= 1"),
    ("factory_models:small_cnn", "3,8,8", ("--threads", "-2"), "--threads: -2: must be >= 1"),
])
def test_bad_input_is_one_line(tmp_path, model, shape, extra, needle):
    out = tmp_path / "x.json"
    p = run("profile", "--model", model, "--input-shape", shape, "--batch-size", "2", "--out", str(out), *extra)
    assert_one_line_error(p, needle)
    assert not out.exists()


def test_threads_and_concurrent_copies_are_recorded_and_cleaned_up(tmp_path):
    """--threads sets torch's threads, --concurrent 2 runs one more copy of the model meanwhile (as the
    other rank of a host computes); both land in the layout, and the copy is gone afterwards."""
    s, d, p = _profile(tmp_path / "c.json", "factory_models:mlp", "256", 64, "--threads", "1", "--concurrent", "2")
    assert d["threads"] == 1 and d["concurrent"] == 2 and s["concurrent"] == 2
    assert "1 concurrent copy(ies) computing" in d["source"]
    left = subprocess.run(["pgrep", "-f", "autotuner.realrun.profile factory_models:mlp"], capture_output=True, text=True)
    assert left.stdout.strip() == ""
    load_layout(str(tmp_path / "c.json"))  # loads back as a layout


def test_a_copy_that_fails_is_one_line():
    """A copy that cannot build its model stops the profile with one line, not a hang."""
    from autotuner.realrun import profile as P

    with pytest.raises(P.ProfileError, match="a copy of factory_models:nope exited before its first step"):
        with P._concurrent_copies(1, "factory_models:nope", "8", 2, 1):
            pass


def test_cuda_without_a_gpu_is_one_line(tmp_path):
    """No GPU visible to the profiling process (``CUDA_VISIBLE_DEVICES`` empty hides one where the machine has it)."""
    p = run("profile", "--model", "factory_models:small_cnn", "--input-shape", "3,8,8", "--device", "cuda",
            "--out", str(tmp_path / "x.json"), env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert_one_line_error(p, "error: --device cuda: CUDA is not available")


def test_profile_on_cuda(tmp_path):
    need_cuda()
    _, d, _ = _profile(tmp_path / "g.json", "factory_models:small_cnn", "3,8,8", 8, "--device", "cuda")
    ready = [t["ready_ms"] for t in d["tensors"]]
    assert d["device"] == "cuda" and all(b >= a for a, b in zip(ready, ready[1:]))
    assert ready[-1] <= d["backward_ms"] + TOL_MS


def test_unwritable_out_fails_before_profiling(tmp_path):
    (tmp_path / "afile").write_text("")
    p = run("profile", "--model", "factory_models:small_cnn", "--input-shape", "3,8,8",
            "--out", str(tmp_path / "afile" / "x.json"))
    assert_one_line_error(p, "cannot write there")


def test_cli_start_does_not_import_torch_or_the_profiler():
    code = "import sys, autotuner.cli; print('torch' in sys.modules, 'autotuner.realrun.profile' in sys.modules)"
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.stdout.split() == ["False", "False"], p.stderr


# --- the measured fields of a layout file -------------------------------------------------------

def _doc(**top):
    tensors = top.pop("tensors", [{"name": "a", "shape": [4], "compute_share": 0.5, "ready_ms": 1.0},
                                  {"name": "b", "shape": [4], "compute_share": 0.5, "ready_ms": 3.0}])
    return {"schema": "autotuner.layout/1", "tensors": tensors, **top}


def test_measured_layout_readiness_is_ready_over_backward():
    L = layout_from_dict(_doc(forward_ms=2.0, backward_ms=4.0))
    assert L.measured and list(L.ready_fraction) == [0.25, 0.75]
    assert L.measured_split() == (2.0, 4.0) and L.measured_split(12.0) == (4.0, 8.0)
    # ready_ms without measured forward/backward (runs/gpu-profiles records): compute shares as before
    old = layout_from_dict(_doc())
    assert not old.measured and old.ready_ms is None and list(old.ready_fraction) == [0.5, 1.0]


@pytest.mark.parametrize("doc, needle", [
    (_doc(forward_ms=2.0), "backward_ms: (missing): forward_ms and backward_ms come together"),
    (_doc(forward_ms=2.0, backward_ms=0.0), "backward_ms: 0.0"),
    (_doc(forward_ms=2.0, backward_ms=4.0, tensors=[{"name": "a", "shape": [4], "compute_share": 1, "ready_ms": 1.0},
                                                    {"name": "b", "shape": [4], "compute_share": 1}]),
     "tensors[1].ready_ms: (missing): ready_ms is on every tensor or on none"),
    (_doc(forward_ms=2.0, backward_ms=4.0, tensors=[{"name": "a", "shape": [4], "compute_share": 1, "ready_ms": 3.0},
                                                    {"name": "b", "shape": [4], "compute_share": 1, "ready_ms": 1.0}]),
     "tensors[1].ready_ms: 1.0: must be >= the previous tensor's ready_ms (3)"),
    (_doc(forward_ms=2.0, backward_ms=2.5), "tensors[1].ready_ms: 3.0: must be >= the previous tensor's ready_ms (1) "
                                            "and <= backward_ms (2.5)"),
])
def test_bad_measured_fields_are_one_line(doc, needle):
    with pytest.raises(LayoutError) as e:
        layout_from_dict(doc, "L.json")
    assert str(e.value).startswith("L.json: ") and needle in str(e.value) and "\n" not in str(e.value)


def test_layout_dataclass_checks_measured_times():
    ok = dict(name="x", names=("a", "b"), shapes=((2,), (2,)), dtypes=("float32",) * 2, compute_share=(1.0, 1.0))
    assert not Layout(**ok).measured
    for bad in [dict(ready_ms=(1.0, 2.0)), dict(forward_ms=1.0), dict(forward_ms=1.0, backward_ms=-1.0),
                dict(forward_ms=1.0, backward_ms=3.0, ready_ms=(2.0, 1.0)),
                dict(forward_ms=1.0, backward_ms=3.0, ready_ms=(1.0, 4.0)),
                dict(forward_ms=1.0, backward_ms=3.0, ready_ms=(1.0,))]:
        with pytest.raises(LayoutError):
            Layout(**{**ok, **bad})
