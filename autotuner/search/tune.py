"""The decision core of ``autotuner tune``: Bayesian optimisation over real trials whose prior is the simulator.

Pure (no I/O, deterministic); the real trials live in :mod:`autotuner.realrun.tune`.

**Candidates.** A grid over what horovodrun can spell (:data:`FUSION_MIB` x :data:`CYCLE_MS` x response
cache on/off x the gradient compressions asked for): every whole-MiB fusion threshold a power of two
from 0 to 128 MiB (Horovod 0.28.1's default is 128 MiB; autotune's range is 0-64 MB,
horovod/common/parameter_manager.cc), cycle times 0.5-50 ms (autotune's range is 1-100 ms; the default
is 1 ms), and Horovod's defaults always among them.

**Prior mean.** The simulator's step time for each candidate, ``prior_ms`` (ms), from the environment's
fitted cost model, refitted after every trial (:func:`refit_bandwidth_scale`).

**Surrogate.** A Gaussian process over the *relative residual* ``r = measured / prior - 1``
(scikit-optimize's :class:`skopt.learning.GaussianProcessRegressor`, zero mean, :class:`ResidualGP`). Its
hyperparameters are not optimised (a handful of points cannot identify them) but set from measured figures:

- the prior's sd: how far the simulator has been from real runs on this environment (its error band,
  :func:`autotuner.api.error_band`: held-out mean error, or borrowed from siblings), widened by the
  residuals themselves once they exceed it;
- candidates that rest on physics no real trial of this env has checked (fp16's saving and its measured
  cost, :func:`unchecked_share`) share one offset, a normal prior of sd the median unchecked share, updated
  by every trial of the group (:func:`group_offset`): one fp16 trial calibrates every fp16 candidate;
- noise ``noise_sd``: the relative standard deviation of one trial's measured step time (the repeat
  spread of real trials, :func:`noise_from_repeats`);
- length scales: :data:`LENGTH_SCALES` over features scaled to [0, 1] (:func:`features`).

With no trial yet, the posterior mean is the prior and every candidate has the same relative
uncertainty: the first proposal is the simulator's best (:func:`next_candidate`).

**Acquisition.** Expected improvement for minimisation, scikit-optimize's
:func:`skopt.acquisition.gaussian_ei`, on ``y = prior_ms · (1 + r)`` (ms), against the best posterior
mean among measured candidates (noisy incumbent). A measured candidate can win it again: that is a
repeat, which the noise asks for when two candidates are close.

**Why not skopt's Optimizer.** ``skopt.Optimizer`` fits its surrogate to the objective itself
(constant mean, ``normalize_y``) and has no place for a prior mean function; modelling the residual
from the simulator with skopt's own GP and EI keeps the library and gives the prior.

**Stopping rule** (:func:`should_stop`): stop when no candidate's expected improvement (ms) beats the
measured noise of one trial (``noise_sd · incumbent``), or at the step budget.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..knobs import CACHE_ON, DEFAULTS_0_28, MIB, Config

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


def noise_from_repeats(measured: dict[int, list[float]], fallback: float) -> float:
    """Relative standard deviation of one trial (fraction): pooled over candidates measured more than
    once (``measured``: candidate index -> step times in ms), from log step times; ``fallback`` until
    some candidate has two measurements. Never below 0.5 % (a few trials underestimate it)."""
    dev, dof = 0.0, 0
    for v in measured.values():
        if len(v) > 1:
            lv = np.log(np.asarray(v, dtype=float))
            dev += float(((lv - lv.mean()) ** 2).sum())
            dof += len(v) - 1
    return max(math.sqrt(dev / dof) if dof else fallback, 0.005)


class ResidualGP:
    """The surrogate: a zero-mean GP over *standardised* relative residuals ``z = r / sd_i`` (scikit-optimize's
    :class:`skopt.learning.GaussianProcessRegressor`, kernel Matern 5/2 with :data:`LENGTH_SCALES`, unit
    amplitude, not optimised). ``sd_i``: how far the simulator may be off at candidate i (a fraction; larger
    where no real run has checked the physics, :func:`prior_sd`); each observation's noise enters as its own
    ``alpha = (noise_sd / sd_i)^2``. ``amplitude``: multiplies every ``sd_i`` (>= 1: raised when the
    measured residuals are larger than the prior said)."""

    def __init__(self, sd: np.ndarray, noise_sd: float, amplitude: float = 1.0):
        self.sd, self.noise_sd, self.amplitude = np.asarray(sd, float) * amplitude, float(noise_sd), float(amplitude)
        self.gp = None

    def fit(self, x: np.ndarray, idx: list[int], r: np.ndarray) -> "ResidualGP":
        from skopt.learning import GaussianProcessRegressor
        from skopt.learning.gaussian_process.kernels import Matern

        if len(r):
            sd = self.sd[idx]
            self.gp = GaussianProcessRegressor(kernel=Matern(LENGTH_SCALES, "fixed", nu=2.5), optimizer=None,
                                               normalize_y=False, alpha=(self.noise_sd / sd) ** 2)
            self.gp.fit(x[idx], np.asarray(r) / sd)
        return self

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(mean, sd) of the relative residual at every row of ``x`` (shape (n, 4), the candidates in the
        order of ``sd``); the latent function's sd (one measurement's noise left out)."""
        if self.gp is None:
            return np.zeros(len(x)), self.sd.copy()
        mu, sd = self.gp.predict(x, return_std=True)
        return mu * self.sd, np.sqrt(np.maximum(sd, 0.0) ** 2) * self.sd


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


