"""Disk data of a remote (inter-cluster) export, sent from the source
cluster's node straight to the destination cluster's node.

The two nodes are of different clusters, so the node daemons' channel
(the cluster certificate) does not apply.  Instead each side has a key
made for this one move (``x509_cert_create``): the source's certificate
reached the destination signed with the cluster domain secret, the
destination's reached the source the same way (:mod:`ganeti.rie`).  The
TLS connection presents those keys and pins the other side's certificate
exactly: the listener on the destination accepts only a client holding the
source's key, the source accepts only a server holding the destination's.

After the handshake the client sends one line ``RIE0 <magic> <size>``; the
server checks the magic (a wrong one is refused with ``ERR <reason>``, the
connection closed), answers ``OK``, receives exactly ``size`` bytes into a
transfer file and answers ``DONE <sha256>``; the client compares the digest
with what it sent.  A failed attempt leaves the listener waiting for a
good one until it times out.
"""

import datetime
import hashlib
import hmac
import os
import shutil
import uuid

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import NameOID
from OpenSSL import SSL
from twisted.internet import defer, protocol
from twisted.internet.endpoints import (TCP4ClientEndpoint,
                                        TCP6ClientEndpoint, wrapClientTLS)
from twisted.internet.interfaces import IOpenSSLClientConnectionCreator
from twisted.logger import Logger
from twisted.protocols.basic import FileSender, LineReceiver
from zope.interface import implementer

from ganeti import crypto
from ganeti import errors
from ganeti import rie
from ganeti.utils import io

__all__ = ["KEY_DIR", "make_key", "load_key", "remove_key", "server_options",
           "ImportListener", "send_file", "PROTOCOL", "MAX_LINE"]

log = Logger()

PROTOCOL = b"RIE0"
#: the common name Ganeti gives such certificates
CERT_CN = "ganeti.example.com"
KEY_DIR = "crypto"
MAX_LINE = 512
_KEY_FILE = "key.pem"


def _key_dir(paths):
    return os.path.join(paths.data_dir, KEY_DIR)


def _key_path(paths, name):
    if not isinstance(name, str) or not name.startswith("x509-") or \
            "/" in name or name in (".", ".."):
        raise errors.ParameterError("key_name", "key_name: %r is not the"
                                    " name of an import/export key" % (name,))
    return os.path.join(_key_dir(paths), name, _KEY_FILE)


def make_key(paths, validity, now):
    """A new key and self-signed certificate valid ``validity`` seconds
    from ``now`` (epoch seconds), kept on this node; ``[name, cert
    PEM]``."""
    key = crypto.new_private_key("rsa")
    moment = datetime.datetime.fromtimestamp(now, datetime.timezone.utc)
    cn = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CERT_CN)])
    cert = (x509.CertificateBuilder()
            .subject_name(cn).issuer_name(cn)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            # clusters' clocks may differ a little
            .not_valid_before(moment - datetime.timedelta(hours=1))
            .not_valid_after(moment + datetime.timedelta(seconds=validity))
            .sign(key, hashes.SHA256()))
    name = "x509-%s-%s" % (
        moment.strftime("%Y%m%d%H%M%S"), uuid.uuid4().hex[:12])
    path = _key_path(paths, name)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption())
    io.atomic_write(path, key_pem + cert_pem, mode=0o400)
    return [name, cert_pem.decode("ascii")]


def clean_keys(paths, now):
    """Remove the keys whose certificates expired before ``now`` (left
    by moves that did not finish); their names."""
    base = _key_dir(paths)
    removed = []
    try:
        names = sorted(os.listdir(base))
    except FileNotFoundError:
        return removed
    moment = datetime.datetime.fromtimestamp(now, datetime.timezone.utc)
    for name in names:
        try:
            key = load_key(paths, name)
        except (errors.ExportError, errors.ParameterError):
            continue
        if key.not_valid_after < moment:
            remove_key(paths, name)
            removed.append(name)
    return removed


def load_key(paths, name):
    """The key ``name`` as a :class:`ganeti.crypto.ClusterCertificate`."""
    path = _key_path(paths, name)
    try:
        with open(path, "rb") as f:
            pem = f.read()
    except FileNotFoundError:
        raise errors.ExportError("there is no import/export key %s on this"
                                 " node (expired or removed?)" % name)
    try:
        return crypto.ClusterCertificate.from_pem(pem, path=path)
    except errors.X509CertError as err:
        raise errors.ExportError("import/export key %s: %s" % (name, err))


def remove_key(paths, name):
    directory = os.path.dirname(_key_path(paths, name))
    if not os.path.isdir(directory):
        return False
    shutil.rmtree(directory)
    return True


