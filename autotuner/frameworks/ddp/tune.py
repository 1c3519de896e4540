"""``autotuner ddp tune``: Bayesian optimisation of DDP's bucket setting on real runs, the Reducer simulator as its
prior. The decision is the Horovod tune's own (:func:`autotuner.search.tune.decide`: the simulator's best first,
then DDP's defaults as the baseline, a repeat for the noise, then expected improvement on a Gaussian process of the
residual, stopping when no candidate's improvement beats one trial's noise or at the step budget), with DDP's
candidates and features; this module holds those and the loop (real trials through
:func:`autotuner.frameworks.ddp.realrun` and :mod:`.launch`), appending one record per trial to
``<env>/ddp-tune/<name>.jsonl`` (a killed tune resumes from its records).

Candidates: :data:`TUNE_CAPS_MIB` (DDP's default and 1-200 MiB) x the gradient view x the fp16 hook where the env
measured float16 allreduces. Features (:func:`features`, in [0, 1]): log2(1 + cap MiB) / log2(257), DDP's default
cap (its 1 MiB first bucket), the view, fp16.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np

from .knobs import DEFAULT_BUCKET_CAP_MB, DdpConfig, searched_hooks

TUNE_CAPS_MIB = (None, 1, 2, 4, 8, 16, 25, 32, 64, 128, 200)


def candidate_grid(fp16: bool) -> list[DdpConfig]:
    """Every candidate, DDP's defaults first: len = 11 x 2 x (2 with fp16, else 1)."""
    hooks = searched_hooks(fp16)
    return [DdpConfig(bucket_cap_mb=c, gradient_as_bucket_view=v, comm_hook=h)
            for h in hooks for v in (False, True) for c in TUNE_CAPS_MIB]


#: the shared surrogate's length scales over :func:`features` (:func:`autotuner.search.tune.decide`), as Horovod's
#: (:data:`autotuner.frameworks.horovod.tune_space.LENGTH_SCALES`) feature for feature: log cap as log fusion
#: threshold (0.25: neighbouring caps 1/8 apart inform each other); the default cap's 1 MiB first bucket 0.25 (its
#: two sides correlated as two caps a quarter of the range apart); the view 1.0 (a copy less, the same physics
#: otherwise: Matern-5/2(1) = 0.52, as the response cache); the fp16 hook 0.3 (its own physics: casts, the
#: float16 sum).
LENGTH_SCALES = (0.25, 0.25, 1.0, 0.3)


def features(cands) -> np.ndarray:
    """Shape (n, 4) in [0, 1]: log2(1 + cap MiB) / log2(257), DDP's default cap, the view, the fp16 hook."""
    x = np.empty((len(cands), 4))
    for i, c in enumerate(cands):
        cap = DEFAULT_BUCKET_CAP_MB if c.bucket_cap_mb is None else c.bucket_cap_mb
        x[i] = (math.log2(1 + cap) / math.log2(257), 1.0 if c.uses_default_cap else 0.0,
                1.0 if c.gradient_as_bucket_view else 0.0, 1.0 if c.comm_hook != "allreduce" else 0.0)
    return x


def scaled_cost(cost, s: float):
    """``cost`` with every tier's bandwidth multiplied by ``s`` (the tune's refit of the link)."""
    return replace(cost, inter=cost.inter.scaled(s), intra=None if cost.intra is None else cost.intra.scaled(s))


@dataclass(frozen=True)
class DdpTuneResult:
    """The tune's answer: the records file, the final setting (the best posterior mean among measured ones) with
    its measured step times (ms), DDP's defaults' measured step times, the steps spent, why it stopped, and every
    trial as (setting label, measured ms or None, the reason it was run)."""

    path: Path
    final: DdpConfig | None
    final_ms: tuple[float, ...]
    default_ms: tuple[float, ...]
    steps: int
    stop: str
    trials: tuple[tuple[str, float | None, str], ...]

    def to_dict(self) -> dict:
        return {"path": str(self.path), "final": None if self.final is None else self.final.to_dict(),
                "final_label": None if self.final is None else self.final.label(),
                "code": None if self.final is None else self.final.code(), "final_ms": list(self.final_ms),
                "default_ms": list(self.default_ms), "steps": self.steps, "stop": self.stop,
                "trials": [{"setting": a, "measured_ms": b, "reason": c} for a, b, c in self.trials]}


