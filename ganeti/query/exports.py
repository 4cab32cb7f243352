"""Export query rows: the exports each node holds (``gnt-backup list``).

Items are ``(node, export name)``; the names come from every node's
``export_list`` through the live-data provider's ``exports`` method (in
the master: RPC).  An offline node gives one row whose export is
RS_OFFLINE; a node that does not answer one whose export is RS_NODATA.
"""

from twisted.internet import defer

from ganeti.query.base import (Field, FieldTable, Resource, QFT_TEXT,
                               NODATA, OFFLINE, lookup_by_name, nice_sort_key)


def build_fields():
    t = FieldTable()
    t.extend([
        Field("node", "Node", QFT_TEXT, "Node name",
              lambda run, item: item[0].name),
        Field("export", "Export", QFT_TEXT, "Export name",
              lambda run, item: item[1]),
    ])
    return t


class ExportResource(Resource):
    name = "export"
    namefield = "node"
    noun = "node"
    fields = build_fields()

    def items(self, run, names):
        nodes = list(run.cfg.nodes.values())
        if names is not None:
            nodes = lookup_by_name(nodes, names, self.noun)
        online = [n.uuid for n in nodes if not n.offline]
        live = run.ctx.live
        getter = getattr(live, "exports", None)
        if getter is None or not online:
            answers = defer.succeed({})
        else:
            answers = defer.maybeDeferred(getter, online)

        def rows(answer):
            if not isinstance(answer, dict):
                answer = {}
            result = []
            for node in nodes:
                if node.offline:
                    result.append((node, OFFLINE))
                    continue
                names = answer.get(node.uuid)
                if not isinstance(names, list):
                    result.append((node, NODATA))
                    continue
                result.extend((node, name) for name in names)
            return result

        def failed(_failure):
            return rows({})
        return answers.addCallbacks(rows, failed)

    def item_name(self, item):
        return item[0].name

    def sort_key(self, item):
        export = item[1] if isinstance(item[1], str) else ""
        return (nice_sort_key(item[0].name), nice_sort_key(export))
