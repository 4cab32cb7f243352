"""Defences of the daemon against hostile traffic, all on an injected clock.

* :class:`ReplayCache` -- a signed request is answered once: its HMAC is
  remembered until its timestamp falls out of the clock-skew window, after
  which the clock check refuses it anyway.  Memory is bounded (when full,
  the oldest timestamps are refused rather than forgotten).
* :class:`RateLimiter` -- a token bucket per source address, checked before
  any parsing, so a flood from one address costs a dict lookup per datagram.
* :class:`LogThrottle` -- at most a few log lines per reason and period, so
  logging a flood of bad packets cannot become the flood's amplifier.
"""

import collections
import heapq


class ReplayCache(object):
    """Remembers the signed requests answered while they could be replayed.

    A request stamped ``t`` passes the clock check until ``t + window``, so
    it is remembered until then, in a bucket per timestamp: a replay carries
    the same timestamp, so only that bucket is looked at, and a whole bucket
    expires at once.  Keys are the first 64 bits of the request's HMAC.

    Memory is bounded by ``max_entries``.  When full, the oldest bucket is
    forgotten and its timestamp becomes a *floor*: from then on requests
    stamped at or before it are refused (:class:`BelowFloor`), since the
    cache can no longer tell whether they were seen.  So no request is ever
    answered twice; under extreme load the accepted clock skew into the past
    shrinks instead.
    """

    def __init__(self, clock, window, max_entries=500000):
        self._clock = clock
        self._window = window
        self._max = max_entries
        self._buckets = {}  # timestamp -> set of 64-bit digest prefixes
        self._stamps = []   # heap of the bucket timestamps
        self._count = 0
        self.floor = None   # timestamps <= floor are refused
        self.evicted = 0    # entries forgotten before their time

    def __len__(self):
        return self._count

    def _drop_oldest(self):
        stamp = heapq.heappop(self._stamps)
        self._count -= len(self._buckets.pop(stamp))
        return stamp

    def _purge(self, now):
        while self._stamps and self._stamps[0] + self._window < now:
            self._drop_oldest()

    def check_and_add(self, digest_hex, stamp, now=None):
        """True if new (now remembered), False if seen.

        Raises BelowFloor when the cache cannot tell (see the class).
        ``now`` saves a clock reading when the caller has one.
        """
        if now is None:
            now = self._clock.seconds()
        if self._stamps and self._stamps[0] + self._window < now:
            self._purge(now)
        if self.floor is not None and stamp <= self.floor:
            raise BelowFloor(self.floor)
        key = int(digest_hex[:16], 16)
        bucket = self._buckets.get(stamp)
        if bucket is not None and key in bucket:
            return False
        while self._count >= self._max and self._stamps:
            if stamp <= self._stamps[0]:
                # It would be the oldest entry: refuse it rather than forget
                # a younger one.
                raise BelowFloor(self._stamps[0])
            size = len(self._buckets[self._stamps[0]])
            oldest = self._drop_oldest()
            self.floor = oldest if self.floor is None else max(self.floor,
                                                               oldest)
            self.evicted += size
        if bucket is None:
            bucket = self._buckets[stamp] = set()
            heapq.heappush(self._stamps, stamp)
        bucket.add(key)
        self._count += 1
        return True


class BelowFloor(Exception):
    """The request is older than what the full replay cache still covers."""


#: Requests/s one source may send, and its burst.  Far above what one node
#: asks for, even in a tight loop (Ganeti's confd answers one client about
#: 40,000 pings/s), so only a flood meets it -- and is then dropped before
#: any parsing or HMAC.
DEFAULT_RATE = 100000.0
DEFAULT_BURST = 100000.0


class RateLimiter(object):
    """Token bucket per source: ``rate`` datagrams/s, bursts of ``burst``.

    A rate of 0 (or less) disables the limit.  At most ``max_sources``
    buckets are kept; the least recently seen source is forgotten first (a
    forgotten bucket is a full one, the state of any idle source anyway).
    """

    def __init__(self, clock, rate=DEFAULT_RATE, burst=DEFAULT_BURST,
                 max_sources=65536):
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

    def allow(self, source, now=None):
        """Take a token of ``source``; False if it has none left."""
        if self.rate <= 0:
            return True
        if now is None:
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
