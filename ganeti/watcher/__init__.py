"""Self-healing: the watcher and auto-repair.

:mod:`~ganeti.watcher.watcher` decides and submits the jobs of one watcher
pass, :mod:`~ganeti.watcher.state` keeps its per-group memory (restart
counters, node boot ids), :mod:`~ganeti.watcher.pause` the cluster-wide
pause, :mod:`~ganeti.watcher.probes` checks this node's daemons, and
:mod:`~ganeti.watcher.service` is the ``ganeti-watcher`` twistd plugin
(docs/watcher.rst).  Auto-repair is in :mod:`~ganeti.watcher.autorepair`
(docs/autorepair.rst); the master's node checks in
:mod:`~ganeti.watcher.nodehealth`.
"""
