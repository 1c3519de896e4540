"""Every error the tool can name, under one base class.

A user error (bad input file, bad option value, unknown model or environment, a run that
cannot be started) raises a subclass of :class:`AutotunerError` whose message is one line
naming the file or option, the field and the value. The CLI catches :class:`AutotunerError`
alone and prints it with exit status 2 (:func:`autotuner.cli.main`); anything else is a bug.

The subclasses are also ``ValueError`` so that library callers catching ``ValueError`` keep
working.
"""
from __future__ import annotations


class AutotunerError(ValueError):
    """Base class: a one-line, user-facing error (exit status 2 on the command line)."""


class KnobError(AutotunerError):
    """A knob value is out of range or malformed (:mod:`autotuner.frameworks.horovod.knobs`)."""


class SchemaError(AutotunerError):
    """A file or option does not match its schema (:mod:`autotuner.schemas`)."""


class LayoutError(AutotunerError):
    """A layout is malformed or cannot be loaded (unknown dtype, negative share, empty, ...)."""


class CostModelError(AutotunerError):
    """A cost model or cluster is malformed (:mod:`autotuner.model.costmodel`)."""


class ScenarioError(AutotunerError):
    """A scenario cannot be built (unknown model for the env, bad what-if)."""


class FitError(AutotunerError):
    """An environment's records cannot be fitted."""


class ModelStoreError(AutotunerError):
    """A fitted model cannot be found, read or written."""


class RunsError(AutotunerError):
    """The runs directory or an environment in it cannot be used."""


class ReportError(AutotunerError):
    """A lab report table cannot be parsed."""


class NcclTestsError(RunsError):
    """An nccl-tests ``all_reduce_perf`` output (stdout table or ``-J`` JSON) cannot be used."""


class TimelineError(AutotunerError):
    """A Horovod timeline cannot be read."""


class AutotuneLogError(AutotunerError):
    """A Horovod autotune log cannot be read."""


class ReplayOutputError(AutotunerError):
    """The output of a replay or user command cannot be parsed."""


class ValidationError(AutotunerError):
    """A real validation cannot be set up or run."""


class ExploreError(AutotunerError):
    """An explore or scale request is malformed."""


class OutputError(AutotunerError):
    """An output file or folder cannot be written."""
