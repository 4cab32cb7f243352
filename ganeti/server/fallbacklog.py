"""A log file that falls back to the console when it cannot be written.

Node daemon availability: the node daemon must keep working (for
example answer a powercycle request) on a node whose system disk is failing.
It is locked in memory (mlockall), and its log messages go to the console
when the log file cannot be written, instead of being lost or stopping it.
"""

import io
import sys

from twisted.logger import ILogObserver, formatEventAsClassicLogText
from zope.interface import implementer

DEFAULT_CONSOLE = "/dev/console"


@implementer(ILogObserver)
class ConsoleFallbackObserver(object):
    """Write events to ``path``; on any I/O error write them to the console.

    The file is reopened after a failure on each later event, so logging
    returns to the file once the disk works again.  ``console`` is a path
    (default /dev/console) or a text stream; if even the console cannot be
    written, stderr is the last resort.
    """

    def __init__(self, path, console=DEFAULT_CONSOLE,
                 formatter=formatEventAsClassicLogText):
        self.path = path
        self.console = console
        self.formatter = formatter
        self._file = None
        self.failures = 0  # events that did not reach the file

    def _open(self):
        if self._file is None:
            self._file = io.open(self.path, "a", encoding="utf-8")
        return self._file

    def _write_console(self, text):
        try:
            if isinstance(self.console, str):
                with io.open(self.console, "a", encoding="utf-8") as f:
                    f.write(text)
            else:
                self.console.write(text)
                self.console.flush()
        except (OSError, ValueError):
            try:
                sys.__stderr__.write(text)
            except (OSError, ValueError, AttributeError):
                pass

    def __call__(self, event):
        text = self.formatter(event)
        if not text:
            return
        try:
            f = self._open()
            f.write(text)
            f.flush()
        except (OSError, ValueError) as err:
            self.failures += 1
            self._close()
            self._write_console("[log file %s unwritable: %s] %s"
                                % (self.path, err.strerror
                                   if hasattr(err, "strerror") else err,
                                   text))

    def _close(self):
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass
            self._file = None

    def close(self):
        self._close()
