#!/usr/bin/env python3
"""Bootstrap and run the project's two entry points.

    python3 dev.py demo     # start a local virtual cluster and print where to look
    python3 dev.py test     # run the whole trial suite through tox

Only the standard library is used here, because this script runs on a fresh
machine where nothing but python3 and pip exist.  It makes a private virtualenv
with tox in it (``.tools-venv``), installs the Debian packages the tests use as
real peers when we are root and they are missing, and then hands over to tox.
"""

import os
import shutil
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS_VENV = os.path.join(HERE, ".tools-venv")
DEBIAN_PACKAGES_FILE = os.path.join(HERE, "etc", "debian-packages.txt")


def _say(msg):
    print("dev.py: %s" % msg, flush=True)


def debian_packages():
    """Return the Debian packages listed in etc/debian-packages.txt."""
    if not os.path.exists(DEBIAN_PACKAGES_FILE):
        return []
    pkgs = []
    with open(DEBIAN_PACKAGES_FILE) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                pkgs.append(line)
    return pkgs


def _apt_lists_present():
    lists = "/var/lib/apt/lists"
    return os.path.isdir(lists) and any(
        name.endswith("_Packages") for name in os.listdir(lists))


def ensure_debian_packages():
    pkgs = debian_packages()
    if not pkgs or not shutil.which("dpkg-query") or not shutil.which("apt-get"):
        return
    if os.geteuid() == 0 and not _apt_lists_present():
        # The tests download a kernel package for their tiny guest: they
        # need the package lists even when everything else is installed.
        _say("apt-get update (no package lists yet)")
        subprocess.run(["apt-get", "update", "-qq"], check=False,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    missing = []
    for pkg in pkgs:
        res = subprocess.run(["dpkg-query", "-W", "-f=${Status}", pkg],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True)
        if "install ok installed" not in res.stdout:
            missing.append(pkg)
    if not missing:
        return
    if os.geteuid() != 0:
        _say("not root; cannot install Debian packages %s (tests that need "
             "them will be skipped)" % " ".join(missing))
        return
    _say("installing Debian packages: %s" % " ".join(missing))
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], env=env, check=False)
    res = subprocess.run(["apt-get", "install", "-y", "-qq",
                          "--no-install-recommends"] + missing, env=env)
    if res.returncode != 0:
        _say("apt-get failed (%d); tests that need %s will be skipped"
             % (res.returncode, " ".join(missing)))


def ensure_tox():
    tox = os.path.join(TOOLS_VENV, "bin", "tox")
    if os.path.exists(tox):
        return tox
    _say("creating %s with tox" % TOOLS_VENV)
    subprocess.run([sys.executable, "-m", "venv", TOOLS_VENV], check=True)
    subprocess.run([os.path.join(TOOLS_VENV, "bin", "pip"), "install", "-q",
                    "--disable-pip-version-check", "tox"], check=True)
    return tox


def main(argv):
    if len(argv) < 2 or argv[1] not in ("demo", "test", "bench"):
        print(__doc__.strip())
        return 2
    what, extra = argv[1], argv[2:]
    ensure_debian_packages()
    tox = ensure_tox()
    env_name = {"demo": ["-e", "demo"], "test": [], "bench": ["-e", "bench"]}[what]
    cmd = [tox, "-c", os.path.join(HERE, "tox.ini")] + env_name
    if extra:
        cmd += ["--"] + extra
    os.chdir(HERE)
    return run_forwarding_signals(cmd)


def run_forwarding_signals(cmd):
    """Run ``cmd`` and pass SIGINT and SIGTERM on to it, once.

    The child gets a session of its own, so that Ctrl-C in a terminal
    reaches it only through us, exactly as a signal sent to this
    process alone does.  The signal goes to the child's whole process
    group (tox and the command it runs), as Ctrl-C would: tox alone
    does not pass it on, and the demo must get it to stop its daemons
    and guests."""
    proc = subprocess.Popen(cmd, start_new_session=True)

    def forward(signum, _frame):
        try:
            os.killpg(proc.pid, signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, forward)
    return proc.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
