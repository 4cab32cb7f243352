"""noded's log: to its file, to the console when the file cannot be written."""

import io
import os

from twisted.logger import Logger, LogPublisher
from twisted.trial import unittest

from ganeti.server import fallbacklog


class BrokenDisk(io.StringIO):
    """A log file whose disk fails (EIO) after ``good`` writes."""

    def __init__(self, good):
        io.StringIO.__init__(self)
        self.good = good

    def write(self, text):
        if self.good <= 0:
            raise OSError(5, "Input/output error")
        self.good -= 1
        return io.StringIO.write(self, text)


class FallbackTests(unittest.TestCase):

    def setUp(self):
        self.dir = self.mktemp()
        os.makedirs(self.dir)
        self.path = os.path.join(self.dir, "node-daemon.log")
        self.console = io.StringIO()
        self.observer = fallbacklog.ConsoleFallbackObserver(self.path,
                                                            self.console)
        self.addCleanup(self.observer.close)
        publisher = LogPublisher(self.observer)
        self.log = Logger(namespace="noded", observer=publisher)

    def test_messages_go_to_the_file(self):
        self.log.info("instance {name} started", name="inst1")
        with open(self.path) as f:
            self.assertIn("instance inst1 started", f.read())
        self.assertEqual(self.console.getvalue(), "")

    def test_failing_disk_sends_messages_to_the_console(self):
        self.log.info("before the failure")
        self.observer._file = BrokenDisk(0)
        self.log.warn("powercycle requested")
        text = self.console.getvalue()
        self.assertIn("powercycle requested", text)
        self.assertIn("unwritable: Input/output error", text)
        self.assertEqual(self.observer.failures, 1)
        # The disk is back: the file is reopened for the next message.
        self.log.info("disk is back")
        with open(self.path) as f:
            content = f.read()
        self.assertIn("before the failure", content)
        self.assertIn("disk is back", content)
        self.assertNotIn("powercycle requested", content)

    def test_unopenable_file_uses_the_console(self):
        observer = fallbacklog.ConsoleFallbackObserver(
            os.path.join(self.dir, "no-such-dir", "x.log"), self.console)
        Logger(observer=LogPublisher(observer)).error("disk gone")
        self.assertIn("disk gone", self.console.getvalue())

    def test_console_path(self):
        console = os.path.join(self.dir, "console")
        observer = fallbacklog.ConsoleFallbackObserver(
            os.path.join(self.dir, "missing", "x.log"), console)
        Logger(observer=LogPublisher(observer)).error("to the console file")
        with open(console) as f:
            self.assertIn("to the console file", f.read())
