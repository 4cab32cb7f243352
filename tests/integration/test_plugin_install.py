"""The twistd plugins are found however the project is installed.

SLOW (about 20 s): a fresh virtualenv per install mode, ``pip install .``
and ``pip install -e .`` of a copy of this checkout, then ``python -m
twisted --help`` run outside the checkout must list every daemon.  The
dependencies are not installed again: the venv gets this interpreter's
site-packages as a plain path entry (``--no-deps --no-build-isolation
--no-index``, so nothing is fetched).
"""

import importlib.util
import os
import shutil
import site
import subprocess
import sys

from twisted.trial import unittest

import twisted

from tests.integration.daemons import PROJECT, short_tmpdir

DAEMONS = ("ganeti-confd", "ganeti-masterd", "ganeti-noded", "ganeti-rapi",
           "ganeti-watcher", "ganeti-maintd", "ganeti-mond")
#: what setup.py needs to build the package
SOURCES = ("setup.py", "setup.cfg", "pyproject.toml", "MANIFEST.in",
           "README.rst", "ganeti", "twisted")


def _clean_env():
    """Our environment without anything that points into the checkout or
    another environment."""
    env = dict(os.environ)
    for name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_TARGET",
                 "PIP_PREFIX", "PIP_USER"):
        env.pop(name, None)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _dependency_dirs():
    """The directories this interpreter imports Twisted, pip and
    setuptools (and the other dependencies next to them) from."""
    dirs = [os.path.dirname(os.path.dirname(os.path.abspath(
        twisted.__file__)))]
    for name in ("pip", "setuptools"):
        spec = importlib.util.find_spec(name)
        dirs.append(os.path.dirname(os.path.dirname(spec.origin)))
    dirs.extend(site.getsitepackages())
    return [d for i, d in enumerate(dirs)
            if d not in dirs[:i] and os.path.isdir(d)
            and os.path.realpath(d) != os.path.realpath(PROJECT)]


class PluginDiscoveryTests(unittest.TestCase):

    timeout = 600

    def setUp(self):
        for module in ("venv", "pip", "setuptools"):
            if importlib.util.find_spec(module) is None:
                raise unittest.SkipTest("needs the %s module to make and"
                                        " fill a virtualenv" % module)
        self.base = short_tmpdir(self, "gnt-plugins-")
        self.source = os.path.join(self.base, "src")
        os.makedirs(self.source)
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc",
                                        "dropin.cache", "*.egg-info")
        for name in SOURCES:
            path = os.path.join(PROJECT, name)
            if os.path.isdir(path):
                shutil.copytree(path, os.path.join(self.source, name),
                                ignore=ignore)
            elif os.path.exists(path):
                shutil.copy(path, self.source)

    def run_ok(self, argv, cwd="/"):
        proc = subprocess.run(argv, cwd=cwd, env=_clean_env(),
                              stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=300)
        output = proc.stdout.decode("utf-8", "replace")
        self.assertEqual(proc.returncode, 0, "%s failed:\n%s"
                         % (" ".join(argv), output))
        return output

    def venv(self, name):
        """A new venv's python, seeing our dependencies (not the
        checkout: .pth files of those directories are not read)."""
        directory = os.path.join(self.base, name)
        try:
            subprocess.run([sys.executable, "-m", "venv", "--without-pip",
                            directory], check=True, timeout=120,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        except subprocess.CalledProcessError as err:
            raise unittest.SkipTest("python -m venv does not work here: %s"
                                    % err.stdout.decode("utf-8", "replace"))
        python = os.path.join(directory, "bin", "python")
        purelib = self.run_ok([python, "-c", "import sysconfig;"
                               " print(sysconfig.get_paths()['purelib'])"])
        with open(os.path.join(purelib.strip(), "zz-test-deps.pth"),
                  "w") as f:
            f.write("".join(d + "\n" for d in _dependency_dirs()))
        return python

    def check_installed(self, *pip_args):
        python = self.venv("venv")
        self.run_ok([python, "-m", "pip", "install", "--no-deps",
                     "--no-build-isolation", "--no-index"]
                    + list(pip_args), cwd=self.source)
        # where the plugins come from: never the checkout
        where = self.run_ok([python, "-c", "import ganeti; print(ganeti"
                             ".__file__)"]).strip()
        self.assertFalse(where.startswith(PROJECT + os.sep), where)
        listing = self.run_ok([python, "-m", "twisted", "--help"])
        for daemon in DAEMONS:
            self.assertIn(daemon, listing)
        twistd = self.run_ok([python, "-c", "import sys;"
                              " from twisted.scripts.twistd import run;"
                              " sys.argv[0] = 'twistd'; run()", "--help"])
        for daemon in DAEMONS:
            self.assertIn(daemon, twistd)
        # and the plugin's module loads: its options are there
        masterd = self.run_ok([python, "-m", "twisted", "ganeti-masterd",
                               "--help"])
        self.assertIn("--max-running-jobs", masterd)
        return where

    def test_pip_install(self):
        where = self.check_installed(".")
        self.assertIn(os.sep + "site-packages" + os.sep, where)

    def test_pip_install_editable(self):
        where = self.check_installed("-e", ".")
        self.assertEqual(where, os.path.join(self.source, "ganeti",
                                             "__init__.py"))
