"""``python -m autotuner.accuracy``: the predicted-vs-measured table (:mod:`autotuner.views.accuracy`)."""
from pathlib import Path

from autotuner.views.accuracy import cases, markdown

if __name__ == "__main__":
    print(markdown(cases(Path("runs"), Path("model"))))
