"""The cluster as a query resource: a single row.

``drain_flag`` and ``watcher_pause`` are master state outside the config;
they come from the context's ``cluster_state`` callable and are RS_UNAVAIL
without it.  ``uuid`` is this project's addition.
"""

import platform

from ganeti import constants
from ganeti.query.base import (Field, FieldTable, Resource, QFT_TEXT,
                               QFT_BOOL, QFT_NUMBER, QFT_OTHER, QFT_TIMESTAMP,
                               FF_HOSTNAME, NODATA, UNAVAIL, attr_getter,
                               tags_getter)

NEED_CLUSTER_STATE = "cluster-state"


def _master_name(run, cluster):
    node = run.cfg.nodes.get(cluster.master_node)
    return node.name if node is not None else NODATA


def _state(key):
    def get(run, _cluster):
        state = run.memo("cluster_state", lambda: (
            run.ctx.cluster_state() if run.ctx.cluster_state else None))
        if not state or state.get(key) is None:
            return UNAVAIL
        return state[key]
    return get


def build_fields():
    t = FieldTable()
    t.extend([
        Field("name", "Name", QFT_TEXT, "Cluster name",
              attr_getter("cluster_name"), flags=[FF_HOSTNAME]),
        Field("cluster_name", "Name", QFT_TEXT, "Cluster name",
              attr_getter("cluster_name"), flags=[FF_HOSTNAME]),
        Field("master_node", "Master", QFT_TEXT, "Name of the master node",
              _master_name),
        Field("volume_group_name", "VgName", QFT_TEXT,
              "LVM volume group for instance disks",
              attr_getter("volume_group_name")),
        Field("software_version", "SoftwareVersion", QFT_TEXT,
              "Ganeti release this software is compatible with",
              lambda run, c: constants.RELEASE_VERSION),
        Field("protocol_version", "ProtocolVersion", QFT_NUMBER,
              "Node RPC protocol version",
              lambda run, c: constants.PROTOCOL_VERSION),
        Field("config_version", "ConfigVersion", QFT_NUMBER,
              "config.data format version",
              lambda run, c: constants.CONFIG_VERSION),
        Field("os_api_version", "OsApiVersion", QFT_NUMBER,
              "Newest OS definition API supported",
              lambda run, c: max(constants.OS_API_VERSIONS)),
        Field("export_version", "ExportVersion", QFT_NUMBER,
              "Instance export format version",
              lambda run, c: constants.EXPORT_VERSION),
        Field("vcs_version", "VCSVersion", QFT_TEXT,
              "Source version of this software",
              lambda run, c: "twisted-ganeti " + constants.RELEASE_VERSION),
        Field("architecture", "ArchInfo", QFT_OTHER,
              "Master's [word size, machine type]",
              lambda run, c: [platform.architecture()[0],
                              platform.machine()]),
        Field("drain_flag", "QueueDrained", QFT_BOOL,
              "Whether the job queue refuses new jobs",
              _state("drain_flag"), needs=NEED_CLUSTER_STATE),
        Field("watcher_pause", "WatcherPause", QFT_TIMESTAMP,
              "Until when the watcher is paused (unavailable if not)",
              _state("watcher_pause"), needs=NEED_CLUSTER_STATE),
        Field("tags", "Tags", QFT_OTHER, "Tags (sorted list)", tags_getter),
        Field("ctime", "CTime", QFT_TIMESTAMP, "When the cluster was created",
              attr_getter("ctime")),
        Field("mtime", "MTime", QFT_TIMESTAMP,
              "When the cluster object was last modified",
              attr_getter("mtime")),
        Field("uuid", "UUID", QFT_TEXT, "Cluster UUID", attr_getter("uuid")),
    ])
    return t


class ClusterResource(Resource):
    name = "cluster"
    noun = "cluster"
    fields = build_fields()

    def items(self, run, names):
        # One row whatever names the filter asks for; the filter decides.
        return [run.cluster]

    def item_name(self, cluster):
        return cluster.cluster_name or ""

    def collect(self, run, items, needs):
        run.collected.add(NEED_CLUSTER_STATE)
        return None
