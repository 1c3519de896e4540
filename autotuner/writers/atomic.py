"""The one way this package writes a file: atomically, or not at all.

Every output (fitted models, plots, timelines, reports) goes to a temporary file in the same
folder, is flushed and fsynced, then renamed over the target with ``os.replace`` (atomic on
POSIX), so an interrupted write (Ctrl-C, SIGTERM, a full disk) leaves the old file or none,
never half of one. Errors become :class:`~autotuner.errors.OutputError` with one line naming
the path. Append-only trial records are written elsewhere
(:class:`autotuner.frameworks.horovod.validation.TrialStore`, O_APPEND + fsync per record).
"""
from __future__ import annotations

import errno
import io
import os
import tempfile
from pathlib import Path

from ..errors import OutputError


def _reason(e: OSError) -> str:
    return e.strerror or str(e)


def check_output_dir(path: Path, what: str = "--out") -> Path:
    """Make sure ``path`` is (or can be made) a folder this process can write into.

    Called before any work starts, so a bad ``--out`` fails in milliseconds, not after a fit.
    Creates the folder (and its parents) when missing. Raises OutputError (one line) when
    ``path`` or a parent is a file, or the folder is not writable.
    """
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
        _probe_write(p)
    except FileExistsError:
        raise OutputError(f"{what} {p}: cannot write there (a file is in the way, not a directory)") from None
    except OSError as e:
        raise OutputError(f"{what} {p}: cannot write there ({_reason(e)})") from None
    return p


def _probe_write(folder: Path) -> None:
    """Create a file in ``folder`` and remove it; OSError when that cannot be done. On Linux the file is unnamed
    (``O_TMPFILE``: it never appears in the folder, so a Ctrl-C at any moment leaves nothing behind); elsewhere, or on
    a file system without it, a named temporary file removed in a ``finally``."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is not None:
        try:
            os.close(os.open(folder, flag | os.O_WRONLY, 0o600))
            return
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".write-check.", suffix=".tmp")
    try:
        os.close(fd)
    finally:
        os.unlink(tmp)


def atomic_write_bytes(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (mode 0644); creates the parent folder.

    Raises OutputError (one line naming ``path``) on any OS error; the target is untouched then.
    """
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    except OSError as e:
        raise OutputError(f"{p}: cannot write ({_reason(e)})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600
        os.replace(tmp, p)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise OutputError(f"{p}: cannot write ({_reason(e)})") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return p


def atomic_write_text(path: Path, text: str) -> Path:
    """:func:`atomic_write_bytes` of ``text`` encoded as UTF-8."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def save_figure(fig, path: Path, **savefig_kw) -> Path:
    """Render a matplotlib figure in memory (format from ``path``'s suffix), write it atomically
    and close the figure. ``savefig_kw`` go to ``Figure.savefig`` (e.g. ``dpi=110``)."""
    import matplotlib.pyplot as plt

    p = Path(path)
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format=p.suffix.lstrip(".") or "png", **savefig_kw)
    finally:
        plt.close(fig)
    return atomic_write_bytes(p, buf.getvalue())


def save_png_svg(fig, stem: Path, dpi: int = 110) -> list[Path]:
    """Write ``fig`` as ``<stem>.png`` (``dpi``) and ``<stem>.svg``, each rendered in memory and written atomically,
    then close the figure. Returns both paths. The suffixes are appended, so a stem with a dot (an env named
    ``ddp-2x1-1.5gbit``) keeps its whole name."""
    import matplotlib.pyplot as plt

    paths = [Path(f"{stem}.png"), Path(f"{stem}.svg")]
    try:
        for path, kw in zip(paths, ({"format": "png", "dpi": dpi}, {"format": "svg"})):
            buf = io.BytesIO()
            fig.savefig(buf, **kw)
            atomic_write_bytes(path, buf.getvalue())
    finally:
        plt.close(fig)
    return paths
