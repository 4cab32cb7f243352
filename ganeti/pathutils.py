"""Where every file lives, relative to a root directory.

Every daemon takes ``--root DIR``; under DIR the layout is Ganeti's standard
one, so Ganeti's own tools run with ``GANETI_ROOTDIR=DIR`` find our files.
"""

import os

import attr


@attr.s(frozen=True)
class Paths(object):
    root = attr.ib(default="/", converter=os.path.abspath)

    def _p(self, *parts):
        return os.path.join(self.root, *parts)

    @property
    def data_dir(self):
        return self._p("var", "lib", "ganeti")

    @property
    def run_dir(self):
        return self._p("var", "run", "ganeti")

    @property
    def log_dir(self):
        return self._p("var", "log", "ganeti")

    @property
    def socket_dir(self):
        return os.path.join(self.run_dir, "socket")

    @property
    def oob_dir(self):
        """Where the out-of-band programs that may run live."""
        return self._p("etc", "ganeti", "oob")

    @property
    def restricted_commands_dir(self):
        """The programs ``gnt-node restricted-command`` may run."""
        return self._p("etc", "ganeti", "restricted-commands")

    @property
    def repair_commands_dir(self):
        """The programs ``gnt-node repair-command`` may run."""
        return self._p("etc", "ganeti", "node-repair-commands")

    @property
    def diagnose_commands_dir(self):
        """The self-diagnose commands the monitoring daemon may run."""
        return self._p("etc", "ganeti", "node-diagnose-commands")

    @property
    def restricted_commands_lock_file(self):
        """Held while a restricted or repair command runs on this node."""
        return self._p("var", "lock", "ganeti-restricted-commands.lock")

    @property
    def config_file(self):
        return os.path.join(self.data_dir, "config.data")

    @property
    def hmac_key_file(self):
        return os.path.join(self.data_dir, "hmac.key")

    @property
    def queue_dir(self):
        return os.path.join(self.data_dir, "queue")

    @property
    def rapi_users_file(self):
        return os.path.join(self.data_dir, "rapi", "users")

    @property
    def master_socket(self):
        return os.path.join(self.socket_dir, "ganeti-query")

    @property
    def uid_pool_lock_dir(self):
        return os.path.join(self.run_dir, "uid-pool")

    def ssconf_file(self, key):
        return os.path.join(self.data_dir, "ssconf_%s" % key)

    def ensure_dirs(self):
        """Create the directories daemons write into (idempotent)."""
        for d in (self.data_dir, self.run_dir, self.log_dir, self.socket_dir):
            os.makedirs(d, mode=0o750, exist_ok=True)
        # job files hold private parameters: the master's user only
        os.makedirs(self.queue_dir, mode=0o700, exist_ok=True)
