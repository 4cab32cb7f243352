"""Start, stop and check this node's daemons by pidfile.

Used by ``gnt-cluster init`` and ``gnt-cluster destroy`` (and by tests).
Each daemon is a twistd plugin run in the foreground with ``python -m
twisted`` in its own session (so it outlives the command that started it);
its PID is written to ``<root>/var/run/ganeti/<daemon>.pid``.  Stopping
sends SIGTERM, waits, then SIGKILL.

A pidfile is trusted only while the process it names is still the daemon
it was written for (its command line names the plugin and the same root):
a stale pidfile whose PID was reused by something else is never signalled.
"""

import errno
import os
import signal
import subprocess
import sys
import time

from ganeti import pathutils

MASTERD = "ganeti-masterd"
NODED = "ganeti-noded"
CONFD = "ganeti-confd"
RAPI = "ganeti-rapi"
MOND = "ganeti-mond"
MAINTD = "ganeti-maintd"
WATCHER = "ganeti-watcher"
#: Start order on a master node; stopping goes the other way round.
MASTER_DAEMONS = (NODED, MASTERD, CONFD, RAPI)
#: what a node daemon started with --daemons starts and stops
MANAGED_DAEMONS = (MOND, CONFD, MASTERD, RAPI, MAINTD, WATCHER)
#: every daemon of a node, in the order stop_all wants them: stopping goes
#: the other way round, so the node daemon goes first (it would start the
#: others again)
ALL_DAEMONS = MANAGED_DAEMONS + (NODED,)


class DaemonError(Exception):
    """A daemon could not be started or stopped."""


def pidfile_path(paths, daemon):
    return os.path.join(paths.run_dir, "%s.pid" % daemon)


def _paths(root_or_paths):
    if isinstance(root_or_paths, pathutils.Paths):
        return root_or_paths
    return pathutils.Paths(root_or_paths)


def _project_dir():
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def daemon_command(paths, daemon, bind, extra_args=()):
    """The argv of a daemon: ``python -m twisted ... <plugin> --root R
    --bind IP [extra]``."""
    return [sys.executable, "-m", "twisted", "--log-format", "text",
            "--log-file", os.path.join(paths.log_dir, "%s.log" % daemon),
            daemon, "--root", paths.root, "--bind", bind] + list(extra_args)


def _cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]


def _state(pid):
    """The process state letter from /proc (``Z`` for zombies), or None."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            data = f.read()
    except OSError:
        return None
    # the command name is in parentheses and may contain spaces
    return data.rsplit(")", 1)[-1].split()[0]


def pid_alive(pid):
    """Whether process ``pid`` exists and has not exited."""
    # A zombie (an exited child of whoever started it, not yet collected)
    # counts as dead; we never collect it ourselves, so its parent still
    # gets its exit status.
    state = _state(pid)
    if state is None:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return state not in ("Z", "X")


def _is_our_daemon(pid, paths, daemon):
    args = _cmdline(pid)
    if args is None:
        # no /proc: fall back to "the pid exists"
        return pid_alive(pid)
    if daemon not in args:
        return False
    try:
        root = args[args.index("--root") + 1]
    except (ValueError, IndexError):
        return paths.root == "/"
    return os.path.abspath(root) == paths.root


def read_pid(root_or_paths, daemon):
    """The PID in the daemon's pidfile, or None."""
    paths = _paths(root_or_paths)
    try:
        with open(pidfile_path(paths, daemon)) as f:
            text = f.read().strip()
    except OSError:
        return None
    try:
        pid = int(text)
    except ValueError:
        return None
    return pid if pid > 0 else None


def running_pid(root_or_paths, daemon):
    """The PID of the running daemon (per its pidfile), or None."""
    paths = _paths(root_or_paths)
    pid = read_pid(paths, daemon)
    if pid is None or not pid_alive(pid):
        return None
    if not _is_our_daemon(pid, paths, daemon):
        return None
    return pid


def status(root_or_paths, daemons=MASTER_DAEMONS):
    """``{daemon: pid or None}``."""
    paths = _paths(root_or_paths)
    return dict((d, running_pid(paths, d)) for d in daemons)


