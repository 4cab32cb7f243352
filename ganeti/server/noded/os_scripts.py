"""OS API procedures: the OS definitions of this node and their scripts."""



from ganeti.server.noded.procedure import (
    Arg, boolean, integer, list_of, mapping, procedure, string)



class OsProcedures(object):
    """OS definitions and the create/rename scripts."""

    @procedure()
    def os_diagnose(self):
        """Every OS in the search path: name, path, valid, status,
        variants, parameters, api_versions."""
        return self.os.diagnose()

    @procedure(Arg("required", boolean), Arg("name", string),
               Arg("checks", list_of(string), []),
               Arg("params", mapping, {}),
               Arg("force_variant", boolean, False))
    def os_validate(self, required, name, checks, params, force_variant):
        """True if OS ``name`` (os+variant) is valid here and accepts
        ``params``; False if missing and not ``required``."""
        return self.os.validate(required, name, checks, params, force_variant)

    @procedure(Arg("instance", mapping), Arg("reinstall", boolean, False),
               Arg("debug", integer(0), 0))
    def instance_os_add(self, instance, reinstall, debug):
        """Run the OS create script; returns the log file's path."""
        return self.os.create(instance, reinstall, debug)

    @procedure(Arg("instance", mapping), Arg("old_name", string),
               Arg("debug", integer(0), 0))
    def instance_run_rename(self, instance, old_name, debug):
        """Run the OS rename script; returns the log file's path."""
        return self.os.rename(instance, old_name, debug)
