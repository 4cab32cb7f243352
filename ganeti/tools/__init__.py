"""Helper tools shipped with the package (not daemons): e.g.
:mod:`ganeti.tools.tinyguest`, the tiny real Linux guest used by the tests
and by ``python -m ganeti.demo --kvm``."""
