"""The decision core of ``tune`` (every framework's): Bayesian optimisation over real trials whose prior is the
simulator. Knows no framework: a framework gives its candidates, their features, the surrogate's length scales,
its baseline and the simulator's prior (Horovod: :mod:`autotuner.frameworks.horovod.tune_space`; DDP:
:mod:`autotuner.frameworks.ddp.tune`). Pure (no I/O, deterministic); the real trials live in each framework's
``tune`` module.

**Prior mean.** The simulator's step time for each candidate (ms), from the environment's fitted cost model,
refitted after every trial (:func:`refit_bandwidth_scale`).

**Surrogate.** A Gaussian process over the *relative residual* ``r = measured / prior - 1``
(scikit-optimize's :class:`skopt.learning.GaussianProcessRegressor`, zero mean, :class:`ResidualGP`). Its
hyperparameters are not optimised (a handful of points cannot identify them) but set from measured figures:

- the prior's sd: how far the simulator has been from real runs on this environment (its error band,
  :func:`autotuner.frameworks.horovod.environments.error_band`: held-out mean error, or borrowed from siblings),
  widened by the residuals themselves once they exceed it;
- candidates that rest on physics no real trial of this env has checked (e.g. Horovod's fp16 candidates,
  :func:`autotuner.frameworks.horovod.tune_space.unchecked_share`) share one offset, a normal prior of sd the
  median unchecked share, updated by every trial of the group (:func:`group_offset`): one trial calibrates the group;
- noise ``noise_sd``: the relative standard deviation of one trial's measured step time (the repeat
  spread of real trials, :func:`noise_from_repeats`);
- length scales: the framework's, over its features scaled to [0, 1].

With no trial yet, the posterior mean is the prior and every candidate has the same relative
uncertainty: the first proposal is the simulator's best (:attr:`Belief.next_index`).

**Acquisition.** Expected improvement for minimisation, scikit-optimize's
:func:`skopt.acquisition.gaussian_ei`, on ``y = prior_ms · (1 + r)`` (ms), against the best posterior
mean among measured candidates (noisy incumbent). A measured candidate can win it again: that is a
repeat, which the noise asks for when two candidates are close.

**Why not skopt's Optimizer.** ``skopt.Optimizer`` fits its surrogate to the objective itself
(constant mean, ``normalize_y``) and has no place for a prior mean function; modelling the residual
from the simulator with skopt's own GP and EI keeps the library and gives the prior.

**Stopping rule** (:func:`should_stop`): stop when no candidate's expected improvement (ms) beats the
measured noise of one trial (``noise_sd · incumbent``), or at the step budget.

**The decision** (:func:`decide`, the one function each framework's loop calls before every trial): from the
trials so far (:class:`TuneState`), the next candidate or the stop, in this order:

1. three failed trials in a row (:data:`MAX_FAILURES_IN_A_ROW`): stop (the job is broken, not a configuration);
2. no trial yet: the simulator's best (the prior's argmin; a candidate whose job failed is never proposed again);
3. the baseline not yet run: the framework's defaults (Horovod's:
   :func:`autotuner.frameworks.horovod.tune_space.baseline_index`, uncompressed when ``none`` is searched, else
   the default knobs with the one compression searched; DDP's: its default setting);
4. no candidate measured twice yet: repeat the incumbent (the stop rule needs one trial's noise);
5. no expected improvement above one trial's noise (:func:`should_stop`): confirm an incumbent measured once,
   else stop;
6. otherwise the expected-improvement argmax (explore, or repeat a measured candidate);

and, for 2-6, stop instead when the trial would pass the step budget. Before each decision the link
bandwidth is refitted to the trials so far (:func:`refit_bandwidth_scale`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

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
    :class:`skopt.learning.GaussianProcessRegressor`, kernel Matern 5/2 with the framework's ``length_scales``, unit
    amplitude, not optimised). ``sd_i``: how far the simulator may be off at candidate i (a fraction; larger
    where no real run has checked the physics, :func:`prior_sd`); each observation's noise enters as its own
    ``alpha = (noise_sd / sd_i)^2``. ``amplitude``: multiplies every ``sd_i`` (>= 1: raised when the
    measured residuals are larger than the prior said)."""

    def __init__(self, sd: np.ndarray, noise_sd: float, amplitude: float = 1.0, *, length_scales: Sequence[float]):
        self.sd, self.noise_sd, self.amplitude = np.asarray(sd, float) * amplitude, float(noise_sd), float(amplitude)
        self.length_scales = tuple(float(v) for v in length_scales)
        self.gp = None

    def fit(self, x: np.ndarray, idx: list[int], r: np.ndarray) -> "ResidualGP":
        from skopt.learning import GaussianProcessRegressor
        from skopt.learning.gaussian_process.kernels import Matern

        if len(r):
            sd = self.sd[idx]
            self.gp = GaussianProcessRegressor(kernel=Matern(self.length_scales, "fixed", nu=2.5), optimizer=None,
                                               normalize_y=False, alpha=(self.noise_sd / sd) ** 2)
            self.gp.fit(x[idx], np.asarray(r) / sd)
        return self

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(mean, sd) of the relative residual at every row of ``x`` (shape (n, k), the candidates in the
        order of ``sd``); the latent function's sd (one measurement's noise left out)."""
        if self.gp is None:
            return np.zeros(len(x)), self.sd.copy()
        mu, sd = self.gp.predict(x, return_std=True)
        return mu * self.sd, np.sqrt(np.maximum(sd, 0.0) ** 2) * self.sd


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
           noise_sd: float, length_scales: Sequence[float], group: np.ndarray | None = None,
           group_sd: float = 0.0) -> Belief:
    """The posterior and the acquisition over every candidate.

    ``prior_ms``: the simulator's step time per candidate (ms, shape (n,)); ``x``: the framework's features of the
    candidates (shape (n, k), each in [0, 1]), ``length_scales`` the GP's over them (k values);
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
    gp = ResidualGP(sd, noise_sd, amp, length_scales=length_scales).fit(x, idx, r)
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


