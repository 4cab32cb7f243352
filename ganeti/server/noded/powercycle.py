"""``node_powercycle``: the node daemon answers, then power-cycles its node
(``gnt-node powercycle``).

What power-cycling means is set by the daemon (:func:`make_powercycle`):
on a real node (root ``/``) the hypervisor's hard reboot of the machine
(:mod:`ganeti.backend.powercycle`); on a virtual cluster node, whose
machine is shared with other nodes, the node daemon restarts in place and
the daemons it manages follow (:mod:`.restart`): new processes, and a new
boot id, as after a reboot.
"""

from twisted.logger import Logger

from ganeti import constants
from ganeti import errors
from ganeti import ht
from ganeti.backend import powercycle as backend_powercycle
from ganeti.server.noded import restart
from ganeti.server.noded.procedure import Arg, procedure

log = Logger()

#: seconds between the answer and the power cycle of a real node
REAL_DELAY = 5
#: the same for a virtual node (only its daemons restart)
VIRTUAL_DELAY = 1


def make_powercycle(reactor, procedures):
    """``(delay, action(hypervisor, hvparams))`` for this daemon."""
    if procedures.paths.root == "/":
        return REAL_DELAY, backend_powercycle.powercycle_node
    from ganeti.server.noded import daemons

    def restart_daemons(hypervisor, hvparams):
        restart.reexec_daemon(reactor, procedures, daemons.MANAGED,
                              "(virtual node power-cycled)")
    return VIRTUAL_DELAY, restart_daemons


class PowercycleProcedures(object):
    """Mixed into NodeProcedures."""

    #: ``(delay seconds, action(hypervisor, hvparams))``, set by the
    #: daemon; None: this process cannot power-cycle its node
    powercycle = None
    #: the pending power cycle (an IDelayedCall), once asked for
    _powercycle_call = None

    @procedure(Arg("hypervisor", ht.one_of(*constants.HYPER_TYPES)),
               Arg("hvparams", ht.DICT, {}))
    def node_powercycle(self, hypervisor, hvparams):
        """Schedule a hard reboot of this node; answers at once."""
        if self.powercycle is None:
            raise errors.OpPrereqError(
                "this node daemon cannot power-cycle its node",
                errors.ECODE_ENVIRON)
        delay, action = self.powercycle
        virtual = self.paths.root != "/"
        message = "Reboot scheduled in %d seconds%s" % (
            delay, " (virtual node: its daemons restart)" if virtual else "")
        pending = self._powercycle_call
        if pending is not None and pending.active():
            return message
        log.warn("Power cycle requested: {message}", message=message)
        self._powercycle_call = self.reactor.callLater(
            delay, action, hypervisor, hvparams)
        return message
