"""Fitting Horovod environments' model files (``autotuner fit runs/``): one fitter per source format.

- :mod:`.fitters`: the registry :data:`autotuner.frameworks.horovod.fit.fitters.FITTERS` (one per
  :class:`autotuner.schemas.Format`), the validation and breakdown fitters, the model file's dict.
- :mod:`.sweep`: ``autotuner measure``'s sweep and its phases (cpu, trickle, idle, burst, fp16).
- :mod:`.nccl_tests`, :mod:`.timelines`, :mod:`.backend_runs`, :mod:`.cpu_scaling`, :mod:`.compression_runs`:
  the other source formats.
- :mod:`.store`: fitted models on disk (``<model folder>/<env>.json``, found by :mod:`autotuner.paths`), read
  back validated.

The fits every framework shares (the alpha-beta ring tier, the fp16 term, regression) are :mod:`autotuner.fit`.
"""