class _StepModel:
    """Adapter for :func:`skopt.acquisition.gaussian_ei`: ``predict(X, return_std)`` in ms, X = row indices."""

    def __init__(self, mean_ms: np.ndarray, sd_ms: np.ndarray):
        self.mean_ms, self.sd_ms = mean_ms, sd_ms

    def predict(self, idx, return_std=False):
        i = np.asarray(idx, dtype=int).ravel()
        return (self.mean_ms[i], self.sd_ms[i]) if return_std else self.mean_ms[i]


@dataclass(frozen=True)
class Belief:
    """The posterior over every candidate (ms), and what the next trial should be.

    Attributes: mean_ms, sd_ms (shape (n,)); ei_ms (expected improvement, ms); incumbent (index of the best
    posterior mean among measured candidates, or None); incumbent_ms; next_index (argmax EI); noise_ms (one
    trial's noise at the incumbent's step time, ms); amplitude (the prior sd's multiplier the residuals asked)."""

    mean_ms: np.ndarray
    sd_ms: np.ndarray
    ei_ms: np.ndarray
    incumbent: int | None
    incumbent_ms: float
    next_index: int
    noise_ms: float
    amplitude: float = 1.0


def group_offset(prior_ms: np.ndarray, measured: dict[int, list[float]], group: np.ndarray, group_sd: float,
                 sd: np.ndarray, noise_sd: float) -> tuple[float, float]:
    """The relative offset every candidate of ``group`` (a boolean mask: the fp16 candidates) shares, and its
    variance: a normal prior N(0, group_sd²) updated by the group's measured residuals ``measured / prior - 1``,
    each with variance ``sd_i² + noise_sd²`` (conjugate normal: precision-weighted mean). (0, group_sd²) with
    no trial in the group."""
    prec, acc = 1.0 / group_sd ** 2, 0.0
    for i, v in measured.items():
        if group[i]:
            for t in v:
                w = 1.0 / (sd[i] ** 2 + noise_sd ** 2)
                prec += w
                acc += w * (t / prior_ms[i] - 1)
    return acc / prec, 1.0 / prec


