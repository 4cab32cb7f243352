"""Tests that run real processes: our daemons (ganeti-noded, -masterd,
-confd, -rapi) on a virtual cluster, Ganeti's own commands against them,
the demo, and real qemu guests.  Slow; ``tox -e unit`` leaves them out."""
