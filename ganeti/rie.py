"""Remote (inter-cluster) import and export: the signed messages the two
clusters exchange, in Ganeti 3.0's formats.

Two clusters trust each other through a shared *cluster domain secret*
(``<data_dir>/cluster-domain-secret``, set with ``gnt-cluster renew-crypto
--cluster-domain-secret FILE``).  Everything one cluster hands to the other
through the admin (or through ``move-instance``) is authenticated with
HMAC-SHA1 under that secret, with a random hex salt in front of the
message:

* the *handshake* ``[version, hmac, salt]`` over ``"<version>:Hi, I'm
  Ganeti"``: proves both clusters share the secret;
* the *X509 key name* ``[name, hmac, salt]`` over the name of the key the
  source node made for the export;
* a *signed certificate*: ``X-Ganeti-Signature: SALT/HMAC``, an empty line,
  then the certificate's PEM (the HMAC is over the PEM);
* per disk, the destination's *disk info* ``[host, port, magic, hmac,
  salt]`` over ``"<index>:<host>:<port>:<magic>"``.

The master side of both clusters builds and checks these; the disk data
itself travels between the nodes (:mod:`ganeti.backend.remote_transfer`).
"""

import hashlib
import hmac
import ipaddress
import os
import re
import secrets

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from ganeti import errors
from ganeti import pathutils

__all__ = ["VERSION", "HANDSHAKE_TEXT", "CERT_VALIDITY", "SIGNATURE_HEADER",
           "new_salt", "sha1_hmac", "verify_hmac", "compute_handshake",
           "check_handshake", "sign_certificate", "load_signed_certificate",
           "compute_key_name", "check_key_name", "compute_disk_info",
           "check_disk_info", "new_magic", "check_magic",
           "read_domain_secret", "DOMAIN_SECRET_FILE"]

#: version of the remote import/export protocol (Ganeti 3.0's)
VERSION = 0
HANDSHAKE_TEXT = "Hi, I'm Ganeti"
#: seconds a key made for a remote export stays valid
CERT_VALIDITY = 24 * 3600
SIGNATURE_HEADER = "X-Ganeti-Signature"
DOMAIN_SECRET_FILE = "cluster-domain-secret"

_HEX_RE = re.compile(r"^[0-9a-fA-F]+$")
_SIGNATURE_RE = re.compile(r"^%s:\s*([0-9a-fA-F]+)/([0-9a-fA-F]+)$"
                           % re.escape(SIGNATURE_HEADER), re.I)
_MAGIC_RE = re.compile(r"^[-_.a-zA-Z0-9]{5,100}$")


def _prereq(msg):
    return errors.OpPrereqError(msg, errors.ECODE_INVAL)


def new_salt():
    """8 random bytes as hex, as Ganeti salts its HMACs."""
    return secrets.token_hex(8)


def new_magic(index):
    """A fresh magic for disk ``index``'s transfer."""
    return "%s-%d" % (secrets.token_hex(12), index)


def check_magic(magic, field="magic"):
    if not isinstance(magic, str) or not _MAGIC_RE.match(magic):
        raise errors.ParameterError(
            field, "%s: %r is not a transfer magic (5 to 100 of"
            " [-_.a-zA-Z0-9])" % (field, magic))
    return magic


def sha1_hmac(key, text, salt=None):
    """Hex HMAC-SHA1 of ``salt + text`` under ``key`` (all text)."""
    if isinstance(text, str):
        text = text.encode("utf-8")
    if salt:
        text = salt.encode("utf-8") + text
    return hmac.new(key.encode("utf-8"), text, hashlib.sha1).hexdigest()


def verify_hmac(key, text, digest, salt=None):
    if not isinstance(digest, str):
        return False
    return hmac.compare_digest(digest.lower(), sha1_hmac(key, text, salt))


def read_domain_secret(paths):
    """The cluster domain secret of this (master) node."""
    if paths is None:
        paths = pathutils.Paths()
    path = os.path.join(paths.data_dir, DOMAIN_SECRET_FILE)
    try:
        with open(path, "r", encoding="ascii") as f:
            secret = f.read().strip()
    except (OSError, UnicodeDecodeError) as err:
        raise errors.OpPrereqError(
            "cannot read the cluster domain secret (%s): %s; set one with"
            " 'gnt-cluster renew-crypto --cluster-domain-secret FILE'"
            % (path, err), errors.ECODE_ENVIRON)
    if not secret:
        raise errors.OpPrereqError(
            "the cluster domain secret (%s) is empty" % path,
            errors.ECODE_ENVIRON)
    return secret


# --- handshake --------------------------------------------------------------

def _handshake_message(version):
    return "%s:%s" % (version, HANDSHAKE_TEXT)


def compute_handshake(cds):
    salt = new_salt()
    return [VERSION, sha1_hmac(cds, _handshake_message(VERSION), salt), salt]


