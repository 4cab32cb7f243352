"""The life of an incident: what the nodes report, matched against what
the maintenance daemon already tracks.

An incident is identified by its node and the exact JSON object the
node's self-diagnosis reported: while a node keeps reporting the same
object it is the same incident (same id); another object is another
incident.  This module decides, from the tracked incidents, the current
reports and the nodes' tags, which incidents are new, which are
forgotten, and how job outcomes move a repair on.  It does no I/O: the
daemon applies what it returns (docs/maintd.rst).
"""

import json

import attrs

from ganeti import objects

OK = "Ok"
LIVE_REPAIR = "live-repair"
EVACUATE = "evacuate"
EVACUATE_FAILOVER = "evacuate-failover"
#: least to most invasive; per node the most invasive requested wins
ACTIONS = (OK, LIVE_REPAIR, EVACUATE, EVACUATE_FAILOVER)

READY_PREFIX = "maintd:repairready:"
FAILED_PREFIX = "maintd:repairfailed:"

#: states in which the daemon still works on an incident
ACTIVE = frozenset([objects.INCIDENT_NOTED, objects.INCIDENT_PENDING])


def invasiveness(action):
    return ACTIONS.index(action) if action in ACTIONS else -1


def identity(node_uuid, report):
    """What makes two observations the same incident."""
    return node_uuid, json.dumps(report, sort_keys=True,
                                 separators=(",", ":"))


def ready_tag(incident_id):
    return READY_PREFIX + incident_id


def failed_tag(incident_id):
    return FAILED_PREFIX + incident_id


@attrs.define
class Reconciled:
    """What one look at the reports changes."""
    #: new incidents (objects.Incident, noted)
    new: list = attrs.field(factory=list)
    #: ids of incidents to forget
    forget: list = attrs.field(factory=list)


def reconcile(incidents, reports, node_tags, new_id):
    """Match ``reports`` ({node uuid: diagnose dict}, only nodes that
    answered with a valid report) against ``incidents`` ({id:
    objects.Incident}).

    ``node_tags`` is {node uuid: set of tags} of the nodes in the cluster;
    ``new_id()`` names a new incident.  Rules:

    * a report whose status is not Ok and that no incident has yet is a
      new incident, ``noted``;
    * a ``completed`` incident is forgotten once its node no longer
      carries its repairready tag and no longer reports it;
    * a ``failed`` incident is forgotten as soon as its repairfailed tag
      is gone (even while still reported: that restarts the repair, as a
      new incident);
    * a ``canceled`` incident, and a ``noted`` one no action was taken
      for, are forgotten once no longer reported;
    * an incident of a node no longer in the cluster is forgotten.
    """
    result = Reconciled()
    observed = {identity(node, rep) for node, rep in reports.items()}
    live_keys = set()
    for inc in sorted(incidents.values(), key=lambda i: i.uuid):
        key = identity(inc.node, inc.original)
        seen = key in observed
        tags = node_tags.get(inc.node)
        status = inc.repair_status
        if tags is None:
            gone = True
        elif status == objects.INCIDENT_COMPLETED:
            gone = not seen and ready_tag(inc.uuid) not in tags
        elif status == objects.INCIDENT_FAILED:
            gone = failed_tag(inc.uuid) not in tags
        elif status == objects.INCIDENT_CANCELED:
            gone = not seen
        elif status == objects.INCIDENT_NOTED:
            gone = not seen and not inc.jobs
        else:
            gone = False
        if gone:
            result.forget.append(inc.uuid)
        else:
            live_keys.add(key)
    for node, rep in sorted(reports.items()):
        if rep.get("status") == OK:
            continue
        if identity(node, rep) in live_keys:
            continue
        uuid = new_id()
        result.new.append(objects.Incident(
            uuid=uuid, node=node, original=rep, action=rep.get("status"),
            repair_status=objects.INCIDENT_NOTED, jobs=[],
            tag=ready_tag(uuid)))
        live_keys.add(identity(node, rep))
    return result


def node_action(incidents, node_uuid):
    """The most invasive action the active incidents of a node ask for
    (OK if none), and those incidents."""
    mine = [i for i in incidents.values()
            if i.node == node_uuid and i.repair_status in ACTIVE]
    if not mine:
        return OK, []
    return max((i.action for i in mine), key=invasiveness), mine


def after_jobs(incident, statuses):
    """The repair status once the incident's jobs are as ``statuses``
    ({job id: status}, None for a job gone from the queue, taken as
    finished): ``failed`` as soon as one failed or was canceled, else as
    it was (the daemon decides completion from the cluster's state)."""
    for jid in incident.jobs:
        if statuses.get(jid) in ("error", "canceled"):
            return objects.INCIDENT_FAILED
    return incident.repair_status


def jobs_running(incident, statuses):
    """Whether a job of the incident is not finished yet."""
    return any(statuses.get(jid) not in (None, "success", "error",
                                         "canceled")
               for jid in incident.jobs)
