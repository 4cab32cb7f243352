"""Serial console procedures: the node's end of the console relay
(:mod:`ganeti.backend.console`; docs/console.rst).

The socket is the kvm driver's, found from the instance name under this
node's root: callers name instances, never paths."""

import base64
import binascii

from ganeti import constants
from ganeti import errors
from ganeti import ht
from ganeti.backend import console as backend_console
from ganeti.hypervisor import state
from ganeti.server.noded.procedure import Arg, procedure

_NAME = ht.where(ht.NESTR, lambda name: "/" not in name and
                 name not in (".", ".."), "an instance name")
_OWNER = ht.where(ht.NESTR, lambda text: len(text) <= 256,
                  "a text of 1 to 256 characters")
_SESSION = ht.where(ht.NESTR, lambda text: len(text) <= 128,
                    "a session id")


class ConsoleProcedures(object):
    """Serial console sessions of this node's kvm instances."""

    _consoles = None
    #: ConsoleSessions' limits (the daemon's --console-* options)
    console_settings = {}

    @property
    def consoles(self):
        if self._consoles is None:
            self._consoles = backend_console.ConsoleSessions(
                self.reactor, backend_console.unix_connector(self.reactor),
                **self.console_settings)
        return self._consoles

    def console_socket(self, instance):
        return state.RuntimeDir(self.paths.root, constants.HT_KVM).ctrl_path(
            instance, "serial")

    @procedure(Arg("instance", _NAME), Arg("owner", _OWNER))
    async def console_open(self, instance, owner):
        """Open a session on the instance's serial console: ``{"session":
        id}`` or ``{"error", "message"}``."""
        return await self.consoles.open(instance,
                                        self.console_socket(instance), owner)

    @procedure(Arg("session", _SESSION), Arg("owner", _OWNER),
               Arg("offset", ht.NONNEG_INT, 0),
               Arg("timeout", ht.NONNEG_NUMBER, 0),
               Arg("instance", ht.maybe(_NAME), None))
    def console_read(self, session, owner, offset, timeout, instance):
        """The output after ``offset``, waiting up to ``timeout`` seconds
        (at most 30) for some."""
        return self.consoles.read(session, owner, offset, timeout, instance)

    @procedure(Arg("session", _SESSION), Arg("owner", _OWNER),
               Arg("data", ht.STR), Arg("instance", ht.maybe(_NAME), None))
    def console_write(self, session, owner, data, instance):
        """Send ``data`` (base64) to the console."""
        try:
            raw = base64.b64decode(data.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError):
            raise errors.ParameterError("data", "argument 'data' of"
                                        " console_write: not base64")
        return self.consoles.write(session, owner, raw, instance)

    @procedure(Arg("session", _SESSION), Arg("owner", _OWNER),
               Arg("instance", ht.maybe(_NAME), None))
    def console_close(self, session, owner, instance):
        """End the session."""
        return self.consoles.close(session, owner, instance)
