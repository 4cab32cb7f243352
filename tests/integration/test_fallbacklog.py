"""noded's log: a real noded whose log file cannot be written logs to the
console and keeps serving."""

import os

from tests.integration.daemons import VirtualClusterTestCase


class NodedConsoleTests(VirtualClusterTestCase):
    """A real noded whose log file cannot be written keeps serving."""

    BASE_PREFIX = "gnt-log-"

    def test_noded_logs_to_the_console_and_serves(self):
        console = os.path.join(self.base, "console")
        self.start_noded(
            self.vc.master,
            "--log-file", os.path.join(self.base, "gone", "node-daemon.log"),
            "--console", console)
        with open(console) as f:
            text = f.read()
        self.assertIn("ganeti-noded starting", text)
        self.assertIn("unwritable", text)
