"""The remote API (RAPI v2): a Klein application in front of the master.

Modules:

* :mod:`ganeti.rapi.baserlib` -- HTTP errors, request bodies and query
  arguments, the list/bulk formats and opcode building shared by resources;
* :mod:`ganeti.rapi.auth` -- the users file and HTTP Basic authentication;
* :mod:`ganeti.rapi.resources` -- the table of resources: paths, methods,
  access rights, opcodes and the handlers;
* :mod:`ganeti.rapi.app` -- the Klein application that routes requests to
  the table, enforces authentication and turns errors into JSON bodies;
* :mod:`ganeti.rapi.openapi` -- the OpenAPI 3 document built from the table;
* :mod:`ganeti.rapi.master` -- the master as RAPI sees it: a small pool of
  luxi connections and the set of opcodes the master implements.

The daemon (``twistd ganeti-rapi``) is :mod:`ganeti.server.rapi`.
See docs/rapi.rst.
"""
