"""The query layer behind luxi's Query/QueryFields/Query<Resource> methods,
RAPI's list and bulk resources, and the command line ``list`` commands.

Typical use in the master::

    ctx = QueryContext(cfg, live=rpc_live_data, jobs=queue.query_rows,
                       locks=lock_manager)
    d = ctx.query("instance", ["name", "status"], ["=~", "name", "^web"])
    ctx.query_fields("node", None)
    d = ctx.old_style("instance", ["inst1"], ["name", "admin_state"])

See docs/query.rst for the resources, their fields and the filter language.
"""

from ganeti.query.base import (
    RS_NORMAL, RS_UNKNOWN, RS_NODATA, RS_UNAVAIL, RS_OFFLINE, RS_ALL,
    QFT_UNKNOWN, QFT_TEXT, QFT_BOOL, QFT_NUMBER, QFT_NUMBER_FLOAT, QFT_UNIT,
    QFT_TIMESTAMP, QFT_OTHER, QFT_ALL, Field, FieldTable, Resource,
    nice_sort, nice_sort_key)
from ganeti.query.engine import QueryContext, PreparedQuery
from ganeti.query.cache import QueryCache
from ganeti.query.live import ILiveData
from ganeti.query.instances import InstanceResource
from ganeti.query.nodes import NodeResource
from ganeti.query.groups import GroupResource
from ganeti.query.networks import NetworkResource
from ganeti.query.cluster import ClusterResource
from ganeti.query.locks import LockResource
from ganeti.query.jobs import JobResource
from ganeti.query.filters import FilterResource
from ganeti.query.exports import ExportResource
from ganeti.query.oses import OsResource, ExtStorageResource

__all__ = [
    "RS_NORMAL", "RS_UNKNOWN", "RS_NODATA", "RS_UNAVAIL", "RS_OFFLINE",
    "RS_ALL", "QFT_UNKNOWN", "QFT_TEXT", "QFT_BOOL", "QFT_NUMBER",
    "QFT_NUMBER_FLOAT", "QFT_UNIT", "QFT_TIMESTAMP", "QFT_OTHER", "QFT_ALL",
    "Field", "FieldTable", "Resource", "nice_sort", "nice_sort_key",
    "QueryContext", "PreparedQuery", "QueryCache", "ILiveData", "RESOURCES",
    "OLD_STYLE",
    "query", "query_fields", "old_style",
]

QR_INSTANCE = "instance"
QR_NODE = "node"
QR_GROUP = "group"
QR_NETWORK = "network"
QR_CLUSTER = "cluster"
QR_LOCK = "lock"
QR_JOB = "job"
QR_FILTER = "filter"
QR_EXPORT = "export"
QR_OS = "os"
QR_EXTSTORAGE = "extstorage"

RESOURCES = {
    QR_INSTANCE: InstanceResource(),
    QR_NODE: NodeResource(),
    QR_GROUP: GroupResource(),
    QR_NETWORK: NetworkResource(),
    QR_CLUSTER: ClusterResource(),
    QR_LOCK: LockResource(),
    QR_JOB: JobResource(),
    QR_FILTER: FilterResource(),
    QR_EXPORT: ExportResource(),
    QR_OS: OsResource(),
    QR_EXTSTORAGE: ExtStorageResource(),
}

#: Resources of luxi's QueryNodes / QueryInstances / QueryGroups /
#: QueryNetworks
OLD_STYLE = {
    "QueryNodes": QR_NODE,
    "QueryInstances": QR_INSTANCE,
    "QueryGroups": QR_GROUP,
    "QueryNetworks": QR_NETWORK,
}


def query(ctx, what, fields, qfilter=None):
    return ctx.query(what, fields, qfilter)


def query_fields(ctx, what, fields=None):
    return ctx.query_fields(what, fields)


def old_style(ctx, what, names, fields):
    return ctx.old_style(what, names, fields)
