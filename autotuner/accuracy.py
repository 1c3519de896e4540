"""``python -m autotuner.accuracy``: the predicted-vs-measured table (:mod:`autotuner.frameworks.horovod.views.accuracy`)
for the runs and fitted models found as every command finds them (:mod:`autotuner.paths`)."""
from autotuner.paths import model_search_path, runs_search_path
from autotuner.frameworks.horovod.views.accuracy import cases, markdown

if __name__ == "__main__":
    print(markdown(cases(runs_search_path(), model_search_path())))
