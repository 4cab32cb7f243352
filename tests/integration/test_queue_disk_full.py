"""The master daemon's job queue on a disk that fills up while a job
runs (a small tmpfs mounted over the queue directory): the job is not
reported finished until its final status is on disk, and is once space
comes back."""

import errno
import os
import shutil
import subprocess

from twisted.trial.unittest import SkipTest

from tests.integration.daemons import wait_for
from tests.integration.test_masterd import MasterdTestCase


class QueueDiskFullTests(MasterdTestCase):

    HYPERVISORS = ("fake",)

    def setUp(self):
        MasterdTestCase.setUp(self)
        self.queue = self.vc.master.paths.queue_dir
        saved = self.queue + ".saved"
        os.rename(self.queue, saved)
        os.mkdir(self.queue, 0o700)
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs",
             self.queue], capture_output=True, text=True)
        if mounted.returncode != 0:
            os.rmdir(self.queue)
            os.rename(saved, self.queue)
            raise SkipTest("cannot mount a tmpfs here: %s"
                           % mounted.stderr.strip())
        self.addCleanup(self.unmount)
        shutil.copytree(saved, self.queue, dirs_exist_ok=True)
        shutil.rmtree(saved)

    def unmount(self):
        # the daemons first: they hold files of the mount open
        self.vc.stop_all()
        subprocess.run(["umount", "-l", self.queue], check=False)

    def fill(self):
        """Write a file until the tmpfs is full; its path."""
        path = os.path.join(self.queue, "filler")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            for size in (65536, 4096, 1):
                try:
                    while True:
                        os.write(fd, b"\0" * size)
                except OSError as err:
                    self.assertEqual(err.errno, errno.ENOSPC)
        finally:
            os.close(fd)
        return path

    def file_status(self, job_id):
        # not written in place yet: the journal holds the job meanwhile
        try:
            with open(os.path.join(self.queue, "job-%d" % job_id)) as f:
                text = f.read()
        except FileNotFoundError:
            return "not in place"
        return "success" if '"status":"success"' in text else "not final"

    def test_a_final_status_waits_for_the_disk(self):
        self.start_masterd()
        c = self.client()
        # a job whose every record needs new pages of the file system
        # (a small one could still fit in the journal's last page)
        job = c.call("SubmitJob", [{"OP_ID": "OP_TEST_DELAY",
                                    "duration": 1.0,
                                    "comment": "x" * 20000}])
        wait_for("job running", lambda: self.job_status(c, job) == "running")
        try:
            filler = self.fill()
        except OSError:
            os.unlink(os.path.join(self.queue, "filler"))
            raise
        # the opcode ends meanwhile; its success cannot be written
        wait_for("a failed final write", lambda: "could not be written:"
                 in open(os.path.join(self.vc.master.paths.log_dir,
                                      "ganeti-masterd.log")).read())
        self.assertEqual(self.job_status(c, job), "running")
        log_path = os.path.join(self.vc.master.paths.log_dir,
                                "ganeti-masterd.log")
        self.assertEqual(c.call("WaitForJobChange", job, ["status"],
                                ["running"], None, 1), "nochange",
                         open(log_path).read()[-3000:])
        self.assertIn(self.file_status(job), ("not final", "not in place"))
        # space comes back: the next attempt writes it
        os.unlink(filler)
        wait_for("job success", lambda: self.job_status(c, job) == "success",
                 timeout=30)
        answer = c.call("WaitForJobChange", job, ["status"], ["running"],
                        None, 5)
        self.assertEqual(answer[0], ["success"])
        wait_for("job file", lambda: self.file_status(job) == "success")
