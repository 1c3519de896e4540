"""The shapes every framework's answers share, one per verb.

Each framework answers with its own frozen dataclass (Horovod's in
:mod:`autotuner.frameworks.horovod.results`, DDP's in :mod:`autotuner.frameworks.ddp.api`), holding its own
config type (:class:`autotuner.Config`, :class:`autotuner.DdpConfig`) and whatever only it knows. Every one of
them also has the attributes of its verb's protocol here, under the same names, with the same units, so that code
written against one framework's answer reads the other's:

- :class:`Pick`: one setting with its prediction;
- :class:`SuggestAnswer`: ``suggest`` / ``ddp suggest``;
- :class:`SimulateAnswer`: ``simulate`` / ``ddp simulate``;
- :class:`ValidateAnswer`: ``validate`` / ``ddp validate``.

Each answer's ``to_dict()`` is its command's ``--json`` object. Pure: no I/O, imports no framework.
"""
from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Pick(Protocol):
    """One setting and its prediction: ``config`` (the framework's config type), ``step_time_ms`` (predicted
    steady-state step, ms) and ``speedup_vs_default`` (the baseline's predicted step / this one's)."""

    @property
    def config(self) -> Any: ...

    @property
    def step_time_ms(self) -> float: ...

    @property
    def speedup_vs_default(self) -> float: ...

    def to_dict(self) -> dict[str, Any]: ...


@runtime_checkable
class SuggestAnswer(Protocol):
    """What ``suggest`` answers in every framework: ``env`` and ``model`` asked about; ``best`` (the
    recommendation: the baseline itself when ``keep_defaults``); ``baseline`` (the framework's defaults, the
    reference of every speed-up); ``keep_defaults`` (no setting beats the baseline by more than ``band``);
    ``trust`` (the env's trust line: how far its predictions were checked against real runs); ``band`` (the
    error band a gain must beat, a fraction of the step time); ``alternatives`` (the other settings shown,
    best first, each a :class:`Pick`)."""

    @property
    def env(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def best(self) -> Pick: ...

    @property
    def baseline(self) -> Pick: ...

    @property
    def keep_defaults(self) -> bool: ...

    @property
    def trust(self) -> str | None: ...

    @property
    def band(self) -> float: ...

    @property
    def alternatives(self) -> tuple[Pick, ...]: ...

    def to_dict(self) -> dict[str, Any]: ...


@runtime_checkable
class SimulateAnswer(Protocol):
    """What ``simulate`` answers in every framework: ``env``, ``model``, ``config`` (the setting simulated, the
    framework's config type), ``step_time_ms`` (predicted steady-state step, ms) and ``trust``."""

    @property
    def env(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def config(self) -> Any: ...

    @property
    def step_time_ms(self) -> float: ...

    @property
    def trust(self) -> str | None: ...

    def to_dict(self) -> dict[str, Any]: ...


@runtime_checkable
class ValidateAnswer(Protocol):
    """What ``validate`` answers in every framework: ``verdict`` (one line: the proposal against the defaults,
    faster / slower / within noise) and ``report`` (the Markdown report's path, or None)."""

    @property
    def verdict(self) -> str: ...

    @property
    def report(self) -> Any: ...


__all__ = ["Pick", "SuggestAnswer", "SimulateAnswer", "ValidateAnswer"]
