"""What every framework's real runs share: owned processes and the testbed.

- :mod:`.launcher`: :class:`~.launcher.OwnedProcess` and :func:`~.launcher.run_argv` (a job's whole process group,
  timeout, parent-death signal) and :func:`~.launcher.testbed_for` (the testbed a real run uses, with one line on it).
- :mod:`.testbed`: the HTB-shaped network namespace, and the emulated cluster (one namespace per host).
- :mod:`.profile`: ``autotuner profile``, a model's gradient layout measured.

Horovod's real runs (``horovodrun``, its probes, replay, validation, tune) are in :mod:`autotuner.frameworks.horovod`;
DDP's (``torchrun``) in :mod:`autotuner.frameworks.ddp`.
"""
