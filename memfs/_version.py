"""memfs's one version, which `memfs --version` prints and the client sends
in its user agent: a module of its own, so that what needs it imports it
without importing the package's public face (no import circle)."""

__version__ = "0.1.0"