def should_stop(b: Belief, ei_ms: np.ndarray | None = None) -> bool:
    """True when no candidate's expected improvement beats one trial's noise (ms). ``ei_ms``: the expected
    improvements to judge (ms, shape (n,); default ``b.ei_ms``; :func:`decide` passes them with the candidates
    whose job failed left out)."""
    ei = b.ei_ms if ei_ms is None else ei_ms
    return b.incumbent is not None and float(np.max(ei)) < b.noise_ms


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


# --------------------------------------------------------------------------- the decision

#: failed trials in a row after which tune stops (the job itself is broken, not one configuration)
MAX_FAILURES_IN_A_ROW = 3


@dataclass
class TuneState:
    """What the trials say so far (``autotuner.frameworks.horovod.tune.state_from_records`` rebuilds it from the records
    on every resume): ``cands`` searched; ``measured`` candidate index -> measured step times (ms, one per
    trial); ``failed`` indices whose trial failed; ``steps`` and ``wall_s`` spent (warm-up included);
    ``records`` the trials' records; ``fails_in_a_row`` and ``last_error`` of the latest failures."""

    cands: list[Any]
    measured: dict[int, list[float]] = field(default_factory=dict)
    failed: set[int] = field(default_factory=set)
    steps: int = 0
    wall_s: float = 0.0
    records: list[dict[str, Any]] = field(default_factory=list)
    fails_in_a_row: int = 0
    last_error: str = ""


@dataclass(frozen=True)
class Decision:
    """The next step of the loop: a candidate index to run (``index``), or None with ``stop`` saying why.

    ``reason``: why this candidate (one line, recorded); ``scale``: the refitted bandwidth multiplier in force,
    ``rms_before``/``rms_after`` its fit (fractions); ``prior``/``prior_unrefit``: the simulator's step time of
    every candidate with/without the refit (ms); ``ei_ms``: the expected improvement of the chosen candidate (or
    the best one at a stop, ms); ``noise_sd``: one trial's relative noise; ``incumbent``/``incumbent_ms``: the
    best posterior mean among measured candidates (index, ms)."""

    index: int | None
    reason: str
    stop: str = ""
    scale: float = 1.0
    rms_before: float | None = None
    rms_after: float | None = None
    prior: np.ndarray | None = None
    prior_unrefit: np.ndarray | None = None
    ei_ms: float | None = None
    noise_sd: float = 0.0
    incumbent: int | None = None
    incumbent_ms: float | None = None


