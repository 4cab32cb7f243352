"""Development tools, not part of an installed cluster.

The virtual cluster (several "nodes" on 127.0.0.x, each with its own root),
the demo built on it, and the tiny real Linux guest used by the kvm tests.
``setup.py`` leaves this package out of what it installs.
"""
