"""ganeti-confd: read-only configuration answers over signed UDP.

The package is split by idea:

* :mod:`ganeti.confd.wire`     -- the ``plj0`` framing, HMAC signing, numbers
* :mod:`ganeti.confd.snapshot` -- one loaded config.data with its indexes
* :mod:`ganeti.confd.queries`  -- what each request type answers
* :mod:`ganeti.confd.guards`   -- replay cache, rate limit, log throttle
* :mod:`ganeti.confd.reloader` -- watching config.data and swapping snapshots
* :mod:`ganeti.confd.server`   -- the datagram pipeline and its counters
* :mod:`ganeti.confd.client`   -- Twisted client: several servers, best serial
* :mod:`ganeti.confd.cli`      -- the ``ganeti-confd-client`` command

The twistd service lives in :mod:`ganeti.server.confd`.
"""
