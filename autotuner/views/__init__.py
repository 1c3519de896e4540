"""Views every framework shares: what the tool shows, computed from cost models and records.

- :mod:`.plots`: the cost model's figures (bandwidth vs size), written atomically.
- :mod:`.timeline_compare`: a real timeline against a simulated one.

Horovod's views (explore, scale, accuracy, timeline export) are :mod:`autotuner.frameworks.horovod.views`; DDP's
plots are :mod:`autotuner.frameworks.ddp.plots`.
"""
