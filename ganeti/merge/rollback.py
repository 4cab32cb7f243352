"""The merge's record of what it changed, and how to take it back.

Each step that changes something records its undo *before* it acts (a
step that fails half-way may have changed part of what it set out to:
its undo must cope with that).  On a failure the undos run newest first;
one that fails does not stop the others, and says what the admin must do
by hand instead.  An undo that is not critical (a watcher pause that ends
by itself) leaves the clusters as they were even when it fails.
"""

import attrs
from twisted.logger import Logger

log = Logger()


@attrs.define(eq=False)
class Undo:
    #: what it restores, for the report ("restart the master daemons ...")
    what: str
    #: ``action()`` -> awaitable
    action: object
    #: what the admin must do if it fails
    manual: str
    #: whether the clusters are as they were without it
    critical: bool = True


@attrs.frozen
class UndoFailure:
    what: str
    error: str
    manual: str
    critical: bool = True


class Journal(object):
    """The undos of the steps done so far, newest last."""

    def __init__(self, report):
        self.report = report
        self.undos = []

    def add(self, what, action, manual, critical=True):
        undo = Undo(what, action, manual, critical)
        self.undos.append(undo)
        return undo

    def drop(self, undo):
        """``undo`` is no longer needed (its step was ended forward)."""
        if undo in self.undos:
            self.undos.remove(undo)

    async def roll_back(self):
        """Run every undo, newest first; the list of those that failed."""
        failures = []
        while self.undos:
            undo = self.undos.pop()
            self.report("  Rollback: %s" % undo.what)
            try:
                await undo.action()
            except Exception as err:
                message = str(err) or type(err).__name__
                log.error("Rollback step failed: {what}: {message}",
                          what=undo.what, message=message)
                self.report("    FAILED: %s" % message)
                failures.append(UndoFailure(undo.what, message, undo.manual,
                                            undo.critical))
        return failures
