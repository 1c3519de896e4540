"""Typed results of the public API (:func:`autotuner.suggest`, :func:`autotuner.simulate`).

Frozen records holding :class:`~autotuner.frameworks.horovod.knobs.Config` objects and numbers in stated units; the
command line renders them and ``--json`` prints :meth:`to_dict`.
Pure: no I/O.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from .knobs import LAST_RELEASE, Config


def _frozen(d: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(d or {}))


@dataclass(frozen=True)
class Proposal:
    """One configuration with its prediction.

    ``step_time_ms``: predicted step time (ms); ``speedup_vs_default``: the reference's predicted
    step time / this one's; ``score_bytes_per_us``: Horovod autotune's score (bytes allreduced per
    µs of collective time, horovod/common/parameter_manager.cc); ``compression``: the gradient
    compression (``none``, ``fp16``), set in the training script by ``compression_code``, not by a
    flag; ``horovodrun_flags`` and ``env_vars`` set the knobs; ``step_time_range_ms``: (low, high) ms, for an fp16
    proposal on CPU ranks the step at the quartiles of the fp16 phase's figures for the float16 sum
    (:attr:`autotuner.model.costmodel.Fp16Cost.sum_extra_range_s_per_elem`), else None."""

    config: Config
    compression: str
    step_time_ms: float
    speedup_vs_default: float
    score_bytes_per_us: float
    horovodrun_flags: tuple[str, ...]
    env_vars: Mapping[str, str]
    compression_code: str | None = None
    step_time_range_ms: tuple[float, float] | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Proposal":
        rng = d.get("step_time_range_ms")
        return cls(Config.from_dict(d["config"]), str(d["compression"]), float(d["step_time_ms"]),
                   float(d["speedup_vs_default"]), float(d["score_bytes_per_us"]), tuple(d["horovodrun_flags"]),
                   _frozen(d["env_vars"]), d.get("compression_code"),
                   None if rng is None else (float(rng[0]), float(rng[1])))

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config.to_dict(), "compression": self.compression,
                "compression_code": self.compression_code, "step_time_ms": self.step_time_ms,
                "speedup_vs_default": self.speedup_vs_default, "score_bytes_per_us": self.score_bytes_per_us,
                "horovodrun_flags": list(self.horovodrun_flags), "env_vars": dict(self.env_vars),
                **({} if self.step_time_range_ms is None else {"step_time_range_ms": list(self.step_time_range_ms)})}


@dataclass(frozen=True)
class Choice:
    """The noise-aware, minimal-change choice (:func:`autotuner.frameworks.horovod.search.ranking.minimal_change`).

    ``band``: the error band (a fraction of the step time) a gain must beat, ``band_source`` whose
    band it is; ``gain``: the best configuration's predicted gain over the reference (fraction);
    ``keep_knobs``: the reference's knobs are kept; ``best_step_time_ms``/``best_config``: the
    fastest configuration found; ``equivalent``: configurations within the band of the best, whose
    thresholds span ``threshold_mib`` (MiB, min and max) and cycle times ``cycle_ms`` (ms)."""

    band: float
    band_source: str
    gain: float
    keep_knobs: bool
    best_step_time_ms: float
    best_config: Config
    equivalent: int
    threshold_mib: tuple[float, float]
    cycle_ms: tuple[float, float]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Choice":
        return cls(float(d["band"]), str(d["band_source"]), float(d["gain"]), bool(d["keep_knobs"]),
                   float(d["best_step_time_ms"]), Config.from_dict(d["best_config"]), int(d["equivalent"]),
                   tuple(d["threshold_mib"]), tuple(d["cycle_ms"]))

    def to_dict(self) -> dict[str, Any]:
        return {"band": self.band, "band_source": self.band_source, "gain": self.gain, "keep_knobs": self.keep_knobs,
                "best_step_time_ms": self.best_step_time_ms, "best_config": self.best_config.to_dict(),
                "equivalent": self.equivalent, "threshold_mib": list(self.threshold_mib),
                "cycle_ms": list(self.cycle_ms)}


@dataclass(frozen=True)
class SuggestResult:
    """What :func:`autotuner.suggest` answers (a :class:`autotuner.results.SuggestAnswer`).

    ``default``: the reference (the defaults of Horovod ``reference_version`` with the fixed knobs, no
    compression); ``reference_version``: the env's own Horovod release (its model file's
    ``cluster.horovod_version``), the one asked for, or the last release when the env names none;
    ``proposals``: the top proposals, best first (the first is the recommendation: the reference
    itself when ``keep_defaults``); ``knob_only``: the best proposal without compression, always;
    ``choice``: the noise-aware choice; ``trust``: the env's trust line ("checked on N real trials
    ..." or "never checked against a real run"); ``warnings``: where the layout and the env differ
    (device, batch, cores); ``notes``: knobs kept off and why; ``evaluations``: configurations
    simulated; ``search_seconds``: wall time of the search (s); ``best_by_compression``: the best
    predicted step time (ms) per compression searched; ``link_gbps``: the link rate simulated."""

    env: str
    model: str
    layout: str
    nodes: int
    gpus_per_node: int
    link_gbps: float
    backend: str | None
    default: Proposal
    proposals: tuple[Proposal, ...]
    knob_only: Proposal
    keep_defaults: bool
    choice: Choice
    trust: str | None
    evaluations: int
    search_seconds: float
    strategy: str
    compressions_searched: tuple[str, ...]
    best_by_compression: Mapping[str, float]
    compression_notes: Mapping[str, str]
    fixed: Mapping[str, Any] = field(default_factory=lambda: _frozen({}))
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    reference_version: str = LAST_RELEASE

    @property
    def best(self) -> Proposal:
        """The recommendation: ``proposals[0]``."""
        return self.proposals[0]

    @property
    def baseline(self) -> Proposal:
        """The reference every speed-up is over: ``default`` (:class:`autotuner.results.SuggestAnswer`)."""
        return self.default

    @property
    def band(self) -> float:
        """The error band a gain must beat (fraction of the step time): ``choice.band``."""
        return self.choice.band

    @property
    def alternatives(self) -> tuple[Proposal, ...]:
        """The other proposals, best first: ``proposals[1:]``."""
        return self.proposals[1:]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, link_gbps: float, warnings=()) -> "SuggestResult":
        return cls(env=d["env"], model=d["model"], layout=d["layout"], nodes=int(d["nodes"]),
                   gpus_per_node=int(d["gpus_per_node"]), link_gbps=float(link_gbps), backend=d.get("backend"),
                   default=Proposal.from_dict(d["default"]),
                   proposals=tuple(Proposal.from_dict(p) for p in d["proposals"]),
                   knob_only=Proposal.from_dict(d["knob_only"]), keep_defaults=bool(d["keep_defaults"]),
                   choice=Choice.from_dict(d["pick"]), trust=d.get("trust"), evaluations=int(d["evaluations"]),
                   search_seconds=float(d["search_seconds"]), strategy=str(d["strategy"]),
                   compressions_searched=tuple(d["compressions_searched"]),
                   best_by_compression=_frozen(d["best_by_compression"]),
                   compression_notes=_frozen(d["compression_notes"]), fixed=_frozen(d.get("fixed")),
                   warnings=tuple(warnings), notes=tuple(d.get("notes", ())),
                   reference_version=str(d.get("reference_version") or LAST_RELEASE))

    def to_dict(self) -> dict[str, Any]:
        """The ``suggest --json`` object."""
        d = {"env": self.env, "model": self.model, "layout": self.layout, "nodes": self.nodes,
             "gpus_per_node": self.gpus_per_node, "link_gbps": self.link_gbps, "default": self.default.to_dict(),
             "proposals": [p.to_dict() for p in self.proposals], "evaluations": self.evaluations,
             "search_seconds": self.search_seconds, "keep_defaults": self.keep_defaults,
             "knob_only": self.knob_only.to_dict(), "pick": self.choice.to_dict(), "trust": self.trust,
             "reference_version": self.reference_version,
             "strategy": self.strategy, "backend": self.backend, "min_gain": self.choice.band,
             "compressions_searched": list(self.compressions_searched),
             "best_by_compression": dict(self.best_by_compression),
             "compression_notes": dict(self.compression_notes), "notes": list(self.notes),
             "warnings": list(self.warnings)}
        if self.fixed:
            d["fixed"] = dict(self.fixed)
        return d


@dataclass(frozen=True)
class Response:
    """One simulated fused response: ``nbytes`` (bytes), ``tensors``, ``start_ms`` and
    ``duration_ms`` (ms from the step's start)."""

    nbytes: int
    tensors: int
    start_ms: float
    duration_ms: float


@dataclass(frozen=True)
class SimulateResult:
    """What :func:`autotuner.simulate` answers for one configuration (a :class:`autotuner.results.SimulateAnswer`).

    ``step_time_ms``: predicted step time (ms); ``comm_ms``: collective time per step (ms);
    ``overlap``: the share of it during backward (0-1); ``score_bytes_per_us``: autotune's score;
    ``bytes_per_step``: bytes allreduced per step; ``responses``: every fused response of one
    step; ``trust`` and ``warnings`` as :class:`SuggestResult`'s; ``steps_per_rank`` and
    ``wall_time_s`` (s) only for a model with a recorded run shape; ``timeline``: the path written
    by ``timeline=``, else None. ``step_time_range_ms``: ``(low, high)``, the step time (ms) with a small response's
    fixed cost at either end of ``small_price_range_ms`` (ms per response, low to high: the env's burst and step
    phases, :attr:`autotuner.model.costmodel.CostModel.small_alpha_range_s`), every other term as charged; None for a
    model without that range (research/notes/accuracy.md, "The small-response price the phases leave open").
    ``reference_version``: the Horovod release whose defaults the knobs left unset took (the env's own, or the one
    asked for)."""

    env: str
    model: str
    layout: str
    n_tensors: int
    layout_mib: float
    nodes: int
    gpus_per_node: int
    link_gbps: float
    compression: str
    backend: str | None
    config: Config
    step_time_ms: float
    comm_ms: float
    overlap: float
    score_bytes_per_us: float
    bytes_per_step: int
    responses: tuple[Response, ...]
    trust: str | None
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    steps_per_rank: int | None = None
    wall_time_s: float | None = None
    startup_s: float | None = None
    timeline: str | None = None
    step_time_range_ms: tuple[float, float] | None = None
    small_price_range_ms: tuple[float, float] | None = None
    reference_version: str = LAST_RELEASE

    def to_dict(self) -> dict[str, Any]:
        """The ``simulate --json`` object."""
        d = {"env": self.env, "model": self.model, "layout": self.layout, "nodes": self.nodes,
             "gpus_per_node": self.gpus_per_node, "bandwidth_gbps": self.link_gbps, "compression": self.compression,
             "backend": self.backend, "config": self.config.to_dict(), "reference_version": self.reference_version,
             "step_time_ms": self.step_time_ms,
             "score_bytes_per_us": self.score_bytes_per_us, "comm_ms": self.comm_ms, "overlap": self.overlap,
             "bytes_per_step": self.bytes_per_step,
             "responses": [{"bytes": r.nbytes, "tensors": r.tensors, "start_ms": r.start_ms,
                            "duration_ms": r.duration_ms} for r in self.responses],
             "trust": self.trust, "warnings": list(self.warnings)}
        if self.steps_per_rank is not None:
            d |= {"steps_per_rank": self.steps_per_rank, "wall_time_s": self.wall_time_s}
        if self.timeline is not None:
            d["timeline"] = self.timeline
        if self.step_time_range_ms is not None:
            d |= {"step_time_range_ms": list(self.step_time_range_ms),
                  "small_price_range_ms": list(self.small_price_range_ms)}
        return d


@dataclass(frozen=True)
class FitResult:
    """What :func:`autotuner.fit` did: ``fitted`` ((model dict, its path, its plot or None), one per
    environment fitted), ``problems`` (one line per input dropped or repaired), ``model_dir`` (where
    the models went) and ``default_folder`` (True when no output folder was given)."""

    fitted: tuple[tuple[dict, Any, Any], ...]
    problems: tuple[str, ...]
    model_dir: Any
    default_folder: bool


@dataclass(frozen=True)
class ExploreResult:
    """What :func:`autotuner.explore` answers: ``exploration``
    (:class:`autotuner.frameworks.horovod.views.explore.Exploration`: the grid, its marks and the measured points),
    ``files`` (the plots written), ``suggest_seconds`` (the pick's search, s; None without one),
    ``plot_seconds`` (s), ``measured_overlaid`` (False when a what-if differs from the measured
    setup), ``backend`` (the ``--backend`` what-if, or None) and ``compression`` (the gradient
    compression the whole map is for)."""

    exploration: Any
    files: tuple[str, ...]
    suggest_seconds: float | None
    plot_seconds: float
    measured_overlaid: bool
    backend: str | None
    compression: str

    def to_dict(self) -> dict[str, Any]:
        """The ``explore --json`` object."""
        return self.exploration.to_dict() | {"files": list(self.files), "suggest_seconds": self.suggest_seconds or 0.0,
                                             "compression": self.compression}


@dataclass(frozen=True)
class ScaleResult:
    """What :func:`autotuner.scale` answers: ``scaling`` (:class:`autotuner.frameworks.horovod.views.scale.Scaling`:
    the table, findings and scenario), ``files`` (the plot), ``trust`` (the env's trust line),
    ``warnings``, ``batch`` (samples per GPU per step, or None), ``run`` (the env's timed run shape,
    :class:`autotuner.model.wallclock.RunShape`, or None) and ``backend`` (the what-if, or None)."""

    scaling: Any
    files: tuple[str, ...]
    trust: str | None
    warnings: tuple[str, ...]
    batch: int | None
    run: Any
    backend: str | None

    def to_dict(self) -> dict[str, Any]:
        """The ``scale --json`` object."""
        return self.scaling.to_dict() | {"files": list(self.files), "trust": self.trust}


@dataclass(frozen=True)
class ValidateResult:
    """What :func:`autotuner.validate` did: ``records`` (every trial's record, this run's and
    earlier ones of the same plan), ``report`` (the Markdown report's path) and ``verdict`` (one
    line: the proposal against the defaults and autotune's best, faster / slower / within noise)."""

    records: tuple[dict, ...]
    report: Any
    verdict: str


@dataclass(frozen=True)
class TuneResult:
    """What :func:`autotuner.tune` did.

    Attributes: ``final`` (the incumbent: ``{"key", "config", "compression", "compression_code",
    "measured_ms" (each trial's step time, ms), "median_ms", "flags" (horovodrun), "env"
    (``HOROVOD_*`` variables)}``, or None when nothing was measured); ``steps`` (steps the tune's trials ran,
    warm-up included); ``trials``; ``wall_s`` (seconds of its trials' jobs); ``stop`` (why it stopped, one
    line); ``refits`` (per trial: the bandwidth scale of the sim-to-real refit in force and its rms relative
    error before / after, fractions); ``defaults_ms`` (the defaults' measured step times, ms); ``records``
    (every tune record); ``report`` (the Markdown report's path); ``trust`` (the env's trust line);
    ``head_to_head`` (``--against-autotune``: ``{"autotune": {"finished", "steps", "wall_s", "rows", "best"},
    "verdict", "report", "table"}``, else None)."""

    final: dict | None
    steps: int
    trials: int
    wall_s: float
    stop: str
    refits: tuple[dict, ...]
    defaults_ms: tuple[float, ...]
    records: tuple[dict, ...]
    report: Any
    trust: str
    head_to_head: dict | None = None


__all__ = ["Proposal", "Choice", "SuggestResult", "Response", "SimulateResult", "FitResult", "ExploreResult",
           "ScaleResult", "ValidateResult", "TuneResult"]
