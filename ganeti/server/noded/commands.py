"""Restricted and repair command procedures: whitelisted programs of this
node, run on the master's request (see :mod:`ganeti.backend.restricted`
for the rules)."""

from ganeti import ht
from ganeti.backend import restricted
from ganeti.server.noded.procedure import Arg, procedure


class CommandProcedures(object):
    """``restricted_command`` and ``repair_command``.

    ``command_sets`` (kind -> :class:`restricted.CommandSet`) is filled by
    ``make_procedures`` from the daemon's options; without it the sets are
    made with the defaults for this node's root.
    """

    command_sets = None

    def command_set(self, kind):
        if self.command_sets is None:
            self.command_sets = make_command_sets(self.reactor, self.paths,
                                                  self.run_blocking)
        return self.command_sets[kind]

    @procedure(Arg("cmd", ht.STR))
    def restricted_command(self, cmd):
        """Run restricted command ``cmd``; its output."""
        return self.command_set(restricted.RESTRICTED).run(cmd)

    @procedure(Arg("cmd", ht.STR), Arg("inp", ht.maybe(ht.STR), None))
    def repair_command(self, cmd, inp):
        """Run repair command ``cmd`` with ``inp`` on its stdin; its
        output."""
        return self.command_set(restricted.REPAIR).run(cmd, stdin=inp)


def make_command_sets(reactor, paths, run_blocking, enabled=True,
                      timeout=restricted.DEFAULT_TIMEOUT, clock=None):
    """kind -> CommandSet for a node with these paths; both kinds share
    the one lock: one command at a time on a node."""
    clock = reactor if clock is None else clock
    common = dict(lock_file=paths.restricted_commands_lock_file,
                  clock=clock, reactor=reactor, enabled=enabled,
                  timeout=timeout, run_blocking=run_blocking)
    return {
        restricted.RESTRICTED: restricted.CommandSet(
            restricted.RESTRICTED, paths.restricted_commands_dir, **common),
        restricted.REPAIR: restricted.CommandSet(
            restricted.REPAIR, paths.repair_commands_dir, **common),
    }
