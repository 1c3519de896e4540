"""Units every part shares (pure constants, no framework)."""
from __future__ import annotations

#: bytes in a mebibyte (MiB, 2**20): what ``--fusion-threshold-mb``, ``HOROVOD_FUSION_THRESHOLD``'s docs and DDP's
#: ``bucket_cap_mb`` (``bucket_cap_mb * 1024 * 1024``, torch/nn/parallel/distributed.py) mean by "MB"
MIB = 1 << 20

__all__ = ["MIB"]
