"""OP_CLUSTER_POST_INIT: what runs once a new cluster's master is up.

As Ganeti's, it runs the post-phase hooks of ``cluster-init`` on the
master node: the executable files of ``<root>/etc/ganeti/hooks/
cluster-init-post.d`` whose names are made of letters, digits, ``_`` and
``-`` (as run-parts takes them), in name order, each with Ganeti's hook
environment (``GANETI_HOOKS_VERSION``, ``GANETI_HOOKS_PHASE=post``,
``GANETI_HOOKS_PATH=cluster-init``, ``GANETI_OP_CODE``,
``GANETI_OBJECT_TYPE=CLUSTER``, ``GANETI_CLUSTER``, ``GANETI_MASTER``,
``GANETI_OP_TARGET``, ``GANETI_DATA_DIR``).  A failing post hook is a
warning in the job's log, never a failure (the cluster exists already).
It warns too when the master is set to use Open vSwitch without a
physical link.  The result is True.
"""

import os
import re

from ganeti import constants
from ganeti import objects
from ganeti.backend import process
from ganeti.cmdlib.base import LogicalUnit

HOOKS_PATH = "cluster-init"
HOOKS_VERSION = 2
#: each hook may run this long (seconds), as Ganeti's hooks runner
HOOK_TIMEOUT = 3600
_HOOK_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


def hooks_dir(root, path, phase):
    """``<root>/etc/ganeti/hooks/<path>-<phase>.d``."""
    return os.path.join(root, "etc", "ganeti", "hooks",
                        "%s-%s.d" % (path, phase))


def hook_scripts(directory):
    """The hooks of ``directory`` that run, in order: executable regular
    files with run-parts names; a missing directory has none."""
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        full = os.path.join(directory, name)
        if (_HOOK_NAME.match(name) and os.path.isfile(full)
                and os.access(full, os.X_OK)):
            found.append(full)
    return found


class LUClusterPostInit(LogicalUnit):
    OP_ID = "OP_CLUSTER_POST_INIT"

    def check_arguments(self):
        cfg = self.cfg
        master = cfg.nodes.get(cfg.cluster.master_node)
        self.master = master
        ndparams = {}
        if master is not None:
            ndparams = objects.fill_ndparams(
                cfg.cluster, cfg.nodegroups.get(master.group), master)
        if ndparams.get(constants.ND_OVS) and \
                not ndparams.get(constants.ND_OVS_LINK):
            self.log_info("No physical interface for OpenvSwitch was given."
                          " OpenvSwitch will not have an outside connection."
                          " This might not be what you want.")

    def _env(self):
        cfg = self.cfg
        root = self.ctx.paths.root if self.ctx.paths is not None else "/"
        name = cfg.cluster.cluster_name
        return {
            "GANETI_HOOKS_VERSION": str(HOOKS_VERSION),
            "GANETI_HOOKS_PHASE": "post",
            "GANETI_HOOKS_PATH": HOOKS_PATH,
            "GANETI_OP_CODE": self.OP_ID,
            "GANETI_OBJECT_TYPE": "CLUSTER",
            "GANETI_DATA_DIR": os.path.join(root, "var", "lib", "ganeti"),
            "GANETI_CLUSTER": name,
            "GANETI_MASTER": self.master.name if self.master else "",
            "GANETI_OP_TARGET": name,
            "GANETI_POST_OP_TARGET": name,
        }

    async def exec_(self):
        root = self.ctx.paths.root if self.ctx.paths is not None else "/"
        scripts = hook_scripts(hooks_dir(root, HOOKS_PATH, "post"))
        runner = getattr(self.ctx, "runner", None) or \
            process.CommandRunner(self.ctx.clock)
        env = self._env()
        for script in scripts:
            result = await runner.run([script], env=env, cwd="/",
                                      timeout=HOOK_TIMEOUT)
            if result.failed:
                self.log_warning("Post hook of %s: %s", HOOKS_PATH,
                                 result.describe())
            else:
                self.log_info("Post hook %s of %s ran",
                              os.path.basename(script), HOOKS_PATH)
        return True
