"""Horovod's record readers: an environment's env.toml and the records it names (:mod:`.runs`), and the records
``measure`` appends (:mod:`.sweep`). The shared readers (files, layouts, timelines, nccl-tests, lab reports) are
:mod:`autotuner.readers`."""
