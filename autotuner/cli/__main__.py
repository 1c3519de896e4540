"""``python -m autotuner.cli ARGS``: the ``autotuner`` program (:func:`autotuner.cli.main`)."""
import sys

from autotuner.cli import main

if __name__ == "__main__":
    sys.exit(main())
