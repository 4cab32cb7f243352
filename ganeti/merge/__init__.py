"""The cluster merger: other clusters join this one (docs/merger.rst).

* :mod:`~ganeti.merge.configmerge`: the checks and the merge of the
  configurations themselves (no network, no files);
* :mod:`~ganeti.merge.rollback`: the record of what was done and how to
  undo it;
* :mod:`~ganeti.merge.flow`: the merge step by step, over the node daemons
  of every cluster and this master's luxi socket;
* :mod:`ganeti.tools.cluster_merge`: the ``cluster-merge`` command.

The node daemons' side is :mod:`ganeti.server.noded.merge`.
"""
