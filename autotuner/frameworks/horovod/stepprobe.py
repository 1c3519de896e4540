"""The ``step`` phase of ``autotuner measure``: what a training step's small responses cost, timed as a step.

A step with fusion off or a threshold of 1 MiB and below runs a response per small gradient (bias, norm
vectors) as backward hands the gradients over one by one, with the ranks asleep in an emulated backward
between hand-overs and busy after it. Every other phase prices small responses in another pattern: the
timelines' back-to-back spans carry the timeline writer's CPU (on two emulated polling hosts most of the
price), the ``burst`` phase enqueues 32 at once from a busy loop (no wake-ups), the ``idle`` phase one at a
time from a sleeping one (research/notes/accuracy.md, "The small-response regime"). This phase runs the replay
workload (:mod:`autotuner.frameworks.horovod.replay`, the same harness ``validate`` runs) on a synthetic
layout, :data:`LAYOUT`, without the timeline, as jobs of Horovod's defaults, fusion off and cache off,
interleaved per repeat, at :data:`COMPUTE_MS` and (defaults, fusion off) at :data:`LONG_COMPUTE_MS`, and records
each job's step times. The fit reads the step-time difference
fusion off - defaults (about :data:`BLOCKS` x 4 - 1 more responses) and solves for the small-response latency
that makes the simulator give the same difference
(:func:`autotuner.frameworks.horovod.fit.phase_step.step_small_response`); the difference cancels what both jobs
share (compute, the defaults' few fused responses, the env's offset).

The layout is no user's model: :data:`BLOCKS` blocks, each a 256 x 256 float32 weight (256 KiB) and three
256-element float32 vectors (1 KiB each: bias, norm weight, norm bias), backward order, one equal share of
backward per block on its weight. The jobs' knobs: Horovod 0.28.1's defaults (``horovod/common/common.h``:
128 MiB, 1 ms, cache 1024), the same with a fusion threshold of 0, and with a response cache capacity of 0
(:data:`JOBS`; :class:`autotuner.frameworks.horovod.knobs.Config` names the flags). Pure: no I/O here; :func:`autotuner.frameworks.horovod.measure.run_step_phase` runs it.
"""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from ...model.layout import Layout
from .knobs import DEFAULTS_0_28, Config

#: names the layout a record was measured with (a changed layout gets a new name; the fit refuses others)
LAYOUT_NAME = "step-probe/1"
#: blocks of the synthetic layout: 4 tensors each
BLOCKS = 32
#: elements of each block's weight (256 x 256) and of each of its three vectors
WEIGHT_SHAPE, VECTOR_SHAPE = (256, 256), (256,)
#: emulated forward + backward compute per step, ms (forward 1/3, backward 2/3, as the replay sleeps them)
COMPUTE_MS = 100.0
#: the same jobs' second compute, ms: a backward long enough that most of fusion off's small responses run during
#: it, where 100 ms leaves most of them after it; the fit records what the two differences say a small response costs
#: during the backward and after it, and what the one charged price simulates at this compute
#: (:func:`autotuner.frameworks.horovod.fit.phase_step._long_compute`; recorded, not charged)
LONG_COMPUTE_MS = 300.0
#: the jobs run at :data:`LONG_COMPUTE_MS` too (cache off only at :data:`COMPUTE_MS`)
LONG_JOBS = ("defaults", "fusion-off")
#: measured and warm-up steps per job
STEPS, WARMUP = 8, 2
#: the jobs, in the order each repeat runs them: name -> Horovod knobs
JOBS: dict[str, Config] = {
    "defaults": DEFAULTS_0_28,
    "fusion-off": replace(DEFAULTS_0_28, fusion_threshold_bytes=0),
    "cache-off": replace(DEFAULTS_0_28, cache_capacity=0),
}


def layout_dict() -> dict:
    """:data:`LAYOUT` as an ``autotuner.layout/1`` JSON object (what the replay is given)."""
    tensors = []
    for b in reversed(range(BLOCKS)):  # backward order: the last block's gradients first
        tensors.append({"name": f"block{b}.weight", "shape": list(WEIGHT_SHAPE), "dtype": "float32",
                        "compute_share": 1.0 / BLOCKS})
        for v in ("bias", "norm.weight", "norm.bias"):
            tensors.append({"name": f"block{b}.{v}", "shape": list(VECTOR_SHAPE), "dtype": "float32",
                            "compute_share": 0.0})
    return {"schema": "autotuner.layout/1", "name": LAYOUT_NAME.replace("/", "-"),
            "source": f"{LAYOUT_NAME}: synthetic (autotuner/frameworks/horovod/stepprobe.py): {BLOCKS} blocks of a "
                      "256x256 float32 weight and three 256-element vectors, equal backward share per block",
            "order": "backward", "tensors": tensors}


@lru_cache(maxsize=1)
def layout() -> Layout:
    """The phase's layout (:data:`BLOCKS` x 4 tensors: 256 KiB, 1 KiB, 1 KiB, 1 KiB per block); built once (the fit
    simulates it at every step of its root search)."""
    from ...readers.layouts import layout_from_dict

    return layout_from_dict(layout_dict(), LAYOUT_NAME)


LAYOUT = layout_dict()
