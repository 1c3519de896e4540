"""Horovod's candidate space for ``autotuner tune``: what horovodrun can spell, the features the shared
surrogate sees, the simulator's prior over it, and Horovod's baseline.

The decision itself is framework-free (:mod:`autotuner.search.tune`: :func:`~autotuner.search.tune.decide`,
:class:`~autotuner.search.tune.TuneState`); DDP's space is :mod:`autotuner.frameworks.ddp.tune`. Pure (no I/O).

**Candidates.** A grid over what horovodrun can spell (:data:`FUSION_MIB` x :data:`CYCLE_MS` x response
cache on/off x the gradient compressions asked for): every whole-MiB fusion threshold a power of two
from 0 to 128 MiB (Horovod 0.28.1's default is 128 MiB; autotune's range is 0-64 MB,
horovod/common/parameter_manager.cc), cycle times 0.5-50 ms (autotune's range is 1-100 ms; the default
is 1 ms), and Horovod's defaults always among them.

**Prior mean.** The simulator's step time for each candidate, :func:`prior_ms` (ms), from the environment's
fitted cost model, with every link's bandwidth scaled by the decision's refit (:func:`scaled_scenario`).

**Unchecked physics.** fp16 candidates rest on physics no real trial of the env may have checked (fp16's
saving and its measured cost): :func:`unchecked_share` gives the surrogate's shared group offset its sd.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .knobs import CACHE_ON, DEFAULTS_0_28, MIB, Config

#: fusion thresholds searched (MiB): powers of two, 0 = fusion off, 128 = Horovod 0.28.1's default
FUSION_MIB = (0, 1, 2, 4, 8, 16, 32, 64, 128)
#: cycle times searched (ms): 1 = Horovod 0.28.1's default
CYCLE_MS = (0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0)
#: GP length scales over :func:`features` ([0, 1] each): log fusion, log cycle, cache, fp16. Two
#: neighbouring grid values of fusion are 1/8 apart and of cycle ~1/6: 0.25 lets one measurement inform
#: its neighbours without flattening the whole range; the cache switch correlates its two sides by
#: Matern-5/2(1/1) = 0.52; the compression switch by Matern-5/2(1/0.3) = 0.04: fp16's residual is its own
#: physics (casts, the float16 sum), not the knobs'.
LENGTH_SCALES = (0.25, 0.25, 1.0, 0.3)


@dataclass(frozen=True)
class Candidate:
    """One configuration tune can run: Horovod knobs and the gradient compression (``none``/``fp16``)."""

    config: Config
    compression: str = "none"

    @property
    def key(self) -> str:
        """A short stable name: ``f<MiB>-c<ms>-cache<on|off>[-fp16]``."""
        c = self.config
        return (f"f{c.fusion_threshold_bytes / MIB:g}-c{c.cycle_time_ms:g}-cache{'on' if c.cache_capacity else 'off'}"
                + ("" if self.compression == "none" else f"-{self.compression}"))


DEFAULT_CANDIDATE = Candidate(DEFAULTS_0_28, "none")


def candidate_grid(compressions: Sequence[str] = ("none",)) -> list[Candidate]:
    """Every candidate, defaults included: len = 9 x 7 x 2 x len(compressions)."""
    out = []
    for comp in compressions:
        for f in FUSION_MIB:
            for cy in CYCLE_MS:
                for cache in (CACHE_ON, 0):
                    out.append(Candidate(Config(fusion_threshold_bytes=int(f * MIB), cycle_time_ms=cy,
                                                cache_capacity=cache), comp))
    if DEFAULT_CANDIDATE not in out and "none" in compressions:
        out.append(DEFAULT_CANDIDATE)
    return out


def features(cands: Sequence[Candidate]) -> np.ndarray:
    """Shape (n, 4) in [0, 1]: log2(1 + fusion MiB) / log2(129), log(cycle / 0.5 ms) / log(100),
    cache on, fp16."""
    x = np.empty((len(cands), 4))
    for i, c in enumerate(cands):
        x[i, 0] = math.log2(1 + c.config.fusion_threshold_bytes / MIB) / math.log2(129)
        x[i, 1] = math.log(c.config.cycle_time_ms / 0.5) / math.log(100)
        x[i, 2] = 1.0 if c.config.cache_capacity else 0.0
        x[i, 3] = 1.0 if c.compression == "fp16" else 0.0
    return x


def unchecked_share(cands: Sequence[Candidate], with_term: np.ndarray, bytes_only: np.ndarray,
                    none_ms: np.ndarray) -> np.ndarray:
    """Per candidate, the share of its prediction no real trial has checked (fractions): for an fp16 candidate,
    the measured fp16 term (``|with_term - bytes_only| / with_term``) plus the halving of the bytes itself
    (``|none - bytes_only| / with_term``, the same knobs without compression); 0 for the others. Arrays in ms,
    shape (n,) each, aligned with ``cands`` (``none_ms``: the same knobs without compression)."""
    out = np.zeros(len(cands))
    for i, c in enumerate(cands):
        if c.compression != "none":
            out[i] = (abs(with_term[i] - bytes_only[i]) + abs(none_ms[i] - bytes_only[i])) / with_term[i]
    return out


def scaled_scenario(sc, scale: float):
    """``sc`` (a :class:`autotuner.frameworks.horovod.scenario.Scenario`) with every link tier's bandwidth multiplied by
    ``scale`` (:meth:`autotuner.model.costmodel.Tier.scaled`): the refit's one parameter."""
    from dataclasses import replace

    cost = sc.cost
    if scale != 1.0:
        cost = replace(cost, inter=cost.inter.scaled(scale),
                       intra=None if cost.intra is None else cost.intra.scaled(scale))
    return replace(sc, cost=cost)


