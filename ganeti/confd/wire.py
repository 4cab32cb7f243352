"""The confd wire format: ``plj0`` framing, the signed envelope, the numbers.

A datagram is the four bytes ``plj0`` followed by a JSON object
``{"msg": <text>, "salt": <text>, "hmac": <40 hex>}``; ``msg`` is itself JSON
text (double encoded) and ``hmac`` is HMAC-SHA1 over ``salt + msg`` with the
cluster's hmac.key used verbatim.  The values
below must match Ganeti 3.0's, since its clients talk to our daemon.
"""

import collections
import hashlib
import hmac
import json
import re

import attr

from ganeti import constants
from ganeti import errors

MAGIC = b"plj0"
PROTOCOL_VERSION = constants.CONFD_PROTOCOL_VERSION  # 1
DEFAULT_PORT = constants.DEFAULT_CONFD_PORT
SERVICE_NAME = "ganeti-confd"

# Ganeti's daemon receives into a 4096-byte buffer, so nothing larger is a
# usable request; clients accept replies up to MAX_UDP_DATA_SIZE.
MAX_REQUEST_SIZE = 4096
MAX_REPLY_SIZE = 61440
MAX_CLOCK_SKEW = 300  # seconds between request salt and server clock
DEFAULT_REQ_COVERAGE = 6
CLIENT_EXPIRE_TIMEOUT = 10  # seconds

# Request types
REQ_PING = 0
REQ_NODE_ROLE_BYNAME = 1
REQ_NODE_PIP_BY_INSTANCE_IP = 2
REQ_CLUSTER_MASTER = 3
REQ_NODE_PIP_LIST = 4
REQ_MC_PIP_LIST = 5
REQ_INSTANCES_IPS_LIST = 6
REQ_NODE_DRBD = 7
REQ_NODE_INSTANCES = 8
REQ_INSTANCE_DISKS = 9
REQ_CONFIG_QUERY = 10
REQ_DATA_COLLECTORS = 11

REQUEST_NAMES = {
    REQ_PING: "ping",
    REQ_NODE_ROLE_BYNAME: "node-role",
    REQ_NODE_PIP_BY_INSTANCE_IP: "node-pip-by-ip",
    REQ_CLUSTER_MASTER: "master",
    REQ_NODE_PIP_LIST: "node-pip-list",
    REQ_MC_PIP_LIST: "mc-pip-list",
    REQ_INSTANCES_IPS_LIST: "instance-ips",
    REQ_NODE_DRBD: "node-drbd",
    REQ_NODE_INSTANCES: "node-instances",
    REQ_INSTANCE_DISKS: "instance-disks",
    REQ_CONFIG_QUERY: "config-query",
    REQ_DATA_COLLECTORS: "data-collectors",
}
REQUEST_TYPES = frozenset(REQUEST_NAMES)
# What Ganeti's Python client agrees to send (it leaves out type 8).
PYTHON_CLIENT_REQS = REQUEST_TYPES - {REQ_NODE_INSTANCES}

# Reply status
STATUS_OK = 0
STATUS_ERROR = 1
STATUS_NOTIMPLEMENTED = 2

# Error answers (with STATUS_ERROR)
ERROR_UNKNOWN_ENTRY = 0
ERROR_INTERNAL = 1
ERROR_ARGUMENT = 2

# Node roles (answer of REQ_NODE_ROLE_BYNAME)
NODE_ROLE_MASTER = 0
NODE_ROLE_CANDIDATE = 1
NODE_ROLE_OFFLINE = 2
NODE_ROLE_DRAINED = 3
NODE_ROLE_REGULAR = 4

# Keys of a dict query
REQQ_LINK = "0"
REQQ_IP = "1"
REQQ_IPLIST = "2"
REQQ_FIELDS = "3"

# Field codes of REQ_CLUSTER_MASTER
REQFIELD_NAME = 0
REQFIELD_IP = 1
REQFIELD_MNODE_PIP = 2
REQFIELDS = frozenset([REQFIELD_NAME, REQFIELD_IP, REQFIELD_MNODE_PIP])

