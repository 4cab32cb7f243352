"""Logical units that exist for testing: the job machinery (delays, dummy
opcodes, the job queue test of ``gnt-debug test-jobqueue``), the
transmission of secret OS parameters, and the instance allocators (what
they get and answer)."""

import json
import os
import shutil
import tempfile

from twisted.internet import defer
from twisted.internet import protocol
from twisted.internet import task
from twisted.internet.interfaces import IReactorUNIX
from twisted.logger import Logger

from ganeti import constants
from ganeti import errors
from ganeti import locking
from ganeti import opcodes
from ganeti.ht import REDACTED
from ganeti.cmdlib import allocation
from ganeti.cmdlib.base import LogicalUnit
from ganeti.iallocator import requests as ia_requests
from ganeti.jqueue import model as jq_model

log = Logger()

# What OP_TEST_JQUEUE tells its client (Ganeti's names): the log entry of
# type "jqueue-test" is ``[socket path, test, argument]``; the client
# connects to the socket, checks the job, and closes it.
JQT_EXPANDNAMES = "expandnames"
JQT_EXEC = "exec"
JQT_STARTMSG = "startmsg"
JQT_LOGMSG = "logmsg"
JQT_MSGPREFIX = "TESTMSG="
#: how long the client has to connect, then to close the socket (seconds)
JQT_CONNECT_TIMEOUT = 20.0
JQT_CONFIRM_TIMEOUT = 60.0


class LUTestDelay(LogicalUnit):
    """Sleep for ``duration`` seconds, ``repeat`` times (OP_TEST_DELAY).

    The sleep is a reactor delayed call, so other jobs run meanwhile; with
    ``no_locks`` false the named nodes are locked for the whole time, which is
    what lock tests use it for.
    """
    OP_ID = "OP_TEST_DELAY"

    def check_arguments(self):
        if self.op.duration < 0:
            raise errors.OpPrereqError("duration: must not be negative",
                                       errors.ECODE_INVAL)

    def expand_names(self):
        self.node_uuids = [self.expand_node(n) for n in self.op.on_nodes]
        if not self.op.no_locks and self.node_uuids:
            self.needed_locks[locking.LEVEL_NODE] = self.node_uuids

    async def exec_(self):
        rounds = max(1, self.op.repeat)
        for i in range(rounds):
            if self.op.repeat:
                self.log_info("Test delay iteration %d/%d", i + 1, rounds)
            if self.op.duration:
                await task.deferLater(self.ctx.clock, self.op.duration,
                                      lambda: None)
        return True