def tune_ddp(env_dir: Path, model: str, cost, cluster, *, band: float, name: str | None = None,
             compute_ms: float = 100.0, steps: int = 5, warmup: int = 3, budget_steps: int = 160,
             np_: int = 2, bandwidth_gbit: float | None = None, testbed_hosts: int = 0, ranks_per_host: int = 1,
             link_gbit: float | None = None, timeout_s: float = 600.0,
             say: Callable[[str], None] = print, command: list[str] | None = None, launch=None,
             print_launch: str | None = None, host=None) -> DdpTuneResult | str:
    """Tune layout ``model``'s DDP setting on real replays (module docstring), or on the user's ``command``
    (``python script.py args``, ``model`` its layout: it reads each trial's setting from
    :func:`~autotuner.frameworks.ddp.realrun.knob_env`'s variables). ``cost``/``cluster``: the env's cost model
    from its sweep alone; ``band``: its error band (the prior's sd). A trial spends ``steps + warmup`` steps of
    ``budget_steps``. ``launch``: real hosts and the device (:class:`~autotuner.frameworks.ddp.realrun.Launch`);
    ``print_launch``: run nothing, return a trial's launch (DDP's defaults; every trial runs the same job with its
    own setting; ``cost`` may then be None); ``host``: the env's Reducer host work the prior charges
    (:class:`~autotuner.frameworks.ddp.hostcost.ReducerHostCost`; None: not charged). Raises ValidationError (one line) when the testbed cannot be built, a
    host cannot be reached or run the device's ranks, or the command is not a script."""
    from ...model.workload import Workload
    from ...readers.layouts import load_layout
    from ...search.tune import TuneState, decide
    from .fastsim import simulate_ddp_batch
    from .realrun import Launch, _setup, append_record, launch_text, run_trial, script_of, trial_fields, trial_job, \
        where_to_run
    from .records import read_jsonl

    launch = launch or Launch()
    script = script_of(command) if command else None
    topo = (testbed_hosts, ranks_per_host) if testbed_hosts else None
    ranks = ranks_per_host if topo else np_
    if print_launch:
        target, args, env = trial_job(DdpConfig(), model, compute_ms, steps, warmup, script, launch.device_args)
        what = ("a trial (DDP's defaults here; every trial runs this job with its own setting: "
                + ("the replay's --bucket-cap-mb, --gradient-as-bucket-view, --comm-hook)" if script is None else
                   "the AUTOTUNER_DDP_* variables)"))
        return launch_text(print_launch, [(target, args, what, 1, env)], launch, ranks, topo, bandwidth_gbit,
                           link_gbit, f"ddp tune --env {env_dir.name} --model {model}", env_dir)
    L = load_layout(model)
    cands = candidate_grid(cost.fp16 is not None)
    x = features(cands)
    c = compute_ms / 1e3
    wl = Workload(forward_s=c / 3, backward_s=2 * c / 3)

    def predict(scale: float, idx=None) -> np.ndarray:
        sel = cands if idx is None else [cands[i] for i in idx]
        step, _, _ = simulate_ddp_batch(L.sizes_bytes, L.ready_fraction, wl, sel, scaled_cost(cost, scale), cluster,
                                        L.dtypes, host)
        return step * 1e3

    out = env_dir / "ddp-tune" / f"{name or L.name}.jsonl"
    setup = {**_setup(np_, bandwidth_gbit, testbed_hosts, ranks_per_host, link_gbit, launch), "model": model,
             "compute_ms": compute_ms, "steps": steps, "warmup": warmup}
    if command:
        setup["command"] = list(command)
    key = {cfg.label(): i for i, cfg in enumerate(cands)}
    st = TuneState(cands=list(cands))
    trials: list[tuple[str, float | None, str]] = []
    for r in (read_jsonl(out) if out.exists() else []):  # resume
        i = key.get(r.get("label"))
        if i is None or (r.get("status") == "ok" and not isinstance(r.get("measured_step_time_ms"), (int, float))):
            continue
        st.steps += steps + warmup
        if r.get("status") == "ok":
            st.measured.setdefault(i, []).append(float(r["measured_step_time_ms"]))
            st.fails_in_a_row = 0
        else:
            st.failed.add(i)
            st.fails_in_a_row += 1
            st.last_error = str(r.get("error", ""))[-200:]
        trials.append((str(r["label"]), r.get("measured_step_time_ms"), str(r.get("reason", ""))))
    base_prior = predict(1.0)
    stop = ""
    with where_to_run(topo, bandwidth_gbit, link_gbit, launch, ranks) as (tb, nodes, note):
        say(note)
        while True:
            d = decide(cands, st, predict, x=x, length_scales=LENGTH_SCALES, base=0, baseline_name="DDP's defaults",
                       sd=max(band, 0.01), noise_fallback=0.02, budget_steps=budget_steps,
                       steps_per_trial=steps + warmup, base_prior=base_prior)
            if d.index is None:
                stop = d.stop
                break
            cfg = cands[d.index]
            res, r = run_trial(cfg, model, compute_ms, steps, warmup, ranks, tb, timeout_s, script, nodes=nodes,
                               device_args=launch.device_args)
            rec = {"trial": len(trials), "label": cfg.label(), "reason": d.reason,
                   "predicted_ms": float(d.prior[d.index]) if d.prior is not None else None,
                   **trial_fields(cfg, res, r, setup, note)}
            append_record(out, rec)
            st.steps += steps + warmup
            if res:
                st.measured.setdefault(d.index, []).append(float(res["median_step_time_ms"]))
                st.fails_in_a_row = 0
            else:
                st.failed.add(d.index)
                st.fails_in_a_row += 1
                st.last_error = rec["error"][-200:]
            trials.append((cfg.label(), rec["measured_step_time_ms"], d.reason))
            say(f"trial {len(trials)}: {cfg.label()}: "
                + (f"{rec['measured_step_time_ms']:.1f} ms" if res else rec["status"]) + f" ({d.reason})")
    inc = d.incumbent if d.incumbent is not None else (min(st.measured, key=lambda i: np.median(st.measured[i]))
                                                       if st.measured else None)
    return DdpTuneResult(out, None if inc is None else cands[inc], tuple(st.measured.get(inc, [])) if inc is not None
                         else (), tuple(st.measured.get(0, [])), st.steps, stop, tuple(trials))
