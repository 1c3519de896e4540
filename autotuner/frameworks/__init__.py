"""One folder per data-parallel framework: its knob table, the simulator of its synchronisation engine, its replay
workload and its launcher (issue 30's structure). The cost model, testbed, search, ``tune``'s core, readers and
views are shared and know no framework.

- :mod:`autotuner.frameworks.ddp`: PyTorch ``DistributedDataParallel`` (torch 2.13): buckets, the Reducer, comm hooks.
- Horovod (0.28.1) still lives at the package's top level (:mod:`autotuner.frameworks.horovod.knobs`, :mod:`autotuner.model`,
  :mod:`autotuner.realrun`); moving it here is issue 30's open structural item.
"""
