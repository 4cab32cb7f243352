"""``drbd``: the health of the node's DRBD resources (a status collector).

Only a node whose kernel has DRBD (``/proc/drbd`` exists) has it; elsewhere
it is not listed.  The resources come from ``drbdsetup status --json``
(DRBD 9; see :mod:`ganeti.storage.drbd`), so the data is this project's
shape rather than Ganeti's parse of DRBD 8's ``/proc/drbd``:
``{"version": <first line of /proc/drbd>, "resources": [{"name",
"role", "minor", "status", "details", "sync_percent"}], "status":
{"code", "message"}}`` where a resource whose local data is missing is
code 4 (needs intervention), a degraded or resyncing one code 1.
"""

import os

from twisted.internet import defer
from zope.interface import implementer

from ganeti.mond import base
from ganeti.storage import DISK_MISSING, DISK_OK
from ganeti.storage import drbd as drbd_storage


def resources_report(version, resources):
    entries = []
    statuses = []
    for res in resources:
        st = drbd_storage.disk_status(res)
        minor = res.devices[0].minor if res.devices else None
        entries.append({"name": res.name, "role": res.role, "minor": minor,
                        "status": st["status"], "details": st["details"],
                        "sync_percent": st["sync_percent"]})
        if st["status"] == DISK_MISSING:
            statuses.append(base.status(base.STATUS_BAD, "%s: %s" % (
                res.name, st["details"])))
        elif st["status"] != DISK_OK:
            statuses.append(base.status(base.STATUS_TEMPORARY, "%s: %s" % (
                res.name, st["details"])))
    return {"version": version, "resources": entries,
            "status": base.merge_status(statuses)}


@implementer(base.ICollector)
class DrbdCollector(base.CollectorBase):
    name = "drbd"
    category = "storage"
    kind = base.KIND_STATUS
    sampled = False

    def __init__(self, runner, proc_path="/proc/drbd", timeout=30.0):
        self.runner = runner
        self.proc_path = proc_path
        self.timeout = timeout

    def available(self):
        return os.path.exists(self.proc_path)

    async def _collect(self):
        with open(self.proc_path) as f:   # a /proc file: never blocks
            version = f.readline().strip()
        result = await self.runner.run(
            [drbd_storage.DRBDSETUP, "status", "--json"],
            timeout=self.timeout)
        if result.failed:
            return {"version": version, "resources": [],
                    "status": base.status(base.STATUS_UNKNOWN,
                                          result.describe())}
        try:
            resources = drbd_storage.parse_status(result.stdout)
        except Exception as err:
            return {"version": version, "resources": [],
                    "status": base.status(base.STATUS_UNKNOWN, str(err))}
        return resources_report(version, resources)

    def collect(self):
        return defer.Deferred.fromCoroutine(self._collect())
