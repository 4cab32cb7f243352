"""The self-diagnose collector (``diagnose``), its signed report, and the
consumer's check of that report.

The node runs a diagnose command and reports the one JSON object it
prints::

    {"status": "Ok" | "live-repair" | "evacuate" | "evacuate-failover",
     "command": "<repair command name>",     (optional)
     "details": <any JSON>}                  (optional)

Which command is a cluster setting (``gnt-cluster modify
--diagnose-data-collector-filename NAME``, reaching the node in the
``diagnose`` entry of the configuration server's data-collectors answer);
``""`` (the default) is the built-in diagnosis over D-Bus
(:mod:`ganeti.mond.builtin_diagnose`).  Since the setting can be changed
through the remote API, a node runs only what its administrator put in
``/etc/ganeti/node-diagnose-commands`` (under its root): a bare name, an
executable regular file owned by the daemon's user and writable by no one
else, in a directory with the same rules (the restricted commands' rules,
:mod:`ganeti.backend.restricted`).  The command runs with no arguments,
an empty stdin, a minimal environment, in ``/``, and is killed after a
timeout.

When the node cannot tell its state (the command is refused, fails, times
out, or prints something that is not such an object) the report says so
with ``{"status": "unknown", "details": {"reason": ...}}``: a consumer
learns that the node's health is unknown and why, and never mistakes it
for ``Ok`` or for a request to act.

The maintenance daemon acts on these reports, so they are signed as
confd signs its messages: the report's ``data`` is the envelope
``{"msg": <the object as JSON text>, "salt": <the time of the diagnosis,
whole seconds since the epoch, as text>, "hmac": <HMAC-SHA1 of salt + msg
with the cluster's hmac.key, lowercase hex>}``.  The salt lets a consumer
refuse old reports replayed at it.  :func:`open_report` is the consumer's
side.
"""

import hmac
import json
import os

from twisted.internet import defer
from twisted.logger import Logger
from zope.interface import implementer

from ganeti import constants
from ganeti.backend import process
from ganeti.backend import restricted
from ganeti.confd import keys
from ganeti.confd import wire
from ganeti.mond import base
from ganeti.mond import builtin_diagnose

log = Logger()

OK = "Ok"
LIVE_REPAIR = "live-repair"
EVACUATE = "evacuate"
EVACUATE_FAILOVER = "evacuate-failover"
STATUSES = (OK, LIVE_REPAIR, EVACUATE, EVACUATE_FAILOVER)
#: what the daemon itself reports when the node's state is not known
UNKNOWN = "unknown"
KEYS = frozenset(["status", "command", "details"])
#: bytes of command output considered (a diagnosis is small)
MAX_OUTPUT = 64 * 1024

# reasons a consumer refuses a report for
UNSIGNED = "unsigned"
BAD_SIGNATURE = "bad-signature"
STALE = "stale"
MALFORMED = "malformed"
#: the report is genuine but says the node could not diagnose itself
NOT_DIAGNOSED = "unknown"
REASONS = (UNSIGNED, BAD_SIGNATURE, STALE, MALFORMED, NOT_DIAGNOSED)


class BadReport(Exception):
    """A diagnose report that must not be acted on; ``reason`` is one of
    REASONS, ``message`` says more."""

    def __init__(self, reason, message):
        Exception.__init__(self, reason, message)
        self.reason = reason
        self.message = message

    def __str__(self):
        return "%s: %s" % (self.reason, self.message)


def check_diagnosis(value):
    """Raise ValueError saying what is wrong unless ``value`` is a valid
    diagnosis object of the protocol; return it."""
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    extra = sorted(set(value) - KEYS)
    if extra:
        raise ValueError("unknown field(s) %s (allowed: command, details,"
                         " status)" % ", ".join(extra))
    status = value.get("status")
    if status not in STATUSES:
        raise ValueError("status %r is not one of %s"
                         % (status, ", ".join(STATUSES)))
    if "command" in value:
        try:
            restricted.check_name(value["command"])
        except restricted.CommandRefused as err:
            raise ValueError("command: %s" % err)
    return value


def parse_output(data):
    """The diagnosis a command printed (bytes); ValueError saying why it is
    not one."""
    if len(data) > MAX_OUTPUT:
        raise ValueError("the output is longer than %d bytes" % MAX_OUTPUT)
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise ValueError("the output is not JSON: %s" % err)
    return check_diagnosis(value)


def unknown(reason):
    return {"status": UNKNOWN, "details": {"reason": reason}}


def sign(hmac_key, diagnosis, seconds):
    """The signed envelope (a dict) of ``diagnosis`` made at ``seconds``."""
    msg = json.dumps(diagnosis, sort_keys=True)
    salt = str(int(seconds))
    return {"msg": msg, "salt": salt, "hmac": wire.sign(hmac_key, salt, msg)}


