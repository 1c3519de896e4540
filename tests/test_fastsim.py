"""The fast batch simulator against the reference simulate_step, on random layouts and configs."""
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autotuner.model.costmodel import Cluster, CostModel, HostPasses, Negotiation, Tier
from autotuner.frameworks.horovod.fastsim import configs_to_arrays, fusion_plan, simulate_batch, simulate_configs
from autotuner.frameworks.horovod.knobs import MIB, Config, KnobError
from autotuner.frameworks.horovod.simulator import fuse, simulate_step
from autotuner.model.workload import Workload

ROOT = Path(__file__).resolve().parents[1]
COST = CostModel(inter=Tier(50e-6, 1e9), link_gbps=10)
WL = Workload(forward_s=0.03, backward_s=0.06)


@st.composite
def layouts(draw):
    T = draw(st.integers(1, 40))
    sizes = draw(st.lists(st.integers(1, 40 * MIB), min_size=T, max_size=T))
    if draw(st.booleans()):  # include tiny tensors (biases, BatchNorm)
        sizes = [s if draw(st.booleans()) else draw(st.integers(1, 4096)) for s in sizes]
    shares = draw(st.lists(st.floats(0.0, 10.0), min_size=T, max_size=T))
    shares = np.asarray(shares) + 1e-3
    frac = np.minimum(np.cumsum(shares) / shares.sum(), 1.0)
    return np.asarray(sizes, dtype=np.int64), frac


@st.composite
def workloads(draw):
    asyn = draw(st.booleans())
    host = draw(st.one_of(st.none(), st.floats(0.0, 0.1))) if asyn or draw(st.booleans()) else None
    overlap = draw(st.sampled_from([1.0, 1.0, 0.0, 0.5, draw(st.floats(0.0, 1.0))]))
    return Workload(forward_s=draw(st.floats(0.0, 0.1)), backward_s=draw(st.floats(1e-3, 0.3)),
                    update_s=draw(st.sampled_from([0.0, draw(st.floats(0.0, 0.01))])),
                    comm_scale=draw(st.floats(0.5, 2.0)), overlap=overlap, host_backward_s=host,
                    async_collectives=asyn)


@st.composite
def costs(draw):
    def tier():
        t = Tier(draw(st.floats(0.0, 1e-3)), draw(st.floats(1e8, 1e11)))
        if draw(st.booleans()):  # a size-dependent latency: a large-message segment
            t = replace(t, large_from_bytes=draw(st.floats(1.0, 64 * MIB)), large_alpha_s=draw(st.floats(0.0, 1e-3)),
                        large_bandwidth_Bps=draw(st.floats(1e8, 1e11)))
        return t

    host = None
    if draw(st.booleans()):  # size-dependent host passes with a cache knee
        host = HostPasses(knee_bytes=draw(st.floats(0.0, 64 * MIB)), memcpy_s_per_byte=draw(st.floats(0.0, 1e-9)),
                          memcpy_spill_s_per_byte=draw(st.floats(0.0, 1e-9)), gap_fixed_s=draw(st.floats(0.0, 1e-3)),
                          gap_s_per_byte=draw(st.floats(0.0, 1e-9)), gap_spill_s_per_byte=draw(st.floats(0.0, 1e-9)))
    neg = Negotiation(ctrl_op_s=draw(st.floats(0.0, 4e-3)), cache_ops=draw(st.integers(0, 2)),
                      nocache_ops=draw(st.integers(0, 5)), per_tensor_s=draw(st.floats(0.0, 1e-5)))
    return CostModel(inter=tier(), intra=tier() if draw(st.booleans()) else None,
                     memcpy_Bps=draw(st.floats(1e9, 5e11)), host_copy_Bps=draw(st.floats(1e9, 5e10)),
                     negotiation=neg, host=host,
                     after_backward_s=draw(st.sampled_from([0.0, draw(st.floats(-5e-4, 2e-3))])))


