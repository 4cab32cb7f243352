"""Running external commands from the node daemon, without blocking it.

Commands (lvm tools, qemu-img, OS scripts) run with ``reactor.spawnProcess``.
A timeout kills the command's whole process group (OS scripts start
children such as dd), so nothing it started outlives it.  Output is kept in
memory up to a cap (and optionally copied to a log file), so a failure can
be reported with the command's last lines.  The log file is opened and
written by ``run_blocking`` work (the node daemon's thread pool), never on
the reactor: a slow log disk delays the log, not the daemon.
"""

import functools
import os
import shutil
import signal

import attr
from twisted.internet import defer, error, protocol
from twisted.logger import Logger

__all__ = ["CommandResult", "CommandRunner", "run_command"]

log = Logger()

#: Bytes of stdout (and of stderr) kept in memory; older output is dropped.
OUTPUT_CAP = 4 * 1024 * 1024
#: Seconds between SIGTERM and SIGKILL when a command runs out of time.
KILL_GRACE = 5.0
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@attr.s(frozen=True)
class CommandResult(object):
    argv = attr.ib()
    exit_code = attr.ib()        # None if killed by a signal
    signal = attr.ib(default=None)
    stdout = attr.ib(default=b"")
    stderr = attr.ib(default=b"")
    timed_out = attr.ib(default=False)
    #: stdout and stderr interleaved as they came (for reports and logs)
    output = attr.ib(default=b"")

    @property
    def failed(self):
        return self.timed_out or self.exit_code != 0

    def tail(self, lines=20):
        """The last ``lines`` lines of the combined output, as text."""
        text = self.output.decode("utf-8", "replace").rstrip("\n")
        return "\n".join(text.splitlines()[-lines:]) if text else ""

    def describe(self):
        """What went wrong, in words: for error messages."""
        if self.timed_out:
            how = "timed out and was killed"
        elif self.signal is not None:
            how = "was killed by signal %s" % self.signal
        else:
            how = "failed with exit code %s" % self.exit_code
        tail = self.tail()
        return "%s %s%s" % (self.argv[0], how,
                            (": " + tail) if tail else " (no output)")


@functools.lru_cache(maxsize=None)
def _setsid():
    # looked up once: a stat per PATH directory, on the reactor
    return shutil.which("setsid", path=DEFAULT_PATH)


def _open_log(path):
    os.makedirs(os.path.dirname(path), mode=0o750, exist_ok=True)
    return open(path, "ab")


def _write_log(f, data):
    f.write(data)
    f.flush()


class _LogWriter(object):
    """A command's log file, written in order by one ``run_blocking`` call
    at a time.  Output arriving meanwhile is gathered and written by the
    next call; at most OUTPUT_CAP bytes wait (a disk that slow loses the
    older ones, said in the log).  A write error ends the logging: a full
    disk must not fail the command itself."""

    def __init__(self, run_blocking, f):
        self._run_blocking = run_blocking
        self._file = f
        self._failed_file = None
        self._pending = bytearray()
        self._dropped = 0
        self._writing = False
        self._idle = []       # Deferreds waiting for the writes to end

    def write(self, data):
        if self._file is None:
            return
        self._pending += data
        if len(self._pending) > OUTPUT_CAP:
            self._dropped += len(self._pending) - OUTPUT_CAP
            del self._pending[:len(self._pending) - OUTPUT_CAP]
        if not self._writing:
            self._next()

    def _next(self):
        if not self._pending or self._file is None:
            self._writing = False
            idle, self._idle = self._idle, []
            for d in idle:
                d.callback(None)
            return
        data = bytes(self._pending)
        del self._pending[:]
        if self._dropped:
            data = (b"[%d bytes of output not logged: the log was written"
                    b" too slowly]\n" % self._dropped) + data
            self._dropped = 0
        self._writing = True
        d = self._run_blocking(_write_log, self._file, data)
        d.addCallbacks(lambda _: self._next(), self._failed)

    def _failed(self, failure):
        log.warn("Cannot write the log file {name}: {err}; not logging"
                 " this command's output any further",
                 name=getattr(self._file, "name", "?"), err=failure.value)
        # closed by close(), in run_blocking work (a close may flush)
        self._failed_file, self._file = self._file, None
        self._pending = bytearray()
        self._next()

    async def close(self):
        """Wait for the writes, then close the file."""
        if self._writing:
            d = defer.Deferred()
            self._idle.append(d)
            await d
        f = self._file or self._failed_file
        self._file = self._failed_file = None
        if f is not None:
            try:
                await self._run_blocking(f.close)
            except OSError:
                pass


