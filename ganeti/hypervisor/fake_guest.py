"""The process that stands for one instance of the fake hypervisor.

``python -m ganeti.hypervisor.fake_guest --status FILE --pidfile FILE
[--paused] [--name NAME]`` detaches itself (fork + setsid, like ``qemu
-daemonize``): the launching process exits 0 once the guest has written its
pid file, so the instance outlives the node daemon that started it.

The guest keeps its state in the JSON status file and acts on signals the
way a real guest acts on what happens to it:

=========  ===========================================================
SIGUSR1    the user powers the guest off from inside: the state becomes
           ``shutdown`` and the process stays, like a kept domain
SIGUSR2    resume a paused guest (QMP ``cont``)
SIGHUP     reset: the guest reboots (``boots`` counts the boots)
SIGTERM    the host stops the instance: exit 0
SIGKILL    a crash: the process vanishes with the state still "running"
=========  ===========================================================
"""

import argparse
import json
import os
import signal
import sys
import time


def _write_atomic(path, text):
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)


class Guest(object):

    def __init__(self, status_path, paused):
        self.status_path = status_path
        self.status = {"state": "paused" if paused else "running",
                       "reason": None, "boots": 0 if paused else 1,
                       "changed": time.time()}

    def save(self):
        self.status["changed"] = time.time()
        _write_atomic(self.status_path, json.dumps(self.status))

    def poweroff(self, *_):
        if self.status["state"] != "shutdown":
            self.status.update(state="shutdown", reason="guest-shutdown")
            self.save()

    def resume(self, *_):
        if self.status["state"] == "paused":
            self.status["state"] = "running"
            if not self.status["boots"]:
                self.status["boots"] = 1
            self.save()

    def reset(self, *_):
        if self.status["state"] == "running":
            self.status["boots"] += 1
            self.save()

    def terminate(self, *_):
        sys.exit(0)

    def install_handlers(self):
        signal.signal(signal.SIGUSR1, self.poweroff)
        signal.signal(signal.SIGUSR2, self.resume)
        signal.signal(signal.SIGHUP, self.reset)
        signal.signal(signal.SIGTERM, self.terminate)

    def run(self):
        while True:
            signal.pause()


def _daemonize(pidfile):
    """Fork into a new session; the parent returns only to exit."""
    read_fd, write_fd = os.pipe()
    if os.fork():
        os.close(write_fd)
        # wait until the child says it is set up (or died trying)
        ok = os.read(read_fd, 2) == b"ok"
        os._exit(0 if ok else 1)
    os.close(read_fd)
    os.setsid()
    os.chdir("/")
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    _write_atomic(pidfile, "%d\n" % os.getpid())
    return write_fd


def main(argv=None):
    parser = argparse.ArgumentParser(prog="fake_guest")
    parser.add_argument("--status", required=True)
    parser.add_argument("--pidfile", required=True)
    parser.add_argument("--paused", action="store_true")
    parser.add_argument("--name", default="")  # shows up in ps
    args = parser.parse_args(argv)
    guest = Guest(os.path.abspath(args.status), args.paused)
    pidfile = os.path.abspath(args.pidfile)
    ready_fd = _daemonize(pidfile)
    # handlers before "ready": a signal sent right after start must not
    # hit the default action (SIGUSR1 would kill us)
    guest.install_handlers()
    guest.save()
    os.write(ready_fd, b"ok")
    os.close(ready_fd)
    guest.run()


if __name__ == "__main__":
    main()
