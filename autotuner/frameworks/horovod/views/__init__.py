"""Horovod's views: what ``explore``, ``scale``, ``accuracy`` and ``timeline`` show, computed from its scenarios
and records.

- :mod:`.explore` and :mod:`.scale`: the knob-space grid and the scaling what-ifs (pure).
- :mod:`.timeline_export`: simulated timelines (Chrome trace).
- :mod:`.accuracy`: predicted vs measured for every committed measurement; :mod:`.protocol`: the held-out
  protocol; :mod:`.emulated_2x2`: the emulated 2x2 testbed's figures.
- :mod:`.plots_explore`: the explore and scale figures, written atomically.

Views every framework shares (the cost model's plots, real-vs-simulated timelines) are :mod:`autotuner.views`.
"""
