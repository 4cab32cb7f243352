"""The maintenance daemon (docs/maintd.rst): incidents reported by the
nodes' self-diagnosis, their repairs, balancing, in rounds of jobs."""