class LUTestAllocator(LogicalUnit):
    """OP_TEST_ALLOCATOR: the input document an allocator would get for a
    request of any type (direction "in"), or what an allocator answers to
    it, unchecked (direction "out"), as ``gnt-debug iallocator`` shows
    them.  Nothing is locked and nothing changes."""
    OP_ID = "OP_TEST_ALLOCATOR"

    def check_arguments(self):
        allocation.check_op_params(self.op)

    def check_prereq(self):
        op = self.op
        cfg = self.cfg
        mode = op.mode
        if mode == ia_requests.MODE_BALANCE:
            if op.group_name is not None:
                self.group_name = cfg.get_nodegroup(op.group_name).name
        elif mode in (ia_requests.MODE_ALLOC, ia_requests.MODE_MULTI_ALLOC,
                      ia_requests.MODE_CAPACITY):
            if mode != ia_requests.MODE_CAPACITY:
                for inst in cfg.instances.values():
                    if inst.name == op.name:
                        raise errors.OpPrereqError(
                            "Instance '%s' already in the cluster" % op.name,
                            errors.ECODE_EXISTS)
            for idx, row in enumerate(op.disks or []):
                if not (isinstance(row, dict) and
                        isinstance(row.get("size"), int) and
                        not isinstance(row.get("size"), bool) and
                        row.get("mode", constants.DISK_RDWR)
                        in constants.DISK_ACCESS_SET):
                    raise errors.OpPrereqError(
                        "disks/%d: expected {\"size\": MiB, \"mode\": \"rw\""
                        " or \"ro\"}, got %r" % (idx, row),
                        errors.ECODE_INVAL)
            for field in ("memory", "vcpus", "disk_template"):
                if getattr(op, field) is None:
                    raise errors.OpPrereqError(
                        "%s: required for %s requests" % (field, mode),
                        errors.ECODE_INVAL)
        elif mode in (ia_requests.MODE_RELOC,
                      ia_requests.MODE_ALLOC_SECONDARY):
            self.instance = cfg.get_instance(op.name)
            if not self.instance.primary_node:
                raise errors.OpPrereqError(
                    "name: instance %s has no node" % op.name,
                    errors.ECODE_STATE)
        else:
            if not op.instances:
                raise errors.OpPrereqError("instances: missing (%s requests"
                                           " name the instances)" % mode,
                                           errors.ECODE_INVAL)
            self.instance_names = [cfg.get_instance(n).name
                                   for n in op.instances]
            self.target_groups = [cfg.get_nodegroup(g).uuid
                                  for g in op.target_groups or []]
        self.request = self._request()
        if op.direction == "out":
            names = allocation.allocator_names(
                cfg, mode, allocation.explicit_allocator(op))
            if not names:
                raise errors.OpPrereqError(
                    "iallocator: missing allocator name (and no default"
                    " allocator for %s requests)" % mode, errors.ECODE_INVAL)
            self.allocator = names[0]

    def _alloc_request(self, name):
        op = self.op
        disks = [{"size": d["size"], "mode": d.get("mode",
                                                   constants.DISK_RDWR)}
                 for d in op.disks or []]
        return ia_requests.AllocateRequest(
            name=name, disk_template=op.disk_template, memory=op.memory,
            vcpus=op.vcpus, disks=disks,
            hypervisor=op.hypervisor or self.cfg.cluster.default_hypervisor,
            os=op.os or "", tags=list(op.tags), nics=list(op.nics or []),
            spindle_use=op.spindle_use, group_name=op.group_name)

    def _request(self):
        op = self.op
        cfg = self.cfg
        mode = op.mode
        if mode == ia_requests.MODE_ALLOC:
            return self._alloc_request(op.name)
        if mode == ia_requests.MODE_MULTI_ALLOC:
            return ia_requests.MultiAllocateRequest(instances=[
                self._alloc_request("%s%d" % (op.name, idx))
                for idx in range(op.count)])
        if mode == ia_requests.MODE_RELOC:
            inst = self.instance
            disks = cfg.instance_disks(inst)
            source = list(inst.secondary_nodes) if any(
                d.dev_type in constants.DTS_INT_MIRROR for d in disks) \
                else [inst.primary_node]
            return allocation.relocate_request(cfg, inst, source)
        if mode == ia_requests.MODE_BALANCE:
            return ia_requests.BalanceRequest(
                max_moves=op.max_moves,
                group=(self.group_name if op.group_name is not None
                       else None),
                disk_moves=op.disk_moves is not False,
                evac_mode=bool(op.balance_evac))
        if mode == ia_requests.MODE_CAPACITY:
            return ia_requests.CapacityRequest(
                disk_template=op.disk_template, memory=op.memory,
                vcpus=op.vcpus, spindle_use=op.spindle_use, name=op.name,
                disks=[{"size": d["size"],
                        "mode": d.get("mode", constants.DISK_RDWR)}
                       for d in op.disks or []],
                hypervisor=(op.hypervisor or
                            self.cfg.cluster.default_hypervisor))
        if mode == ia_requests.MODE_ALLOC_SECONDARY:
            return ia_requests.AllocateSecondaryRequest(
                name=self.instance.name,
                primary=cfg.get_node(self.instance.primary_node).name)
        if mode == ia_requests.MODE_NODE_EVAC:
            return ia_requests.NodeEvacuateRequest(
                instances=self.instance_names,
                evac_mode=op.evac_mode or "all")
        return ia_requests.ChangeGroupRequest(
            instances=self.instance_names, target_groups=self.target_groups)

    def _hypervisor(self):
        request = self.request
        if isinstance(request, (ia_requests.AllocateRequest,
                                ia_requests.CapacityRequest)):
            return request.hypervisor
        if self.op.mode == ia_requests.MODE_RELOC:
            return self.instance.hypervisor
        return None

    async def exec_(self):
        if self.op.direction == "in":
            data = await allocation.input_data(self, self.request,
                                               self._hypervisor())
            return json.dumps(data, indent=2, sort_keys=True)
        return await allocation.run_for_test(
            self, self.request, self.allocator, self.op.iallocator_params,
            self._hypervisor())


class LUTestDummy(LogicalUnit):
    """OP_TEST_DUMMY: logs each of ``messages`` into the job, fails with
    OpExecError when ``fail`` is true, submits ``submit_jobs`` (a list of
    jobs, each a list of opcodes), and returns ``result``; with jobs
    submitted the result is ``{"jobs": [[true, job id] or [false, error],
    ...], "result": result}``."""
    OP_ID = "OP_TEST_DUMMY"

    def check_arguments(self):
        op = self.op
        messages = op.messages
        if messages is not None and not (
                isinstance(messages, list) and
                all(isinstance(m, str) for m in messages)):
            raise errors.OpPrereqError(
                "messages: expected a list of strings, got %s"
                % type(messages).__name__, errors.ECODE_INVAL)
        self.jobs = []
        if op.submit_jobs:
            if not isinstance(op.submit_jobs, list):
                raise errors.OpPrereqError(
                    "submit_jobs: expected a list of jobs (lists of"
                    " opcodes), got %s" % type(op.submit_jobs).__name__,
                    errors.ECODE_INVAL)
            for idx, job in enumerate(op.submit_jobs):
                if not isinstance(job, list) or not job:
                    raise errors.OpPrereqError(
                        "submit_jobs[%d]: expected a non-empty list of"
                        " opcodes" % idx, errors.ECODE_INVAL)
                ops = []
                for opidx, data in enumerate(job):
                    if isinstance(data, opcodes.OpCode):
                        ops.append(data)
                        continue
                    try:
                        ops.append(opcodes.OpCode.from_dict(data))
                    except errors.GenericError as err:
                        raise errors.OpPrereqError(
                            "submit_jobs[%d][%d]: %s"
                            % (idx, opidx, err.args[0] if err.args
                               else err), errors.ECODE_INVAL)
                self.jobs.append(ops)

    async def exec_(self):
        op = self.op
        for msg in op.messages or []:
            self.log_info("%s", msg)
        if op.fail:
            raise errors.OpExecError("Opcode failure was requested")
        if self.jobs:
            submitted = await self.submit_jobs(self.jobs)
            return {"jobs": submitted, "result": op.result}
        return op.result


