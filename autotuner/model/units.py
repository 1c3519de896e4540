"""Units every part shares (pure constants, no framework)."""
from __future__ import annotations

#: bytes in a mebibyte (MiB, 2**20): what the frameworks' "MB" knobs mean (Horovod's fusion threshold flag, DDP's
#: ``bucket_cap_mb * 1024 * 1024`` in torch/nn/parallel/distributed.py)
MIB = 1 << 20

__all__ = ["MIB"]