@st.composite
def configs(draw, T: int, total: int):
    thr = draw(st.one_of(st.just(0), st.integers(0, 2 * total), st.integers(0, 512).map(lambda m: m * MIB)))
    cyc = draw(st.one_of(st.sampled_from([0.1, 1.0, 5.0, 100.0]), st.floats(0.1, 100.0)))
    cap = draw(st.sampled_from([0, 1024, T, max(T - 1, 0), 1]))
    return Config(fusion_threshold_bytes=thr, cycle_time_ms=cyc, cache_capacity=cap,
                  hierarchical_allreduce=draw(st.booleans()), hierarchical_allgather=draw(st.booleans()))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_batch_equals_reference_on_random_layouts_workloads_and_configs(data):
    sizes, frac = data.draw(layouts())
    wl, cost = data.draw(workloads()), data.draw(costs())
    cluster = Cluster(data.draw(st.integers(1, 8)), data.draw(st.integers(1, 4)))
    comp = data.draw(st.sampled_from([1.0, 0.5]))
    phase = data.draw(st.sampled_from([0.0, data.draw(st.floats(0.0, 0.01))]))
    steps = data.draw(st.sampled_from([(1, 2), (0, 1), (2, 3)]))
    cfgs = data.draw(st.lists(configs(sizes.size, int(sizes.sum())), min_size=1, max_size=6))
    kw = dict(compression_ratio=comp, warmup_steps=steps[0], measure_steps=steps[1], loop_phase_s=phase)
    ref = np.array([simulate_step(sizes, frac, wl, c, cost, cluster, **kw).step_time_s for c in cfgs])
    fast = simulate_configs(sizes, frac, wl, cfgs, cost, cluster, **kw)
    np.testing.assert_allclose(fast, ref, rtol=1e-9, atol=0)
    raw = simulate_configs(sizes, frac, wl, cfgs, cost, cluster, dedupe=False, chunk=2, **kw)
    np.testing.assert_array_equal(raw, fast)


@pytest.mark.parametrize("env,model", [("v100-16gbit", "resnet50"), ("v100-16gbit", "vgg16"),
                                       ("local-gloo-1gbit", "resnet50"), ("v100-5gbit", "resnet50")])
def test_batch_equals_reference_on_committed_models(env, model):
    from autotuner.frameworks.horovod.predict import make_scenario

    sc, _ = make_scenario(ROOT / "autotuner" / "models", env, model)
    rng = np.random.default_rng(4)
    cfgs = [Config(fusion_threshold_bytes=int(m) * MIB, cycle_time_ms=float(c), cache_capacity=int(k),
                   hierarchical_allreduce=bool(h))
            for m, c, k, h in zip(rng.integers(0, 513, 40), np.exp(rng.uniform(np.log(0.1), np.log(100), 40)),
                                  rng.choice([0, 1024], 40), rng.integers(0, 2, 40))]
    ref = np.array([sc.simulate(c).step_time_s for c in cfgs])
    fast = sc.step_times(**configs_to_arrays(cfgs))
    np.testing.assert_allclose(fast, ref, rtol=1e-9, atol=0)


@settings(max_examples=200, deadline=None)
@given(sizes=st.lists(st.integers(1, 1000), min_size=1, max_size=30), thr=st.integers(0, 5000))
def test_fusion_plan_reproduces_fuse_for_every_cycle_window(sizes, thr):
    w = np.asarray(sizes, dtype=np.int64)
    nxt = fusion_plan(w, thr)
    for i in range(w.size):
        for j in range(i + 1, w.size + 1):
            groups, a = [], i
            while a < j:
                b = min(j, int(nxt[a]))
                groups.append((a - i, b - i))
                a = b
            assert groups == fuse(w[i:j], thr)


def test_provably_irrelevant_knobs_do_not_change_step_times():
    sizes, frac = np.full(12, 3 * MIB), np.linspace(0.1, 1, 12)
    total = int(sizes.sum())
    thr = np.array([total, total + 1, 512 * MIB])
    kw = dict(cycle_time_ms=2.0, cache_capacity=1024, hierarchical_allreduce=True)
    a = simulate_batch(sizes, frac, WL, COST, Cluster(4, 1), fusion_threshold_bytes=thr, hierarchical_allgather=False, **kw)
    b = simulate_batch(sizes, frac, WL, COST, Cluster(4, 1), fusion_threshold_bytes=thr, hierarchical_allgather=True, **kw)
    assert np.all(a == a[0]) and np.array_equal(a, b)  # thresholds >= total bytes fuse alike
    one = simulate_batch(sizes, frac, WL, COST, Cluster(1, 4), fusion_threshold_bytes=64 * MIB, cycle_time_ms=2.0,
                         cache_capacity=1024, hierarchical_allreduce=np.array([False, True]))
    assert one[0] == one[1]  # one node: Horovod ignores hierarchical allreduce


