"""Development tools, not part of an installed cluster.

The virtual cluster (several "nodes" on 127.0.0.x, each with its own root),
the demo built on it, and the tiny real Linux guest used by the kvm tests.
``setup.py`` leaves this package out of what it installs.
"""

import os

#: The checkout these tools run from (its etc/os holds the demo's OS).
CHECKOUT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
