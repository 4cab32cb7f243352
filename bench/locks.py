"""Lock benchmarks: ganeti.locking with the real reactor and real time.

(a) uncontended acquire/release pairs per second, against a baseline of a
    bare Deferred create + addCallback + callback loop measured in the same
    run;
(b) 64 jobs x 200 operations on random 1-4 of 256 instance locks, held for
    0 ms (one reactor turn) or 1 ms: throughput and acquire latency;
(c) one job taking the whole set exclusively (retry with growing timeouts,
    and for comparison a plain blocking acquire) while 63 jobs keep taking
    single locks: how long the big job waits and how many small
    acquisitions stall.
"""

import random
import time

from twisted.internet import defer, task
from twisted.logger import globalLogPublisher

from bench.stats import percentile
from bench.table import table
from ganeti import locking

SEED = 20261121
N_LOCKS = 256
N_JOBS = 64
OPS_PER_JOB = 200
STALL = 0.050  # seconds: a small acquisition waiting longer has stalled
# Scaled-down retry series so (c) completes quickly: 10 ms, x1.5, <= 100 ms
BENCH_TIMEOUTS = locking.retry_timeouts(start=0.01, factor=1.5, cap=0.1,
                                        total=1.0)

NAMES = ["inst%03d" % i for i in range(N_LOCKS)]


def _noop(result):
    return result


def _best_rate(loop, n, repeat=3):
    best = 0.0
    for _ in range(repeat):
        start = time.perf_counter()
        loop(n)
        best = max(best, n / (time.perf_counter() - start))
    return best


# (a) uncontended

def _baseline(n):
    for _ in range(n):
        d = defer.Deferred()
        d.addCallback(_noop)
        d.callback(True)


def _lock_loop(lock, shared):
    def loop(n):
        acquire = lock.acquire
        release = lock.release
        for _ in range(n):
            acquire("job", shared).addCallback(_noop)
            release("job")
    return loop


def _lockset_loop(lockset, shared):
    def loop(n):
        acquire = lockset.acquire
        release = lockset.release
        for _ in range(n):
            acquire(NAMES[7], "job", shared).addCallback(_noop)
            release("job")
    return loop


def bench_uncontended(reactor, n=50000):
    baseline = _best_rate(_baseline, n)
    lock = locking.SharedLock("bench", reactor)
    lockset = locking.LockSet(NAMES, "instance", reactor)
    rows = [("baseline: Deferred+callback", baseline)]
    rows.append(("SharedLock exclusive", _best_rate(_lock_loop(lock, False),
                                                    n)))
    rows.append(("SharedLock shared", _best_rate(_lock_loop(lock, True), n)))
    rows.append(("LockSet 1 name exclusive",
                 _best_rate(_lockset_loop(lockset, False), n)))
    rows.append(("LockSet 1 name shared",
                 _best_rate(_lockset_loop(lockset, True), n)))
    print("(a) uncontended acquire+release pairs (best of 3 x %d)" % n)
    table(["what", "pairs/s", "vs baseline"],
           [(what, "%.0f" % rate, "%.2fx" % (rate / baseline))
            for what, rate in rows])
    return baseline


# (b) contended random operations

@defer.inlineCallbacks
def _random_job(reactor, lockset, job_id, ops, hold, latencies):
    rng = random.Random(SEED * 1000 + job_id)
    for i in range(ops):
        wanted = rng.sample(NAMES, rng.randint(1, 4))
        shared = i % 2 == 0
        start = time.perf_counter()
        yield lockset.acquire(wanted, job_id, shared)
        latencies.append(time.perf_counter() - start)
        yield task.deferLater(reactor, hold, _noop, None)
        lockset.release(job_id)


