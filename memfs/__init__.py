"""memfs: Memory Stores of Claude Managed Agents as ordinary folders, over FUSE.

Public names: the `StoreClient` for the Memory Store API, the wire types, and
the exception tree (see `memfs._exceptions`).
"""

__version__ = "0.1.0"
