"""Job queue benchmark: persisted jobs per second, with the real reactor.

(1) baseline: N_JOBS ``atomic_write`` calls (temp file, fsync,
    rename, fsync of the directory) of a finished job's JSON, in the same
    run and on the same file system;
(2) N_JOBS ``OP_TEST_DELAY(duration=0)`` jobs from N_CLIENTS concurrent
    clients: each client submits a job, waits for it with
    WaitForJobChange until it is finalized, and submits the next.  The
    executor completes the opcode at once (notify_running, then success).
    Reported: jobs/s from first submit to last success, p50/p99 of the
    submit latency and of submit -> success, and the ratio to (1).

Two kinds of clients run (2), one after the other in the same run:

* :class:`InProcessClient` objects call a JobQueue in this process
  directly, with an executor finishing each opcode at once;
* :class:`ganeti.luxi.LuxiClient` objects, one connection each, talk to a
  real ``ganeti-masterd`` process (a one-node VirtualCluster under a short
  /tmp path, started with ``python -m twisted``): luxi framing, opcode
  validation, the opcode processor with its locks and LU, persisted jobs.

The last column compares each row with the in-process clients' rate.
"""

import os
import random
import shutil
import tempfile
import time

from twisted.internet import defer, task

from bench.stats import percentile
from bench.table import table
from ganeti import constants
from ganeti import jqueue
from ganeti import luxi
from ganeti import opcodes
from ganeti.utils.io import atomic_write
from ganeti.utils.writer import OrderedWriter
from ganeti.jqueue.store import encode_job
from ganeti.dev.vcluster import VirtualCluster

N_JOBS = 2000
N_CLIENTS = 20
OP = {"OP_ID": "OP_TEST_DELAY", "duration": 0.0, "on_master": True,
      "on_nodes": [], "repeat": 0, "priority": 0, "depends": None,
      "dry_run": False, "debug_level": 0, "comment": None, "reason": []}


def _sample_job_bytes():
    """A finished OP_TEST_DELAY job as the queue writes it."""
    ts = jqueue.split_time(time.time())
    op = jqueue.QueuedOpCode(input=opcodes.from_dict(OP), status="success",
                             start_timestamp=ts, exec_timestamp=ts,
                             end_timestamp=ts)
    job = jqueue.QueuedJob(id=1, ops=[op], received_timestamp=ts,
                           start_timestamp=ts, end_timestamp=ts)
    return encode_job(job)


def baseline(directory, count):
    """Seconds for ``count`` atomic writes of a job-sized file."""
    data = _sample_job_bytes()
    start = time.perf_counter()
    for i in range(count):
        atomic_write(os.path.join(directory, "job-%d" % i), data, 0o640)
    return time.perf_counter() - start


class ImmediateExecutor(object):
    """Runs OP_TEST_DELAY(duration=0): running, then success at once."""

    def execute(self, job, op_index, op_input, feedback_fn):
        feedback_fn.notify_running()
        return defer.succeed(None)


class InProcessClient(object):
    """The two luxi calls a job-submitting client makes, in process."""

    def __init__(self, queue):
        self._queue = queue

    def submit_job(self, ops):
        # luxi's server loads the opcodes before the queue sees them
        return self._queue.submit_job([opcodes.from_dict(op) for op in ops])

    def wait_for_job_change(self, job_id, fields, prev_info, prev_serial,
                            timeout):
        return self._queue.wait_for_job_change(job_id, fields, prev_info,
                                               prev_serial, timeout)


async def _client(client, count, submit_lat, total_lat, errors_seen):
    for _ in range(count):
        start = time.perf_counter()
        job_id = await client.submit_job([dict(OP)])
        submitted = time.perf_counter()
        submit_lat.append(submitted - start)
        prev = None
        while True:
            # as gnt-* clients do: wait for "status" to change until final
            answer = await client.wait_for_job_change(job_id, ["status"],
                                                      prev, None, 60)
            if answer == jqueue.JOB_NOTCHANGED:
                continue
            prev = answer[0]
            if prev[0] in jqueue.FINALIZED:
                break
        if prev[0] != jqueue.STATUS_SUCCESS:
            errors_seen.append((job_id, prev[0]))
        total_lat.append(time.perf_counter() - start)


async def run_clients(make_client, n_jobs, n_clients):
    """Drive ``n_clients`` clients submitting ``n_jobs`` jobs in total."""
    submit_lat, total_lat, errors_seen = [], [], []
    per_client = n_jobs // n_clients
    start = time.perf_counter()
    await defer.gatherResults([
        defer.Deferred.fromCoroutine(_client(make_client(), per_client,
                                             submit_lat, total_lat,
                                             errors_seen))
        for _ in range(n_clients)], consumeErrors=True)
    elapsed = time.perf_counter() - start
    if errors_seen:
        raise RuntimeError("jobs did not succeed: %r" % errors_seen[:5])
    return elapsed, submit_lat, total_lat


