"""Size-dependent latency (piecewise tier), host passes with a cache knee, and their fits."""
import json
from pathlib import Path

import numpy as np
import pytest

from autotuner.model.costmodel import Cluster, CostModel, CostModelError, HostPasses, Tier
from autotuner.errors import FitError
from autotuner.fit.regression import fit_host_passes, fit_piecewise
from autotuner.frameworks.horovod.knobs import MIB, Config
from autotuner.readers.timeline import read_timeline
from autotuner.frameworks.horovod.simulator import simulate_step
from autotuner.model.workload import Workload
from autotuner.readers.timeline_steps import host_samples

ROOT = Path(__file__).resolve().parents[1]
TIMELINES = ROOT / "runs" / "local-gloo-1gbit" / "validation" / "timelines" / "fit-sweep"


def test_piecewise_tier_switches_segment_at_the_knee_for_scalars_and_arrays():
    t = Tier(1e-3, 1e9, large_from_bytes=4 * MIB, large_alpha_s=0.0, large_bandwidth_Bps=5e8)
    below, at = t.allreduce_s(4 * MIB - 1, 2), t.allreduce_s(4 * MIB, 2)
    assert below == pytest.approx(2e-3 + (4 * MIB - 1) / 1e9)
    assert at == pytest.approx(4 * MIB / 5e8)
    arr = t.allreduce_s(np.array([4 * MIB - 1, 4 * MIB]), 2)
    assert arr.tolist() == [below, at]
    assert t.scaled(2.0).large_bandwidth_Bps == 1e9 and t.scaled(2.0).bandwidth_Bps == 2e9
    assert Tier.from_dict(t.to_dict()).to_dict() == pytest.approx(t.to_dict())
    with pytest.raises(CostModelError):
        Tier(1e-3, 1e9, large_from_bytes=1.0, large_bandwidth_Bps=0.0)


def test_host_passes_formulas_round_trip_and_no_host_keeps_the_old_copy_charge():
    h = HostPasses(knee_bytes=8 * MIB, memcpy_s_per_byte=1e-10, memcpy_spill_s_per_byte=2e-10,
                   gap_fixed_s=1e-4, gap_s_per_byte=5e-11, gap_spill_s_per_byte=1e-10)
    assert h.memcpy_s(4 * MIB) == pytest.approx(4 * MIB * 1e-10)
    assert h.memcpy_s(16 * MIB) == pytest.approx(16 * MIB * 1e-10 + 8 * MIB * 2e-10)
    assert h.gap_s(16 * MIB) == pytest.approx(1e-4 + 16 * MIB * 5e-11 + 8 * MIB * 1e-10)
    cm = CostModel(inter=Tier(1e-4, 1e9), memcpy_Bps=4e9, host=h)
    back = CostModel.from_dict(json.loads(json.dumps(cm.to_dict())))
    assert back.inter.alpha_s == pytest.approx(cm.inter.alpha_s) and back.memcpy_Bps == cm.memcpy_Bps
    assert back.host.to_dict() == pytest.approx(h.to_dict())
    plain = CostModel(inter=Tier(1e-4, 1e9), memcpy_Bps=4e9)
    assert plain.memcpy_s(1000) == 2 * 1000 / 4e9 and plain.host_gap_s(1000) == 0.0
    assert "host_passes" not in plain.to_dict()
    with pytest.raises(CostModelError):
        HostPasses(knee_bytes=-1, memcpy_s_per_byte=0.0)


def test_host_gap_is_charged_once_per_response_in_the_step():
    sizes = np.full(4, MIB, dtype=np.int64)
    frac = np.zeros(4)
    wl = Workload(forward_s=0.0, backward_s=1e-3)
    cfg = Config(fusion_threshold_bytes=0, cycle_time_ms=1.0)
    base = CostModel(inter=Tier(0.0, 1e9))
    gap = CostModel(inter=Tier(0.0, 1e9), host=HostPasses(knee_bytes=0.0, memcpy_s_per_byte=0.0, gap_fixed_s=5e-3))
    c = Cluster(1, 2)
    r0, r1 = simulate_step(sizes, frac, wl, cfg, base, c), simulate_step(sizes, frac, wl, cfg, gap, c)
    assert len(r1.responses) == 4
    assert r1.step_time_s - r0.step_time_s == pytest.approx(4 * 5e-3)


def test_fit_piecewise_recovers_two_segments():
    n = np.array([2**k for k in range(8, 28)], dtype=float)
    t = np.where(n < 4 * MIB, 3e-3 + n * 1.5e-8, n * 1.7e-8)
    knee, small, large = fit_piecewise(n, t, np.ones_like(n), np.ones_like(n))
    assert knee == 4 * MIB
    assert small.a_s == pytest.approx(3e-3, rel=1e-3) and large.b_s_per_byte == pytest.approx(1.7e-8, rel=1e-3)
    assert large.a_s < 1e-5


def test_fit_host_passes_recovers_knee_rates_and_fixed_cost():
    rng = np.random.default_rng(0)
    k = 8 * MIB
    sizes = rng.uniform(0.1, 90, 400) * MIB
    mem = np.c_[sizes, 0.18e-3 / MIB * sizes + 0.28e-3 / MIB * np.maximum(sizes - k, 0)]
    a, b = rng.uniform(0, 90, 600) * MIB, rng.uniform(0, 90, 600) * MIB
    g = 0.05e-3 + 0.06e-3 / MIB * (a + b) / 2 + 0.2e-3 / MIB * (np.maximum(a - k, 0) + np.maximum(b - k, 0)) / 2
    host, ctrl, info = fit_host_passes(mem, np.c_[a, b, g, rng.integers(0, 2, 600)])
    assert info["knee_mib"] == 8
    assert host.memcpy_s_per_byte * MIB == pytest.approx(0.18e-3, rel=1e-3)
    assert host.memcpy_spill_s_per_byte * MIB == pytest.approx(0.28e-3, rel=1e-3)
    assert host.gap_spill_s_per_byte * MIB == pytest.approx(0.2e-3, rel=1e-3)
    assert ctrl == pytest.approx(0.05e-3, rel=1e-3) and host.gap_fixed_s == pytest.approx(ctrl)
    with pytest.raises(FitError):
        fit_host_passes(mem[:2], np.c_[a, b, g, np.zeros(600)])


def test_host_samples_from_a_real_timeline():
    """The 96 MiB / 2 ms fit-sweep trial (real Horovod 0.28.1, 2 Gloo ranks, 1 Gbit/s testbed):
    its ~87 MiB fused responses copy slower per byte than the small ones, and the host time
    after an ~87 MiB response is many times the typical gap of the 6 MiB / 4 ms trial
    (CYCLE_START marks are in the files, so next-cycle pairs count)."""
    tl = read_timeline(TIMELINES / "proposal-4-r0.json.gz")
    assert tl.cycle_starts_us
    hs = host_samples(tl, cycle_time_ms=2.0)
    big = [s / n for n, s in hs.memcpy if n > 64 * MIB]
    small = [s / n for n, s in hs.memcpy if n < 16 * MIB]
    assert big and small and np.median(big) > np.median(small)
    assert hs.gaps and all(new == 1 for *_, new in hs.gaps)  # one big response per cycle here
    after_big = [g for a, _, g, _ in hs.gaps if a > 64 * MIB]
    small_run = host_samples(read_timeline(TIMELINES / "proposal-5-r0.json.gz"), cycle_time_ms=4.0)  # 6 MiB / 4 ms
    typical = np.median([g for *_, g, _ in small_run.gaps])
    assert after_big and typical < 1e-3 and min(after_big) > 10 * typical
