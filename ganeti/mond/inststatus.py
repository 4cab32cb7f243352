"""``inst-status-kvm`` / ``inst-status-fake``: are this node's instances in
the state the cluster wants them in?

Ganeti has one such collector, ``inst-status-xen``.  Here there is one per
hypervisor driver, named the same way, for two reasons: the cluster's
``data_collectors`` setting switches collectors by name, so an admin can
keep one hypervisor's report and drop the other's; and the configuration
server reports a hypervisor's collector active only while that
hypervisor is enabled, as it does for Xen's, so a node never asks a
driver the cluster does not use.

The data is Ganeti's: ``{"instances": [...], "status": {...}}`` with, per
primary instance of the node (from the configuration server) running on
this hypervisor: ``name``, ``uuid``, ``adminState``, ``actualState``,
``uptime`` (null when not running), ``mtime``, ``state_reason`` and its
own ``status``.  An instance that should run but is not running (or is
paused), or should be stopped but is not, is code 4; an offline one code
2.  The overall status merges them.
"""

from twisted.internet import defer
from zope.interface import implementer

from ganeti import hypervisor as hv
from ganeti.mond import base

# Ganeti's actual states (the ones our drivers can report, and "unknown")
ACTUAL_STATES = {hv.RUNNING: "running", hv.PAUSED: "paused",
                 hv.SHUTDOWN: "shutdown", hv.CRASHED: "crashed"}


def format_uptime(seconds):
    """As Xen prints it: ``H:MM:SS``, with ``N day(s), `` in front."""
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    text = "%d:%02d:%02d" % (rest // 3600, rest % 3600 // 60, rest % 60)
    if days:
        text = "%d day%s, %s" % (days, "" if days == 1 else "s", text)
    return text


def instance_status(admin_state, actual):
    if admin_state == "offline":
        return base.status(base.STATUS_UNKNOWN,
                           "The instance is marked as offline")
    if admin_state == "up":
        if actual != "running":
            return base.status(base.STATUS_BAD,
                               "The instance is not running as it should be")
        return base.status(base.STATUS_OK)
    if actual != "shutdown":
        return base.status(base.STATUS_BAD,
                           "The instance is not stopped as it should be")
    return base.status(base.STATUS_OK)


def build_report(instances, infos):
    """The data from the configured primary instances (dicts) and the
    driver's InstanceInfo list."""
    by_name = {i.name: i for i in infos}
    entries = []
    for inst in sorted(instances, key=lambda i: i.get("name") or ""):
        name = inst.get("name")
        admin = inst.get("admin_state", "down")
        info = by_name.get(name)
        if info is None:
            actual = "shutdown" if admin != "up" else "unknown"
        else:
            actual = ACTUAL_STATES.get(info.state, "unknown")
        uptime = None
        if info is not None and info.live and info.uptime is not None:
            uptime = format_uptime(info.uptime)
        entries.append({
            "name": name, "uuid": inst.get("uuid"), "adminState": admin,
            "actualState": actual, "uptime": uptime,
            "mtime": float(inst.get("mtime") or 0.0), "state_reason": [],
            "status": instance_status(admin, actual)})
    return {"instances": entries,
            "status": base.merge_status([e["status"] for e in entries])}


@implementer(base.ICollector)
class InstStatusCollector(base.CollectorBase):
    category = "instance"
    kind = base.KIND_STATUS
    sampled = False

    def __init__(self, hypervisor_name, driver, node_config):
        self.name = "inst-status-%s" % hypervisor_name
        self.hypervisor_name = hypervisor_name
        #: an IHypervisor for this node
        self.driver = driver
        #: has node_instances() -> Deferred list of primary instance dicts
        self.node_config = node_config

    async def _collect(self):
        try:
            instances = await self.node_config.node_instances()
        except Exception as err:
            return {"instances": [], "status": base.status(
                base.STATUS_UNKNOWN, "Cannot get this node's instances from"
                " the configuration servers: %s" % err)}
        instances = [i for i in instances
                     if i.get("hypervisor") == self.hypervisor_name]
        try:
            infos = await self.driver.observe_instances()
        except Exception as err:
            return {"instances": [], "status": base.status(
                base.STATUS_BAD, "Unable to receive the list of instances:"
                " %s" % err)}
        return build_report(instances, infos)

    def collect(self):
        return defer.Deferred.fromCoroutine(self._collect())
