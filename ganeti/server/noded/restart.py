"""Restarting the node daemon in place: the reactor stops (the port
closes, the thread pool drains), the daemons the node daemon manages are
stopped, and the same program is executed again with the same PID; the
new process starts the managed daemons again (new processes).

The cluster merger restarts this way to serve another certificate; a
virtual cluster node restarts this way when it is power-cycled.
"""

import os
import subprocess
import sys

from twisted.logger import Logger

from ganeti import daemon_util

log = Logger()


def restart_argv():
    """How this process was started: the interpreter and its arguments."""
    argv = getattr(sys, "orig_argv", None)
    if argv:
        return [sys.executable] + list(argv[1:])
    # Python < 3.10: ``python -m twisted`` shows as twisted/__main__.py
    first = sys.argv[0]
    if first.endswith(os.path.join("twisted", "__main__.py")):
        return [sys.executable, "-m", "twisted"] + sys.argv[1:]
    return [sys.executable] + sys.argv


def stop_daemons_now(paths, supervisor, daemons):
    """Stop ``daemons`` once the reactor is down (blocking is fine then);
    the restarted node daemon starts them again.  Nothing without a
    supervisor: someone else runs them."""
    if supervisor is None:
        return
    from ganeti.server.noded import daemons as noded_daemons
    launcher = supervisor.launcher
    for daemon in daemons:
        try:
            if isinstance(launcher, noded_daemons.SystemdLauncher):
                subprocess.run([launcher.systemctl, "stop",
                                daemon + ".service"], timeout=60,
                               stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
            else:
                daemon_util.stop_daemon(paths, daemon)
        except Exception as err:      # the restart matters more
            sys.stderr.write("stopping %s failed: %s\n" % (daemon, err))


def reexec_daemon(reactor, procedures, daemons, why):
    """Stop the reactor, then ``daemons``, then execute this program
    again (``why`` is logged)."""
    argv = restart_argv()

    def execute():
        stop_daemons_now(procedures.paths, procedures.supervisor, daemons)
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(argv[0], argv)
    log.info("Restarting in place {why}", why=why)
    reactor.addSystemEventTrigger("after", "shutdown", execute)
    reactor.stop()
