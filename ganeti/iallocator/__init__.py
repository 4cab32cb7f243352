"""Instance allocators: who decides where instances go.

Ganeti's iallocator protocol is a JSON document in (the cluster as the
master sees it, plus one request) and a JSON document out (``success``,
``info``, ``result``).  This package speaks it on the master's side:

* :mod:`~ganeti.iallocator.requests`: the request types (allocate,
  multi-allocate, relocate, change-group, node-evacuate,
  allocate-secondary, and the added balance and capacity) and how each
  one's answer is checked;
* :mod:`~ganeti.iallocator.cluster_data`: the input document, built from
  the configuration and what the nodes report;
* :mod:`~ganeti.iallocator.allocators`: the allocators themselves, external
  scripts found on the search path (Ganeti's ``hail`` works) and built-in
  ones that run in the master (a function taking and returning the same
  JSON);
* :mod:`~ganeti.iallocator.defaults`: the cluster's default allocators,
  an ordered list per request type.

Logical units reach all of this through :mod:`ganeti.cmdlib.allocation`.
docs/allocator.rst is the admin's view.
"""

from ganeti import errors


class AllocatorError(errors.GenericError):
    """An allocator gave no usable answer: it could not be found or run,
    it failed, or what it printed is not a valid answer."""


class AllocatorNotFound(AllocatorError):
    """No built-in allocator and no script on the search path has this
    name."""