@defer.inlineCallbacks
def bench_contended(reactor, baseline):
    rows = []
    for hold in (0.0, 0.001):
        lockset = locking.LockSet(NAMES, "instance", reactor)
        latencies = []
        start = time.perf_counter()
        yield defer.gatherResults(
            [_random_job(reactor, lockset, job, OPS_PER_JOB, hold, latencies)
             for job in range(N_JOBS)], consumeErrors=True)
        elapsed = time.perf_counter() - start
        ops = len(latencies)
        label = "%g ms" % (hold * 1000) if hold else "0 (1 turn)"
        rows.append((label, ops, "%.2f" % elapsed,
                     "%.0f" % (ops / elapsed),
                     "%.3f" % (percentile(latencies, 50) * 1000),
                     "%.3f" % (percentile(latencies, 99) * 1000),
                     "%.3fx" % (ops / elapsed / baseline)))
    print("(b) %d jobs x %d ops, each op 1-4 random of %d locks, half shared"
          % (N_JOBS, OPS_PER_JOB, N_LOCKS))
    table(["hold", "ops", "seconds", "jobs/s (ops/s)", "p50 acquire ms",
            "p99 acquire ms", "vs baseline"], rows)


# (c) one job wants everything

@defer.inlineCallbacks
def _small_job(reactor, lockset, job_id, stop, latencies):
    rng = random.Random(SEED * 1000 + job_id)
    while not stop:
        name = rng.choice(NAMES)
        start = time.perf_counter()
        yield lockset.acquire(name, job_id, shared=rng.random() < 0.5)
        latencies.append(time.perf_counter() - start)
        yield task.deferLater(reactor, 0.001, _noop, None)
        lockset.release(job_id)


@defer.inlineCallbacks
def _big_job(reactor, lockset, with_retries, stop):
    yield task.deferLater(reactor, 0.1, _noop, None)  # let small jobs run
    start = time.perf_counter()
    if with_retries:
        yield lockset.acquire_with_retries(locking.ALL_SET, "big",
                                           timeouts=BENCH_TIMEOUTS)
    else:
        yield lockset.acquire(locking.ALL_SET, "big")
    waited = time.perf_counter() - start
    yield task.deferLater(reactor, 0.001, _noop, None)
    lockset.release("big")
    yield task.deferLater(reactor, 0.05, _noop, None)  # small jobs recover
    stop.append(True)
    return waited


@defer.inlineCallbacks
def bench_all_set(reactor):
    rows = []
    for with_retries in (True, False):
        lockset = locking.LockSet(NAMES, "instance", reactor)
        stop = []
        latencies = []
        timeouts = []

        def observe(event):
            # Count the big job's failed attempts from the module's log
            if (event.get("log_namespace") == "ganeti.locking"
                    and event.get("owner") == "big"
                    and "attempt" in event):
                timeouts.append(event["attempt"])
        globalLogPublisher.addObserver(observe)
        try:
            small = [_small_job(reactor, lockset, job, stop, latencies)
                     for job in range(1, N_JOBS)]
            waited = yield _big_job(reactor, lockset, with_retries, stop)
            yield defer.gatherResults(small, consumeErrors=True)
        finally:
            globalLogPublisher.removeObserver(observe)
        stalled = sum(1 for lat in latencies if lat > STALL)
        rows.append(("retries %s" % (BENCH_TIMEOUTS[:3],) if with_retries
                     else "blocking", "%.1f" % (waited * 1000),
                     len(timeouts) if with_retries else "-",
                     stalled, len(latencies),
                     "%.1f" % (max(latencies) * 1000)))
    print("(c) 1 job acquires ALL_SET (%d locks) exclusively; %d jobs take"
          " single random locks (hold 1 ms)" % (N_LOCKS, N_JOBS - 1))
    table(["big job", "big waited ms", "timed-out attempts",
            "small stalled >%d ms" % (STALL * 1000), "small total",
            "small max ms"], rows)


@defer.inlineCallbacks
def run(reactor):
    started = time.perf_counter()
    baseline = bench_uncontended(reactor)
    print()
    yield bench_contended(reactor, baseline)
    print()
    yield bench_all_set(reactor)
    print()
    print("seed %d; retry timeouts in (c): %s; total %.1f s"
          % (SEED, ", ".join("%g" % t for t in BENCH_TIMEOUTS),
             time.perf_counter() - started))
