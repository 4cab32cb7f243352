"""The master's part of the console relay: serial consoles of kvm
instances for clients that hold no node credentials (RAPI).

The master holds no session state: each call names the instance, whose
primary node (from the configuration, now) is asked to open, read, write
or close the session there (:mod:`ganeti.backend.console`).  Opening
checks first that the instance can have a serial console: it exists, is
not a forthcoming one, runs under kvm with ``serial_console`` on, is
marked up, and its primary node is online.  Each refusal is an
:class:`ganeti.errors.OpPrereqError` naming the reason, with an error code
RAPI turns into its status: unknown instance or session
(``ECODE_NOENT``), wrong state (``ECODE_STATE``), wrong hypervisor or
settings (``ECODE_INVAL``), too many sessions on the node
(``ECODE_TEMP_NORES``).  A node that cannot be reached is an
:class:`ganeti.errors.OpExecError` naming it.

Who opened which console, and who closed it, goes to the master's log.
See docs/console.rst.
"""

from twisted.logger import Logger

from ganeti import constants
from ganeti import errors
from ganeti import objects
from ganeti.backend import console as backend_console

__all__ = ["ConsoleRelay", "READ_RPC_MARGIN", "CALL_TIMEOUT"]

log = Logger()

#: seconds an RPC to a node's console waits beyond the read's own wait
READ_RPC_MARGIN = 15
#: seconds an open, write or close may take on the node
CALL_TIMEOUT = 30

_CODES = {
    backend_console.NOT_FOUND: errors.ECODE_NOENT,
    backend_console.NOT_RUNNING: errors.ECODE_STATE,
    backend_console.CLOSED: errors.ECODE_STATE,
    backend_console.LIMIT: errors.ECODE_TEMP_NORES,
}


class ConsoleRelay(object):
    """Console sessions through the primary nodes: ``cfg`` a config
    store, ``rpc`` the node RPC client (None: node RPC disabled)."""

    def __init__(self, cfg, rpc):
        self.cfg = cfg
        self.rpc = rpc

    def check(self, name):
        """The instance ``name`` if it can have a serial console; else an
        OpPrereqError saying why not."""
        inst = self.cfg.get_instance(name)
        if inst.forthcoming:
            raise errors.OpPrereqError(
                "Instance %s is forthcoming (it exists only in the"
                " configuration): it has no console" % inst.name,
                errors.ECODE_STATE)
        if inst.hypervisor != constants.HT_KVM:
            raise errors.OpPrereqError(
                "Instance %s runs under the %s hypervisor: only kvm"
                " instances have a serial console here" % (
                    inst.name, inst.hypervisor), errors.ECODE_INVAL)
        hvparams = objects.fill_hvparams(self.cfg.cluster, inst)
        if not hvparams.get("serial_console"):
            raise errors.OpPrereqError(
                "Instance %s has no serial console (hypervisor parameter"
                " serial_console is off)" % inst.name, errors.ECODE_INVAL)
        if inst.admin_state != constants.ADMINST_UP:
            raise errors.OpPrereqError(
                "Instance %s is not running (state %s)" % (
                    inst.name, _state(inst)), errors.ECODE_STATE)
        node = self.cfg.get_node(inst.primary_node)
        if node.offline:
            raise errors.OpPrereqError(
                "Instance %s's primary node %s is offline" % (
                    inst.name, node.name), errors.ECODE_STATE)
        if self.rpc is None:
            raise errors.OpExecError("Node RPC is disabled on this master"
                                     " (no cluster certificate)")
        return inst

    async def _call(self, inst, procedure, args, timeout=CALL_TIMEOUT):
        result = await self.rpc.call(inst.primary_node, procedure, args,
                                     timeout=timeout)
        if not result.success:
            raise errors.OpExecError("Console of %s: %s" % (inst.name,
                                                           result.fail_msg))
        answer = result.payload
        if not isinstance(answer, dict):
            raise errors.OpExecError("Console of %s: invalid answer from its"
                                     " node: %r" % (inst.name, answer))
        if "error" in answer:
            raise errors.OpPrereqError(
                str(answer.get("message")),
                _CODES.get(answer["error"], errors.ECODE_INVAL))
        return answer

    async def open(self, name, owner):
        """``{"session": id}`` of a new session of ``owner``."""
        inst = self.check(name)
        answer = await self._call(inst, "console_open", [inst.name, owner])
        log.info("Console of {instance} opened by {owner} (session"
                 " {session})", instance=inst.name, owner=owner,
                 session=str(answer.get("session"))[:6])
        return {"session": answer.get("session")}

    def _session_instance(self, name):
        # a session's later calls only need the instance's node: a
        # stopped instance's last output can still be read
        inst = self.cfg.get_instance(name)
        if self.rpc is None:
            raise errors.OpExecError("Node RPC is disabled on this master"
                                     " (no cluster certificate)")
        return inst

    async def read(self, name, session, owner, offset, timeout):
        inst = self._session_instance(name)
        timeout = min(float(timeout), backend_console.MAX_READ_WAIT)
        return await self._call(
            inst, "console_read", [session, owner, offset, timeout,
                                   inst.name],
            timeout=timeout + READ_RPC_MARGIN)

    async def write(self, name, session, owner, data):
        inst = self._session_instance(name)
        return await self._call(inst, "console_write",
                                [session, owner, data, inst.name])

    async def close(self, name, session, owner):
        inst = self._session_instance(name)
        answer = await self._call(inst, "console_close",
                                  [session, owner, inst.name])
        log.info("Console of {instance} closed by {owner} (session"
                 " {session})", instance=inst.name, owner=owner,
                 session=session[:6])
        return answer


def _state(inst):
    if inst.admin_state == constants.ADMINST_DOWN:
        return constants.INSTST_ADMINDOWN
    return constants.INSTST_ADMINOFFLINE