def decide(cands: Sequence[Any], st: TuneState, predict: Callable[[float, Sequence[int] | None], np.ndarray], *,
           x: np.ndarray, length_scales: Sequence[float], base: int | None, baseline_name: str,
           sd: float, noise_fallback: float, budget_steps: int, steps_per_trial: int,
           base_prior: np.ndarray | None = None, unchecked: np.ndarray | None = None) -> Decision:
    """The next trial, or the stop, from the trials so far (the rules of the module docstring, "The decision").

    Pure: ``cands``: the framework's candidates (only counted, and read for a ``compression`` attribute in the
    baseline's reason); ``predict(scale, indices)`` gives the simulator's step times (ms) of those candidates (all
    for None) with every link's bandwidth multiplied by ``scale``; ``x``: the candidates' features (shape (n, k) in
    [0, 1]) and ``length_scales`` the surrogate's over them; ``base``: the baseline's index (None: no baseline among
    them), ``baseline_name`` how the reason names it; ``st``: the trials so far; ``sd``: the prior's relative sd
    (the env's error band); ``noise_fallback``: one trial's relative noise until repeats measure it;
    ``budget_steps``/``steps_per_trial``: the step budget and what one trial spends (warm-up included);
    ``base_prior``: ``predict(1.0, None)`` if already computed; ``unchecked``: each candidate's share of its
    prediction no real trial has checked (the group sharing one offset), or None."""
    if st.fails_in_a_row >= MAX_FAILURES_IN_A_ROW:
        return Decision(None, "", stop=f"{st.fails_in_a_row} trials failed in a row (last: {st.last_error})")
    base_prior = predict(1.0, None) if base_prior is None else base_prior
    scale, rb, ra = 1.0, None, None
    noise = noise_from_repeats(st.measured, noise_fallback)
    if st.measured:
        scale, rb, ra = refit_bandwidth_scale(st.measured, predict, min_gain=noise / 2)
    prior = base_prior if scale == 1.0 else predict(scale, None)
    masked = prior.copy()
    for i in st.failed - set(st.measured):
        masked[i] = np.inf  # a configuration whose job failed is not proposed again
    group = None if unchecked is None else unchecked > 0
    gsd = float(np.median(unchecked[group])) if group is not None and group.any() else 0.0
    b = belief(np.where(np.isfinite(masked), masked, prior.max() * 100), x, st.measured, sd=sd, noise_sd=noise,
               length_scales=length_scales, group=group, group_sd=gsd)
    ei = np.where(np.isfinite(masked), b.ei_ms, -1.0)
    common = dict(scale=scale, rms_before=rb, rms_after=ra, prior=prior, prior_unrefit=base_prior, noise_sd=noise,
                  incumbent=b.incumbent, incumbent_ms=None if b.incumbent is None else b.incumbent_ms)
    if not st.measured:
        nxt = int(np.argmin(masked))
        why = "the simulator's best (no trial yet: the prior decides)"
    elif base is not None and base not in st.measured and base not in st.failed:
        nxt = base
        comp = getattr(cands[base], "compression", "none")
        why = f"{baseline_name}: the baseline" + ("" if comp == "none"
                                                  else f" (with {comp}, the one compression searched)")
    elif not any(len(v) > 1 for v in st.measured.values()) and b.incumbent is not None:
        nxt, why = b.incumbent, ("measure the noise: repeat the incumbent (no candidate has two trials yet, and "
                                 "the stop rule needs one trial's noise)")
    elif should_stop(b, ei):
        inc = b.incumbent
        if len(st.measured.get(inc, [])) < 2:
            nxt, why = inc, (f"confirm the incumbent: the best expected improvement {ei.max():.2f} ms is below one "
                             f"trial's noise {b.noise_ms:.2f} ms, and it was measured once")
        else:
            return Decision(None, "", stop=(f"no candidate's expected improvement beats the noise: best "
                                            f"{ei.max():.2f} ms < {b.noise_ms:.2f} ms (one trial's noise, "
                                            f"{noise:.1%} of {b.incumbent_ms:.1f} ms)"), ei_ms=float(ei.max()), **common)
    else:
        nxt = int(np.argmax(ei))
        why = (("repeat" if nxt in st.measured else "explore") + f": expected improvement {ei[nxt]:.2f} ms "
               f"> noise {b.noise_ms:.2f} ms")
    if st.steps + steps_per_trial > budget_steps:
        return Decision(None, "", stop=f"step budget: {st.steps} of {budget_steps} steps spent, a trial takes "
                                       f"{steps_per_trial}", ei_ms=float(ei.max()), **common)
    return Decision(nxt, why, ei_ms=float(ei[nxt]), **common)
