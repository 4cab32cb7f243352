"""Node-side operations: what the node daemon does when the master asks.

One module per idea; the node daemon (``ganeti.server.noded``) maps RPC
procedures onto them:

``process``
    running external commands without blocking the reactor, with timeouts.
``os_api``
    the OS API: finding OS definitions, their variants and parameters, and
    running their create/rename/... scripts with the API's environment.
``instances``
    instance operations on this node's hypervisors.
``files``
    files the master pushes to nodes (allow-listed) and ssconf files.

Storage (block devices, storage units) lives in ``ganeti.storage``.
"""