_HEX40 = re.compile(r"^[0-9a-fA-F]{40}$")


class EnvelopeError(errors.SignatureError):
    """The datagram is not a well-formed signed envelope."""


class ReplyError(errors.ConfdClientError):
    """A reply's inner message is malformed."""


class Envelope(collections.namedtuple("Envelope", "msg salt hmac")):
    """A verified envelope: ``msg`` exactly as received, ``salt``, ``hmac``
    (lowercase hex).  (A tuple: one is made per datagram.)"""
    __slots__ = ()


@attr.s(frozen=True, slots=True)
class Reply(object):
    """The inner message of a reply."""
    status = attr.ib()
    answer = attr.ib()
    serial = attr.ib()
    protocol = attr.ib(default=PROTOCOL_VERSION)


def read_hmac_key(path):
    """The cluster key: the file's bytes verbatim, trailing newline included.

    Ganeti's Python and Haskell code both use the whole file, so stripping
    the newline would make every signature mismatch.
    """
    with open(path, "rb") as f:
        return f.read()


def _as_key(key):
    return key.encode("utf-8") if isinstance(key, str) else key


class PreparedMsg(object):
    """A message with its encodings computed once.

    Replies that are sent many times (memoised answers) keep these, so a
    30 KB instance-IP list is JSON-escaped and UTF-8 encoded once per config
    version instead of once per query; ``head`` is the whole envelope up to
    the salt.
    """
    __slots__ = ("text", "data", "quoted", "head")

    def __init__(self, text):
        self.text = text
        self.data = text.encode("utf-8")
        self.quoted = json.dumps(text).encode("utf-8")
        self.head = b"".join([MAGIC, b'{"msg": ', self.quoted, b', "salt": '])

    def __repr__(self):
        return "<PreparedMsg %s>" % self.text[:60]


try:  # OpenSSL's HMAC object itself: hmac.HMAC wraps it in Python calls
    from _hashlib import hmac_new as _openssl_hmac

    def _keyed_sha1(key):
        return _openssl_hmac(key, b"", "sha1")
except ImportError:  # pragma: no cover (Python built without OpenSSL)
    def _keyed_sha1(key):
        return hmac.new(key, digestmod=hashlib.sha1)

_quote = json.encoder.encode_basestring_ascii  # what json.dumps does to a str
_decoder = json.JSONDecoder()
_scan = _decoder.scan_once
_TRAILING_SPACE = re.compile(r"[ \t\n\r]*\Z").match


def decode_json(text, start=0):
    """``json.loads(text[start:])``, without its wrappers' costs.

    Messages are small and parsed once per datagram, so the Python layers
    around the C scanner are a good part of the time: scan directly, and
    only for what the scanner does not take alone (leading white space,
    errors) go the usual way.
    """
    try:
        value, end = _scan(text, start)
    except StopIteration:
        return _decoder.decode(text[start:])
    if end != len(text) and not _TRAILING_SPACE(text, end):
        return _decoder.decode(text[start:])
    return value


