"""Allocators: external scripts and built-in functions, found by name.

Both kinds take the input document and answer with the output document;
both are :class:`IAllocator`.

* An external allocator is an executable found on the search path.  As
  Ganeti runs it: the input goes to a temporary file ``ganeti-iallocator.*``
  and the script runs as ``<script> <input-file> [--key=value | --key
  ...]``; exit code 0 and the answer on stdout.  It runs as a process of
  its own (``reactor.spawnProcess``), with a time limit after which it and
  everything it started is killed.  A non-zero exit, a signal, the time
  limit or output that is not JSON is an :class:`AllocatorError` quoting
  what the script said.
* A built-in allocator is a function ``answer(request: dict) -> dict``
  taking and returning exactly the iallocator documents (parsed), named
  ``"module:function"`` in :data:`BUILTIN_ALLOCATORS` and imported when it
  is first used.  It runs in a small thread pool (a big cluster can take
  it tens of milliseconds), never on the reactor.

:class:`AllocatorRegistry` resolves names: first the directories the
admin gave the master (``--iallocator-search-path``), then the built-in
allocators, then Ganeti's standard directories under the master's root.
"""

import importlib
import json
import os
import tempfile

import attr
from twisted.internet import defer, threads
from twisted.logger import Logger
from twisted.python import threadpool
from zope.interface import Attribute, Interface, implementer

from ganeti.backend import process
from ganeti.iallocator import AllocatorError, AllocatorNotFound
from ganeti.iallocator.defaults import NAME_RE

__all__ = ["IAllocator", "ExternalAllocator", "BuiltinAllocator",
           "AllocatorRegistry", "BUILTIN_ALLOCATORS", "STANDARD_SEARCH_PATH",
           "DEFAULT_TIMEOUT", "format_params", "ThreadRunner"]

log = Logger()

#: built-in allocators: name -> "module:function" (imported on first use)
BUILTIN_ALLOCATORS = {
    "hail": "ganeti.htools.iallocator:answer",
}

#: Ganeti's search path for allocator scripts (below the master's root)
STANDARD_SEARCH_PATH = ("usr/local/lib/ganeti/iallocators",
                        "usr/lib/ganeti/iallocators")

#: seconds an external allocator may run before it is killed
DEFAULT_TIMEOUT = 120.0

#: characters of an allocator's output quoted in an error
_QUOTE = 2000


class IAllocator(Interface):
    """Something that answers iallocator requests."""

    name = Attribute("The name it is asked by (e.g. 'hail').")
    kind = Attribute("'external' or 'built-in'.")
    where = Attribute("The script's path or the function's module path.")

    def run(data, text, params):
        """Answer the input document.

        ``data`` is the document (a dict, not to be changed), ``text`` the
        same as JSON text, ``params`` the allocator parameters
        ``{key: value or None}``.  Returns a Deferred firing with the
        output document as JSON text, or failing with AllocatorError.
        """


def format_params(params):
    """``{"key": "v", "flag": None}`` as ``["--flag", "--key=v"]`` (sorted:
    the same request gives the same command line)."""
    argv = []
    for key in sorted(params):
        value = params[key]
        if value is None or value is True:
            argv.append("--%s" % key)
        elif value is False:
            continue
        else:
            argv.append("--%s=%s" % (key, value))
    return argv


def _quote(text):
    text = text.strip()
    if len(text) > _QUOTE:
        text = "..." + text[-_QUOTE:]
    return text