def check_handshake(cds, handshake):
    """None if ``handshake`` is good, else why not."""
    try:
        version, digest, salt = handshake
    except (TypeError, ValueError):
        return "not a [version, hmac, salt] triple: %r" % (handshake,)
    if not isinstance(salt, str) or not verify_hmac(
            cds, _handshake_message(version), digest, salt):
        return ("the HMAC does not match: the two clusters do not share the"
                " same cluster domain secret")
    if version != VERSION:
        return ("the clusters speak different remote import/export protocols"
                " (here %s, there %s)" % (VERSION, version))
    return None


# --- certificates ---------------------------------------------------------

def _sane_pem(pem):
    """Load a certificate and dump it again: (cryptography cert, PEM)."""
    if isinstance(pem, str):
        pem = pem.encode("ascii", "replace")
    try:
        cert = x509.load_pem_x509_certificate(pem)
    except ValueError as err:
        raise _prereq("not a PEM certificate: %s" % err)
    return cert, cert.public_bytes(serialization.Encoding.PEM).decode("ascii")


def sign_certificate(pem, cds, salt=None):
    """The certificate ``pem`` with the signature header in front."""
    salt = salt or new_salt()
    if not _HEX_RE.match(salt):
        raise errors.ProgrammerError("invalid salt %r" % salt)
    _, sane = _sane_pem(pem)
    return "%s: %s/%s\n\n%s" % (SIGNATURE_HEADER, salt,
                                sha1_hmac(cds, sane, salt), sane)


def load_signed_certificate(text, cds, field):
    """Check a signed certificate; its PEM (without the header).  Errors
    are OpPrereqError naming ``field``."""
    if not isinstance(text, str) or not text.strip():
        raise _prereq("%s: missing (a signed X509 certificate is needed)"
                      % field)
    found = None
    for line in text.splitlines():
        if line.startswith("---"):
            break
        match = _SIGNATURE_RE.match(line.strip())
        if match:
            found = match.groups()
            break
    if found is None:
        raise _prereq("%s: the certificate carries no %s header"
                      % (field, SIGNATURE_HEADER))
    salt, digest = found
    try:
        cert, sane = _sane_pem(text[text.index("-----BEGIN"):])
    except (ValueError, errors.OpPrereqError) as err:
        raise _prereq("%s: %s" % (field, err.args[0] if err.args else err))
    if not verify_hmac(cds, sane, digest, salt):
        raise _prereq("%s: the certificate's signature is invalid: the two"
                      " clusters do not share the same cluster domain secret"
                      % field)
    return sane


# --- X509 key name -----------------------------------------------------------

def compute_key_name(cds, name):
    salt = new_salt()
    return [name, sha1_hmac(cds, name, salt), salt]


def check_key_name(cds, key_name, field="x509_key_name"):
    """The key's name from a signed ``[name, hmac, salt]``."""
    try:
        name, digest, salt = key_name
    except (TypeError, ValueError):
        raise _prereq("%s: not a [name, hmac, salt] triple: %r"
                      % (field, key_name))
    if not (isinstance(name, str) and isinstance(salt, str)) or \
            not verify_hmac(cds, name, digest, salt):
        raise _prereq("%s: the HMAC is invalid (not made by a cluster"
                      " sharing our cluster domain secret)" % field)
    return name


# --- disk info --------------------------------------------------------------

def _disk_message(index, host, port, magic):
    return "%s:%s:%s:%s" % (index, host, port, magic)


def compute_disk_info(cds, salt, index, host, port, magic):
    return [host, port, magic,
            sha1_hmac(cds, _disk_message(index, host, port, magic), salt),
            salt]


def check_disk_info(cds, index, info, field="target_node"):
    """(host, port, magic) from disk ``index``'s signed info."""
    try:
        host, port, magic, digest, salt = info
    except (TypeError, ValueError):
        raise _prereq("%s: disk/%d: not a [host, port, magic, hmac, salt]"
                      " list: %r" % (field, index, info))
    if not (host and port and magic):
        raise _prereq("%s: disk/%d: the host, port or magic is missing"
                      % (field, index))
    if not isinstance(salt, str) or not verify_hmac(
            cds, _disk_message(index, host, port, magic), digest, salt):
        raise _prereq("%s: disk/%d: the HMAC is invalid (not made by a"
                      " cluster sharing our cluster domain secret)"
                      % (field, index))
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise _prereq("%s: disk/%d: host %r is not an IP address"
                      % (field, index, host))
    if isinstance(port, bool) or not isinstance(port, int) or \
            not 0 < port < 65536:
        raise _prereq("%s: disk/%d: port %r is not a TCP port"
                      % (field, index, port))
    try:
        check_magic(magic)
    except errors.ParameterError as err:
        raise _prereq("%s: disk/%d: %s" % (field, index, err.args[-1]))
    return host, port, magic
