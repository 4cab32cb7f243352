"""The job queue (``from ganeti import jqueue; jqueue.JobQueue(...)``).

* :mod:`ganeti.jqueue.model`: jobs, opcodes, statuses, query fields
* :mod:`ganeti.jqueue.store`: the queue directory's files
* :mod:`ganeti.jqueue.waiters`: WaitForJobChange without polling
* :mod:`ganeti.jqueue.queue`: submitting, scheduling, running, cancel,
  archive, drain

See docs/jobs.rst for statuses, files and crash behaviour.
"""

from ganeti.jqueue.model import (  # noqa: F401
    STATUS_QUEUED, STATUS_WAITING, STATUS_CANCELING, STATUS_RUNNING,
    STATUS_CANCELED, STATUS_SUCCESS, STATUS_ERROR, STATUS_ALL, PENDING,
    FINALIZED, PRIO_HIGHEST, PRIO_HIGH, PRIO_NORMAL, PRIO_LOW, PRIO_LOWEST,
    PRIO_DEFAULT, ELOG_MESSAGE, ELOG_MESSAGE_LIST, ELOG_REMOTE_IMPORT,
    ELOG_JQUEUE_TEST, ELOG_DELAY_TEST, JOB_FIELDS, QueuedJob, QueuedOpCode,
    UnreadableOpCode, split_time)
from ganeti.jqueue.waiters import WFJC_TIMEOUT, JOB_NOTCHANGED  # noqa: F401
from ganeti.jqueue.queue import (  # noqa: F401
    JobQueue, OpContext, LoadReport, DEFAULT_MAX_RUNNING, QUEUE_SIZE_LIMIT)

__all__ = [
    "STATUS_QUEUED", "STATUS_WAITING", "STATUS_CANCELING", "STATUS_RUNNING",
    "STATUS_CANCELED", "STATUS_SUCCESS", "STATUS_ERROR", "STATUS_ALL",
    "PENDING", "FINALIZED", "PRIO_HIGHEST", "PRIO_HIGH", "PRIO_NORMAL",
    "PRIO_LOW", "PRIO_LOWEST", "PRIO_DEFAULT", "ELOG_MESSAGE",
    "ELOG_MESSAGE_LIST", "ELOG_REMOTE_IMPORT", "ELOG_JQUEUE_TEST",
    "ELOG_DELAY_TEST", "JOB_FIELDS", "QueuedJob", "QueuedOpCode",
    "UnreadableOpCode", "split_time", "WFJC_TIMEOUT", "JOB_NOTCHANGED",
    "JobQueue", "OpContext", "LoadReport", "DEFAULT_MAX_RUNNING",
    "QUEUE_SIZE_LIMIT",
]
