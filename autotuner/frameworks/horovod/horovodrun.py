"""``horovodrun --gloo`` without its per-job check of the build: what :class:`autotuner.frameworks.horovod.launch.Job`
starts in place of the ``horovodrun`` console script when Horovod is installed beside this Python.

Usage (the arguments are horovodrun's own)::

    python -m autotuner.frameworks.horovod.horovodrun -np 2 -H localhost:2 --gloo python train.py

Horovod 0.28.1's launcher asks ``gloo_built()`` before every ``--gloo`` job (horovod/runner/launch.py
``run_controller``); that check (horovod/common/util.py ``gloo_built`` -> ``_check_extension_lambda``) forks a
process that imports each framework extension in turn, ``horovod.tensorflow`` and then ``horovod.torch`` (that is,
torch): 7.5 s of a 16 s two-rank job on a 2-core machine (cProfile of ``horovodrun -np 2 -H
localhost:2`` with a script that only calls ``hvd.init()``), paid again by every job of a ``measure``,
``validate`` or ``tune``. The build's answer cannot change while its extension libraries stay the same, so it is
asked once, by Horovod's own ``gloo_built``, and kept in ``horovod-build.json`` in the per-user cache folder
(``platformdirs.user_cache_dir("autotuner")``), keyed by Horovod's version and the path, size and modification time of
every extension library (``horovod/*/mpi_lib*.so``). Another key, or a file that cannot be read, asks again; a
folder that cannot be written keeps nothing. Everything else is Horovod's ``run_commandline`` (the console script's
entry point, Horovod's setup.py ``entry_points``) on the same arguments. Only ``--gloo`` jobs come here: an MPI
job's checks are Horovod's, unchanged.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

CACHE_FILE = "horovod-build.json"


def build_key() -> list:
    """Horovod's version and ``[path, size in bytes, mtime in ns]`` of each of its extension libraries, sorted.
    Raises ImportError when Horovod is not installed."""
    import horovod

    root = Path(horovod.__file__).parent
    libs = []
    for p in sorted(root.glob("*/mpi_lib*.so")):
        st = p.stat()
        libs.append([str(p), st.st_size, st.st_mtime_ns])
    return [horovod.__version__, libs]


def cache_path() -> Path:
    """``horovod-build.json`` in the per-user cache folder (``$XDG_CACHE_HOME`` honoured); not created here."""
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("autotuner", appauthor=False)) / CACHE_FILE


def gloo_built_cached() -> bool:
    """Whether the installed Horovod was built with Gloo: the cached answer for :func:`build_key`, else Horovod's own
    ``horovod.common.util.gloo_built()`` (a forked import of each extension), kept for the next job. A cache that
    cannot be read or written is ignored."""
    key = build_key()
    path = cache_path()
    try:
        d = json.loads(path.read_text())
        if isinstance(d, dict) and d.get("key") == key and isinstance(d.get("gloo_built"), bool):
            return d["gloo_built"]
    except (OSError, ValueError):
        pass
    from horovod.common.util import gloo_built

    answer = bool(gloo_built())
    try:
        from ...writers.atomic import atomic_write_text

        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({"key": key, "gloo_built": answer}) + "\n")
    except (OSError, ValueError):  # OutputError is a ValueError: nothing kept, the next job asks again
        pass
    return answer


def main() -> None:
    from horovod.runner import launch

    if "--gloo" in sys.argv[1:]:
        answer = gloo_built_cached()
        launch.gloo_built = lambda verbose=False: answer  # the name run_controller calls (launch.py imports it)
    sys.argv[0] = "horovodrun"
    launch.run_commandline()


if __name__ == "__main__":
    main()
