"""Where code that runs both in a daemon and in a plain helper process
says what went wrong.

A report function takes a level (``"info"``, ``"warn"`` or ``"error"``)
and a finished text.  In a daemon it is :func:`to_twisted_log`; the job
queue's journal helper, a process without Twisted's logging whose
standard error the master daemon logs, uses :func:`to_stderr`.  Twisted's
logger is imported on the first message only: importing it takes longer
than the rest of the helper's start, and the master's first jobs wait
for that start.
"""

import sys

_logger = None


def to_twisted_log(level, text):
    """Emit ``text`` as an event of Twisted's logging system."""
    global _logger
    from twisted.logger import Logger, LogLevel
    if _logger is None:
        _logger = Logger(namespace="ganeti")
    _logger.emit(LogLevel.lookupByName(level), "{text}", text=text)


def to_stderr(level, text):
    """Write ``text`` as one line on standard error."""
    sys.stderr.write("%s: %s\n" % (level, text.replace("\n", " ")))
    sys.stderr.flush()