def load_peer(pem, field):
    if isinstance(pem, str):
        pem = pem.encode("ascii", "replace")
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError as err:
        raise errors.ParameterError(field, "%s: not a PEM certificate: %s"
                                    % (field, err))


def server_options(own, peer):
    """The listener's context: presents ``own``, demands ``peer``."""
    options, verify = crypto.peer_pinned_options(own, peer,
                                                 "remote export client")
    options.getContext().set_verify(
        SSL.VERIFY_PEER | SSL.VERIFY_FAIL_IF_NO_PEER_CERT |
        SSL.VERIFY_CLIENT_ONCE, verify)
    return options


@implementer(IOpenSSLClientConnectionCreator)
class _ClientCreator(object):
    def __init__(self, own, peer):
        options, self._verify = crypto.peer_pinned_options(
            own, peer, "remote import server")
        self._context = options.getContext()

    def clientConnectionForTLS(self, tlsProtocol):
        conn = SSL.Connection(self._context, None)
        conn.set_app_data(tlsProtocol)
        conn.set_verify(SSL.VERIFY_PEER | SSL.VERIFY_FAIL_IF_NO_PEER_CERT,
                        self._verify)
        return conn


# --- the destination: a listener per disk ------------------------------------

class _Receiver(LineReceiver):
    delimiter = b"\n"
    MAX_LENGTH = MAX_LINE

    def connectionMade(self):
        self.file = None
        self.received = 0
        self.size = None
        self.digest = hashlib.sha256()

    def lineReceived(self, line):
        listener = self.factory.listener
        parts = line.strip().split(b" ")
        if len(parts) != 3 or parts[0] != PROTOCOL:
            return self._refuse("expected '%s <magic> <size>'"
                                % PROTOCOL.decode())
        if not hmac.compare_digest(parts[1], listener.magic.encode()):
            return self._refuse("wrong magic")
        try:
            size = int(parts[2])
        except ValueError:
            size = -1
        if size < 0:
            return self._refuse("bad size %r" % parts[2])
        if listener.finished:
            return self._refuse("this disk was received already")
        if listener.receiving is not None:
            return self._refuse("another transfer of this disk is under way")
        listener.receiving = self
        self.size = size
        self.file = open(listener.partial_path, "wb")
        self.sendLine(b"OK")
        self.setRawMode()
        if size == 0:
            self._complete()

    def rawDataReceived(self, data):
        if self.file is None:
            return
        if self.received + len(data) > self.size:
            self.file.close()
            self.file = None
            self._release()
            return self._refuse("more data than announced")
        self.file.write(data)
        self.digest.update(data)
        self.received += len(data)
        if self.received == self.size:
            self._complete()

    def _release(self):
        listener = self.factory.listener
        if listener.receiving is self:
            listener.receiving = None

    def _complete(self):
        self._release()
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.close()
        self.file = None
        hexdigest = self.digest.hexdigest()
        self.factory.listener.received(self.size, hexdigest)
        self.sendLine(b"DONE " + hexdigest.encode())
        self.transport.loseConnection()

    def _refuse(self, reason):
        self.factory.listener.attempt_failed(reason)
        self.sendLine(b"ERR " + reason.encode("utf-8", "replace"))
        self.transport.loseConnection()

    def lineLengthExceeded(self, line):
        self._refuse("header line too long")

    def connectionLost(self, reason):
        self._release()
        if self.file is not None:
            self.file.close()
            self.file = None
            self.factory.listener.attempt_failed(
                "connection lost after %d of %d bytes" % (self.received,
                                                          self.size))
        elif self.size is None and not self.factory.listener.finished:
            # the TLS handshake failed (a wrong certificate) or nothing
            # was said
            self.factory.listener.attempt_failed(
                "connection closed before the header: %s"
                % reason.getErrorMessage())


