"""OP_OOB_COMMAND: out-of-band management of nodes (``gnt-node power``,
``gnt-node health``), the building block of fencing.

A node's out-of-band program (the ``oob_program`` node parameter,
inherited from the cluster and the node group) runs on the master as
``PROGRAM COMMAND NODE_NAME``; ``power-status`` prints ``{"powered":
BOOL}``, ``health`` a list of ``[item, status]`` pairs, the others print
nothing; a non-zero exit or a timeout is a failure.  As Ganeti does, it
refuses to power off or cycle the master, and to power off a node that
is not marked offline; ``power-on`` and ``power-off`` record the node's
``powered`` state.

The program runs as the master daemon's user, so only programs inside the
out-of-band directory (``/etc/ganeti/oob`` under the root) run: a node
parameter cannot make the master execute an arbitrary file.
"""

import json
import os

from twisted.internet import task

from ganeti import constants
from ganeti import errors
from ganeti import locking
from ganeti import objects
from ganeti.backend import process
from ganeti.cmdlib.base import LogicalUnit

POWER_ON = "power-on"
POWER_OFF = "power-off"
POWER_CYCLE = "power-cycle"
POWER_STATUS = "power-status"
HEALTH = "health"

#: query result statuses (Ganeti's RS_*)
RS_NORMAL = 0
RS_UNAVAIL = 2

HEALTH_STATUSES = ("OK", "WARNING", "CRITICAL", "UNKNOWN")


def oob_program(cfg, node):
    """The node's out-of-band program ("" when none)."""
    return objects.fill_ndparams(cfg.cluster, cfg.nodegroups.get(node.group),
                                 node).get(constants.ND_OOB_PROGRAM) or ""


def allowed_program(paths, program):
    """The program's real path if it may run (inside the out-of-band
    directory), else raise OpPrereqError saying why."""
    if not os.path.isabs(program):
        raise errors.OpPrereqError(
            "Out-of-band program %r must be an absolute path" % program,
            errors.ECODE_INVAL)
    base = os.path.realpath(paths.oob_dir)
    real = os.path.realpath(program)
    if os.path.commonpath([base, real]) != base:
        raise errors.OpPrereqError(
            "Out-of-band program %s is not inside %s, the only directory"
            " out-of-band programs run from" % (program, paths.oob_dir),
            errors.ECODE_INVAL)
    if not os.access(real, os.X_OK):
        raise errors.OpPrereqError(
            "Out-of-band program %s is not an executable file" % program,
            errors.ECODE_ENVIRON)
    return real


def check_output(command, stdout):
    """The command's data from its output, or raise OpExecError."""
    text = stdout.decode("utf-8", "replace").strip()
    if command in (POWER_ON, POWER_OFF, POWER_CYCLE):
        if text:
            raise errors.OpExecError("%s should print nothing, printed %r"
                                     % (command, text[:200]))
        return None
    try:
        data = json.loads(text)
    except ValueError:
        raise errors.OpExecError("%s printed no JSON: %r"
                                 % (command, text[:200]))
    if command == POWER_STATUS:
        if not isinstance(data, dict) or \
                not isinstance(data.get("powered"), bool):
            raise errors.OpExecError('power-status must print {"powered":'
                                     ' true|false}, printed %r' % text[:200])
        return data
    if not isinstance(data, list) or not all(
            isinstance(x, list) and len(x) == 2 and x[1] in HEALTH_STATUSES
            for x in data):
        raise errors.OpExecError("health must print a list of [item,"
                                 " status] pairs (status one of %s),"
                                 " printed %r" % (", ".join(HEALTH_STATUSES),
                                                  text[:200]))
    return data


class LUOobCommand(LogicalUnit):
    OP_ID = "OP_OOB_COMMAND"

    def expand_names(self):
        cfg = self.cfg
        if self.op.node_names:
            self.node_uuids = [self.expand_node(n) for n in
                               self.op.node_names]
        else:
            self.node_uuids = sorted(
                cfg.nodes, key=lambda u: cfg.nodes[u].name)
        self.needed_locks[locking.LEVEL_NODE] = list(self.node_uuids)

    def check_prereq(self):
        cfg = self.cfg
        op = self.op
        master = cfg.master_node
        self.work = []
        for uuid in self.node_uuids:
            node = cfg.nodes[uuid]
            if op.command in (POWER_OFF, POWER_CYCLE) and \
                    master is not None and uuid == master.uuid:
                raise errors.OpPrereqError(
                    "Operating on the master node %s is not allowed"
                    % node.name, errors.ECODE_INVAL)
            if op.command == POWER_OFF and not node.offline and \
                    not op.ignore_status:
                raise errors.OpPrereqError(
                    "Cannot power off node %s because it is not marked"
                    " offline" % node.name, errors.ECODE_STATE)
            program = oob_program(cfg, node)
            if not program:
                if op.node_names:
                    raise errors.OpPrereqError(
                        "Node %s has no out-of-band program (ndparams %s)"
                        % (node.name, constants.ND_OOB_PROGRAM),
                        errors.ECODE_STATE)
                continue  # "all nodes": those that have one
            self.work.append((node, allowed_program(self.ctx.paths,
                                                    program)))

    def _runner(self):
        runner = getattr(self.ctx, "runner", None)
        if runner is None:
            runner = process.CommandRunner(self.ctx.clock)
        return runner

    async def exec_(self):
        op = self.op
        runner = self._runner()
        result = []
        first = True
        for node, program in self.work:
            if op.command == POWER_ON and not first and op.power_delay > 0:
                # not every node at once: their power supplies
                await task.deferLater(self.ctx.clock, op.power_delay,
                                      lambda: None)
            first = False
            self.log_info("Running %s on node %s", op.command, node.name)
            res = await runner.run([program, op.command, node.name],
                                   timeout=op.timeout)
            row = [[RS_NORMAL, node.name]]
            try:
                if res.failed:
                    raise errors.OpExecError(res.describe())
                data = check_output(op.command, res.stdout)
            except errors.OpExecError as err:
                self.log_warning("Out-of-band %s of node %s: %s", op.command,
                                 node.name, err)
                row.append([RS_UNAVAIL, str(err)])
                result.append(row)
                continue
            if op.command == POWER_ON:
                self.cfg.set_node_params(node.uuid, powered=True)
            elif op.command == POWER_OFF:
                self.cfg.set_node_params(node.uuid, powered=False)
            elif op.command == POWER_STATUS:
                self.cfg.set_node_params(node.uuid, powered=data["powered"])
            row.append([RS_NORMAL, data if data is not None else True])
            result.append(row)
        return result
