"""Run the benchmarks: ``python -m bench`` runs all, ``python -m bench locks``
runs one (several names may be given)."""

import importlib
import sys

from twisted.internet import defer, task

#: name -> module; add new benchmarks here (e.g. "confd", "jobs")
BENCHMARKS = {
    "locks": "bench.locks",
    "jobs": "bench.jobs",
    "confd": "bench.confd",
    "rapi": "bench.rapi",
    "flood": "bench.flood",
    "config": "bench.config",
    "noded": "bench.noded",
    "htools": "bench.htools",
    "htools_alloc": "bench.htools_alloc",
    "failover": "bench.failover",
    "maintd": "bench.maintd",
    "scale": "bench.scale",
    "events": "bench.events",
}


@defer.inlineCallbacks
def _main(reactor, names):
    for name in names:
        module = importlib.import_module(BENCHMARKS[name])
        print("== bench %s ==" % name, flush=True)
        yield module.run(reactor)
        print(flush=True)


def main(argv):
    names = argv or list(BENCHMARKS)
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        print("unknown benchmark(s): %s; known: %s"
              % (", ".join(unknown), ", ".join(BENCHMARKS)), file=sys.stderr)
        return 2
    # One reactor run for all benchmarks: a reactor cannot be restarted
    task.react(_main, (names,))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
