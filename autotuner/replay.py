"""``python -m autotuner.replay``: the replay workload's entry point (:mod:`autotuner.frameworks.horovod.replay`).

Kept at this path because the README, the launcher and users' scripts run it by this name.
"""
import sys

from autotuner.frameworks.horovod.replay import main

if __name__ == "__main__":
    sys.exit(main())
