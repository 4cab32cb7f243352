"""``cpu-avg-load``: the node's CPU load, averaged over a window.

Every collection reads ``/proc/stat`` and keeps the busy time of the
whole node and of each CPU (user + nice + system + iowait + irq + softirq
+ steal + guest + guest_nice clock ticks, as Ganeti counts it).  The
report is the busy time between the oldest and the newest sample of the
last ``window`` seconds divided by the time between them: 0.0 (idle) to
1.0 per CPU (``cpus``), up to the number of CPUs for the node
(``cpu_total``).  With fewer than two samples in the window the data is
``{"error": ...}``, as Ganeti's.  hbal's ``--mond`` reads this report.
"""

import collections
import os

from twisted.internet import defer
from zope.interface import implementer

from ganeti.mond import base

#: Ganeti's CPUAVGLOAD_WINDOW_SIZE (seconds) and CPUAVGLOAD_BUFFER_SIZE
WINDOW = 600
BUFFER_SIZE = 150


def parse_stat(text):
    """[(cpu name, busy ticks)] of the ``cpu*`` lines, the total first."""
    rows = []
    for line in text.splitlines():
        fields = line.split()
        if not fields or not fields[0].startswith("cpu"):
            continue
        try:
            values = [int(v) for v in fields[1:]]
        except ValueError:
            raise ValueError("bad /proc/stat line: %r" % line)
        if len(values) < 4:
            raise ValueError("bad /proc/stat line: %r" % line)
        # user nice system [idle] iowait irq softirq steal guest guest_nice
        busy = sum(values[:3]) + sum(values[4:10])
        rows.append((fields[0], busy))
    if not rows or rows[0][0] != "cpu":
        raise ValueError("no 'cpu' line in /proc/stat")
    return rows


@implementer(base.ICollector)
class CpuLoadCollector(base.CollectorBase):
    name = "cpu-avg-load"
    category = None
    kind = base.KIND_PERFORMANCE
    sampled = True

    def __init__(self, clock, path="/proc/stat", window=WINDOW,
                 buffer_size=BUFFER_SIZE, ticks=None):
        self.clock = clock
        self.path = path
        self.window = window
        self.ticks = ticks or os.sysconf("SC_CLK_TCK")
        #: (time, [total busy, cpu0 busy, ...]), newest last
        self.samples = collections.deque(maxlen=buffer_size)

    def available(self):
        return os.path.exists(self.path)

    def sample(self):
        with open(self.path) as f:   # a /proc file: never blocks
            rows = parse_stat(f.read())
        self.samples.append((self.clock.seconds(), [b for _, b in rows]))

    def average(self):
        now = self.clock.seconds()
        window = [s for s in self.samples if s[0] > now - self.window]
        if len(window) < 2:
            return {"error": "not enough samples yet: %d in the last %ds"
                    % (len(window), self.window)}
        (t0, old), (t1, new) = window[0], window[-1]
        elapsed = (t1 - t0) * self.ticks
        if elapsed <= 0 or len(old) != len(new):
            return {"error": "the samples cover no time (or the CPUs"
                    " changed)"}
        loads = [(n - o) / elapsed for n, o in zip(new, old)]
        return {"cpu_number": len(loads) - 1, "cpus": loads[1:],
                "cpu_total": loads[0]}

    def collect(self):
        return defer.maybeDeferred(lambda: (self.sample(), self.average())[1])
