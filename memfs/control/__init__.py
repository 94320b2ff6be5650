"""Between the supervisor and its store processes: the store spec and the
runtime folder where they meet.
"""

from __future__ import annotations

from ._spec import (
    StoreSpec,
    runtime_dir,
)

__all__ = [
    "StoreSpec",
    "runtime_dir",
]
