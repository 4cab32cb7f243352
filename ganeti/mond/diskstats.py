"""``diskstats``: the kernel's per block device I/O counters.

The data is one object per line of ``/proc/diskstats`` with the first
fourteen columns under Ganeti's names (the counters are cumulative since
boot; a consumer takes differences between reports).
"""

import os

from twisted.internet import defer
from zope.interface import implementer

from ganeti.mond import base

#: Ganeti's names of the columns after major, minor and name
FIELDS = ("readsNum", "mergedReads", "secRead", "timeRead", "writes",
          "mergedWrites", "secWritten", "timeWrite", "ios", "timeIO",
          "wIOmillis")


def parse_diskstats(text):
    devices = []
    for line in text.splitlines():
        cols = line.split()
        if not cols:
            continue
        if len(cols) < 3 + len(FIELDS):
            raise ValueError("bad /proc/diskstats line: %r" % line)
        try:
            numbers = [int(c) for c in cols[3:3 + len(FIELDS)]]
            entry = {"major": int(cols[0]), "minor": int(cols[1]),
                     "name": cols[2]}
        except ValueError:
            raise ValueError("bad /proc/diskstats line: %r" % line)
        entry.update(zip(FIELDS, numbers))
        devices.append(entry)
    return devices


@implementer(base.ICollector)
class DiskstatsCollector(base.CollectorBase):
    name = "diskstats"
    category = "storage"
    kind = base.KIND_PERFORMANCE
    sampled = True

    def __init__(self, path="/proc/diskstats"):
        self.path = path

    def available(self):
        return os.path.exists(self.path)

    def _read(self):
        with open(self.path) as f:   # a /proc file: never blocks
            return parse_diskstats(f.read())

    def collect(self):
        return defer.maybeDeferred(self._read)
