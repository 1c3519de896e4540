"""Search every framework shares: ``tune``'s decision core (:mod:`.tune`: the surrogate over the simulator's
prior, expected improvement, the stopping rule).

Each framework's own search space lives in its folder: Horovod's grid, Bayesian search and ranking in
:mod:`autotuner.frameworks.horovod.search`, its tune candidates in :mod:`autotuner.frameworks.horovod.tune_space`;
DDP's in :mod:`autotuner.frameworks.ddp.suggest` and :mod:`autotuner.frameworks.ddp.tune`.
"""