async def in_process(reactor, directory, n_jobs, n_clients):
    # the master daemon's writer: one thread, group commit of job files
    writer = OrderedWriter(reactor)
    writer.startService()
    queue = jqueue.JobQueue(directory, ImmediateExecutor(), clock=reactor,
                            max_running=20, writer=writer)
    queue.load()
    try:
        return await run_clients(lambda: InProcessClient(queue), n_jobs,
                                 n_clients)
    finally:
        await queue.shutdown()
        await writer.stopService()
        if writer.batches:
            print("in-process: %d files in %d group commits (%.1f per"
                  " commit)" % (writer.batched_items, writer.batches,
                                writer.batched_items / writer.batches))


async def _wait_for_master(reactor, proc, path, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("ganeti-masterd exited with %s"
                               % proc.returncode)
        client = luxi.LuxiClient(reactor, path, timeout=5)
        try:
            await client.query_config_values(["cluster_name"])
            return
        except luxi.NoMasterError:
            pass
        finally:
            await client.close()
        await task.deferLater(reactor, 0.05, lambda: None)
    raise RuntimeError("ganeti-masterd did not answer on %s within %ss"
                       % (path, timeout))


async def luxi_masterd(reactor, directory, n_jobs, n_clients):
    """The clients as luxi connections to a real master daemon process
    (``directory`` is not used: the queue is the master's)."""
    # short: the master's socket path must fit in 108 bytes
    base = tempfile.mkdtemp(prefix="bench-j-", dir="/tmp")
    vc = VirtualCluster(os.path.join(base, "vc"), node_count=1)
    vc.master.ip = "127.%d.%d.%d" % (random.randint(1, 254),
                                     random.randint(1, 254),
                                     random.randint(2, 254))
    clients = []

    def make_client():
        client = luxi.LuxiClient(reactor, vc.master.paths.master_socket,
                                 timeout=120)
        clients.append(client)
        return client
    try:
        vc.create(hypervisors=(constants.HT_FAKE,))
        proc = vc.start("masterd", vc.twistd_command("ganeti-masterd",
                                                     vc.master))
        await _wait_for_master(reactor, proc, vc.master.paths.master_socket)
        return await run_clients(make_client, n_jobs, n_clients)
    finally:
        for client in clients:
            await client.close()
        vc.stop_all()
        shutil.rmtree(base, ignore_errors=True)


#: (label, coroutine function(reactor, queue dir, jobs, clients))
_CLIENT_KINDS = [
    ("in-process clients", in_process),
    ("luxi clients, real masterd", luxi_masterd),
]


async def _run(reactor):
    top = tempfile.mkdtemp(prefix="bench-jobs-")
    try:
        base_dir = os.path.join(top, "baseline")
        os.makedirs(base_dir)
        base_time = baseline(base_dir, N_JOBS)
        base_rate = N_JOBS / base_time
        rows = [("baseline: atomic_write x%d" % N_JOBS,
                 "%.0f writes/s" % base_rate, "-", "-", "1.00", "-")]
        in_process_rate = None
        for label, fn in _CLIENT_KINDS:
            queue_dir = os.path.join(top, label.replace(" ", "-"), "queue")
            os.makedirs(queue_dir)
            elapsed, submit_lat, total_lat = await fn(reactor, queue_dir,
                                                      N_JOBS, N_CLIENTS)
            rate = N_JOBS / elapsed
            if in_process_rate is None:
                in_process_rate = rate
            rows.append((
                "%d jobs, %d %s" % (N_JOBS, N_CLIENTS, label),
                "%.0f jobs/s" % rate,
                "%.2f / %.2f ms" % (percentile(submit_lat, 50) * 1000,
                                    percentile(submit_lat, 99) * 1000),
                "%.2f / %.2f ms" % (percentile(total_lat, 50) * 1000,
                                    percentile(total_lat, 99) * 1000),
                "%.2f" % (rate / base_rate),
                "%.2f" % (rate / in_process_rate)))
        table(["what", "rate", "submit p50/p99", "submit->success p50/p99",
                "ratio to baseline", "ratio to in-process"], rows)
    finally:
        shutil.rmtree(top, ignore_errors=True)


def run(reactor):
    return defer.Deferred.fromCoroutine(_run(reactor))
