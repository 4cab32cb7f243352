"""The unit suite (``tox -e unit``) and the integration package together
are the whole suite (``tox``): no test is in both, none in neither."""

import unittest as pyunit

from twisted.trial import runner, unittest

from tests import unit


def case_ids(suite):
    """The ids of every test case in ``suite``."""
    ids = []
    for test in suite:
        if isinstance(test, pyunit.TestCase):
            ids.append(test.id())
        else:
            ids.extend(case_ids(test))
    return ids


class SuiteTests(unittest.TestCase):

    def test_unit_and_integration_make_the_whole_suite(self):
        loader = runner.TestLoader()
        everything = case_ids(loader.loadByName("tests", recurse=True))
        units = case_ids(unit.test_suite())
        integration = case_ids(loader.loadByName("tests.integration",
                                                 recurse=True))
        self.assertEqual(len(everything), len(set(everything)))
        self.assertFalse(set(units) & set(integration))
        self.assertEqual(sorted(units + integration), sorted(everything))
        self.assertFalse([name for name in units
                          if name.startswith("tests.integration.")])
        self.assertIn("tests.test_suites.SuiteTests."
                      "test_unit_and_integration_make_the_whole_suite",
                      units)