class _Accepting(protocol.Protocol):
    """The client's connection to a notification socket."""

    def connectionMade(self):
        self.factory.connected.callback(self)

    def connectionLost(self, reason=None):
        if not self.factory.closed.called:
            self.factory.closed.callback(None)


class _NotifyFactory(protocol.ServerFactory):
    protocol = _Accepting

    def __init__(self):
        self.connected = defer.Deferred()
        self.closed = defer.Deferred()

    def buildProtocol(self, addr):
        if self.connected.called:
            return None     # one client only
        return protocol.ServerFactory.buildProtocol(self, addr)


class LUTestJqueue(LogicalUnit):
    """OP_TEST_JQUEUE, what ``gnt-debug test-jobqueue`` runs: each step
    (``notify_waitlock``: while the job waits for its locks, i.e. before
    they are asked for; ``notify_exec``: while it runs) and each of
    ``log_messages`` is announced to the client by a "jqueue-test" log
    entry naming a UNIX socket; the opcode waits until the client has
    connected to it (and looked at the job) and closed it.  The messages
    themselves are logged with the prefix ``TESTMSG=``.  With ``fail`` the
    opcode fails at the end.  The master node is locked (shared)."""
    OP_ID = "OP_TEST_JQUEUE"

    def _reactor(self):
        clock = self.ctx.clock
        if IReactorUNIX.providedBy(clock):
            return clock
        from twisted.internet import reactor
        return reactor

    async def _notify(self, errcls, test, arg):
        tmpdir = tempfile.mkdtemp(prefix="jqueue-test-")
        path = os.path.join(tmpdir, "sock")
        factory = _NotifyFactory()
        try:
            port = self._reactor().listenUNIX(path, factory)
        except Exception:
            shutil.rmtree(tmpdir, ignore_errors=True)
            raise
        clock = self.ctx.clock
        conn = None
        try:
            self._feedback([path, test, arg], type=jq_model.ELOG_JQUEUE_TEST)
            try:
                conn = await factory.connected.addTimeout(
                    JQT_CONNECT_TIMEOUT, clock)
            except defer.TimeoutError:
                raise errcls("Client didn't connect in time (%s s) to %s"
                             % (JQT_CONNECT_TIMEOUT, path))
        finally:
            # no other client may come
            await defer.maybeDeferred(port.stopListening)
            shutil.rmtree(tmpdir, ignore_errors=True)
        try:
            await factory.closed.addTimeout(JQT_CONFIRM_TIMEOUT, clock)
        except defer.TimeoutError:
            raise errcls("Client failed to confirm notification (did not"
                         " close the socket in %s s)" % JQT_CONFIRM_TIMEOUT)
        finally:
            if conn.transport is not None and not factory.closed.called:
                conn.transport.loseConnection()

    async def expand_names(self):
        if self.op.notify_waitlock:
            await self._notify(errors.OpPrereqError, JQT_EXPANDNAMES, None)
        self.log_info("Expanding names")
        master = self.cfg.cluster.master_node
        if master:
            self.needed_locks[locking.LEVEL_NODE] = [master]
            self.share_locks[locking.LEVEL_NODE] = True

    async def exec_(self):
        op = self.op
        if op.notify_exec:
            await self._notify(errors.OpExecError, JQT_EXEC, None)
        self.log_info("Executing")
        if op.log_messages:
            await self._notify(errors.OpExecError, JQT_STARTMSG,
                               len(op.log_messages))
            for idx, msg in enumerate(op.log_messages):
                self.log_info("Sending log message %s", idx + 1)
                self._feedback(JQT_MSGPREFIX + msg)
                await self._notify(errors.OpExecError, JQT_LOGMSG, idx + 1)
        if op.fail:
            raise errors.OpExecError("Opcode failure was requested")
        return True


class LUTestOsParams(LogicalUnit):
    """OP_TEST_OS_PARAMS: receives secret OS parameters, as an instance
    creation would, and reports which arrived; their values never reach
    the job's log or result (they show as ``<redacted>``).  Without any
    the opcode fails."""
    OP_ID = "OP_TEST_OS_PARAMS"

    async def exec_(self):
        params = self.op.osparams_secret
        if not params:
            raise errors.OpExecError("Opcode needs secret parameters")
        self.log_info("Secret OS parameters: %s",
                      {name: REDACTED for name in sorted(params)})
        return None
