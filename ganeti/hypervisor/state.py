"""On-disk runtime state of instances, shared by the hypervisor drivers.

Layout under ``<root>/var/run/ganeti/<hv>-hypervisor/``::

    conf/<name>.json   the record: spec started with, intent, start time,
                       pid and the last shutdown seen
    pid/<name>.pid     written by the instance process itself
    ctrl/<name>.*      control sockets, status and console files

The record is what lets a driver created after a node daemon restart find
the instances an earlier one started; the processes themselves are detached
and never children of the node daemon.  Writes are atomic (temp + rename)
so a crash mid-write leaves the old record.  Files are tiny: plain blocking
IO is fine here.
"""

import inspect
import json
import os

import attr
from twisted.internet import task

from ganeti import pathutils
from ganeti.hypervisor import InstanceSpec

__all__ = ["InstanceRecord", "RuntimeDir", "read_pid_file",
           "process_alive", "wait_until", "INTENT_RUN", "INTENT_STOP"]

#: The instance should be up (as far as this node knows).
INTENT_RUN = "run"
#: A stop was asked for: a guest shutdown seen now is ours, not the user's.
INTENT_STOP = "stop"


@attr.s
class InstanceRecord(object):
    spec = attr.ib()                 # InstanceSpec
    started = attr.ib()              # reactor.seconds() at start
    intent = attr.ib(default=INTENT_RUN)
    pid = attr.ib(default=None)
    #: Last SHUTDOWN seen while watching: {"guest": bool, "reason": str,
    #: "time": float}; cleared when the guest runs again.
    shutdown = attr.ib(default=None)
    #: What a driver keeps about the running process beyond the spec (the
    #: kvm driver: the uid it runs as, files it handed to that uid).
    extra = attr.ib(factory=dict)

    @property
    def name(self):
        return self.spec.name

    def to_dict(self):
        return {"spec": self.spec.to_dict(), "started": self.started,
                "intent": self.intent, "pid": self.pid,
                "shutdown": self.shutdown, "extra": self.extra}

    @classmethod
    def from_dict(cls, data):
        return cls(spec=InstanceSpec.from_dict(data["spec"]),
                   started=data["started"], intent=data.get("intent", INTENT_RUN),
                   pid=data.get("pid"), shutdown=data.get("shutdown"),
                   extra=data.get("extra") or {})


class RuntimeDir(object):
    """The per-hypervisor runtime directory of one node root."""

    def __init__(self, root, hv_name):
        self.base = os.path.join(pathutils.Paths(root).run_dir,
                                 "%s-hypervisor" % hv_name)
        self.conf_dir = os.path.join(self.base, "conf")
        self.pid_dir = os.path.join(self.base, "pid")
        self.ctrl_dir = os.path.join(self.base, "ctrl")

    def ensure(self):
        for d in (self.conf_dir, self.pid_dir, self.ctrl_dir):
            os.makedirs(d, mode=0o750, exist_ok=True)

    def record_path(self, name):
        return os.path.join(self.conf_dir, name + ".json")

    def pid_path(self, name):
        return os.path.join(self.pid_dir, name + ".pid")

    def ctrl_path(self, name, suffix):
        return os.path.join(self.ctrl_dir, "%s.%s" % (name, suffix))

    def names(self):
        try:
            files = os.listdir(self.conf_dir)
        except FileNotFoundError:
            return []
        return sorted(f[:-len(".json")] for f in files
                      if f.endswith(".json") and not f.startswith("."))

    def read(self, name):
        """The record of ``name``, or None."""
        try:
            with open(self.record_path(name)) as f:
                return InstanceRecord.from_dict(json.load(f))
        except FileNotFoundError:
            return None

    def write(self, record):
        self.ensure()
        write_atomic(self.record_path(record.name),
                     json.dumps(record.to_dict(), indent=1, sort_keys=True))

    def update(self, name, **changes):
        """Change fields of an existing record; returns it (None if gone)."""
        record = self.read(name)
        if record is None:
            return None
        for key, value in changes.items():
            setattr(record, key, value)
        self.write(record)
        return record

    def remove(self, name, ctrl_suffixes=()):
        """Delete every file of ``name``; the record last, so a crash in
        between still leaves the instance listed for another cleanup."""
        paths = [self.pid_path(name)]
        paths += [self.ctrl_path(name, s) for s in ctrl_suffixes]
        paths.append(self.record_path(name))
        for path in paths:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass


def write_atomic(path, text):
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)


def read_pid_file(path):
    """The pid in ``path``, or None if missing or garbage."""
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def process_alive(pid, marker=None):
    """Whether ``pid`` is a live (not zombie) process whose command line
    contains ``marker`` (guards against pid reuse)."""
    if not pid:
        return False
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            stat = f.read()
        # state is the first field after the parenthesised command name;
        # orphans are not always reaped quickly, so zombies count as dead.
        if stat[stat.rindex(b")") + 2:][:1] in (b"Z", b"X"):
            return False
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmdline = f.read()
        # an empty command line: the process is exiting (its memory is
        # already gone) or is a kernel thread; either way not ours
        if not cmdline or (marker is not None and
                           marker.encode() not in cmdline):
            return False
    except (OSError, ValueError):
        return False
    return True


async def wait_until(reactor, check, timeout, interval=0.2):
    """Call ``check()`` (may return a Deferred) until true or ``timeout``
    seconds passed; returns its last result."""
    deadline = reactor.seconds() + timeout
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result or reactor.seconds() >= deadline:
            return result
        await task.deferLater(reactor, min(interval, max(
            0.0, deadline - reactor.seconds())), lambda: None)
