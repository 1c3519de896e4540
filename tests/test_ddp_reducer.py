"""DDP's Reducer simulator: the bucket assignment against torch's own, the knob table, and the step's
timeline on hand-worked cases."""
from __future__ import annotations

import numpy as np
import pytest
from cli_helpers import need_module

from autotuner.errors import CostModelError, KnobError, ScenarioError
from autotuner.frameworks.ddp.knobs import DDP_KNOBS, DdpConfig
from autotuner.frameworks.ddp.reducer import assign_buckets, simulate_ddp_step
from autotuner.model.costmodel import Cluster, CostModel, Tier
from autotuner.model.workload import Workload

MIB = 1 << 20
torch = need_module("torch")
dist = need_module("torch.distributed", "torch")

_DT = {"float32": torch.float32, "float16": torch.float16}


def _torch_assignment(sizes, dtypes, limits, order=None):
    """torch 2.13's own ``compute_bucket_assignment_by_size`` (reducer.cpp, exposed to Python)."""
    ts = [torch.empty(int(s) // (4 if d == "float32" else 2), dtype=_DT[d]) for s, d in zip(sizes, dtypes)]
    if order is None:
        return dist._compute_bucket_assignment_by_size(ts, list(limits), [False] * len(ts))
    # the rebuild passes the tensors in ready order and their indices beside them
    return dist._compute_bucket_assignment_by_size([ts[i] for i in order], list(limits), [False] * len(ts),
                                                   [int(i) for i in order])


@pytest.mark.parametrize("seed", range(12))
def test_bucket_assignment_is_torchs_own(seed):
    rng = np.random.default_rng(seed)
    T = int(rng.integers(1, 300))
    elems = np.exp(rng.uniform(np.log(1), np.log(8e6), T)).astype(int) + 1
    dtypes = ["float16" if (seed % 3 == 0 and rng.random() < 0.3) else "float32" for _ in range(T)]
    sizes = [int(e) * (4 if d == "float32" else 2) for e, d in zip(elems, dtypes)]
    limits = [[1 * MIB, 25 * MIB], [int(rng.integers(1, 64)) * MIB], [MIB, 4 * MIB, 16 * MIB, 64 * MIB],
              [2**63 - 1]][seed % 4]
    mine, theirs = assign_buckets(sizes, dtypes, limits), _torch_assignment(sizes, dtypes, limits)
    assert [list(b) for b in mine[0]] == [list(b) for b in theirs[0]] and list(mine[1]) == list(theirs[1])
    order = rng.permutation(T)
    mine = assign_buckets(sizes, dtypes, limits, order)
    theirs = _torch_assignment(sizes, dtypes, limits, order)
    assert [list(b) for b in mine[0]] == [list(b) for b in theirs[0]] and list(mine[1]) == list(theirs[1])


def test_the_caps_ddp_derives_from_its_arguments():
    """torch 2.13 _BucketCapacityConfig: the 1 MiB first bucket only while bucket_cap_mb is left at its default."""
    assert DdpConfig().rebuild_limits() == (MIB, 25 * MIB)
    assert DdpConfig(bucket_cap_mb=25).rebuild_limits() == (25 * MIB, 25 * MIB)
    assert DdpConfig(bucket_cap_mb_list=(1, 4, 25)).rebuild_limits() == (MIB, 4 * MIB, 25 * MIB)
    assert DdpConfig(bucket_cap_mb_list=(1, 4, 25)).cap_bytes() == 25 * MIB
    assert DdpConfig().first_iteration_limits() == (2**63 - 1,)  # one bucket until the rebuild
    assert DdpConfig(find_unused_parameters=True).first_iteration_limits() == (MIB, 25 * MIB)
    assert not DdpConfig(find_unused_parameters=True).rebuilds and DdpConfig(find_unused_parameters=True,
                                                                            static_graph=True).rebuilds
    # the same caps as torch's own config class
    from torch.nn.parallel.distributed import _BucketCapacityConfig

    for kw in ({}, {"bucket_cap_mb": 25}, {"bucket_cap_mb": 3}, {"bucket_cap_mb_list": [1, 4, 25]}):
        theirs = _BucketCapacityConfig.create(kw.get("bucket_cap_mb"), kw.get("bucket_cap_mb_list"), False)
        mine = DdpConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in kw.items()})
        assert (mine.cap_bytes(), mine.first_cap_bytes()) == (theirs.bucket_bytes_cap, theirs.first_bucket_bytes_cap)
        first, rebuild = theirs.compute_bucket_size_limits(False, False)
        assert list(mine.first_iteration_limits()) == [int(x) for x in first]
        if rebuild:
            assert list(mine.rebuild_limits()) == rebuild