class Signer(object):
    """Signs and checks datagrams with one key.

    The HMAC state keyed with it is computed once and copied for each
    datagram, which costs half of keying a new HMAC every time.
    """
    __slots__ = ("key", "_mac")

    def __init__(self, key):
        self.key = _as_key(key)
        self._mac = _keyed_sha1(self.key)

    def sign(self, salt, msg):
        """Lowercase hex HMAC-SHA1 of ``salt + msg`` (both text)."""
        mac = self._mac.copy()
        mac.update((salt + msg).encode("utf-8"))
        return mac.hexdigest()

    def pack(self, salt, msg):
        """A complete datagram carrying ``msg`` signed with ``salt``.

        ``msg`` is JSON text or a :class:`PreparedMsg`.  The envelope is laid
        out as json.dumps lays out {"msg", "salt", "hmac"}.
        """
        if not isinstance(msg, PreparedMsg):
            msg = PreparedMsg(msg)
        mac = self._mac.copy()
        mac.update(salt.encode("utf-8"))
        mac.update(msg.data)
        return b"".join([msg.head, _quote(salt).encode("ascii"),
                         b', "hmac": "', mac.hexdigest().encode("ascii"),
                         b'"}'])

    def unpack(self, datagram):
        """Check framing and signature of ``datagram``; return an Envelope.

        Raises ConfdMagicError, EnvelopeError (not a JSON envelope) or
        SignatureError (wrong HMAC).  The caller checks the salt's meaning.
        """
        return Envelope._make(self.verify(datagram))

    def verify(self, datagram):
        """What unpack does, giving a plain (msg, salt, hmac) tuple."""
        if not datagram.startswith(MAGIC):
            raise errors.ConfdMagicError("datagram does not start with %r"
                                         % MAGIC)
        try:
            outer = decode_json(datagram.decode("utf-8"), 4)
        except (ValueError, UnicodeDecodeError, RecursionError) as err:
            raise EnvelopeError("envelope is not JSON: %s" % err)
        if type(outer) is not dict:
            raise EnvelopeError("envelope is not a JSON object")
        msg = outer.get("msg")
        salt = outer.get("salt")
        digest = outer.get("hmac")
        if type(msg) is not str or type(salt) is not str \
                or type(digest) is not str:
            for name in ("msg", "salt", "hmac"):
                if not isinstance(outer.get(name), str):
                    raise EnvelopeError("envelope field '%s' is missing or"
                                        " not a string" % name)
        selector = outer.get("key_selector")
        if selector is not None:
            # Ganeti's generic signer appends a key selector to the salt;
            # confd never sends one, but honouring it costs nothing.
            if not isinstance(selector, str):
                raise EnvelopeError("envelope field 'key_selector' is not a"
                                    " string")
        if not _HEX40.match(digest):
            raise errors.SignatureError("hmac is not 40 hex digits")
        mac = self._mac.copy()
        try:
            mac.update((salt + (selector or "") + msg).encode("utf-8"))
        except UnicodeEncodeError:  # lone surrogates, legal in JSON strings
            raise EnvelopeError("envelope text is not valid Unicode")
        digest = digest.lower()
        if not hmac.compare_digest(mac.hexdigest(), digest):
            raise errors.SignatureError("hmac does not match")
        return msg, salt, digest


def sign(key, salt, msg):
    """Lowercase hex HMAC-SHA1 of ``salt + msg`` (both text)."""
    return Signer(key).sign(salt, msg)


def pack(key, salt, msg):
    """A complete datagram carrying ``msg`` (text or PreparedMsg) signed
    with ``salt``; see :meth:`Signer.pack`."""
    return Signer(key).pack(salt, msg)


def unpack(datagram, key):
    """The Envelope of ``datagram``; see :meth:`Signer.unpack`."""
    return Signer(key).unpack(datagram)


def encode_request(req_type, rsalt, query=None):
    """The inner JSON text of a request (``query`` left out when None)."""
    body = {"protocol": PROTOCOL_VERSION, "type": req_type, "rsalt": rsalt}
    if query is not None:
        body["query"] = query
    return json.dumps(body)


def encode_reply(status, answer, serial):
    return json.dumps({"protocol": PROTOCOL_VERSION, "status": status,
                       "answer": answer, "serial": serial})


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def decode_reply(msg):
    """Parse and type-check a reply's inner message; raise ReplyError."""
    try:
        body = json.loads(msg)
    except (ValueError, RecursionError) as err:
        raise ReplyError("reply message is not JSON: %s" % err)
    if not isinstance(body, dict):
        raise ReplyError("reply message is not a JSON object")
    for name in ("protocol", "status", "serial"):
        if not _is_int(body.get(name)):
            raise ReplyError("reply field '%s' is missing or not an integer"
                             % name)
    if "answer" not in body:
        raise ReplyError("reply field 'answer' is missing")
    if body["protocol"] != PROTOCOL_VERSION:
        raise ReplyError("reply protocol %s is not %s"
                         % (body["protocol"], PROTOCOL_VERSION))
    return Reply(status=body["status"], answer=body["answer"],
                 serial=body["serial"], protocol=body["protocol"])