def test_broadcasting_shapes_and_knob_errors():
    sizes, frac = np.full(5, MIB), np.linspace(0.2, 1, 5)
    out = simulate_batch(sizes, frac, WL, COST, Cluster(2, 1), fusion_threshold_bytes=np.array([0, MIB])[:, None],
                         cycle_time_ms=np.array([1.0, 2.0, 5.0])[None, :], cache_capacity=0, hierarchical_allreduce=False)
    assert out.shape == (2, 3)
    assert out[0, 1] == simulate_step(sizes, frac, WL, Config(fusion_threshold_bytes=0, cycle_time_ms=2.0,
                                                              cache_capacity=0), COST, Cluster(2, 1)).step_time_s
    with pytest.raises(KnobError):
        simulate_batch(sizes, frac, WL, COST, Cluster(2, 1), fusion_threshold_bytes=-1, cycle_time_ms=1.0,
                       cache_capacity=0, hierarchical_allreduce=False)
    with pytest.raises(KnobError):
        simulate_batch(sizes, frac, WL, COST, Cluster(2, 1), fusion_threshold_bytes=0, cycle_time_ms=0.0,
                       cache_capacity=0, hierarchical_allreduce=False)
    with pytest.raises(ValueError):
        simulate_batch(sizes[:3], frac, WL, COST, Cluster(2, 1), fusion_threshold_bytes=0, cycle_time_ms=1.0,
                       cache_capacity=0, hierarchical_allreduce=False)


def test_grid_frame_covers_every_configuration_and_matches_the_reference():
    from autotuner.frameworks.horovod.predict import make_scenario
    from autotuner.frameworks.horovod.search.grid import ALL_COMBOS, COLUMNS, best_of_grid, grid_step_times

    sc, _ = make_scenario(ROOT / "autotuner" / "models", "v100-16gbit", "vgg16")
    f, c = np.array([0, 1, 32, 128, 512]), np.array([0.1, 1.0, 25.6])
    df = grid_step_times(sc, f, c)
    assert list(df.columns) == COLUMNS and len(df) == len(ALL_COMBOS) * f.size * c.size
    assert not df.duplicated(COLUMNS[:-1]).any()
    for r in df.sample(12, random_state=0).itertuples():
        cfg = Config(fusion_threshold_bytes=int(r.fusion_threshold_mb) * MIB, cycle_time_ms=r.cycle_time_ms,
                     cache_capacity=int(r.cache_capacity), hierarchical_allreduce=bool(r.hierarchical_allreduce),
                     hierarchical_allgather=bool(r.hierarchical_allgather))
        assert r.step_time_ms == pytest.approx(sc.simulate(cfg).step_time_ms, rel=1e-9)
    cfg, ms = best_of_grid(df)
    assert ms == df.step_time_ms.min() and sc.simulate(cfg).step_time_ms == pytest.approx(ms, rel=1e-9)


def test_large_layouts_compute_response_times_on_demand_and_agree_with_the_table(monkeypatch):
    """The (2, T, T+1) response-time table is quadratic in memory (5,000 tensors: 1.5 GB); above
    DUR_TABLE_MAX_T tensors each response's time is computed when performed. Both
    paths give the same step times to the last bit."""
    from autotuner.frameworks.horovod import fastsim
    from autotuner.model.costmodel import Cluster, CostModel, Tier
    from autotuner.model.workload import Workload

    rng = np.random.default_rng(3)
    T = 300
    sizes = rng.integers(64, 4 << 20, T)
    frac = np.sort(rng.random(T))
    cost = CostModel(inter=Tier.from_linear(5e-4, 1 / 1e8, 2))
    wl = Workload(forward_s=0.05, backward_s=0.1)
    knobs = dict(fusion_threshold_bytes=np.array([0, 1 << 20, 64 << 20]), cycle_time_ms=np.array([1.0, 3.5, 25.0]),
                 cache_capacity=np.array([1024, 0, 1024]), hierarchical_allreduce=np.array([False, False, False]))
    table = fastsim.simulate_batch(sizes, frac, wl, cost, Cluster(1, 2), **knobs)
    monkeypatch.setattr(fastsim, "DUR_TABLE_MAX_T", 10)
    on_demand = fastsim.simulate_batch(sizes, frac, wl, cost, Cluster(1, 2), **knobs)
    assert np.array_equal(table, on_demand)