def test_the_knob_table_and_the_code_a_user_pastes():
    assert {k.argument for k in DDP_KNOBS} >= {"bucket_cap_mb", "bucket_cap_mb_list", "gradient_as_bucket_view",
                                               "register_comm_hook", "static_graph", "find_unused_parameters"}
    c = DdpConfig(bucket_cap_mb=4, gradient_as_bucket_view=True, comm_hook="fp16_compress")
    assert c.code() == ("model = DistributedDataParallel(model, bucket_cap_mb=4, gradient_as_bucket_view=True)\n"
                        "model.register_comm_hook(None, default_hooks.fp16_compress_hook)")
    assert DdpConfig.from_dict(c.to_dict()) == c
    assert DdpConfig().code() == "model = DistributedDataParallel(model)"


@pytest.mark.parametrize("kw, msg", [({"bucket_cap_mb": 0}, "bucket_cap_mb"), ({"bucket_cap_mb": float("nan")}, "MiB"),
                                     ({"bucket_cap_mb_list": ()}, "non-empty"), ({"comm_hook": "int8"}, "comm_hook"),
                                     ({"gradient_as_bucket_view": 1}, "true or false"),
                                     ({"bucket_cap_mb_list": (1, -2)}, "bucket_cap_mb_list[1]")])
def test_bad_knobs_are_one_line(kw, msg):
    with pytest.raises(KnobError, match=None) as e:
        DdpConfig(**kw)
    assert msg in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(KnobError):
        DdpConfig.from_dict({"bucket_size": 3})


def _cost(alpha_s=1e-3, gbps=1.0, memcpy_Bps=1e9):
    # a linear tier: allreduce(n) on 2 ranks = 2 alpha + n / bw
    return CostModel(inter=Tier(alpha_s, gbps * 1e9 / 8), memcpy_Bps=memcpy_Bps)


def test_a_compress_hooks_cast_delays_the_later_gradients():
    """The fp16 hook casts a bucket down in ``run_comm_hook``, called from ``mark_bucket_ready`` on the thread that
    marked its last gradient: the backward's (reducer.cpp). Two 2 MiB tensors in two buckets, ready at 1/2 and 1 of
    a 100 ms backward after a 50 ms forward, a 1 ms cast down per bucket (524,288 elements at 1.9073 ns): bucket 1's
    gradient is marked 1 ms later than without the hook (as its copy in, c, delays it), and its collective starts
    after its own cast too."""
    from dataclasses import replace

    from autotuner.model.costmodel import Fp16Cost

    fp = Fp16Cost(sum_extra_s_per_elem=0.0, cast_up_s_per_elem=0.0, cast_down_s_per_elem=1e-3 / (MIB / 2))
    cost = replace(_cost(), fp16=fp)
    w = Workload(forward_s=0.05, backward_s=0.1)
    plain = simulate_ddp_step([2 * MIB, 2 * MIB], [0.5, 1.0], w, DdpConfig(bucket_cap_mb=1), cost, Cluster(1, 2))
    hooked = simulate_ddp_step([2 * MIB, 2 * MIB], [0.5, 1.0], w, DdpConfig(bucket_cap_mb=1, comm_hook="fp16_compress"),
                               cost, Cluster(1, 2))
    c = 2 * MIB / 1e9
    assert [b.ready_s for b in plain.buckets] == pytest.approx([0.1 + c, 0.15 + 2 * c])
    assert [b.ready_s for b in hooked.buckets] == pytest.approx([0.1 + c, 0.15 + 2 * c + 1e-3])
    assert hooked.buckets[1].start_s == pytest.approx(0.15 + 2 * c + 2e-3)


