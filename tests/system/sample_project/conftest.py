"""The one line that gives this project memfs's fake store and fault proxy."""

pytest_plugins = ["memfs.testing"]
