"""htools: cluster model, loaders, cluster score and balancer (hbal).

The model follows the semantics of Ganeti's htools so that a cluster read
from the same data scores exactly as Ganeti's tools score it.
"""
