"""Restricted commands: whitelisted programs a node runs on the master's
request (``gnt-node restricted-command``), and repair commands, the same
with an input on stdin (``gnt-node repair-command``, maintd's live
repairs).

Whoever holds the cluster certificate may ask for them, so a node runs
only what its own administrator put in place:

- the name is a bare file name (``[-_.a-zA-Z0-9]+``): no path, no
  arguments;
- the directory (``/etc/ganeti/restricted-commands`` or
  ``/etc/ganeti/node-repair-commands`` under the node's root) and the
  program are owned by the daemon's user (root on a real node) and
  writable by nobody else (mode 0755 or stricter);
- the program is an executable regular file, or a symlink to one inside
  the same directory;
- one command runs at a time on a node: an exclusive ``flock`` on
  ``/var/lock/ganeti-restricted-commands.lock`` (so two node daemons on
  one root exclude each other too), waited for a limited time;
- when a command cannot be run for any reason (refused, lock not had,
  cannot start) the answer comes after a delay and says only that
  executing it failed: the reason goes to the node's log.  Probing for
  names is slow and learns nothing.  A command that ran and failed is
  reported at once with its exit status and output.

The program runs with a minimal environment, in ``/``, with a timeout that
kills its whole process group.
"""

import errno
import fcntl
import os
import re
import stat

import attr
from twisted.internet import defer, task
from twisted.logger import Logger

from ganeti import errors
from ganeti.backend import process

__all__ = ["CommandRefused", "CommandSet", "FileLock", "check_name",
           "check_path", "find_executable", "RESTRICTED", "REPAIR"]

log = Logger()

#: What a command name may look like (no slash, no space)
NAME_RE = re.compile(r"^[-_.a-zA-Z0-9]+$")
#: The most permissive mode of the directory and the programs
MAX_MODE = 0o755
#: Seconds before a command that could not be run is answered
FAILURE_DELAY = 10.0
#: Seconds to wait for the node's command lock (less than the delay, so
#: that queued requests fail before piling up)
LOCK_TIMEOUT = 8.0
#: How often a waiting request tries the lock again
LOCK_POLL = 0.05
#: Seconds a command may run (below the master's RPC timeout of an hour)
DEFAULT_TIMEOUT = 1800.0

RESTRICTED = "restricted"
REPAIR = "repair"


class CommandRefused(Exception):
    """The command may not run; the reason is for the node's log only."""


def check_name(name):
    """Raise CommandRefused unless ``name`` is a valid command name."""
    if not isinstance(name, str) or not name.strip():
        raise CommandRefused("missing command name")
    if os.path.basename(name) != name or name in (".", ".."):
        raise CommandRefused("command name %r is a path" % name)
    if not NAME_RE.match(name):
        raise CommandRefused("command name %r has characters other than"
                             " letters, digits, '-', '_' and '.'" % name)


def check_path(path, owner, want_dir):
    """Raise CommandRefused unless ``path`` (followed if a symlink) is
    owned by ``owner`` (uid, gid), writable by nobody else, and a directory
    (``want_dir``) or a regular file."""
    try:
        st = os.stat(path)
    except OSError as err:
        raise CommandRefused("cannot stat %s: %s" % (path, err.strerror))
    if want_dir and not stat.S_ISDIR(st.st_mode):
        raise CommandRefused("%s is not a directory" % path)
    if not want_dir and not stat.S_ISREG(st.st_mode):
        raise CommandRefused("%s is not a regular file" % path)
    if stat.S_IMODE(st.st_mode) & ~MAX_MODE:
        raise CommandRefused("%s has mode %04o, more permissive than %04o"
                             % (path, stat.S_IMODE(st.st_mode), MAX_MODE))
    if (st.st_uid, st.st_gid) != tuple(owner):
        raise CommandRefused("%s is owned by %d:%d, not %d:%d"
                             % ((path, st.st_uid, st.st_gid) + tuple(owner)))


def find_executable(directory, name, owner):
    """The program to run for command ``name`` of ``directory``, or raise
    CommandRefused saying why not."""
    check_path(directory, owner, want_dir=True)
    check_name(name)
    path = os.path.join(directory, name)
    # a symlink may point to another program of the directory, not out
    base = os.path.realpath(directory)
    real = os.path.realpath(path)
    if os.path.dirname(real) != base:
        raise CommandRefused("%s leads to %s, outside %s"
                             % (path, real, directory))
    check_path(real, owner, want_dir=False)
    if not os.access(real, os.X_OK):
        raise CommandRefused("%s is not executable" % real)
    return real


