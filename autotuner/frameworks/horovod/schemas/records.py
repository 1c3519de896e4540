"""Validation records, their setup, and proposals files."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    ConfigDict,
    Field,
)
from pydantic.dataclasses import dataclass as pydantic_dataclass

from ....schemas.core import (
    Count,
    Index,
    LinkGbit,
    Millis,
    NonNeg,
    Positive,
    Text,
    _Schema,
)
from .knobs import Knobs


# --- validation records ---------------------------------------------------------------------

@pydantic_dataclass(frozen=True, config=ConfigDict(extra="ignore"))
class Setup:
    """What must be equal for two trials to be comparable (and for a resume to reuse records):
    the ``setup`` of every validation record, and the runtime object of
    :mod:`autotuner.frameworks.horovod.validation` (one definition, validated when built or read).

    Attributes: env, model (layout name), np (ranks), hosts (``-H``; empty = localhost),
    bandwidth_gbit (testbed HTB rate, Gbit/s; None = no shaping), compute_ms/update_ms (replay
    workload's emulated compute per step, ms), steps/warmup (measured and warm-up steps per
    trial), command (a user's own training command instead of the replay workload, or empty),
    batch_size (images per rank per step, to turn img/sec output into step times; or None),
    testbed_hosts / ranks_per_host (an emulated cluster of that many hosts x ranks, each host a
    network namespace, :func:`autotuner.realrun.testbed.emulated_cluster`; then ``np`` =
    hosts x ranks and ``hosts`` its ``-H``; None: one host), link_gbit (the cluster's host-link
    HTB rate, Gbit/s; ``bandwidth_gbit`` then shapes each host's loopback), replay_wait (the replay
    workload's ``--wait``: ``spin``, Horovod's own synchronize, or ``sleep``, polling; see
    :data:`autotuner.frameworks.horovod.replay.WAIT_POLL_S`).
    """

    env: str
    model: Text
    np: Count = 2
    hosts: str = ""
    bandwidth_gbit: LinkGbit | None = None
    compute_ms: Millis = 300.0
    update_ms: Millis = 0.0
    steps: Count = 6
    warmup: Index = 2
    command: tuple[str, ...] = ()
    batch_size: Count | None = None
    testbed_hosts: Annotated[int, Field(ge=1, le=16)] | None = None
    ranks_per_host: Count | None = None
    link_gbit: LinkGbit | None = None
    replay_wait: Literal["spin", "sleep"] = "spin"

    def __post_init__(self) -> None:
        if (self.testbed_hosts is None) != (self.ranks_per_host is None):
            raise ValueError("--testbed-hosts and --ranks-per-host go together")
        if self.testbed_hosts is None and self.link_gbit is not None:
            raise ValueError("--link-gbit needs --testbed-hosts (one host has no link)")
        if self.testbed_hosts is not None and self.np != self.testbed_hosts * self.ranks_per_host:
            raise ValueError(f"np={self.np} is not --testbed-hosts {self.testbed_hosts} x --ranks-per-host "
                             f"{self.ranks_per_host}")

    @property
    def topology(self) -> tuple[int, int] | None:
        """(hosts, ranks per host) of an emulated cluster, else None."""
        return None if self.testbed_hosts is None else (self.testbed_hosts, self.ranks_per_host)

    def to_dict(self) -> dict[str, Any]:
        """As recorded: ``command`` a list, ``batch_size`` and the testbed topology left out when
        None (records written before they existed stay comparable)."""
        d = {f: getattr(self, f) for f in self.__dataclass_fields__}
        d["command"] = list(self.command)
        for k in ("batch_size", "testbed_hosts", "ranks_per_host", "link_gbit"):
            if d[k] is None:
                del d[k]
        if d["replay_wait"] == "spin":  # Horovod's own wait: left out, as every record before it
            del d["replay_wait"]
        return d


class TimelineSummary(_Schema):
    """``timeline`` of a record (:func:`autotuner.frameworks.horovod.validation.summarize_timeline`)."""

    model_config = ConfigDict(extra="allow")
    #: ``[nbytes, count, median µs, mean µs]`` per response size
    samples: list[Annotated[list[NonNeg], Field(min_length=4, max_length=4)]] = []
    responses: Index | None = None
    #: ``[bytes, µs]`` of fusion-buffer copies
    memcpy: Annotated[list[NonNeg], Field(min_length=2, max_length=2)] | None = None
    negotiation_us: NonNeg | None = None
    responses_per_step: NonNeg | None = None
    form: str | None = None
    problems: list[str] = []


class Record(_Schema):
    """One trial of ``autotuner validate`` (one line of ``validation/*.jsonl``)."""

    model_config = ConfigDict(extra="allow")
    trial: Text
    kind: str | None = None
    label: str | None = None
    repeat: Index | None = None
    config: Knobs | None = None
    #: the gradient compression the trial's DistributedOptimizer applied (older records lack it: none)
    compression: Literal["none", "fp16"] = "none"
    status: Text
    measured_step_time_ms: Positive | None = None
    spread_ms: NonNeg | None = None
    step_times_ms: list[NonNeg] = []
    predicted_step_time_ms: NonNeg | None = None
    score_bytes_per_us: NonNeg | None = None
    timeline: TimelineSummary | None = None
    #: whether Horovod's timeline was recorded in the trial (its writer's cost is then in the measured step
    #: times); older records lack it: :func:`timeline_recorded` infers it from ``timeline``
    timeline_recorded: bool | None = None
    #: the values the trial's gradients held (``"normal(0, 0.001)"``, ``"the script's own"``); the oldest replay
    #: records lack it: they allreduced zeros (:func:`zero_gradients`)
    gradients: str | None = None
    autotune: dict[str, Any] | None = None
    setup: Setup
    wall_s: NonNeg | None = None
    error: str | None = None


def timeline_recorded(rec: dict[str, Any]) -> bool:
    """Whether Horovod's timeline ran in the trial of validation record ``rec`` (a dict as read).

    Its ``timeline_recorded`` flag when it has one. Older records lack it:
    ``validate`` then recorded the timeline in every fixed-configuration trial unless ``--no-timeline``,
    never in the autotune run, and stored its summary in ``timeline``; so a record ran it exactly when it
    carries a ``timeline`` summary (a dict, its ``error`` form included). A failed trial whose timeline was
    never written reads as without one; it has no step time to compare either.
    """
    flag = rec.get("timeline_recorded")
    if isinstance(flag, bool):
        return flag
    return isinstance(rec.get("timeline"), dict)


def zero_gradients(rec: dict[str, Any]) -> bool:
    """Whether the trial of validation record ``rec`` allreduced gradients of zeros: a replay workload's trial
    (``setup.command`` empty) recorded before its gradients held values (no ``gradients`` key: the replay then
    allocated them with ``torch.zeros``). A CPU's float16 sum costs far less for zeros than for a training job's
    values (docs/explanation/fp16-compression.md, "The values matter"), so such an fp16 trial is another job than the one
    predicted; an uncompressed one is not (float32's vectorised sum does not depend on the values)."""
    if rec.get("gradients") is not None:
        return False
    setup = rec.get("setup") if isinstance(rec.get("setup"), dict) else {}
    return not setup.get("command")


#: what a replay record's ``gradients`` holds when every rank's values were renewed between steps
#: (:data:`autotuner.frameworks.horovod.replay.VALUES_RENEWED`; kept here so readers import no workload)
VALUES_RENEWED = "per rank, renewed each step"


def same_values_on_every_rank(rec: dict[str, Any]) -> bool:
    """Whether the trial of validation record ``rec`` allreduced the *same* values on every rank: a Horovod replay
    trial (``setup.command`` empty) with gradient-like values (``gradients`` set) recorded before the replay renewed
    them between steps (``gradients`` without :data:`VALUES_RENEWED`). Horovod writes the
    average back into each gradient, so from the second step on those ranks held identical values; Gloo's software
    float16 sum of ``x + x`` rounds exactly and ran 10-22 % faster than a sum of two ranks' own values
    (``research/scripts/fp16_rank_values.py``; docs/explanation/fp16-compression.md, "Fourth pass"). Such an fp16 trial is another job than a
    training job's; an uncompressed one is not (float32's sum measured the same either way). Zero-gradient records
    (:func:`zero_gradients`) are not counted here."""
    g = rec.get("gradients")
    if g is None or g == "the script's own":
        return False
    setup = rec.get("setup") if isinstance(rec.get("setup"), dict) else {}
    return not setup.get("command") and VALUES_RENEWED not in str(g)


# --- proposals ------------------------------------------------------------------------------

class ProposalEntry(_Schema):
    """An entry of ``suggest --json``'s ``proposals``: its ``config`` (other keys are kept)."""

    model_config = ConfigDict(extra="allow")
    config: Knobs


class SuggestOutput(_Schema):
    """``suggest --json`` output, as a proposals file: its ``proposals`` (other keys are kept)."""

    model_config = ConfigDict(extra="allow")
    proposals: Annotated[list[Any], Field(min_length=1)]


#: a proposals file that is a list: one entry per configuration
ProposalList = Annotated[list[Any], Field(min_length=1)]
