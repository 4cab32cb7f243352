"""Logical units of the generic queries: OP_QUERY and OP_QUERY_FIELDS (the
opcode form of luxi's Query and QueryFields calls), and
OP_CLUSTER_CONFIG_QUERY (values of the cluster's query fields, as luxi's
QueryConfigValues gives them).

They read through the same query layer as luxi (:mod:`ganeti.query`), so
a job answers exactly what the luxi call would: ``{"fields": [field
definitions], "data": [[[status, value], ...], ...]}`` for OP_QUERY,
``{"fields": [...]}`` for OP_QUERY_FIELDS.  Nothing is locked: the answer
is one consistent snapshot of the configuration.
"""

from ganeti import errors
from ganeti import query
from ganeti.cmdlib.base import LogicalUnit
from ganeti.query.rpclive import RpcLiveData


def query_context(lu):
    """The master's query context (with its live-data provider, job and
    lock rows and cache), or one built from what the LU's context has."""
    make = getattr(lu.ctx, "query_context", None)
    if make is not None:
        return make()
    ctx = lu.ctx
    live = RpcLiveData(lu.cfg, ctx.rpc) if ctx.rpc is not None else None
    queue = ctx.queue

    def job_rows(job_ids, field_names):
        names = ["id"] + [f for f in field_names if f != "id"]
        rows = queue.query_jobs(job_ids, names)
        return [dict(zip(names, row)) for row in rows if row is not None]
    jobs = job_rows if queue is not None else None
    root = ctx.paths.root if ctx.paths is not None else "/"
    return query.QueryContext(lu.cfg, live=live, jobs=jobs, locks=ctx.glm,
                              root=root)


class LUQuery(LogicalUnit):
    """OP_QUERY: one query of any resource (``what``), with a filter."""
    OP_ID = "OP_QUERY"

    def check_arguments(self):
        # the resource, the fields and the filter are checked before
        # anything is read (an unknown field is a column of RS_UNKNOWN, as
        # luxi answers it; a bad filter is an error naming it)
        self.qctx = query_context(self)
        self.qctx.prepare(self.op.what, self.op.fields, self.op.qfilter)

    async def exec_(self):
        return await self.qctx.query(self.op.what, self.op.fields,
                                     self.op.qfilter,
                                     fresh=bool(self.op.use_locking))


class LUQueryFields(LogicalUnit):
    """OP_QUERY_FIELDS: the definitions of a resource's fields (all of
    them when ``fields`` is null)."""
    OP_ID = "OP_QUERY_FIELDS"

    def check_arguments(self):
        self.result = query_context(self).query_fields(self.op.what,
                                                       self.op.fields)

    async def exec_(self):
        return self.result


class LUClusterConfigQuery(LogicalUnit):
    """OP_CLUSTER_CONFIG_QUERY: the values of cluster query fields, in the
    order asked (``gnt-cluster`` tools ask for e.g. ``cluster_name``,
    ``master_node``, ``drain_flag``).  An unknown field is an error naming
    it; a value the master cannot tell is null."""
    OP_ID = "OP_CLUSTER_CONFIG_QUERY"

    def check_arguments(self):
        self.qctx = query_context(self)
        prepared = self.qctx.prepare(query.QR_CLUSTER,
                                     self.op.output_fields)
        unknown = prepared.unknown_fields()
        if unknown:
            raise errors.OpPrereqError(
                "output_fields: unknown cluster field(s) %s"
                % ", ".join(unknown), errors.ECODE_INVAL)

    async def exec_(self):
        rows = await self.qctx.old_style(query.QR_CLUSTER, None,
                                         self.op.output_fields)
        if len(rows) != 1:
            raise errors.OpExecError("the cluster query gave %d rows, not one"
                                     % len(rows))
        return rows[0]
