"""Horovod 0.28.1 (and 0.20.3's defaults): its knob table (:mod:`.knobs`), the simulator of its background loop
(:mod:`.simulator`, the batch :mod:`.fastsim`), the question asked of it (:mod:`.scenario`), its replay workload
(:mod:`.replay`), its probes and launcher (``horovodrun``: :mod:`.launch`, :mod:`.hostlaunch`), and its jobs: predict
(:mod:`.predict`), environments (:mod:`.environments`), real runs (:mod:`.measure`, :mod:`.validation`, :mod:`.tune`,
:mod:`.realruns`).
"""
