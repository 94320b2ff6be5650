"""The Memory Store API over httpx: the only layer that imports httpx (but memfs.testing)."""

from __future__ import annotations

from ._client import StoreClient as StoreClient
