"""``python -m autotuner.replay``: the replay workload's entry point (:mod:`autotuner.realrun.replay`).

Kept at this path because the README, the launcher and users' scripts run it by this name.
"""
import sys

from autotuner.realrun.replay import main

if __name__ == "__main__":
    sys.exit(main())