def open_report(data, hmac_key, now, max_age):
    """The checked diagnosis in a report's ``data`` (a signed envelope).

    ``hmac_key`` is the cluster key, or a list of keys any of which may
    have signed (during a key renewal: the new and the old one).

    ``now`` is the consumer's clock (seconds); a report signed more than
    ``max_age`` seconds from it (either way: clocks drift) is stale.
    Raises BadReport with reason ``unsigned`` (no envelope), ``bad-signature``
    (forged or another cluster's key), ``stale``, ``malformed`` (signed,
    but not a diagnosis of the protocol) or ``unknown`` (the node says it
    could not diagnose itself).
    """
    if not isinstance(data, dict) or not all(
            isinstance(data.get(k), str) for k in ("msg", "salt", "hmac")):
        raise BadReport(UNSIGNED, "the report is not a signed envelope"
                        " (msg, salt, hmac)")
    candidates = hmac_key if isinstance(hmac_key, (list, tuple)) \
        else [hmac_key]
    given = data["hmac"].lower()
    try:
        good = any(hmac.compare_digest(wire.sign(key, data["salt"],
                                                 data["msg"]), given)
                   for key in candidates)
    except UnicodeEncodeError:   # lone surrogates, legal in JSON strings
        raise BadReport(MALFORMED, "the envelope is not valid Unicode")
    if not good:
        raise BadReport(BAD_SIGNATURE, "the HMAC does not match the"
                        " cluster key")
    try:
        signed_at = int(data["salt"])
    except ValueError:
        raise BadReport(MALFORMED, "salt %r is not a time" % data["salt"])
    if abs(now - signed_at) > max_age:
        raise BadReport(STALE, "signed at %d, %ds from now (at most %ss)"
                        % (signed_at, now - signed_at, max_age))
    try:
        value = json.loads(data["msg"])
    except (ValueError, RecursionError) as err:
        raise BadReport(MALFORMED, "msg is not JSON: %s" % err)
    if isinstance(value, dict) and value.get("status") == UNKNOWN:
        reason = (value.get("details") or {}).get("reason") \
            if isinstance(value.get("details"), dict) else None
        raise BadReport(NOT_DIAGNOSED, "the node could not diagnose itself:"
                        " %s" % (reason or "no reason given"))
    try:
        return check_diagnosis(value)
    except ValueError as err:
        raise BadReport(MALFORMED, str(err))


@implementer(base.ICollector)
class DiagnoseCollector(base.CollectorBase):
    """Runs the diagnosis on its timer; serves the last one, signed at the
    time it was made (so a hung diagnosis shows as a stale report)."""

    name = constants.DATA_COLLECTOR_DIAGNOSE
    category = "node"         # as Ganeti 3.1's
    kind = base.KIND_STATUS
    sampled = True

    def __init__(self, reactor, clock, hmac_key, directory,
                 timeout=constants.DIAGNOSE_TIMEOUT, bus_address="system",
                 owner=None, builtin=None):
        self.reactor = reactor
        self.clock = clock
        # the key, or keys.HmacKeys following the key files
        self.keys = keys.as_keys(hmac_key)
        self.directory = directory
        self.timeout = timeout
        self.bus_address = bus_address
        self.owner = owner or (os.geteuid(), os.getegid())
        #: reactor, bus address -> Deferred diagnosis
        self.builtin = builtin or builtin_diagnose.run
        self.filename = ""

    def configure(self, settings):
        filename = settings.get("filename", "")
        self.filename = filename if isinstance(filename, str) else None

    async def diagnose(self):
        """The node's diagnosis (never fails: problems are ``unknown``)."""
        name = self.filename
        if name is None:
            return unknown("the configured diagnose command is not a name")
        if name == "":
            try:
                return check_diagnosis(
                    await self.builtin(self.reactor, self.bus_address))
            except Exception as err:
                log.failure("The built-in diagnose failed")
                return unknown("the built-in diagnose failed: %s" % err)
        try:
            program = restricted.find_executable(self.directory, name,
                                                 self.owner)
        except restricted.CommandRefused as err:
            log.warn("Diagnose command {name!r} refused: {err}", name=name,
                     err=err)
            return unknown("diagnose command %r refused: %s" % (name, err))
        result = await process.run_command(
            self.reactor, [program], cwd="/", timeout=self.timeout,
            stdin_data=b"")
        if result.failed:
            if result.timed_out:
                how = "did not finish within %ss and was killed" \
                    % self.timeout
            elif result.signal is not None:
                how = "was killed by signal %s" % result.signal
            else:
                how = "exited with status %s" % result.exit_code
            tail = result.tail(5)
            return unknown("diagnose command %r %s%s" % (
                name, how, (": " + tail) if tail else ""))
        try:
            return parse_output(result.stdout)
        except ValueError as err:
            return unknown("diagnose command %r printed a malformed"
                           " diagnosis: %s" % (name, err))

    async def _collect(self):
        started = self.clock.seconds()
        diagnosis = await self.diagnose()
        return sign(self.keys.signing(), diagnosis, started)

    def collect(self):
        return defer.Deferred.fromCoroutine(self._collect())
