"""Defences of the daemon against hostile traffic, all on an injected clock.

* :class:`ReplayCache` -- a signed request is answered once: its HMAC is
  remembered until its timestamp falls out of the clock-skew window, after
  which the clock check refuses it anyway.  Memory is bounded.
* :class:`RateLimiter` -- a token bucket per source address, checked before
  any parsing, so a flood from one address costs a dict lookup per datagram.
* :class:`LogThrottle` -- at most a few log lines per reason and period, so
  logging a flood of bad packets cannot become the flood's amplifier.
"""

import collections
import heapq


class ReplayCache(object):
    """Remembers request digests until their acceptance window ends."""

    def __init__(self, clock, max_entries=200000):
        self._clock = clock
        self._max = max_entries
        self._expiry = {}   # digest -> time after which it may be forgotten
        self._heap = []     # (expiry, digest), oldest first

    def __len__(self):
        return len(self._expiry)

    def _purge(self, now):
        heap = self._heap
        while heap and heap[0][0] < now:
            expiry, digest = heapq.heappop(heap)
            if self._expiry.get(digest) == expiry:
                del self._expiry[digest]

    def check_and_add(self, digest, expires_at):
        """True if ``digest`` is new (and now remembered), False if seen.

        Also False when the cache is full of live entries: refusing is safe,
        forgetting a live entry would let its request be replayed.
        """
        now = self._clock.seconds()
        self._purge(now)
        if digest in self._expiry:
            return False
        if len(self._expiry) >= self._max:
            raise CacheFull()
        self._expiry[digest] = expires_at
        heapq.heappush(self._heap, (expires_at, digest))
        return True


class CacheFull(Exception):
    """The replay cache holds its maximum of live entries."""


class RateLimiter(object):
    """Token bucket per source: ``rate`` datagrams/s, bursts of ``burst``.

    A rate of 0 (or less) disables the limit.  At most ``max_sources``
    buckets are kept; the least recently seen source is forgotten first (a
    forgotten bucket is a full one, the state of any idle source anyway).
    """

    def __init__(self, clock, rate=1000.0, burst=2000.0, max_sources=65536):
        self._clock = clock
        self.rate = float(rate)
        self.burst = max(1.0, float(burst))
        self._max = max_sources
        self._buckets = collections.OrderedDict()  # source -> [tokens, time]

    @property
    def enabled(self):
        return self.rate > 0

    def __len__(self):
        return len(self._buckets)

    def allow(self, source):
        if self.rate <= 0:
            return True
        now = self._clock.seconds()
        bucket = self._buckets.get(source)
        if bucket is None:
            if len(self._buckets) >= self._max:
                self._buckets.popitem(last=False)
            bucket = self._buckets[source] = [self.burst, now]
        else:
            self._buckets.move_to_end(source)
            elapsed = now - bucket[1]
            if elapsed > 0:
                bucket[0] = min(self.burst, bucket[0] + elapsed * self.rate)
            bucket[1] = now
        if bucket[0] >= 1.0:
            bucket[0] -= 1.0
            return True
        return False


class LogThrottle(object):
    """Allows ``per_period`` log lines per key every ``period`` seconds."""

    def __init__(self, clock, per_period=10, period=60.0):
        self._clock = clock
        self._per_period = per_period
        self._period = period
        self._state = {}  # key -> [period start, lines logged, suppressed]

    def allow(self, key):
        now = self._clock.seconds()
        state = self._state.get(key)
        if state is None or now - state[0] >= self._period:
            state = self._state[key] = [now, 0, 0]
        if state[1] < self._per_period:
            state[1] += 1
            return True
        state[2] += 1
        return False

    def suppressed(self):
        """{key: lines suppressed in the current period}, non-zero only."""
        return {k: s[2] for k, s in self._state.items() if s[2]}
