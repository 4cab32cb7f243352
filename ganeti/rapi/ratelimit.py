"""How fast one RAPI client may submit jobs: a token bucket per client.

Each client (an authenticated user, or for anonymous requests the client's
address; IPv6 addresses by their /64 network, which one host usually
holds whole) has a bucket of ``burst`` tokens that refills at ``rate``
tokens a second.  Submitting a job takes a token; with none left the
request is answered 429 with ``Retry-After`` (whole seconds until the
next token) and nothing is submitted.  Requests that submit no job
(queries, job status, long polls) take nothing.

Buckets that have filled up again are the same as new ones, so they are
dropped once more than :data:`MAX_CLIENTS` clients are known; if that is
not enough, the least recently used go (a client so dropped starts again
with a full bucket).
"""

import collections
import ipaddress
import math

#: Authenticated users: jobs a second, and how many at once
DEFAULT_USER_RATE = 20.0
DEFAULT_USER_BURST = 100
#: Anonymous clients (only read jobs: instance info, OS list)
DEFAULT_ANONYMOUS_RATE = 2.0
DEFAULT_ANONYMOUS_BURST = 20
#: Buckets kept at most
MAX_CLIENTS = 10000


class _Bucket(object):
    __slots__ = ("tokens", "stamp")

    def __init__(self, tokens, stamp):
        self.tokens = tokens
        self.stamp = stamp


class TokenBuckets(object):
    """One token bucket per client; ``rate`` 0 means no limit."""

    def __init__(self, clock, rate, burst, max_clients=MAX_CLIENTS):
        if rate < 0:
            raise ValueError("rate must not be negative, got %r" % (rate,))
        if rate and burst < 1:
            raise ValueError("burst must be at least 1, got %r" % (burst,))
        self.clock = clock
        self.rate = float(rate)
        self.burst = burst
        self.max_clients = max_clients
        self._buckets = collections.OrderedDict()

    def take(self, client):
        """Take a token of ``client``'s: 0 if there was one, else the
        seconds until there is (nothing taken)."""
        if not self.rate:
            return 0
        now = self.clock.seconds()
        bucket = self._buckets.get(client)
        if bucket is None:
            bucket = _Bucket(float(self.burst), now)
            self._buckets[client] = bucket
            self._trim(now)
        else:
            self._buckets.move_to_end(client)
            # a clock that went back refills nothing
            elapsed = max(0.0, now - bucket.stamp)
            bucket.tokens = min(float(self.burst),
                                bucket.tokens + elapsed * self.rate)
            bucket.stamp = now
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return 0
        return (1 - bucket.tokens) / self.rate

    def wait(self, client):
        """Seconds until ``client`` has a token (0: it has one now);
        takes nothing."""
        if not self.rate:
            return 0
        bucket = self._buckets.get(client)
        if bucket is None:
            return 0
        elapsed = max(0.0, self.clock.seconds() - bucket.stamp)
        tokens = min(float(self.burst), bucket.tokens + elapsed * self.rate)
        if tokens >= 1:
            return 0
        return (1 - tokens) / self.rate

    def _trim(self, now):
        if len(self._buckets) <= self.max_clients:
            return
        full = [client for client, bucket in self._buckets.items()
                if bucket.tokens + (now - bucket.stamp) * self.rate
                >= self.burst]
        for client in full:
            del self._buckets[client]
        while len(self._buckets) > self.max_clients:
            self._buckets.popitem(last=False)

    def __len__(self):
        return len(self._buckets)


def retry_after(seconds):
    """The ``Retry-After`` value for a wait: whole seconds, at least 1."""
    return str(max(1, int(math.ceil(seconds))))


def address_key(host):
    """The client name of an anonymous request from ``host``: the address
    itself, or for IPv6 its /64 network."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if address.version == 6 and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    if address.version == 6:
        return str(ipaddress.ip_network("%s/64" % address, strict=False))
    return str(address)