def test_a_collective_in_flight_slows_a_cpu_bound_backward():
    """The cpu phase's law (``CollectiveCpu``): while a collective runs, a CPU-bound backward's thread gets ``1 - f``
    of its core, ``f`` = the collective's CPU (per collective + per byte) over its duration, at most half a core.
    Two 2 MiB tensors ready at 1/2 and 1 of a 100 ms backward after a 50 ms forward, 1 MiB caps, the hand-worked
    step's link (bucket allreduce 18.777 ms) and copies (c = 2.097 ms): bucket 0 starts at 100 + c and takes
    CPU 2 ms + 2 MiB x 1 ns = 4.097 ms over its 18.777 ms, f = 0.2182. The 50 ms of compute after it run 18.777 ms
    at 1 - f and the rest at full speed: bucket 1 is marked (and, with the view, starts) at 100 + c + 18.777 +
    (50 - 18.777 x (1 - f)) + c ms, 4.097 ms later than without the term; not cpu_bound, nothing changes."""
    from dataclasses import replace

    from autotuner.model.costmodel import CollectiveCpu

    cost = replace(_cost(), collective_cpu=CollectiveCpu(2e-3, 1e-9))
    cfg = DdpConfig(bucket_cap_mb=1, gradient_as_bucket_view=True)
    plain = simulate_ddp_step([2 * MIB, 2 * MIB], [0.5, 1.0], Workload(forward_s=0.05, backward_s=0.1), cfg, cost,
                              Cluster(1, 2))
    bound = simulate_ddp_step([2 * MIB, 2 * MIB], [0.5, 1.0], Workload(forward_s=0.05, backward_s=0.1, cpu_bound=True),
                              cfg, cost, Cluster(1, 2))
    one, c = 2e-3 + 2 * MIB / 125e6, 2 * MIB / 1e9
    f = (2e-3 + 2 * MIB * 1e-9) / one
    assert cost.collective_cpu.share(2 * MIB, one) == pytest.approx(f)
    assert bound.buckets[0].start_s == pytest.approx(0.1 + c)
    assert bound.buckets[1].ready_s == pytest.approx(0.1 + c + one + (0.05 - one * (1 - f)) + c)
    assert bound.buckets[1].ready_s - plain.buckets[1].ready_s == pytest.approx(f * one)
    assert bound.step_time_s - plain.step_time_s == pytest.approx(f * one)
    assert CollectiveCpu(1.0).share(MIB, 1e-3) == 0.5 and CollectiveCpu(1.0).share(MIB, 0.0) == 0.0  # capped; none
    back = CostModel.from_dict(cost.to_dict()).collective_cpu  # the model file's form: us and ns per byte
    assert back.per_collective_s == pytest.approx(2e-3) and back.per_byte_s == pytest.approx(1e-9)
    assert CostModel.from_dict(_cost().to_dict()).collective_cpu is None
    with pytest.raises(CostModelError):
        CollectiveCpu(-1e-3)


def test_a_hand_worked_step():
    """Two tensors of 2 MiB ready at 1/2 and 1 of a 100 ms backward (after a 50 ms forward), 1 MiB caps, 2 ranks on
    one host at 1 Gbit/s (125 MB/s) and 1 ms alpha: each bucket's allreduce = 2 x 1 ms + 2 MiB / 125 MB/s =
    18.777 ms; each copy of 2 MiB at 1 GB/s c = 2.097 ms. With the view: each hook copies its gradient in (the
    training loop's zero_grad set it to None), delaying what follows: bucket 0 runs from 100 + c, bucket 1 from
    150 + 2c, and nothing is copied back: the step is 150 + 2c + 18.777 ms. The first iteration's one bucket of
    4 MiB starts at 150 + 2c, takes 2 ms + 4 MiB / 125 MB/s, and its gradients are copied back (2c)."""
    w = Workload(forward_s=0.05, backward_s=0.1)
    r = simulate_ddp_step([2 * MIB, 2 * MIB], [0.5, 1.0], w, DdpConfig(bucket_cap_mb=1, gradient_as_bucket_view=True),
                          _cost(), Cluster(1, 2))
    one = 2e-3 + 2 * MIB / 125e6
    c = 2 * MIB / 1e9
    assert [len(b.tensors) for b in r.buckets] == [1, 1]
    assert r.buckets[0].start_s == pytest.approx(0.1 + c) and r.buckets[0].end_s == pytest.approx(0.1 + c + one)
    assert r.step_time_s == pytest.approx(0.15 + 2 * c + one)
    assert r.exposed_comm_s == pytest.approx(one) and r.copy_s == pytest.approx(2 * c)
    # (the first iteration has no view yet: both gradients copied in, delaying the backward, and back)
    assert r.first_step_time_s == pytest.approx(0.15 + 2e-3 + 4 * MIB / 125e6 + 4 * (2 * MIB / 1e9))
    # without the view the gradients are also copied back after the last collective
    r2 = simulate_ddp_step([2 * MIB, 2 * MIB], [0.5, 1.0], w, DdpConfig(bucket_cap_mb=1), _cost(), Cluster(1, 2))
    assert r2.buckets[0].start_s == pytest.approx(0.1 + c) and r2.buckets[1].start_s == pytest.approx(0.15 + 2 * c)
    assert r2.step_time_s == pytest.approx(0.15 + 2 * c + one + 2 * c)


