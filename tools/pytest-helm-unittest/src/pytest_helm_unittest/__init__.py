"""pytest plugin running helm-unittest suites (see plugin.py)."""
