"""One folder per data-parallel framework: its knob table, the simulator of its synchronisation engine, its replay
workload, its launcher and its jobs. The cost model, testbed, search, ``tune``'s core, readers
and views are shared; a framework imports nothing of another (``tests/test_architecture.py``; docs/architecture.md,
"Frameworks", for what of the shared layers still reads Horovod's pure core).

- :mod:`autotuner.frameworks.horovod`: Horovod 0.28.1 (0.20.3's defaults too): the knob table, the background loop,
  fusion and negotiation, ``horovodrun``.
- :mod:`autotuner.frameworks.ddp`: PyTorch ``DistributedDataParallel`` (torch 2.13): buckets, the Reducer, comm hooks,
  ``torchrun``.
"""