def _write_input(text):
    fd, path = tempfile.mkstemp(prefix="ganeti-iallocator.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
    except BaseException:
        os.unlink(path)
        raise
    return path


def _remove(path):
    try:
        os.unlink(path)
    except OSError:
        pass


@implementer(IAllocator)
@attr.s
class ExternalAllocator(object):
    """A script run as its own process, killed after ``timeout`` s."""
    name = attr.ib()
    path = attr.ib()
    reactor = attr.ib()
    timeout = attr.ib(default=DEFAULT_TIMEOUT)
    #: f(*args) -> Deferred: where the input file is written and removed
    run_blocking = attr.ib(default=None)
    kind = "external"

    @property
    def where(self):
        return self.path

    def _blocking(self, f, *args):
        if self.run_blocking is not None:
            return self.run_blocking(f, *args)
        return threads.deferToThreadPool(
            self.reactor, self.reactor.getThreadPool(), f, *args)

    def run(self, data, text, params):
        return defer.Deferred.fromCoroutine(self._run(text, params))

    async def _run(self, text, params):
        try:
            input_file = await self._blocking(_write_input, text)
        except OSError as err:
            raise AllocatorError("iallocator '%s': cannot write its input"
                                 " file: %s" % (self.name, err))
        try:
            argv = [self.path, input_file] + format_params(params)
            result = await process.run_command(self.reactor, argv,
                                               timeout=self.timeout)
        finally:
            await self._blocking(_remove, input_file)
        stdout = result.stdout.decode("utf-8", "replace")
        stderr = result.stderr.decode("utf-8", "replace")
        if result.timed_out:
            raise AllocatorError(
                "iallocator '%s' (%s) did not answer within %s seconds and"
                " was killed%s" % (self.name, self.path, _secs(self.timeout),
                                   _said(stdout, stderr)))
        if result.signal is not None:
            raise AllocatorError(
                "iallocator '%s' (%s) was killed by signal %s%s"
                % (self.name, self.path, result.signal,
                   _said(stdout, stderr)))
        if result.exit_code != 0:
            err = AllocatorError(
                "iallocator '%s' (%s) failed with exit code %s%s"
                % (self.name, self.path, result.exit_code,
                   _said(stdout, stderr)))
            # what the script itself said, for messages about the request
            err.said = (stderr.strip() or stdout.strip())
            raise err
        if stderr.strip():
            log.info("iallocator {name} said on stderr: {err}",
                     name=self.name, err=_quote(stderr))
        return stdout


def _secs(value):
    return ("%g" % value) if isinstance(value, float) else str(value)


def _said(stdout, stderr):
    parts = []
    if stderr.strip():
        parts.append("stderr: %s" % _quote(stderr))
    if stdout.strip():
        parts.append("stdout: %s" % _quote(stdout))
    return ("; " + "; ".join(parts)) if parts else " (no output)"


class ThreadRunner(object):
    """Runs functions in a thread pool of at most ``size`` threads, started
    on first use and stopped with the reactor."""

    def __init__(self, reactor, size=2, name="iallocator"):
        self.reactor = reactor
        self.size = size
        self.name = name
        self._pool = None

    def __call__(self, f, *args):
        if self._pool is None:
            self._pool = threadpool.ThreadPool(0, self.size, name=self.name)
            self._pool.start()
            self.reactor.addSystemEventTrigger("during", "shutdown",
                                               self.stop)
        return threads.deferToThreadPool(self.reactor, self._pool, f, *args)

    def stop(self):
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.stop()


def _load(target):
    module_name, _, attr_name = target.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attr_name)