def belief(prior_ms: np.ndarray, x: np.ndarray, measured: dict[int, list[float]], *, sd: np.ndarray | float,
           noise_sd: float, group: np.ndarray | None = None, group_sd: float = 0.0) -> Belief:
    """The posterior and the acquisition over every candidate.

    ``prior_ms``: the simulator's step time per candidate (ms, shape (n,)); ``x``: :func:`features`;
    ``measured``: candidate index -> measured step times (ms, one per trial); ``sd``: the prior's relative sd
    per candidate (the env's error band) or one for all; ``noise_sd``: one trial's relative noise;
    ``group``/``group_sd``: candidates whose prediction rests on physics no real trial has checked (fp16's)
    share one relative offset of prior sd ``group_sd`` (:func:`group_offset`): one trial of the group tells
    every member, the GP then models what is left."""
    from skopt.acquisition import gaussian_ei

    sd = np.broadcast_to(np.asarray(sd, float), prior_ms.shape)
    if group is not None and group_sd > 0 and np.any(group):
        off, var = group_offset(prior_ms, measured, group, group_sd, sd, noise_sd)
        prior_ms = prior_ms * (1 + off * group)
        sd = np.sqrt(sd ** 2 + var * group)
    idx = [i for i, v in measured.items() for _ in v]
    r = np.array([t / prior_ms[i] - 1 for i, v in measured.items() for t in v])
    # empirical amplitude: residuals larger than the prior allowed (beyond one trial's noise) widen it
    amp = 1.0
    if len(r):
        z2 = np.maximum(r ** 2 - noise_sd ** 2, 0.0) / sd[idx] ** 2
        amp = max(1.0, math.sqrt(float(np.mean(z2))))
    gp = ResidualGP(sd, noise_sd, amp).fit(x, idx, r)
    mu, sdr = gp.predict(x)
    mean_ms, sd_ms = prior_ms * (1 + mu), prior_ms * sdr
    if measured:
        inc = min(measured, key=lambda i: mean_ms[i])
        y_opt = float(mean_ms[inc])
    else:
        inc, y_opt = None, float(mean_ms.min())
    ei = gaussian_ei(np.arange(len(prior_ms))[:, None], _StepModel(mean_ms, sd_ms), y_opt=y_opt, xi=0.0)
    ei = np.asarray(ei, dtype=float)
    # ties (no data: the same relative sd everywhere) go to the lowest mean, then the lowest index
    nxt = int(np.lexsort((np.arange(len(ei)), mean_ms, -np.round(ei, 9)))[0])
    return Belief(mean_ms, sd_ms, ei, inc, y_opt, nxt, noise_sd * y_opt, amp)


def should_stop(b: Belief) -> bool:
    """True when no candidate's expected improvement beats one trial's noise (ms)."""
    return b.incumbent is not None and float(b.ei_ms.max()) < b.noise_ms


def refit_bandwidth_scale(measured: dict[int, list[float]], predict: Callable[[float, list[int]], np.ndarray],
                          bounds: tuple[float, float] = (0.5, 2.0), min_gain: float = 0.0) -> tuple[float, float, float]:
    """The sim-to-real refit: the one cost-model parameter the trials so far identify, a multiplier ``s`` of
    every link tier's bandwidth (the effective link rate a training job sees beside the sweep's), fitted by
    least squares of log(predicted / measured) over the measured candidates (scipy's bounded scalar search,
    ``bounds``: a link the sweep measured at half or twice its rate would be another environment).

    The data identify ``s`` only when it explains them: if the rms error falls by less than ``min_gain``
    (a fraction: one trial's noise), or ``s`` ends on a bound (the link is not what the misfit is about: a
    compute-bound step, a small model's latency), ``s`` stays 1 and the GP carries the residual.
    ``predict(s, indices)``: the simulator's step times (ms) of those candidates with the bandwidths scaled
    by ``s``. Returns (s, rms before, rms after): rms of the relative error (fractions) at s = 1 and at s.
    """
    from scipy.optimize import minimize_scalar

    idx = sorted(measured)
    meas = np.array([float(np.median(measured[i])) for i in idx])

    def loss(s):
        return float(np.mean(np.log(predict(s, idx) / meas) ** 2))

    before = math.sqrt(loss(1.0))
    res = minimize_scalar(loss, bounds=bounds, method="bounded", options={"xatol": 1e-3})
    s = float(res.x)
    on_bound = min(abs(s - bounds[0]), abs(s - bounds[1])) < 2e-3 * s
    if on_bound or not math.sqrt(res.fun) < before - min_gain:
        s = 1.0
    return s, before, math.sqrt(loss(s))


def scaled_scenario(sc, scale: float):
    """``sc`` (a :class:`autotuner.model.scenario.Scenario`) with every link tier's bandwidth multiplied by
    ``scale`` (:meth:`autotuner.model.costmodel.Tier.scaled`): the refit's one parameter."""
    from dataclasses import replace

    cost = sc.cost
    if scale != 1.0:
        cost = replace(cost, inter=cost.inter.scaled(scale),
                       intra=None if cost.intra is None else cost.intra.scaled(scale))
    return replace(sc, cost=cost)


def prior_ms(sc, cands: Sequence[Candidate], scale: float = 1.0, idx: Sequence[int] | None = None) -> np.ndarray:
    """The simulator's step time (ms) of candidates ``idx`` (default: all) on ``sc`` with the bandwidths
    scaled by ``scale``, each with its compression (:meth:`autotuner.model.scenario.Scenario.simulate`)."""
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
