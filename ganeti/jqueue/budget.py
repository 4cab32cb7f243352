"""Query jobs get a budget of their own, so reads never crowd out writes.

A *query job* is a job whose opcodes all only read
(:data:`ganeti.opcodes.QUERY_ONLY_OP_IDS`: ``OP_INSTANCE_QUERY_DATA``,
``OP_QUERY``, ``OP_NODE_QUERY_STORAGE``, ...).  Anyone may make the master
run one (an anonymous ``GET /2/instances/NAME/info`` does), so the queue
holds at most ``total`` unfinished query jobs, and at most ``per_client``
of them for one client; a query job beyond either is refused at once with
:class:`ganeti.errors.JobQueueFull` whose second argument says which limit
(:data:`OVER_CLIENT` or :data:`OVER_TOTAL`).  Jobs that change the cluster
never count and are never refused by this budget.

A *client* is a string: ``rapi user=NAME`` or ``rapi address=IP`` for jobs
the RAPI daemon submits for its clients, ``luxi uid=N`` for other luxi
clients (the peer credentials of their connection), or None for jobs the
master submits itself (and jobs found unfinished at start-up): those count
towards the total but are never refused.
"""

import collections

from ganeti import errors
from ganeti import opcodes

#: Unfinished query jobs at most (0: no limit)
DEFAULT_MAX_QUERY_JOBS = 200
#: Unfinished query jobs of one client at most (0: no limit)
DEFAULT_MAX_QUERY_JOBS_PER_CLIENT = 20

#: Second argument of the JobQueueFull a refused query job gets
OVER_CLIENT = "query_jobs_per_client"
OVER_TOTAL = "query_jobs_total"


class QueryBudget(object):
    """The unfinished query jobs, by client; refuses those over a limit."""

    def __init__(self, total=DEFAULT_MAX_QUERY_JOBS,
                 per_client=DEFAULT_MAX_QUERY_JOBS_PER_CLIENT):
        for name, value in (("total", total), ("per_client", per_client)):
            if not isinstance(value, int) or isinstance(value, bool) \
                    or value < 0:
                raise errors.ProgrammerError(
                    "QueryBudget: %s must be a non-negative integer, not %r"
                    % (name, value))
        self.total = total
        self.per_client = per_client
        self._jobs = {}                          # job id -> client
        self._by_client = collections.Counter()  # client -> count

    def check(self, ops, client):
        """Raise JobQueueFull if a job of ``ops`` submitted by ``client``
        would be one query job too many; change nothing."""
        if client is None or not opcodes.is_query_only(ops):
            return
        mine = self._by_client[client]
        if self.per_client and mine >= self.per_client:
            raise errors.JobQueueFull(
                "Too many unfinished query jobs of %s: %d (limit %d per"
                " client, ganeti-masterd --max-query-jobs-per-client);"
                " retry when some have finished"
                % (client, mine, self.per_client), OVER_CLIENT)
        if self.total and len(self._jobs) >= self.total:
            raise errors.JobQueueFull(
                "Too many unfinished query jobs: %d (limit %d, ganeti-masterd"
                " --max-query-jobs); jobs that change the cluster are still"
                " accepted" % (len(self._jobs), self.total), OVER_TOTAL)

    def admit(self, job_id, ops, client):
        """Count job ``job_id`` if it is a query job (then True), or raise
        JobQueueFull if it is one too many.  Other jobs: False."""
        if not opcodes.is_query_only(ops):
            return False
        self.check(ops, client)
        self._jobs[job_id] = client
        self._by_client[client] += 1
        return True

    def release(self, job_id):
        """Job ``job_id`` has finished (or was never created)."""
        if job_id not in self._jobs:
            return
        client = self._jobs.pop(job_id)
        self._by_client[client] -= 1
        if self._by_client[client] <= 0:
            del self._by_client[client]

    def is_query(self, job_id):
        return job_id in self._jobs

    def count(self, client=None):
        """Unfinished query jobs (of ``client`` if given)."""
        if client is None:
            return len(self._jobs)
        return self._by_client[client]


def rapi_client(text):
    """The client name of a job RAPI submits for ``text`` (``user=NAME``
    or ``address=IP``)."""
    return "rapi %s" % text


def luxi_client(caller):
    """The client name of a luxi connection (:class:`ganeti.luxi.Caller`
    or None when its credentials are unknown)."""
    if caller is None or caller.uid is None:
        return "luxi uid=unknown"
    return "luxi uid=%d" % caller.uid