class ImportListener(object):
    """One disk's listener on the destination node: accepts the source's
    data into ``path`` (a transfer file), then stops listening."""

    def __init__(self, reactor, own, peer, host, magic, path, timeout):
        self.reactor = reactor
        self.own = own
        self.peer = peer
        self.host = host
        self.magic = rie.check_magic(magic)
        self.path = path
        self.partial_path = path + ".partial"
        self.timeout = timeout
        self.port = None
        self.finished = False
        self.size = None
        self.sha256 = None
        self.error = None
        self.last_attempt = None
        #: the connection receiving the data now, if any
        self.receiving = None
        self._listening = None
        self._timer = None

    def start(self):
        factory = protocol.Factory.forProtocol(_Receiver)
        factory.listener = self
        self._listening = self.reactor.listenSSL(
            0, factory, server_options(self.own, self.peer),
            interface=self.host)
        self.port = self._listening.getHost().port
        self._timer = self.reactor.callLater(self.timeout, self._expire)
        return self.port

    def received(self, size, digest):
        os.rename(self.partial_path, self.path)
        self.finished = True
        self.size = size
        self.sha256 = digest
        log.info("Remote import: received {size} bytes on port {port}",
                 size=size, port=self.port)
        self.stop()

    def attempt_failed(self, reason):
        self.last_attempt = reason
        log.warn("Remote import on port {port}: refused a connection:"
                 " {reason}", port=self.port, reason=reason)

    def _expire(self):
        self._timer = None
        if not self.finished:
            self.error = ("no complete transfer within %d seconds (last"
                          " attempt: %s)" % (self.timeout,
                                             self.last_attempt or "none"))
        self.stop()

    def stop(self):
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        if self.receiving is not None:
            self.receiving.transport.abortConnection()
        if not self.finished:
            try:
                os.unlink(self.partial_path)
            except FileNotFoundError:
                pass
        listening, self._listening = self._listening, None
        if listening is not None:
            return listening.stopListening()
        return defer.succeed(None)

    def status(self):
        return {"port": self.port, "done": self.finished, "size": self.size,
                "sha256": self.sha256, "error": self.error,
                "last_attempt": self.last_attempt}


# --- the source: sending a file ---------------------------------------------

class _Sender(LineReceiver):
    delimiter = b"\n"
    MAX_LENGTH = MAX_LINE

    def connectionMade(self):
        self.state = "header"
        self.sendLine(b"%s %s %d" % (PROTOCOL, self.factory.magic.encode(),
                                     self.factory.size))

    def lineReceived(self, line):
        factory = self.factory
        if line.startswith(b"ERR "):
            factory.fail("the destination refused the transfer: %s"
                         % line[4:].decode("utf-8", "replace"))
            self.transport.loseConnection()
        elif self.state == "header" and line == b"OK":
            self.state = "sending"
            if factory.size == 0:
                return
            f = open(factory.path, "rb")
            digest = factory.digest

            def transform(data):
                digest.update(data)
                return data
            d = FileSender().beginFileTransfer(f, self.transport, transform)
            d.addBoth(lambda r: (f.close(), r)[1])
            d.addErrback(lambda fail: factory.fail(
                "reading %s: %s" % (factory.path, fail.getErrorMessage())))
        elif line.startswith(b"DONE ") and self.state == "sending":
            theirs = line[5:].decode("ascii", "replace")
            ours = factory.digest.hexdigest()
            if theirs != ours:
                factory.fail("the destination received other data (sha256"
                             " %s, sent %s)" % (theirs, ours))
            else:
                factory.succeed({"size": factory.size, "sha256": ours})
            self.transport.loseConnection()
        else:
            factory.fail("unexpected answer from the destination: %r"
                         % line[:80])
            self.transport.loseConnection()

    def connectionLost(self, reason):
        factory = self.factory
        if factory.result is not None:
            factory.deferred.callback(factory.result)
        else:
            factory.fail("the connection was closed before the destination"
                         " confirmed the data: %s" % reason.getErrorMessage())


class _SenderFactory(protocol.ClientFactory):
    protocol = _Sender

    def __init__(self, path, size, magic):
        self.path = path
        self.size = size
        self.magic = rie.check_magic(magic)
        self.digest = hashlib.sha256()
        self.result = None
        self.deferred = defer.Deferred()

    def succeed(self, value):
        # reported once the connection is closed
        self.result = value

    def fail(self, msg):
        self.result = None
        if not self.deferred.called:
            self.deferred.errback(errors.ExportError(msg))


def send_file(reactor, own, peer, host, port, magic, path,
              connect_timeout=60):
    """Send the file ``path`` to a destination's listener; a Deferred
    firing ``{"size", "sha256"}`` once the destination confirmed it, or
    failing with ExportError."""
    size = os.path.getsize(path)
    factory = _SenderFactory(path, size, magic)
    tcp = (TCP6ClientEndpoint if ":" in host else TCP4ClientEndpoint)(
        reactor, host, port, timeout=connect_timeout)
    endpoint = wrapClientTLS(_ClientCreator(own, peer), tcp)
    d = endpoint.connect(factory)
    d.addErrback(lambda fail: factory.fail(
        "cannot connect to %s:%s: %s" % (host, port,
                                         fail.getErrorMessage())))
    return factory.deferred
