"""Benchmarks, run with ``python -m bench [name ...]`` (or ``tox -e bench``).

Each benchmark is a module of this package with a ``run(reactor)`` function
returning a Deferred; it measures real time with the real reactor and prints
a plain text table.  Register new modules in ``bench.__main__.BENCHMARKS``.
"""
