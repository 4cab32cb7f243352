"""Files replaced through spare files (ganeti.utils.recycled)."""

import os

from twisted.trial import unittest

from ganeti.utils import recycled
from ganeti.utils.recycled import RecyclingWriter, SPARE_PREFIX


def read(path):
    with open(path, "rb") as f:
        return f.read()


class RecyclingWriterTests(unittest.TestCase):

    def setUp(self):
        self.dir = os.path.abspath(self.mktemp())
        os.makedirs(self.dir)
        self.writer = RecyclingWriter(self.dir, 0o640, reserve=2)

    def path(self, name):
        return os.path.join(self.dir, name)

    def spares(self):
        return sorted(n for n in os.listdir(self.dir)
                      if n.startswith(SPARE_PREFIX))

    def inodes(self):
        return {os.stat(self.path(n)).st_ino for n in os.listdir(self.dir)}

    def test_new_and_replaced_files_hold_their_content_and_mode(self):
        self.writer.write(self.path("job-1"), b"queued", new=True)
        self.writer.write(self.path("job-1"), b"running, a longer state")
        self.writer.write(self.path("job-1"), b"done")
        self.assertEqual(read(self.path("job-1")), b"done")
        self.assertEqual(os.stat(self.path("job-1")).st_mode & 0o777, 0o640)

    def test_replacing_allocates_no_inode_once_the_pool_is_full(self):
        self.writer.write(self.path("job-1"), b"v0", new=True)
        for n in range(1, 4):
            self.writer.write(self.path("job-1"), b"v%d" % n)
        before = self.inodes()
        for n in range(4, 40):
            self.writer.write(self.path("job-1"), b"v%d" % n)
        self.assertEqual(self.inodes(), before)
        self.assertEqual(read(self.path("job-1")), b"v39")
        self.assertGreater(self.writer.exchanged, 30)
        self.assertEqual(len(self.spares()), 3)      # reserve + 1

    def test_a_spare_is_reused_only_after_reserve_other_writes(self):
        # a reader that opened the old file has that long to read it
        self.writer.write(self.path("job-1"), b"old", new=True)
        with open(self.path("job-1"), "rb") as reader:
            self.writer.write(self.path("job-1"), b"new")
            self.writer.write(self.path("job-2"), b"other", new=True)
            self.assertEqual(reader.read(), b"old")
        self.assertEqual(read(self.path("job-1")), b"new")

    def test_without_exchange_the_spare_is_renamed_over(self):
        self.patch(recycled, "_renameat2", None)
        writer = RecyclingWriter(self.dir, 0o640)
        writer.write(self.path("job-1"), b"one", new=True)
        writer.write(self.path("job-1"), b"two")
        self.assertEqual(read(self.path("job-1")), b"two")
        self.assertEqual(writer.exchanged, 0)

    def test_a_spare_that_became_a_link_is_never_written_through(self):
        victim = self.path("victim")
        with open(victim, "wb") as f:
            f.write(b"precious")
        self.writer.write(self.path("job-1"), b"a", new=True)
        for n in range(3):
            self.writer.write(self.path("job-1"), b"b%d" % n)
        # something puts a link where the job file was; the next write
        # swaps it out into the pool of spares
        os.unlink(self.path("job-1"))
        os.symlink(victim, self.path("job-1"))
        self.writer.write(self.path("job-1"), b"c")
        for n in range(6):
            self.writer.write(self.path("job-1"), b"d%d" % n)
        self.assertEqual(read(victim), b"precious")
        self.assertEqual(read(self.path("job-1")), b"d5")
        self.flushLoggedErrors()

    def test_adopt_takes_the_spares_of_a_previous_run(self):
        self.writer.write(self.path("job-1"), b"a", new=True)
        for n in range(4):
            self.writer.write(self.path("job-1"), b"b%d" % n)
        left = self.spares()
        writer = RecyclingWriter(self.dir, 0o640, reserve=2)
        self.assertEqual(writer.adopt(), len(left))
        before = self.inodes()
        writer.write(self.path("job-1"), b"again")
        self.assertEqual(self.inodes(), before)
        self.assertEqual(self.spares(), left)

    def test_exchange_reports_a_missing_name(self):
        self.assertRaises(FileNotFoundError, recycled.exchange,
                          self.path("a"), self.path("b"))