def prior_ms(sc, cands: Sequence[Candidate], scale: float = 1.0, idx: Sequence[int] | None = None) -> np.ndarray:
    """The simulator's step time (ms) of candidates ``idx`` (default: all) on ``sc`` with the bandwidths
    scaled by ``scale``, each with its compression (:meth:`autotuner.frameworks.horovod.scenario.Scenario.simulate`)."""
    from dataclasses import replace

    base = scaled_scenario(sc, scale)
    scs = {}
    out = []
    for i in (range(len(cands)) if idx is None else idx):
        c = cands[i]
        if c.compression not in scs:
            scs[c.compression] = replace(base, compression=c.compression)
        out.append(scs[c.compression].simulate(c.config).step_time_ms)
    return np.asarray(out, dtype=float)


def baseline_index(cands: Sequence[Candidate]) -> int | None:
    """The baseline every answer is measured against: Horovod's default knobs (:data:`DEFAULT_CANDIDATE`)
    without compression when ``none`` is searched, else the default knobs with the first compression searched
    (``--compression fp16`` alone: the user's job already sends float16); None when no candidate has the
    default knobs."""
    if DEFAULT_CANDIDATE in cands:
        return cands.index(DEFAULT_CANDIDATE)
    return next((i for i, c in enumerate(cands) if c.config == DEFAULT_CANDIDATE.config), None)


def prior_unchecked(sc, cands: Sequence[Candidate], with_term: np.ndarray) -> np.ndarray:
    """:func:`unchecked_share` for ``cands`` on ``sc`` (a :class:`autotuner.frameworks.horovod.scenario.Scenario`): the fp16
    candidates' predictions without the env's measured fp16 term, and the same knobs without compression
    (``with_term``: :func:`prior_ms` of ``cands``, ms). Zeros when nothing is compressed."""
    from dataclasses import replace

    if all(c.compression == "none" for c in cands):
        return np.zeros(len(cands))
    bare = replace(sc, cost=replace(sc.cost, fp16=None))
    bytes_only = prior_ms(bare, cands)
    twins = [Candidate(c.config, "none") for c in cands]
    none_ms = prior_ms(sc, twins)
    return unchecked_share(cands, with_term, bytes_only, none_ms)
