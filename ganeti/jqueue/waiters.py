"""WaitForJobChange: park a client until a job changes or a timeout passes.

Waiters are kept per job and re-evaluated whenever the queue reports a
change of that job, so nothing polls.  The timeout runs on the injected
clock and is capped like Ganeti's luxi server caps it.
"""

import collections
import copy

from twisted.internet import defer
from twisted.logger import Logger

from ganeti.jqueue.model import job_row

log = Logger()

#: Longest a WaitForJobChange call waits (seconds), as Ganeti's luxi does
WFJC_TIMEOUT = 89
#: Answer when nothing changed before the timeout
JOB_NOTCHANGED = "nochange"


def job_changes(job, fields, prev_job_info, prev_log_serial):
    """``[values, new log entries]`` if the client has something to see.

    Returns None while the job is unfinished, its field values equal
    ``prev_job_info`` and there is no log entry newer than
    ``prev_log_serial``.
    """
    info = job_row(job, fields)
    entries = job.log_entries(prev_log_serial)
    if job.finalized or info != prev_job_info or entries:
        return [info, copy.deepcopy(entries)]
    return None


class _Waiter(object):
    __slots__ = ("job_id", "fields", "prev_info", "prev_serial", "deferred",
                 "timer")


class ChangeWaiters(object):
    """The parked WaitForJobChange calls of one queue."""

    def __init__(self, clock):
        self._clock = clock
        self._by_job = collections.defaultdict(list)

    def count(self, job_id=None):
        if job_id is None:
            return sum(len(w) for w in self._by_job.values())
        return len(self._by_job.get(job_id, ()))

    def wait(self, job, fields, prev_job_info, prev_log_serial, timeout):
        """Deferred firing with the changes or ``"nochange"``."""
        found = job_changes(job, fields, prev_job_info, prev_log_serial)
        if found is not None:
            return defer.succeed(found)
        timeout = min(WFJC_TIMEOUT, timeout if timeout is not None
                      else WFJC_TIMEOUT)
        if timeout <= 0:
            return defer.succeed(JOB_NOTCHANGED)
        waiter = _Waiter()
        waiter.job_id = job.id
        waiter.fields = list(fields)
        waiter.prev_info = prev_job_info
        waiter.prev_serial = prev_log_serial
        # the client went away (connection lost): forget the waiter
        waiter.deferred = defer.Deferred(lambda _d: self._drop(waiter))
        waiter.timer = self._clock.callLater(timeout, self._expire, waiter)
        self._by_job[job.id].append(waiter)
        return waiter.deferred

    def notify(self, job):
        """The queue changed ``job``: answer every waiter that sees news."""
        waiters = self._by_job.get(job.id)
        if not waiters:
            return
        fire = []
        for waiter in list(waiters):
            found = job_changes(job, waiter.fields, waiter.prev_info,
                                waiter.prev_serial)
            if found is not None:
                self._drop(waiter)
                fire.append((waiter, found))
        # fire after the bookkeeping: callbacks may submit new waits
        for waiter, found in fire:
            waiter.deferred.callback(found)

    def shutdown(self):
        """Answer every waiter with "nochange" (clients then ask again)."""
        for waiters in list(self._by_job.values()):
            for waiter in list(waiters):
                self._drop(waiter)
                waiter.deferred.callback(JOB_NOTCHANGED)

    def _expire(self, waiter):
        waiter.timer = None
        self._drop(waiter)
        waiter.deferred.callback(JOB_NOTCHANGED)

    def _drop(self, waiter):
        if waiter.timer is not None and waiter.timer.active():
            waiter.timer.cancel()
        waiter.timer = None
        waiters = self._by_job.get(waiter.job_id)
        if waiters and waiter in waiters:
            waiters.remove(waiter)
            if not waiters:
                del self._by_job[waiter.job_id]