def start_daemon(root_or_paths, daemon, bind, extra_args=(), env=None):
    """Start ``daemon`` detached; return its PID.

    Refuses (DaemonError) when the pidfile names a running instance of it.
    The daemon's stdout/stderr go to ``<log dir>/<daemon>.stderr``, where a
    daemon that dies before its logging is set up says why.
    """
    proc = start_daemon_process(root_or_paths, daemon, bind, extra_args, env)
    # Popen would warn about a child still running when it is collected;
    # the daemon is meant to outlive us.
    proc.returncode = 0
    return proc.pid


def start_daemon_process(root_or_paths, daemon, bind, extra_args=(),
                         env=None):
    """As :func:`start_daemon`, but the ``subprocess.Popen``: a parent
    that stays (the node daemon) learns its child's exit status from it."""
    paths = _paths(root_or_paths)
    paths.ensure_dirs()
    pid = running_pid(paths, daemon)
    if pid is not None:
        raise DaemonError("%s is already running (pid %d, pidfile %s)"
                          % (daemon, pid, pidfile_path(paths, daemon)))
    full_env = dict(os.environ)
    here = _project_dir()
    full_env["PYTHONPATH"] = os.pathsep.join(
        [here] + [p for p in full_env.get("PYTHONPATH", "").split(os.pathsep)
                  if p and p != here])
    full_env.update(env or {})
    argv = daemon_command(paths, daemon, bind, extra_args)
    err_path = stderr_path(paths, daemon)
    with open(err_path, "ab") as err:
        proc = subprocess.Popen(argv, env=full_env, cwd="/",
                                stdin=subprocess.DEVNULL, stdout=err,
                                stderr=err, start_new_session=True,
                                close_fds=True)
    # Until the child has exec'd, /proc shows our own command line, and
    # running_pid() would take the fresh daemon for a stranger; wait for the
    # exec (or the death) so checks right after a start are meaningful.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and proc.poll() is None:
        args = _cmdline(proc.pid)
        if args is None or daemon in args:
            break
        time.sleep(0.01)
    tmp = pidfile_path(paths, daemon) + ".new"
    with open(tmp, "w") as f:
        f.write("%d\n" % proc.pid)
    os.rename(tmp, pidfile_path(paths, daemon))
    return proc


def stderr_path(paths, daemon):
    return os.path.join(paths.log_dir, "%s.stderr" % daemon)


def stderr_tail(root_or_paths, daemon, lines=20):
    """The last lines a daemon wrote to stderr (for error messages)."""
    paths = _paths(root_or_paths)
    try:
        with open(stderr_path(paths, daemon), "rb") as f:
            data = f.read()[-16384:]
    except OSError:
        return ""
    text = data.decode("utf-8", "replace").splitlines()
    return "\n".join(text[-lines:])


def _wait_gone(pid, timeout, clock=time.monotonic, sleep=time.sleep):
    deadline = clock() + timeout
    while pid_alive(pid):
        if clock() >= deadline:
            return False
        sleep(0.05)
    return True


def stop_daemon(root_or_paths, daemon, timeout=10.0):
    """Stop ``daemon``: SIGTERM, wait up to ``timeout`` s, then SIGKILL.

    Returns the PID that was stopped, or None if it was not running.  The
    pidfile is removed either way.
    """
    paths = _paths(root_or_paths)
    pid = running_pid(paths, daemon)
    if pid is not None:
        _signal(pid, signal.SIGTERM)
        if not _wait_gone(pid, timeout):
            _signal(pid, signal.SIGKILL)
            if not _wait_gone(pid, 5.0):
                raise DaemonError("%s (pid %d) did not stop even after"
                                  " SIGKILL" % (daemon, pid))
    try:
        os.unlink(pidfile_path(paths, daemon))
    except OSError as err:
        if err.errno != errno.ENOENT:
            raise
    return pid


def _signal(pid, signum):
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def stop_all(root_or_paths, daemons=ALL_DAEMONS, timeout=10.0):
    """Stop the given daemons in reverse start order; ``{daemon: pid}``."""
    paths = _paths(root_or_paths)
    stopped = {}
    for daemon in reversed(list(daemons)):
        stopped[daemon] = stop_daemon(paths, daemon, timeout)
    return stopped


def check_alive(root_or_paths, daemon):
    """Raise DaemonError (with its stderr) if ``daemon`` is not running."""
    paths = _paths(root_or_paths)
    if running_pid(paths, daemon) is None:
        tail = stderr_tail(paths, daemon)
        raise DaemonError("%s is not running%s" % (
            daemon, ("; its last output:\n%s" % tail) if tail else
            " (no output in %s)" % stderr_path(paths, daemon)))
