"""Search strategies over Horovod's knobs, and the ranking they share.

- :mod:`.bayes`: Bayesian optimization (scikit-optimize ask/tell) refined on the batch simulator.
- :mod:`.grid`: the exhaustive grid (benchmarks, regret).
- :mod:`.at_size`: the best knobs at each node count (``scale``).
- :mod:`.ranking`: :class:`~.ranking.Trial`, the tie rule :data:`~.ranking.MIN_GAIN` and the
  distinct top proposals.

``tune``'s decision, shared by every framework, is :mod:`autotuner.search.tune`.
"""
