"""Search: the coordinate refinement on a batch objective."""
import numpy as np

from autotuner.frameworks.horovod.knobs import DEFAULTS_0_28, MIB, Config
from autotuner.frameworks.horovod.search.bayes import search


def _f(fusion_bytes, cycle_ms, cache, hier):
    """A smooth synthetic step time (s), minimum at 37 MiB, 0.7 ms, cache off, hierarchical on."""
    mb = np.asarray(fusion_bytes) / MIB
    return (1.0 + (np.log1p(mb) - np.log1p(37)) ** 2 + (np.log(cycle_ms) - np.log(0.7)) ** 2
            + 0.1 * (np.asarray(cache) > 0) + 0.1 * ~np.asarray(hier, dtype=bool))


def test_refinement_moves_only_downhill_and_reaches_the_optimum():
    calls = []

    def batch(**k):
        calls.append(k)
        return _f(k["fusion_threshold_bytes"], k["cycle_time_ms"], k["cache_capacity"], k["hierarchical_allreduce"])

    one = lambda c: float(_f(c.fusion_threshold_bytes, c.cycle_time_ms, c.cache_capacity, c.hierarchical_allreduce))  # noqa: E731
    trials = search(one, DEFAULTS_0_28, multi_node=True, n_calls=2, seed=0, batch_objective=batch)
    ref = [t for t in trials if t.origin == "refine"]
    before = min(t.step_time_s for t in trials if t.origin != "refine")
    assert ref and calls
    ys = [before] + [t.step_time_s for t in ref]
    assert all(b < a for a, b in zip(ys, ys[1:]))
    best = ref[-1].config
    assert best.fusion_threshold_bytes == 37 * MIB and best.cache_capacity == 0 and best.hierarchical_allreduce
    assert abs(best.cycle_time_ms - 0.7) < 0.01 and round(best.cycle_time_ms, 3) == best.cycle_time_ms
    assert all(isinstance(t.config, Config) and t.step_time_s == one(t.config) for t in ref)


def test_without_batch_objective_there_is_no_refinement():
    one = lambda c: float(_f(c.fusion_threshold_bytes, c.cycle_time_ms, c.cache_capacity, c.hierarchical_allreduce))  # noqa: E731
    trials = search(one, DEFAULTS_0_28, multi_node=False, n_calls=2, seed=0)
    assert {t.origin for t in trials} <= {"default", "autotune-start", "search"}
