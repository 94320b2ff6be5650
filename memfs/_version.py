"""memfs's one version: a module of its own, so that what needs it need not
import the package's public face."""

__version__ = "0.1.0"
