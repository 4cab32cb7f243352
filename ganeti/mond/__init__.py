"""The monitoring daemon's data collectors (``ganeti-mond``).

:mod:`ganeti.mond.base` has the collector interface and the report object;
one module per collector; :mod:`ganeti.mond.daemon` runs them as the
cluster's ``data_collectors`` setting says and :mod:`ganeti.mond.web`
serves their reports over HTTP, as Ganeti's monitoring daemon does.
"""
