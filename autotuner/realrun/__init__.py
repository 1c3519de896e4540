"""Real Horovod runs: ``horovodrun`` jobs, the emulated network, the replay workload, validation.

- :mod:`.launcher`: one ``horovodrun`` job (process group, timeout, parent-death signal).
- :mod:`.testbed`: the HTB-shaped network namespace, and the emulated cluster (one namespace per host).
- :mod:`.hostlaunch`: Horovod's Gloo launcher starting each rank in its emulated host.
- :mod:`.replay`: the replay training loop (``python -m autotuner.replay``).
- :mod:`.validation`: trials, the append-only trial store, resume.
- :mod:`.report`: the validation report.
"""