def test_the_reducers_host_work_delays_the_later_gradients_and_each_launch():
    """The Reducer's host work (``ReducerHostCost``): each hook costs ``per_tensor_s`` on the backward's thread
    (``autograd_hook`` -> ``mark_variable_ready``, reducer.cpp), so it delays every later gradient as the copy
    does, and each bucket ``per_bucket_s`` at its launch (``mark_bucket_ready`` -> ``all_reduce_bucket``) before its
    collective starts. The hand-worked step (two 2 MiB gradients at 1/2 and 1 of a 100 ms backward after 50 ms,
    1 MiB caps, the view; c = 2.097 ms a copy, one = 18.777 ms an allreduce) with h = 0.1 ms per gradient and
    g = 0.5 ms per bucket: bucket 0 is marked at 100 + c + h and starts g later; bucket 1 is marked at
    150 + 2c + 2h + g and starts at 150 + 2c + 2h + 2g; the step ends one allreduce later. Without it (None) the
    step is the one without the term; a negative figure is refused."""
    from autotuner.frameworks.ddp.hostcost import ReducerHostCost

    w = Workload(forward_s=0.05, backward_s=0.1)
    cfg = DdpConfig(bucket_cap_mb=1, gradient_as_bucket_view=True)
    one, c, h, g = 2e-3 + 2 * MIB / 125e6, 2 * MIB / 1e9, 1e-4, 5e-4
    host = ReducerHostCost(h, g, "a test")
    r = simulate_ddp_step([2 * MIB, 2 * MIB], [0.5, 1.0], w, cfg, _cost(), Cluster(1, 2), host=host)
    b0, b1 = r.buckets
    assert b0.ready_s == pytest.approx(0.1 + c + h) and b0.start_s == pytest.approx(0.1 + c + h + g)
    assert b1.ready_s == pytest.approx(0.15 + 2 * c + 2 * h + g)
    assert b1.start_s == pytest.approx(0.15 + 2 * c + 2 * h + 2 * g)
    assert r.step_time_s == pytest.approx(0.15 + 2 * c + 2 * h + 2 * g + one)
    plain = simulate_ddp_step([2 * MIB, 2 * MIB], [0.5, 1.0], w, cfg, _cost(), Cluster(1, 2))
    assert plain.step_time_s == pytest.approx(0.15 + 2 * c + one)
    assert r.step_time_s - plain.step_time_s == pytest.approx(2 * h + 2 * g)
    assert host.at("low") == host and host.to_dict()["per_tensor_us"] == pytest.approx(100.0)
    ranged = ReducerHostCost(h, g, "a test", (5e-5, 2e-4), (0.0, 1e-3))
    assert (ranged.at("low").per_tensor_s, ranged.at("high").per_bucket_s) == (5e-5, 1e-3)
    with pytest.raises(ValueError):
        ReducerHostCost(-1e-6, 0.0, "a test")


def test_a_queued_bucket_costs_the_burst_phases_saving_less():
    """Both 2 MiB gradients ready at the end of the backward, 1 MiB caps, the view: bucket 0 starts at 100 ms + c
    (its copy in), bucket 1 is launched at 100 + 2c, while bucket 0's allreduce still runs, so it starts when that
    ends and costs ``queued_saving_s`` (0.5 ms) less; bucket 0 (the link idle) costs the lone allreduce."""
    from dataclasses import replace

    w = Workload(forward_s=0.0, backward_s=0.1)
    cfg = DdpConfig(bucket_cap_mb=1, gradient_as_bucket_view=True)
    one, c = 2e-3 + 2 * MIB / 125e6, 2 * MIB / 1e9
    r = simulate_ddp_step([2 * MIB, 2 * MIB], [1.0, 1.0], w, cfg, replace(_cost(), queued_saving_s=5e-4), Cluster(1, 2))
    b0, b1 = r.buckets
    assert b0.end_s - b0.start_s == pytest.approx(one) and b1.start_s == pytest.approx(b0.end_s)
    assert b1.end_s - b1.start_s == pytest.approx(one - 5e-4)
    assert r.step_time_s == pytest.approx(0.1 + c + 2 * one - 5e-4)


