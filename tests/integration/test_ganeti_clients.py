"""Ganeti 3.0's own clients against the demo cluster: every call of the
compatibility sweep (its command line tools and its RAPI client, reads and
changes that undo themselves) works."""


from twisted.trial import unittest

from ganeti.dev import compat
from tests import ganeti_peer
from tests.integration.demo_process import RunningDemo


class GanetiClientsTests(unittest.TestCase):

    def setUp(self):
        ganeti_peer.skip_unless_available()

    def test_every_call_of_the_sweep_works(self):
        demo = RunningDemo(self, nodes=2, prefix="gnt-compat-",
                           timeout=180)
        root = demo.root()
        lines = []
        results = compat.sweep(root, writes=True, report=lines.append)
        failed = [r for r in results if not r[2]]
        print("\n%d of %d calls of Ganeti's clients worked"
              % (len(results) - len(failed), len(results)))
        self.assertEqual(failed, [], "\n".join(lines))
        # the sweep covers what users meet first
        calls = [r[1] for r in results]
        for expected in ("gnt-backup export", "gnt-backup import",
                         "gnt-network add", "gnt-filter add",
                         "gnt-instance console --show-cmd",
                         "c.ExportInstance", "c.GetInstanceConsole",
                         "c.GetNetworks", "c.GetFilters"):
            self.assertTrue(any(expected in c for c in calls),
                            expected)
        self.assertEqual(demo.stop(), 0, demo.text())
