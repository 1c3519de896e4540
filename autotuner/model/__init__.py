"""The model of Horovod's training step (pure: no I/O, no clocks, no global random state).

- :mod:`.layout`: a model's gradient tensors in backward readiness order.
- :mod:`.costmodel`: time of collectives (alpha-beta ring tiers), host passes, negotiation.
- :mod:`.simulator`: the reference event simulator of Horovod's background loop.
- :mod:`.fastsim`: the vectorized batch simulator (same results, many configurations at once).
- :mod:`.scenario`: everything the simulator needs besides the knobs.

``tests/test_architecture.py`` parses these files and fails on any import of an I/O module.
"""