def test_the_queued_saving_from_burst_records():
    """The saving is the median over jobs and sizes of (median lone call - median back-to-back call), clipped to
    [0, 2 (p - 1) alpha]; no records: 0 with a note saying so."""
    from autotuner.frameworks.ddp.fit import queued_saving

    tier = Tier(1e-3, 1e9)
    rec = {"sizes": [1024, 4096, 16384], "lone_ms": [[2.0, 2.2, 2.1], [3.0, 3.0], [5.0]],
           "burst_ms": [[1.5, 1.6], [2.0, 2.2], [4.8]]}
    q = queued_saving([rec], tier, 2)  # differences 2.1 - 1.55, 3.0 - 2.1, 5.0 - 4.8 ms: median 0.55
    assert q["saving_us"] == pytest.approx(550.0) and not q["clipped"] and q["jobs"] == 1
    assert queued_saving([rec], Tier(2e-4, 1e9), 2)["saving_us"] == pytest.approx(400.0)  # at most 2 alpha
    neg = dict(rec, burst_ms=[[3.0], [4.0], [6.0]])
    assert queued_saving([neg], tier, 2)["saving_us"] == 0.0
    none = queued_saving([], tier, 2)
    assert none["saving_us"] == 0.0 and "no burst phase" in none["note"]


def test_a_bucket_waits_for_the_one_before_it():
    """Launch order is bucket order: a late gradient in bucket 0 holds bucket 1 back even when 1 is ready first
    (the ready order decides the rebuilt buckets, so this only happens with find_unused_parameters' buckets)."""
    w = Workload(forward_s=0.0, backward_s=0.1)
    cfg = DdpConfig(bucket_cap_mb=1, gradient_as_bucket_view=True, find_unused_parameters=True)
    r = simulate_ddp_step([2 * MIB, 2 * MIB], [1.0, 0.2], w, cfg, _cost(), Cluster(1, 2))
    assert r.buckets[0].tensors == (0,) and r.buckets[1].launch_s == pytest.approx(r.buckets[0].launch_s)


def test_malformed_layouts_and_powersgd_are_one_line():
    w = Workload(forward_s=0.0, backward_s=0.1)
    for sizes, ready in (([], []), ([1, 2], [0.5]), ([0], [0.5]), ([4], [float("nan")])):
        with pytest.raises(ScenarioError):
            simulate_ddp_step(sizes, ready, w, DdpConfig(), _cost(), Cluster(1, 2))
    with pytest.raises(ScenarioError, match="powerSGD"):
        simulate_ddp_step([4], [1.0], w, DdpConfig(comm_hook="powerSGD"), _cost(), Cluster(1, 2))
    with pytest.raises(ScenarioError):
        assign_buckets([4], ["float32"], [])


def _layout_and_env():
    from pathlib import Path

    from autotuner.frameworks.horovod.fit.store import load_env
    from autotuner.readers.layouts import load_layout

    root = Path(__file__).resolve().parents[1]
    return load_layout("resnet50"), load_env(root / "autotuner" / "models", "fresh-poll-2gbit")


def _grid():
    caps = [None, 0.25, 1, 2, 4, 8, 16, 25, 32, 64, 128, 200]
    out = [DdpConfig(bucket_cap_mb=c, gradient_as_bucket_view=v, comm_hook=h)
           for c in caps for v in (False, True) for h in ("allreduce", "fp16_compress")]
    return out + [DdpConfig(bucket_cap_mb_list=(1, 4, 25)), DdpConfig(bucket_cap_mb_list=(0.5, 64), comm_hook="bf16_compress")]


@pytest.mark.parametrize("queued_saving_s,cpu_bound,host", [(0.0, False, None), (4e-4, False, None),
                                                            (4e-4, True, None), (0.0, False, (3e-5, 4e-4)),
                                                            (4e-4, True, (3e-5, 4e-4))])
