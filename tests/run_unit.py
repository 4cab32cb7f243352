"""Run trial on the unit tests: every ``tests/test_*.py`` module (trial
takes packages and modules, and the unit tests share their package with
``tests/integration``), or on the test names given.

    python -m tests.run_unit [trial options] [names]
"""

import glob
import os
import sys

from twisted.scripts import trial


def unit_modules():
    here = os.path.dirname(os.path.abspath(__file__))
    return sorted("tests." + os.path.basename(path)[:-3]
                  for path in glob.glob(os.path.join(here, "test_*.py")))


def main(argv):
    options = [a for a in argv if a.startswith("-")]
    names = [a for a in argv if not a.startswith("-")]
    sys.argv = ["trial"] + options + (names or unit_modules())
    trial.run()


if __name__ == "__main__":
    main(sys.argv[1:])