class FileLock(object):
    """An exclusive ``flock`` on a file, waited for on the clock (never
    blocking the reactor).  Each holder opens the file itself: flock locks
    belong to the open file, so holders in one process exclude each other
    as holders in different processes do."""

    def __init__(self, path, clock, poll=LOCK_POLL):
        self.path = path
        self.clock = clock
        self.poll = poll
        self._fd = None

    def _open(self):
        os.makedirs(os.path.dirname(self.path), mode=0o755, exist_ok=True)
        return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                       0o600)

    def _try(self):
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return False
            raise
        return True

    async def acquire(self, timeout, run_blocking=defer.maybeDeferred):
        """True once held, False if not had within ``timeout`` seconds."""
        if self._fd is not None:
            raise RuntimeError("lock %s is held already" % self.path)
        self._fd = await run_blocking(self._open)
        deadline = self.clock.seconds() + timeout
        while True:
            try:
                if self._try():
                    return True
            except OSError:
                self.release()
                raise
            if self.clock.seconds() >= deadline:
                self.release()
                return False
            await task.deferLater(self.clock, self.poll, lambda: None)

    def release(self):
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    @property
    def held(self):
        return self._fd is not None


@attr.s
class CommandSet(object):
    """The commands of one whitelist directory on this node.

    ``clock`` times the lock wait and the delay; ``reactor`` spawns the
    programs (and times them out); ``run_blocking`` does the file checks
    (the daemon's thread pool: a dead disk stalls this call only).
    ``owner`` is the (uid, gid) that must own the directory and programs,
    the daemon's own by default.
    """
    kind = attr.ib(validator=attr.validators.in_([RESTRICTED, REPAIR]))
    directory = attr.ib()
    lock_file = attr.ib()
    clock = attr.ib()
    reactor = attr.ib()
    enabled = attr.ib(default=True)
    owner = attr.ib(factory=lambda: (os.geteuid(), os.getegid()))
    timeout = attr.ib(default=DEFAULT_TIMEOUT)
    delay = attr.ib(default=FAILURE_DELAY)
    lock_timeout = attr.ib(default=LOCK_TIMEOUT)
    run_blocking = attr.ib(default=defer.maybeDeferred)

    @property
    def label(self):
        return "Restricted" if self.kind == RESTRICTED else "Repair"

    def run(self, name, stdin=None):
        """Deferred of the command's output (stdout and stderr as they
        came); fails with OpExecError when it cannot run or fails."""
        return defer.Deferred.fromCoroutine(self._run(name, stdin))

    async def _run(self, name, stdin):
        if not self.enabled:
            raise errors.OpExecError(
                "%s commands are disabled on this node" % self.label)
        log.info("{kind} command {name!r} requested", kind=self.label,
                 name=name)
        lock = FileLock(self.lock_file, self.clock)
        result = None
        try:
            try:
                if not await lock.acquire(self.lock_timeout,
                                          self.run_blocking):
                    raise CommandRefused(
                        "another command held %s for %ss"
                        % (self.lock_file, self.lock_timeout))
                program = await self.run_blocking(
                    find_executable, self.directory, name, self.owner)
                result = await process.run_command(
                    self.reactor, [program], cwd="/", timeout=self.timeout,
                    stdin_data=(stdin.encode("utf-8")
                                if stdin is not None else None))
            except Exception as err:
                log.warn("{kind} command {name!r} not run: {err}",
                         kind=self.label, name=name,
                         err=(err if isinstance(err, CommandRefused)
                              else repr(err)))
                # still holding the lock: probes queue behind the delay
                await task.deferLater(self.clock, self.delay, lambda: None)
                raise errors.OpExecError("Executing command '%s' failed"
                                         % name)
        finally:
            lock.release()
        output = result.output.decode("utf-8", "replace")
        if result.failed:
            if result.timed_out:
                how = "timed out after %ss and was killed" % self.timeout
            elif result.signal is not None:
                how = "was killed by signal %s" % result.signal
            else:
                how = "exited with status %s" % result.exit_code
            log.warn("{kind} command {name!r} {how}", kind=self.label,
                     name=name, how=how)
            raise errors.OpExecError("%s command '%s' %s; output: %s"
                                     % (self.label, name, how, output))
        log.info("{kind} command {name!r} succeeded", kind=self.label,
                 name=name)
        return output
