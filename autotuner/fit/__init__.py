"""Fits every framework shares (scipy, no framework's knobs).

- :mod:`.regression`: alpha-beta lines, the two-segment fit, host passes.
- :mod:`.collective`: the ring tier of measured allreduces (:func:`~.collective.fit_collective_tier`) and fp16's
  cost besides the bytes (:func:`~.collective.fp16_cost`).

Horovod's model-file fitters (``autotuner fit runs/``) are :mod:`autotuner.frameworks.horovod.fit`; DDP's sweep fit
is :mod:`autotuner.frameworks.ddp.fit`.
"""
