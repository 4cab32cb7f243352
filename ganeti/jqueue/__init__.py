"""The job queue (``from ganeti import jqueue; jqueue.JobQueue(...)``).

* :mod:`ganeti.jqueue.model`: jobs, opcodes, statuses, query fields
* :mod:`ganeti.jqueue.store`: the queue directory's files
* :mod:`ganeti.jqueue.waiters`: WaitForJobChange without polling
* :mod:`ganeti.jqueue.queue`: submitting, scheduling, running, cancel,
  archive, drain
* :mod:`ganeti.jqueue.budget`: the budget of query jobs, per client
* :mod:`ganeti.jqueue.replication`: the queue's copies on the master
  candidates (:mod:`ganeti.jqueue.layout`: the directory's names, shared
  with the node daemon)

See docs/jobs.rst for statuses, files and crash behaviour.
"""

import importlib

# Loaded on first use (PEP 562): the journal helper process imports
# ganeti.jqueue.journal_helper, and with it this package, but none of the
# queue (its start delays the master's first jobs).
_SOURCES = {
    "model": [
        "STATUS_QUEUED", "STATUS_WAITING", "STATUS_CANCELING",
        "STATUS_RUNNING", "STATUS_CANCELED", "STATUS_SUCCESS",
        "STATUS_ERROR", "STATUS_ALL", "PENDING", "FINALIZED",
        "PRIO_HIGHEST", "PRIO_HIGH", "PRIO_NORMAL", "PRIO_LOW",
        "PRIO_LOWEST", "PRIO_DEFAULT", "ELOG_MESSAGE", "ELOG_MESSAGE_LIST",
        "ELOG_REMOTE_IMPORT", "ELOG_JQUEUE_TEST", "ELOG_DELAY_TEST",
        "JOB_FIELDS", "QueuedJob", "QueuedOpCode", "UnreadableOpCode",
        "split_time"],
    "waiters": ["WFJC_TIMEOUT", "JOB_NOTCHANGED"],
    "queue": ["JobQueue", "OpContext", "LoadReport", "DEFAULT_MAX_RUNNING",
              "QUEUE_SIZE_LIMIT"],
}
_MODULE_OF = {name: module for module, names in _SOURCES.items()
              for name in names}


def __getattr__(name):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError("module %r has no attribute %r"
                             % (__name__, name))
    value = getattr(importlib.import_module("%s.%s" % (__name__, module)),
                    name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_MODULE_OF))


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