def test_the_batch_version_is_the_reference(queued_saving_s, cpu_bound, host):
    """Contract: the batch simulator gives the reference's step, first step and bucket count on every setting of a
    grid (caps from 0.25 to 200 MiB, DDP's default, per-bucket lists, view and hooks), ResNet-50's 161 gradients on
    a fitted env whose fp16 term is measured (fresh-poll-2gbit), with and without a queued bucket's saving, with
    a CPU-bound backward that each collective in flight slows (``CollectiveCpu`` of 2 ms + 1 ns per byte), and with
    the Reducer's host work (30 us per gradient, 400 us per bucket); within 1e-9 s (float summation order)."""
    from dataclasses import replace

    from autotuner.frameworks.ddp.fastsim import simulate_ddp_batch
    from autotuner.frameworks.ddp.hostcost import ReducerHostCost
    from autotuner.model.costmodel import CollectiveCpu

    L, fenv = _layout_and_env()
    cost = replace(fenv.cost, queued_saving_s=queued_saving_s, collective_cpu=CollectiveCpu(2e-3, 1e-9))
    w = Workload(forward_s=0.03, backward_s=0.06, update_s=0.002, cpu_bound=cpu_bound)
    hc = None if host is None else ReducerHostCost(host[0], host[1], "a test")
    cfgs = _grid()
    step, first, count = simulate_ddp_batch(L.sizes_bytes, L.ready_fraction, w, cfgs, cost, fenv.cluster, L.dtypes,
                                            hc)
    for j, c in enumerate(cfgs):
        r = simulate_ddp_step(L.sizes_bytes, L.ready_fraction, w, c, cost, fenv.cluster, L.dtypes, hc)
        assert step[j] == pytest.approx(r.step_time_s, abs=1e-9), c
        assert first[j] == pytest.approx(r.first_step_time_s, abs=1e-9), c
        assert count[j] == len(r.buckets), c
    assert len(set(np.round(step, 6))) > 10  # the grid is not flat: the contract compares distinct answers


def test_the_ddp_tune_decides_as_horovods_simulators_best_then_ddps_defaults_then_a_repeat():
    """The shared decision (autotuner.search.tune.decide) over DDP's candidates: no trial yet, the simulator's best;
    then DDP's defaults (index 0), the baseline; then a repeat of the incumbent for the noise."""
    from autotuner.frameworks.ddp.fastsim import simulate_ddp_batch
    from autotuner.frameworks.ddp.tune import LENGTH_SCALES, candidate_grid, features, scaled_cost
    from autotuner.search.tune import TuneState, decide

    L, fenv = _layout_and_env()
    cands = candidate_grid(True)
    assert cands[0] == DdpConfig() and len(cands) == 44
    x = features(cands)
    assert x.shape == (44, 4) and x.min() >= 0 and x.max() <= 1
    w = Workload(forward_s=0.03, backward_s=0.06)

    def predict(scale, idx=None):
        sel = cands if idx is None else [cands[i] for i in idx]
        return simulate_ddp_batch(L.sizes_bytes, L.ready_fraction, w, sel, scaled_cost(fenv.cost, scale),
                                  fenv.cluster, L.dtypes)[0] * 1e3

    st = TuneState(cands=list(cands))
    kw = dict(sd=0.03, noise_fallback=0.02, budget_steps=200, steps_per_trial=8, x=x, length_scales=LENGTH_SCALES,
              base=0, baseline_name="DDP's defaults")
    d = decide(cands, st, predict, **kw)
    assert d.index == int(np.argmin(predict(1.0)))
    st.measured[d.index] = [float(d.prior[d.index])]
    st.steps += 8
    d2 = decide(cands, st, predict, **kw)
    assert d2.index == 0 and "DDP's defaults" in d2.reason
    st.measured[0] = [float(d2.prior[0])]
    st.steps += 8
    d3 = decide(cands, st, predict, **kw)
    assert d3.index == d.index and "repeat" in d3.reason
    # the budget stops it
    st.steps = 199
    assert decide(cands, st, predict, **kw).stop.startswith("step budget")


def test_torchrun_commands_for_one_host_and_for_emulated_hosts():
    from autotuner.frameworks.ddp.launch import torchrun_argv

    one = torchrun_argv("autotuner.frameworks.ddp.replay", ["--model", "m"], 2)
    assert one[1:] == ["--standalone", "--nproc-per-node", "2", "--max-restarts", "0", "-m",
                       "autotuner.frameworks.ddp.replay", "--model", "m"]
    two = torchrun_argv("train.py", [], 1, nnodes=2, node_rank=1, endpoint="10.77.0.1:29531", local_addr="10.77.0.2")
    # every emulated host shares this machine's host name: each torchrun says which address is its own
    assert two[two.index("--local-addr") + 1] == "10.77.0.2" and two[-1] == "train.py" and "-m" not in two
    assert two[two.index("--rdzv-endpoint") + 1] == "10.77.0.1:29531"
    with pytest.raises(ValueError):
        torchrun_argv("m", [], 1, nnodes=2)
    with pytest.raises(ValueError):
        torchrun_argv("m", [], 0)
