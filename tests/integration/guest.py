"""The tiny real guest for the kvm tests: :mod:`ganeti.dev.tinyguest`
plus :func:`guest_or_skip`, which turns "cannot have it here" into a
skipped test saying why."""

from ganeti.dev.tinyguest import (  # noqa: F401  (re-exported)
    MODULES, RECIPE, Guest, GuestUnavailable, cache_dir, get_guest,
    qemu_binary)

__all__ = ["Guest", "GuestUnavailable", "get_guest", "guest_or_skip",
           "qemu_binary"]


def guest_or_skip():
    """(qemu binary, Guest) or raise SkipTest with the reason."""
    from twisted.trial.unittest import SkipTest
    binary = qemu_binary()
    if binary is None:
        raise SkipTest("qemu-system-x86_64 is not installed (apt-get install "
                       "qemu-system-x86)")
    try:
        return binary, get_guest()
    except GuestUnavailable as err:
        raise SkipTest("no test guest: %s" % err)