@implementer(IAllocator)
@attr.s
class BuiltinAllocator(object):
    """``answer(request) -> answer`` of the module path ``target``, run by
    ``run_in_thread(f, *args) -> Deferred``."""
    name = attr.ib()
    target = attr.ib()          # "module:function"
    run_in_thread = attr.ib()
    kind = "built-in"
    _function = attr.ib(default=None, init=False)

    @property
    def where(self):
        return self.target

    def _resolve(self):
        if self._function is None:
            try:
                function = _load(self.target)
            except (ImportError, AttributeError) as err:
                raise AllocatorError(
                    "built-in iallocator '%s' is not available: %s cannot be"
                    " loaded (%s)" % (self.name, self.target, err))
            if not callable(function):
                raise AllocatorError("built-in iallocator '%s': %s is not a"
                                     " function" % (self.name, self.target))
            self._function = function
        return self._function

    def run(self, data, text, params):
        try:
            function = self._resolve()
        except AllocatorError:
            return defer.fail()
        # the function gets a document of its own (parsed in the thread:
        # a big cluster's document takes a while), which it may change
        d = self.run_in_thread(_call, function, text, dict(params or {}))
        d.addErrback(self._failed)
        return d

    def _failed(self, failure):
        if failure.check(_Unusable):
            raise AllocatorError("built-in iallocator '%s' gave an unusable"
                                 " answer: %s" % (self.name,
                                                  failure.getErrorMessage()))
        raise AllocatorError("built-in iallocator '%s' failed: %s: %s"
                             % (self.name, failure.type.__name__,
                                failure.getErrorMessage()))


class _Unusable(Exception):
    """The built-in function answered something that is not a document."""


def _call(function, text, params):
    """In the thread: the answer to the document ``text``, serialised;
    the allocator parameters go to functions that take them."""
    if params:
        answer = function(json.loads(text), params=params)
    else:
        answer = function(json.loads(text))
    if not isinstance(answer, dict):
        raise _Unusable("the answer is %s, not an object"
                        % type(answer).__name__)
    try:
        return json.dumps(answer)
    except (TypeError, ValueError) as err:
        raise _Unusable("the answer cannot be written as JSON: %s" % err)


@attr.s
class AllocatorRegistry(object):
    """Finds allocators by name.

    ``extra_path``: directories searched first (the master's
    ``--iallocator-search-path``); ``builtins``: name -> "module:function";
    ``search_path``: Ganeti's standard directories (already under the
    root).
    """
    reactor = attr.ib()
    root = attr.ib(default="/", converter=os.path.abspath)
    extra_path = attr.ib(default=(), converter=lambda dirs: tuple(
        os.path.abspath(d) for d in dirs))
    builtins = attr.ib(factory=lambda: dict(BUILTIN_ALLOCATORS))
    timeout = attr.ib(default=DEFAULT_TIMEOUT)
    #: how built-in allocators run (default: a ThreadRunner)
    run_in_thread = attr.ib(default=None)
    #: how external ones write their input file (default: reactor threads)
    run_blocking = attr.ib(default=None)
    _cache = attr.ib(factory=dict, init=False)

    def __attrs_post_init__(self):
        if self.run_in_thread is None:
            self.run_in_thread = ThreadRunner(self.reactor)

    @property
    def search_path(self):
        """Every directory searched for scripts, in order."""
        standard = [os.path.join(self.root, d) for d in STANDARD_SEARCH_PATH]
        return list(self.extra_path) + standard

    def _find_script(self, name, directories):
        for directory in directories:
            path = os.path.join(directory, name)
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return path
        return None

    def lookup(self, name):
        """The :class:`IAllocator` called ``name``; AllocatorNotFound (with
        Ganeti's wording) if there is none."""
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise AllocatorNotFound(
                "iallocator module '%s' not found in the search path (not a"
                " valid allocator name)" % (name,))
        path = self._find_script(name, self.extra_path)
        if path is None and name in self.builtins:
            key = ("built-in", name)
            if key not in self._cache:
                self._cache[key] = BuiltinAllocator(
                    name, self.builtins[name], self.run_in_thread)
            return self._cache[key]
        if path is None:
            path = self._find_script(
                name, [os.path.join(self.root, d)
                       for d in STANDARD_SEARCH_PATH])
        if path is None:
            raise AllocatorNotFound(
                "iallocator module '%s' not found in the search path (%s)"
                " and not a built-in allocator (%s)"
                % (name, ", ".join(self.search_path),
                   ", ".join(sorted(self.builtins)) or "none"))
        return ExternalAllocator(name, path, self.reactor, self.timeout,
                                 self.run_blocking)
