"""Fitting cost models and workloads from measurements (``autotuner fit runs/``).

- :mod:`.regression`: alpha-beta lines, the two-segment fit, host passes (scipy).
- :mod:`.fitters`: one fitter per source format (:class:`autotuner.schemas.Format`), registry
  :data:`autotuner.fit.fitters.FITTERS`.
- :mod:`.store`: fitted models on disk (``<model folder>/<env>.json``, found by
  :mod:`autotuner.paths`), read back validated.
"""
