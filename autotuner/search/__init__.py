"""Search strategies over Horovod's knobs, and the ranking they share.

- :mod:`.bayes`: Bayesian optimization (scikit-optimize ask/tell) refined on the batch simulator.
- :mod:`.grid`: the exhaustive grid (benchmarks, regret).
- :mod:`.ranking`: :class:`~.ranking.Trial`, the tie rule :data:`~.ranking.MIN_GAIN` and the
  distinct top proposals.
"""
