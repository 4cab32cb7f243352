"""``extstorage_diagnose``: the ExtStorage providers of this node
(:mod:`ganeti.backend.extstorage`)."""

from ganeti.backend import extstorage
from ganeti.server.noded.procedure import procedure


class ExtStorageProcedures(object):
    """Mixed into NodeProcedures."""

    #: extra directories searched after ``<root>/srv/ganeti/extstorage``
    #: (``--extstorage-search-path``)
    extstorage_dirs = ()

    def extstorage_search_path(self):
        return (extstorage.default_search_path(self.paths.root)
                + list(self.extstorage_dirs))

    @procedure(blocking=True)
    def extstorage_diagnose(self):
        """Every provider in the search path: ``{"name", "path", "valid",
        "status", "parameters"}``."""
        return extstorage.diagnose(self.extstorage_search_path())
