"""PyTorch ``DistributedDataParallel`` (torch 2.13): the knob table (:mod:`.knobs`) and the simulator of its
Reducer (:mod:`.reducer`, the reference; :mod:`.fastsim`, the batch version for grids), both pure.

Sources (torch 2.13.0): ``torch/nn/parallel/distributed.py`` (``_BucketCapacityConfig``,
``compute_bucket_size_limits``, ``_ddp_init_helper``) and the C++ Reducer
(``torch/csrc/distributed/c10d/reducer.cpp``: ``compute_bucket_assignment_by_size``, ``mark_variable_ready``,
``mark_bucket_ready``, ``rebuild_buckets``, ``finalize_backward``); docs/explanation/ddp-simulator.md has the model with line references.
"""
