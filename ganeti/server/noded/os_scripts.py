"""OS API procedures: the OS definitions of this node and their scripts.

Reading the definitions and writing the scripts' logs is file work, done in
the daemon's thread pool (os_diagnose as a whole, the others through the
OS backend's ``run_blocking``); the scripts run as commands."""

from ganeti import ht
from ganeti.server.noded.procedure import Arg, procedure


class OsProcedures(object):
    """OS definitions and the create/rename scripts."""

    @procedure(blocking=True)
    def os_diagnose(self):
        """Every OS in the search path: name, path, valid, status,
        variants, parameters, api_versions, trusted."""
        return self.os.diagnose()

    @procedure(Arg("required", ht.BOOL), Arg("name", ht.NESTR),
               Arg("checks", ht.list_of(ht.NESTR), []),
               Arg("params", ht.DICT, {}),
               Arg("force_variant", ht.BOOL, False))
    def os_validate(self, required, name, checks, params, force_variant):
        """True if OS ``name`` (os+variant) is valid here and accepts
        ``params``; False if missing and not ``required``."""
        return self.os.validate(required, name, checks, params, force_variant)

    @procedure(Arg("instance", ht.DICT), Arg("reinstall", ht.BOOL, False),
               Arg("debug", ht.NONNEG_INT, 0))
    def instance_os_add(self, instance, reinstall, debug):
        """Run the OS create script; returns the log file's path."""
        return self.os.create(instance, reinstall, debug)

    @procedure(Arg("instance", ht.DICT), Arg("old_name", ht.NESTR),
               Arg("debug", ht.NONNEG_INT, 0))
    def instance_run_rename(self, instance, old_name, debug):
        """Run the OS rename script; returns the log file's path."""
        return self.os.rename(instance, old_name, debug)
