"""The built-in self-diagnosis (diagnose command ""): the machine's health
as the system D-Bus tells it.

* UDisks2 (``org.freedesktop.UDisks2``): every drive whose ATA SMART data
  says it is failing (``org.freedesktop.UDisks2.Drive.Ata.SmartFailing``)
  -> ``evacuate``: the disk should be replaced, the instances must leave.
* systemd (``org.freedesktop.systemd1``): every unit whose ``ActiveState``
  is ``failed`` -> ``live-repair``: something on the node needs a look,
  its instances may stay.  No repair command is named.
* nothing of that -> ``Ok``.  A node without a system bus or without one
  of those services reports ``Ok`` too, the details saying what could not
  be looked at: the absence of a health source is not a reason to move
  instances.

The details list only stable facts (drive ids, unit names, what was
absent), so the same state gives the same report and the maintenance
daemon sees one incident, not a new one per look.
"""

from twisted.internet import defer
from twisted.logger import Logger

log = Logger()

UDISKS_NAME = "org.freedesktop.UDisks2"
UDISKS_PATH = "/org/freedesktop/UDisks2"
UDISKS_DRIVE = "org.freedesktop.UDisks2.Drive"
UDISKS_ATA = "org.freedesktop.UDisks2.Drive.Ata"
OBJECT_MANAGER = "org.freedesktop.DBus.ObjectManager"
SYSTEMD_NAME = "org.freedesktop.systemd1"
SYSTEMD_PATH = "/org/freedesktop/systemd1"
SYSTEMD_MANAGER = "org.freedesktop.systemd1.Manager"

#: seconds a D-Bus call may take
CALL_TIMEOUT = 5


def _plain(value):
    """D-Bus values as JSON (txdbus gives bytes for 'ay' strings)."""
    if isinstance(value, bytes):
        return value.rstrip(b"\0").decode("utf-8", "replace")
    return value


async def failing_drives(conn):
    objects = await conn.callRemote(
        UDISKS_PATH, "GetManagedObjects", interface=OBJECT_MANAGER,
        destination=UDISKS_NAME, timeout=CALL_TIMEOUT)
    drives = []
    for path in sorted(objects):
        ifaces = objects[path]
        ata = ifaces.get(UDISKS_ATA) or {}
        if ata.get("SmartFailing"):
            drive = ifaces.get(UDISKS_DRIVE) or {}
            drives.append({"object": str(path),
                           "id": _plain(drive.get("Id", "")),
                           "model": _plain(drive.get("Model", "")),
                           "serial": _plain(drive.get("Serial", ""))})
    return drives


async def failed_units(conn):
    units = await conn.callRemote(
        SYSTEMD_PATH, "ListUnits", interface=SYSTEMD_MANAGER,
        destination=SYSTEMD_NAME, timeout=CALL_TIMEOUT)
    # (name, description, load state, active state, sub state, ...)
    return sorted(u[0] for u in units if len(u) > 3 and u[3] == "failed")


def _why(err):
    name = getattr(err, "errName", None)
    return name or str(err) or err.__class__.__name__


async def diagnose(reactor, bus_address="system"):
    """The node's diagnosis, a dict of the self-diagnose protocol."""
    from txdbus import client
    try:
        conn = await client.connect(reactor, bus_address)
    except Exception as err:
        return {"status": "Ok", "details": {
            "unavailable": {"dbus": "no system bus: %s" % _why(err)}}}
    unavailable = {}
    drives = units = []
    try:
        try:
            drives = await failing_drives(conn)
        except Exception as err:
            unavailable["udisks2"] = _why(err)
        try:
            units = await failed_units(conn)
        except Exception as err:
            unavailable["systemd"] = _why(err)
    finally:
        conn.disconnect()
    details = {}
    if drives:
        details["failing_drives"] = drives
    if units:
        details["failed_units"] = units
    if unavailable:
        details["unavailable"] = unavailable
    if drives:
        status = "evacuate"
    elif units:
        status = "live-repair"
    else:
        status = "Ok"
    return {"status": status, "details": details}


def run(reactor, bus_address="system"):
    return defer.Deferred.fromCoroutine(diagnose(reactor, bus_address))