class _Collector(protocol.ProcessProtocol):

    def __init__(self, stdin_data, log_file):
        self.done = defer.Deferred()
        self.stdin_data = stdin_data
        self.log_file = log_file
        self.out = bytearray()
        self.err = bytearray()
        self.both = bytearray()
        self.exit_code = None
        self.signal = None

    def connectionMade(self):
        if self.stdin_data:
            self.transport.write(self.stdin_data)
        self.transport.closeStdin()

    @staticmethod
    def _append(buf, data):
        buf.extend(data)
        if len(buf) > OUTPUT_CAP:
            del buf[:len(buf) - OUTPUT_CAP]

    def _data(self, buf, data):
        self._append(buf, data)
        self._append(self.both, data)
        if self.log_file is not None:
            self.log_file.write(data)

    def outReceived(self, data):
        self._data(self.out, data)

    def errReceived(self, data):
        self._data(self.err, data)

    def processEnded(self, reason):
        if isinstance(reason.value, error.ProcessTerminated):
            self.exit_code = reason.value.exitCode
            self.signal = reason.value.signal
        else:
            self.exit_code = 0
        self.done.callback(None)


def _kill_group(transport, sig):
    pid = transport.pid
    if pid is None:
        return
    try:
        # The command is a session leader (setsid): its pid is its group.
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            transport.signalProcess(sig)
        except error.ProcessExitedAlready:
            pass


async def _run(reactor, argv, env, cwd, timeout, log_path, stdin_data,
               run_blocking):
    log_file = None
    if log_path is not None:
        log_file = _LogWriter(run_blocking,
                              await run_blocking(_open_log, log_path))
    collector = _Collector(stdin_data, log_file)
    full_env = {"PATH": DEFAULT_PATH, "LC_ALL": "C"}
    full_env.update(env or {})
    executable = argv[0]
    spawn_argv = list(argv)
    # setsid makes the command lead its own process group, so a timeout
    # can kill everything it started.
    setsid = _setsid()
    if setsid is not None:
        executable, spawn_argv = setsid, ["setsid", "--wait"] + spawn_argv
    timed_out = []
    kill_calls = []
    try:
        try:
            transport = reactor.spawnProcess(
                collector, executable, spawn_argv, env=full_env,
                path=cwd or "/")
        except OSError as err:
            return CommandResult(argv=list(argv), exit_code=127,
                                 stderr=str(err).encode(),
                                 output=str(err).encode())

        def on_timeout():
            timed_out.append(True)
            log.warn("{cmd} did not finish within {timeout}s; killing it",
                     cmd=argv[0], timeout=timeout)
            _kill_group(transport, signal.SIGTERM)
            kill_calls.append(reactor.callLater(
                KILL_GRACE, _kill_group, transport, signal.SIGKILL))

        if timeout is not None:
            kill_calls.append(reactor.callLater(timeout, on_timeout))
        await collector.done
        for call in kill_calls:
            if call.active():
                call.cancel()
    finally:
        if log_file is not None:
            await log_file.close()
    return CommandResult(argv=list(argv), exit_code=collector.exit_code,
                         signal=collector.signal, stdout=bytes(collector.out),
                         stderr=bytes(collector.err),
                         timed_out=bool(timed_out),
                         output=bytes(collector.both))


def run_command(reactor, argv, env=None, cwd=None, timeout=None,
                log_path=None, stdin_data=None,
                run_blocking=defer.maybeDeferred):
    """Run ``argv``; Deferred firing a :class:`CommandResult` (never fails
    because the command failed: look at ``result.failed``).

    ``env`` is added to a minimal environment (PATH, LC_ALL=C): commands do
    not inherit the daemon's environment.  ``run_blocking(f, *args)`` ->
    Deferred does the log file's work (default: at once, in this thread).
    """
    return defer.Deferred.fromCoroutine(
        _run(reactor, argv, env, cwd, timeout, log_path, stdin_data,
             run_blocking))


@attr.s
class CommandRunner(object):
    """``run(argv, **kw)`` bound to a reactor: the seam storage code uses,
    so tests can substitute recorded outputs."""
    reactor = attr.ib()

    def run(self, argv, env=None, cwd=None, timeout=None, log_path=None,
            stdin_data=None):
        return run_command(self.reactor, argv, env=env, cwd=cwd,
                           timeout=timeout, log_path=log_path,
                           stdin_data=stdin_data)
