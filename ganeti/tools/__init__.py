"""Stand-alone administration tools (not gnt-* sub-commands):
:mod:`~ganeti.tools.cluster_merge` (``cluster-merge``)."""
