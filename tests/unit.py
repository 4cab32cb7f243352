"""The unit tests alone: every ``tests/test_*.py`` module, none of
``tests/integration/`` (real daemons, qemu).

``trial tests.unit`` (``tox -e unit``) runs them; ``trial tests`` runs
everything.  Trial cannot leave a package out, but it runs the suite a
module's ``test_suite()`` returns: this one names the unit test modules, so
a new module in tests/ is a unit test by being there.
"""

import os

from twisted.trial import runner

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


def module_names():
    """The dotted names of the unit test modules."""
    return sorted("tests." + name[:-len(".py")]
                  for name in os.listdir(TESTS_DIR)
                  if name.startswith("test_") and name.endswith(".py"))


def test_suite():
    return runner.TestLoader().loadByNames(module_names())
