"""The RAPI v2 resources: one table, read by the app and by the OpenAPI
document.

Each :class:`Resource` is a path (OpenAPI style, ``/2/instances/{name}``)
with its methods; each :class:`Method` says who may call it (``access``),
which opcodes it submits (a method whose opcode the master does not
implement answers 501 before anything is submitted), its query parameters
and body for the documentation, and its handler: ``async def
handler(req)`` returning the JSON value of the answer, where ``req`` is a
:class:`Request` (query arguments, body, path parameters, and the helpers
to query the master and submit jobs).

Path parameters: ``{job_id}`` and ``{disk_index}`` are integers, ``{uuid}``
a filter UUID, every other one a name (``[\\w._-]+``).
"""

import functools
import time

import attr

from ganeti import constants
from ganeti import errors
from ganeti import ht
from ganeti import luxi
from ganeti import opcodes
from ganeti.rapi import auth
from ganeti.rapi import baserlib
from ganeti.rapi import console as rapi_console
from ganeti.rapi import ratelimit
from ganeti.rapi.baserlib import BadRequest, NotFound

ANON = ()
WRITE = (auth.ACCESS_WRITE,)
READ_WRITE = (auth.ACCESS_READ, auth.ACCESS_WRITE)

RAPI_VERSION = 2

#: /2/features
FEATURES = ["instance-create-reqv1", "instance-reinstall-reqv1",
            "node-migrate-reqv1", "node-evac-res1",
            # not Ganeti's: GET /2/events is served (docs/events.rst).
            # Ganeti's client only asks whether a string it knows is in
            # the list: one more is ignored.
            "event-stream"]

#: fields of the bulk formats (Ganeti's).  The instance list leaves out
#: "forthcoming", as Ganeti's does: htools reading it would count
#: reservations as not holding resources (and hspace fails to add up the
#: instances); without it they count a forthcoming instance as a stopped
#: one, holding its memory and disks, as the master does.  ``lease_until``
#: and ``lease_state`` (a reservation's lease, docs/leases.rst) are this
#: project's additions; clients reading Ganeti's fields ignore them.
I_FIELDS = ["name", "admin_state", "os", "pnode", "snodes", "disk_template",
            "nic.ips", "nic.macs", "nic.modes", "nic.uuids", "nic.names",
            "nic.links", "nic.networks", "nic.networks.names", "nic.bridges",
            "network_port", "disk.sizes", "disk.spindles", "disk_usage",
            "disk.uuids", "disk.names", "beparams", "hvparams", "oper_state",
            "oper_ram", "oper_vcpus", "status", "custom_hvparams",
            "custom_beparams", "custom_nicparams", "ctime", "mtime", "uuid",
            "serial_no", "tags", "lease_until", "lease_state"]
#: one instance (GET /2/instances/{name}) also says whether it is
#: forthcoming (this project's addition, for reservation clients) and its
#: hypervisor (for the web console's serial console link)
I_FIELDS_ONE = I_FIELDS + ["forthcoming", "hypervisor"]
N_FIELDS = ["name", "offline", "master_candidate", "drained", "dtotal",
            "dfree", "sptotal", "spfree", "mtotal", "mnode", "mfree",
            "pinst_cnt", "sinst_cnt", "ctotal", "cnos", "cnodes", "csockets",
            "pip", "sip", "role", "pinst_list", "sinst_list",
            "master_capable", "vm_capable", "ndparams", "group.uuid",
            "ctime", "mtime", "uuid", "serial_no", "tags"]
G_FIELDS = ["alloc_policy", "name", "node_cnt", "node_list", "ipolicy",
            "custom_ipolicy", "diskparams", "custom_diskparams", "ndparams",
            "custom_ndparams", "ctime", "mtime", "uuid", "serial_no", "tags"]
NET_FIELDS = ["name", "network", "gateway", "network6", "gateway6",
              "mac_prefix", "free_count", "reserved_count", "map",
              "group_list", "inst_list", "external_reservations", "ctime",
              "mtime", "uuid", "serial_no", "tags"]
J_FIELDS_BULK = ["id", "ops", "status", "summary", "opstatus", "received_ts",
                 "start_ts", "end_ts"]
J_FIELDS = J_FIELDS_BULK + ["oplog", "opresult"]
FILTER_FIELDS = ["watermark", "priority", "predicates", "action",
                 "reason_trail", "uuid"]

#: what /2/query/{resource} may ask for (as in Ganeti)
QUERY_RESOURCES = ["export", "filter", "group", "instance", "job", "lock",
                   "network", "node"]

NODE_ROLES = {"M": "master", "C": "master-candidate", "R": "regular",
              "D": "drained", "O": "offline"}

#: how long /2/jobs/ID/wait waits for a change (as Ganeti's RAPI)
WAIT_TIMEOUT = 10
#: how long /2/os and the console wait for their job
SYNC_JOB_TIMEOUT = 120


# --- The table --------------------------------------------------------------

@attr.s(frozen=True)
class Param(object):
    """A query parameter (for the documentation)."""
    name = attr.ib()
    kind = attr.ib(default="boolean")   # boolean, integer, string, list
    doc = attr.ib(default="")
    required = attr.ib(default=False)


DRY_RUN = Param("dry-run", "boolean", "only check, change nothing")
REASON = Param("reason", "string", "reason recorded in the job's trail")
BULK = Param("bulk", "boolean", "full objects instead of names and URIs")
FORCE = Param("force", "boolean", "force the operation")
TAG = Param("tag", "list", "a tag (repeat for several)", required=True)


@attr.s(frozen=True)
class Body(object):
    """What a handler reads from the request body, for the OpenAPI
    document (:mod:`ganeti.rapi.openapi` makes its schema).

    Either the parameters of the opcode ``op`` (in its JSON form), changed
    as the handler changes them:

    * ``renames``: body key -> opcode parameter (Ganeti's RAPI names, e.g.
      ``name`` for ``instance_name``; both are accepted);
    * ``exclude``: opcode parameters the handler refuses in the body;
    * ``filled``: parameters the URL path or the query string gives (the
      body may repeat them with the same value; not required in it);
    * ``optional``: required parameters the handler has a default for;
    * ``override``: body key -> the ht type the handler takes instead, or
      the name of another component schema (a list of them);

    or, for a body that is not an opcode, ``fields`` (key -> ht type) and
    ``required``.  ``extra`` adds keys (ht types) besides the opcode's;
    ``lenient``: keys the handler does not read are ignored, not refused;
    ``whole``: the body is one value of that ht type (not an object).
    ``name`` names the component schema (default: from the operation).
    """
    op = attr.ib(default=None)
    renames = attr.ib(default=attr.Factory(dict))
    exclude = attr.ib(default=())
    filled = attr.ib(default=())
    optional = attr.ib(default=())
    override = attr.ib(default=attr.Factory(dict))
    fields = attr.ib(default=None)
    required = attr.ib(default=())
    extra = attr.ib(default=attr.Factory(dict))
    lenient = attr.ib(default=False)
    whole = attr.ib(default=None)
    name = attr.ib(default=None)


def op_param_type(op_id, name):
    """The ht type of the parameter ``name`` of ``op_id``."""
    return opcodes.opcode_class(op_id)._BY_NAME[name].type


#: the body of handlers that read nothing from it but ``depends``
#: (:meth:`Request.with_depends`)
DEPENDS_ONLY = Body(fields={"depends": dict(
    (p.name, p.type) for p in opcodes.GENERIC_PARAMS)["depends"]},
    lenient=True, name="DependsOnly")


@attr.s(frozen=True)
class QueryList(object):
    """An answer of ``[{key: name, "uri": ...}]``, or with ``bulk=1`` of
    objects of the query ``fields`` of the resource ``what``."""
    what = attr.ib()
    fields = attr.ib()
    key = attr.ib()


@attr.s(frozen=True)
class QueryObject(object):
    """An answer of one object of the query ``fields`` of ``what``;
    ``copies``: further keys holding the value of a field (new key ->
    field)."""
    what = attr.ib()
    fields = attr.ib()
    copies = attr.ib(default=attr.Factory(dict))


@attr.s(frozen=True)
class Method(object):
    verb = attr.ib()
    handler = attr.ib()
    summary = attr.ib()
    access = attr.ib(default=None)      # None: anonymous GET, write else
    opcodes = attr.ib(default=())       # OP_IDs this method submits
    query = attr.ib(default=())         # Param
    body = attr.ib(default=None)        # description of the body, or None
    returns = attr.ib(default="object")  # see ganeti.rapi.openapi
    request = attr.ib(default=None)     # Body: what the handler reads
    #: served without credentials even when the daemon requires them
    #: (logging in)
    public = attr.ib(default=False)
    #: False: the answer depends on the credentials, so identical
    #: concurrent requests must not share it
    coalesce = attr.ib(default=True)
    #: also answers Server-Sent Events (``Accept: text/event-stream``)
    streams = attr.ib(default=False)

    @property
    def body_spec(self):
        """The :class:`Body` the handler reads: given in the table, or
        made by the handler's factory (:func:`_add`, :func:`_named_op`)."""
        if self.request is not None:
            return self.request
        return getattr(self.handler, "request", None)

    @property
    def shared(self):
        """Pure reads: identical concurrent requests share one answer."""
        return self.verb == "GET" and not self.opcodes and \
            self.body is None and not self.streams and self.coalesce

    @property
    def required_access(self):
        if self.access is not None:
            return self.access
        return ANON if self.verb == "GET" else WRITE


@attr.s(frozen=True)
class Resource(object):
    path = attr.ib()            # OpenAPI style: /2/instances/{name}
    rlib = attr.ib()            # the name in the reason trail
    methods = attr.ib()         # {verb: Method}
    doc = attr.ib(default="")


RESOURCES = []


def resource(path, rlib, doc, *methods):
    res = Resource(path, rlib, dict((m.verb, m) for m in methods), doc)
    RESOURCES.append(res)
    return res


# --- The request as handlers see it -----------------------------------------

class Request(object):
    """What a handler works with."""

    def __init__(self, app, resource_, method, args, body, params, user,
                 client="address=unknown", http=None, address="unknown",
                 token=None):
        self.app = app
        #: the HTTP request (for handlers writing their answer themselves)
        self.http = http
        #: the client's address (IPv6: its /64), whoever the user is
        self.address = address
        #: the session token the request carries (Authorization: Bearer),
        #: if any
        self.token = token
        self.resource = resource_
        self.method = method
        self.args = args
        self.body = body
        self.params = params
        self.user = user
        #: who jobs are submitted for (``user=NAME`` or ``address=IP``)
        self.client = client

    def http_header(self, name):
        """A request header's text, or None."""
        if self.http is None:
            return None
        value = self.http.getHeader(name)
        if isinstance(value, bytes):
            value = value.decode("utf-8", "replace")
        return value

    # master access
    def call(self, method, *args):
        return self.app.master.call(method, *args)

    async def query(self, what, fields, qfilter=None):
        return await self.call(luxi.REQ_QUERY, what, fields, qfilter)

    async def query_dicts(self, what, fields, qfilter=None):
        result = await self.query(what, fields, qfilter)
        return baserlib.rows_to_dicts(fields, result["data"])

    async def query_rendered(self, what, fields, shape, qfilter=None):
        """The rendered body of ``shape(result)``, ``result`` the master's
        Query answer; kept and sent again while the master's answer is
        unchanged (:mod:`ganeti.rapi.answers`)."""
        if self.app.answers is None:
            return shape(await self.query(what, fields, qfilter))
        return await self.app.answers.rendered(what, fields, qfilter, shape)

    async def query_names(self, what, key="name"):
        result = await self.query(what, [key])
        return [row[0][1] for row in result["data"]]

    # jobs
    def reason_trail(self, existing=()):
        now = time.time_ns()
        trail = [list(r) for r in existing or []]
        text = self.args.get("reason")
        if text is not None:
            trail.append([opcodes.REASON_SRC_USER, text, now])
        trail.append(["gnt:library:rlib2:%s" % self.resource.rlib, "", now])
        return trail

    def opcode(self, op_id, body=None, static=None, defaults=None,
               where="body"):
        """A validated OpCode with the dry-run flag and the reason trail."""
        static = dict(static or {})
        if self.args.bool("dry-run"):
            static["dry_run"] = True
        body = dict(body or {})
        existing = body.pop("reason", None)
        if existing is not None and not isinstance(existing, list):
            raise BadRequest("Invalid %s parameters: reason: expected a"
                             " list of [source, text, timestamp]" % where)
        # the trail is checked with the other parameters
        body["reason"] = self.reason_trail(existing)
        return baserlib.build_opcode(op_id, body, static, defaults, where)

    async def submit(self, *ops):
        """Submit one job of ``ops`` for this request's client; its id (a
        number).  A client submitting too fast gets a 429 instead."""
        self.app.take_submit_token(self.client)
        return await self.app.submit_job(self.client, list(ops))

    async def run_job(self, ops, timeout=SYNC_JOB_TIMEOUT):
        """Submit and wait for the job; ``(status, opresult)``."""
        job_id = await self.submit(*ops)
        return await self.app.wait_job_end(job_id, timeout)

    # arguments
    def body_dict(self):
        return baserlib.body_dict(self.body)

    def with_depends(self, data):
        """Body keys every opcode-building handler copies (``depends``)."""
        body = self.body if isinstance(self.body, dict) else {}
        if "depends" in body and "depends" not in data:
            data = dict(data, depends=body["depends"])
        return data


def _name_filter(name, fields=("name", "uuid")):
    return ["|"] + [["=", f, name] for f in fields]


async def _require(req, what, name):
    """404 unless the ``what`` (instance, node) named ``name`` exists: a
    read for an unknown name is answered without submitting a job (which
    would only fail), so no flood of such reads can fill the job queue.
    The text is the one the job would have ended with."""
    result = await req.query(what, ["name"], _name_filter(name))
    if not result["data"]:
        raise NotFound(explain="Nothing matches the given URI: %s '%s' not"
                       " known" % (what.capitalize(), name))


async def _one(req, what, fields, name, fix=None):
    rows = await req.query_dicts(what, fields, _name_filter(name))
    if not rows:
        raise NotFound(explain="Nothing matches the given URI: %s %r does"
                       " not exist" % (what, name))
    row = rows[0]
    return fix(row) if fix else row


def _fix_instance(row):
    be = row.get("beparams")
    if isinstance(be, dict) and "maxmem" in be:
        be["memory"] = be["maxmem"]
    return row


def _fix_node(row):
    # Ganeti reports the CPUs the node OS may use (cpu_dom0) as all of them
    # on every hypervisor but Xen; the query layer does not say it yet, and
    # htools need a number for every online node.
    if row.get("cnos") is None and row.get("ctotal") is not None:
        row["cnos"] = row["ctotal"]
    return row


def _list(what, key, uri, fields, fix=None):
    def bulk(result):
        rows = baserlib.rows_to_dicts(fields, result["data"])
        return [fix(r) for r in rows] if fix else rows

    async def handler(req):
        if req.args.bool("bulk"):
            return await req.query_rendered(what, fields, bulk)
        names = await req.query_names(what)
        return baserlib.id_list(names, key, uri)
    return handler


def _get(what, fields, fix=None):
    """A handler answering the ``what`` named in the URL (bulk format)."""
    async def handler(req):
        return await _one(req, what, fields, req.params["name"], fix)
    return handler


def _add(op_id, name_param):
    """A handler submitting ``op_id`` with the body's parameters, its
    ``name`` given as ``name_param``."""
    async def handler(req):
        data = baserlib.rename_keys(req.body_dict(), {"name": name_param})
        return await req.submit(req.opcode(op_id, data))
    handler.request = Body(op=op_id, renames={"name": name_param})
    return handler


def _named_op(name_param, op_id, query_map=None, body=True, renames=None,
              static=None):
    """A handler submitting ``op_id`` for the object named in the URL
    (opcode parameter ``name_param``).

    ``query_map``: query parameter -> (opcode parameter, getter kind);
    ``body``: whether the body gives further parameters (``renames``
    renames its keys); ``static``: fixed opcode parameters.
    """
    async def handler(req):
        params = {name_param: req.params["name"]}
        params.update(static or {})
        params.update(_from_query(req, query_map))
        data = req.body_dict() if body else req.with_depends({})
        if renames:
            data = baserlib.rename_keys(data, renames)
        return await req.submit(req.opcode(op_id, data, static=params))
    if body:
        handler.request = Body(
            op=op_id, renames=dict(renames or {}),
            filled=tuple([name_param] + sorted(static or {}) +
                         sorted(p for p, _ in (query_map or {}).values())))
    else:
        handler.request = DEPENDS_ONLY
    return handler


# --- Plain information ------------------------------------------------------

async def _null(req):
    return None


async def _version(req):
    return RAPI_VERSION


async def _features(req):
    return list(FEATURES)


async def _info(req):
    info = await req.call(luxi.REQ_QUERY_CLUSTER_INFO)
    info["vg_name"] = info.get("volume_group_name")
    info["drbd_helper"] = info.get("drbd_usermode_helper")
    return info


async def _os_list(req):
    op = req.opcode("OP_OS_DIAGNOSE", static={
        "output_fields": ["name", "variants"], "names": []})
    status, result = await req.run_job([op])
    if status != "success" or not isinstance(result[0], list):
        raise baserlib.BadGateway("Can't get OS list: the diagnose job"
                                  " ended with %s: %s" % (status, result))
    names = []
    for name, variants in result[0]:
        if variants:
            names.extend("%s+%s" % (name, v) for v in variants)
        else:
            names.append(name)
    return names


async def _openapi(req):
    from ganeti.rapi import openapi
    return openapi.document()


resource("/", "root", "Legacy entry point",
         Method("GET", _null, "Always null", returns="null"))
resource("/2", "2", "Legacy entry point of version 2",
         Method("GET", _null, "Always null", returns="null"))
resource("/version", "version", "The RAPI version",
         Method("GET", _version, "The remote API version: 2",
                returns="integer"))
resource("/2/features", "features", "Optional features this server has",
         Method("GET", _features, "List of feature strings",
                returns="strings"))
resource("/2/info", "info", "Cluster information",
         Method("GET", _info, "The cluster info dict (luxi QueryClusterInfo)"
                " plus vg_name and drbd_helper", returns="info"))
resource("/2/os", "os", "Operating systems",
         Method("GET", _os_list, "Names of the valid OSes (name+variant)",
                opcodes=("OP_OS_DIAGNOSE",), returns="strings"))
resource("/2/openapi.json", "openapi", "This API's OpenAPI 3 document",
         Method("GET", _openapi, "The OpenAPI document"))


# --- Sessions of the web console ---------------------------------------------

SESSION_LOGIN_BODY = Body(fields={"username": ht.NESTR, "password": ht.STR},
                          required=("username", "password"),
                          name="SessionLogin")


async def _session_login(req):
    store = req.app.sessions
    wait = store.login_wait(req.address)
    if wait:
        retry = ratelimit.retry_after(wait)
        raise baserlib.TooManyRequests(
            "Too many failed logins from %s; retry in %s s"
            % (req.address, retry), headers={"Retry-After": retry})
    body = req.body_dict()
    for key in ("username", "password"):
        if not isinstance(body.get(key), str) or \
                (key == "username" and not body[key]):
            raise BadRequest("Invalid body parameters: %s: %s" % (
                key, "missing" if key not in body else
                "expected a non-empty string" if key == "username" else
                "expected a string"))
    unknown = sorted(set(body) - set(["username", "password"]))
    if unknown:
        raise BadRequest("Invalid body parameters: unknown parameter(s) %s"
                         % ", ".join(unknown))
    user = req.app.users.get(body["username"])
    if user is None or not auth.check_password(user, body["password"]):
        store.failed(req.address, body["username"])
        # no WWW-Authenticate: a browser shows no password popup
        raise baserlib.Unauthorized(
            message="Wrong user name or password",
            explain="The user name or the password is not one of the"
            " RAPI users file")
    session = store.create(user)
    return {"token": session.token, "user": user.name,
            "rights": sorted(user.options),
            "expires": store.expires(session),
            "idle_timeout": store.idle_timeout}


def _session_token(req, verb, what):
    if req.token is None:
        raise BadRequest("%s /2/sessions %s the session whose token the"
                         " request carries (Authorization: Bearer); this"
                         " one carries none" % (verb, what))
    return req.token


async def _session_get(req):
    store = req.app.sessions
    session = store.get(_session_token(req, "GET", "describes"))
    if session is None:
        # ended between the check of the credentials and now
        raise baserlib.Unauthorized(message="Session ended")
    return {"user": req.user.name, "rights": sorted(req.user.options),
            "expires": store.expires(session),
            "idle_timeout": store.idle_timeout}


async def _session_logout(req):
    req.app.sessions.logout(_session_token(req, "DELETE", "ends"))
    return None


resource("/2/sessions", "sessions", "Login sessions of the web console",
         Method("POST", _session_login, "Log in with a user and password of"
                " the users file; the token authenticates later requests"
                " as Authorization: Bearer TOKEN", access=ANON,
                body="{username, password}", returns="session",
                request=SESSION_LOGIN_BODY, public=True),
         Method("GET", _session_get, "The session of the request's Bearer"
                " token: its user, the user's rights now, when it ends",
                access=ANON, returns="session_info", coalesce=False),
         Method("DELETE", _session_logout, "Log out: end the session of the"
                " request's Bearer token", access=ANON, returns="null"))


# --- Tags -------------------------------------------------------------------

def _tags_resource(path, rlib, kind, param=None):
    def target(req):
        return req.params[param] if param else ""

    async def get(req):
        try:
            return await req.call(luxi.REQ_QUERY_TAGS, kind, target(req))
        except errors.OpPrereqError as err:
            if _ecode(err) == errors.ECODE_NOENT:
                raise NotFound(explain="Nothing matches the given URI: %s"
                               % err.args[0])
            raise

    def tags_of(req):
        tags = req.args.getlist("tag")
        if not tags:
            raise BadRequest("Query parameter 'tag' is required: give the"
                             " tags as ?tag=a&tag=b")
        return tags

    def change(op_id):
        async def handler(req):
            static = {"kind": kind, "tags": tags_of(req)}
            if param:
                static["name"] = target(req)
            return await req.submit(req.opcode(op_id, static=static))
        return handler

    what = kind if kind != "nodegroup" else "node group"
    resource(path, rlib, "Tags of the %s" % what,
             Method("GET", get, "The %s's tags" % what, returns="strings"),
             Method("PUT", change("OP_TAGS_SET"), "Add tags",
                    opcodes=("OP_TAGS_SET",), query=(TAG, DRY_RUN, REASON),
                    returns="job_id"),
             Method("DELETE", change("OP_TAGS_DEL"), "Remove tags",
                    opcodes=("OP_TAGS_DEL",), query=(TAG, DRY_RUN, REASON),
                    returns="job_id"))


def _ecode(err):
    return err.args[1] if len(err.args) > 1 else None


# --- Cluster ----------------------------------------------------------------

async def _cluster_modify(req):
    body = req.body_dict()
    if "compression_tools" in body:
        raise BadRequest("Invalid body parameters: compression_tools: the"
                         " compression tools cannot be changed over RAPI")
    return await req.submit(req.opcode("OP_CLUSTER_SET_PARAMS", body))


async def _redistribute(req):
    return await req.submit(req.opcode("OP_CLUSTER_REDIST_CONF",
                                       req.with_depends({})))


_tags_resource("/2/tags", "tags", constants.TAG_CLUSTER)
resource("/2/modify", "modify", "Cluster parameters",
         Method("PUT", _cluster_modify, "Change cluster parameters (body:"
                " OP_CLUSTER_SET_PARAMS parameters)",
                opcodes=("OP_CLUSTER_SET_PARAMS",), query=(DRY_RUN, REASON),
                body="OP_CLUSTER_SET_PARAMS parameters", returns="job_id",
                request=Body(op="OP_CLUSTER_SET_PARAMS",
                             exclude=("compression_tools",))))
resource("/2/redistribute-config", "redist_config",
         "Copy the configuration to all nodes",
         Method("PUT", _redistribute, "Redistribute the configuration",
                opcodes=("OP_CLUSTER_REDIST_CONF",), query=(DRY_RUN, REASON),
                returns="job_id", request=DEPENDS_ONLY))


# --- The maintenance daemon's incidents --------------------------------------

async def _maintenance(req):
    info = await req.call(luxi.REQ_QUERY_CLUSTER_INFO)
    return info.get("maintenance") or {}


async def _incident_cancel(req):
    return await req.submit(req.opcode(
        "OP_CLUSTER_REPAIR_CANCEL",
        static={"incident_id": req.params["incident"]}))


resource("/2/maintenance", "maintenance",
         "The maintenance daemon's switches and incidents",
         Method("GET", _maintenance, "Its switches (round_delay, balance,"
                " balance_threshold, harep, balance_disk_moves,"
                " balance_load, balance_hold_down, balance_max_moves), the"
                " jobs of its round, the nodes it evacuated and its"
                " incidents (id, node, node_name, original, action,"
                " repair-status, jobs, tag)", returns="maintenance"))
resource("/2/maintenance/incidents/{incident}/cancel",
         "maintenance_incidents_incident_cancel",
         "Cancel an incident of the maintenance daemon",
         Method("PUT", _incident_cancel, "Take no more action for it; it is"
                " forgotten once no node reports it",
                opcodes=("OP_CLUSTER_REPAIR_CANCEL",),
                query=(DRY_RUN, REASON), returns="job_id"))


# --- Instances --------------------------------------------------------------

INSTANCE_RENAMES = {"name": "instance_name", "os": "os_type"}
INSTANCE_MODIFY_RENAMES = {"custom_beparams": "beparams",
                           "custom_hvparams": "hvparams"}
#: what a forthcoming instance may leave out
FORTHCOMING_DEFAULTS = {"instance_name": "", "mode": "create", "disks": [],
                        "nics": []}


#: the body of POST /2/instances
INSTANCE_CREATE_BODY = Body(
    op="OP_INSTANCE_CREATE", renames=INSTANCE_RENAMES,
    optional=tuple(sorted(FORTHCOMING_DEFAULTS)),
    extra={"__version__": ht.one_of(1)}, required=("__version__",),
    name="InstanceCreate")
#: one instance of POST /2/instances-multi-alloc
INSTANCE_NESTED_BODY = Body(
    op="OP_INSTANCE_CREATE", renames=INSTANCE_RENAMES,
    extra={"__version__": ht.ANY}, name="InstanceCreateNested")


def _creation_params(data, where="body"):
    """An instance creation body (without ``__version__``) as
    OP_INSTANCE_CREATE parameters."""
    data = baserlib.rename_keys(data, INSTANCE_RENAMES, where)
    return data


async def _instances_create(req):
    body = req.body_dict()
    version = body.pop("__version__", 0)
    if version == 0:
        raise BadRequest("Invalid body: __version__: instance creation"
                         " request version 0 is no longer supported; send"
                         " \"__version__\": 1")
    if version != 1:
        raise BadRequest("Invalid body: __version__: unsupported request"
                         " data version %r (only 1 is supported)"
                         % (version,))
    params = _creation_params(body)
    defaults = FORTHCOMING_DEFAULTS if params.get("forthcoming") is True \
        else None
    op = req.opcode("OP_INSTANCE_CREATE", params, defaults=defaults)
    return await req.submit(op)


async def _instance_commit(req):
    """POST /2/instances/{name}/create: the forthcoming instance becomes
    real; the body may give what it still lacks."""
    body = req.body_dict()
    body.pop("__version__", None)
    params = _creation_params(body)
    if params.get("forthcoming"):
        raise BadRequest("Invalid body parameters: forthcoming: this"
                         " resource turns a forthcoming instance into a real"
                         " one; it cannot be true here")
    defaults = {"mode": "create", "disks": [], "nics": []}
    op = req.opcode("OP_INSTANCE_CREATE", params, defaults=defaults,
                    static={"instance_name": req.params["name"],
                            "commit": True})
    return await req.submit(op)


async def _multi_alloc(req):
    body = req.body_dict()
    instances = body.pop("instances", None)
    if not isinstance(instances, list):
        raise BadRequest("Invalid body parameters: instances: expected a"
                         " list of instance creation objects")
    nested = []
    for idx, inst in enumerate(instances):
        if not isinstance(inst, dict):
            raise BadRequest("Invalid body parameters: instances/%d:"
                             " expected an object" % idx)
        inst = dict(inst)
        inst.pop("__version__", None)
        params = _creation_params(inst, "instances/%d" % idx)
        nested.append(baserlib.build_opcode("OP_INSTANCE_CREATE", params,
                                            where="instances/%d" % idx))
    body["instances"] = nested
    return await req.submit(req.opcode("OP_INSTANCE_MULTI_ALLOC", body))


_instance_op = functools.partial(_named_op, "instance_name")


def _from_query(req, query_map):
    result = {}
    for qname, (pname, kind) in (query_map or {}).items():
        if qname not in req.args:
            continue
        if kind == "bool":
            result[pname] = req.args.bool(qname)
        elif kind == "int":
            result[pname] = req.args.int(qname)
        else:
            result[pname] = req.args.get(qname)
    return result


async def _instance_info(req):
    await _require(req, "instance", req.params["name"])
    static = {"instances": [req.params["name"]],
              "static": req.args.bool("static")}
    return await req.submit(req.opcode("OP_INSTANCE_QUERY_DATA",
                                       req.with_depends({}), static=static))


async def _instance_reboot(req):
    rtype = req.args.get("type", opcodes.REBOOT_HARD)
    if rtype not in opcodes.REBOOT_TYPES:
        raise BadRequest("Query parameter 'type': expected one of %s, got %r"
                         % (", ".join(sorted(opcodes.REBOOT_TYPES)), rtype))
    static = {"instance_name": req.params["name"], "reboot_type": rtype}
    static.update(_from_query(req, {"ignore_secondaries":
                                    ("ignore_secondaries", "bool")}))
    return await req.submit(req.opcode("OP_INSTANCE_REBOOT",
                                       req.body_dict(), static=static))


async def _instance_reinstall(req):
    name = req.params["name"]
    if req.body is not None:
        body = req.body_dict()
        unknown = sorted(set(body) - {"os", "start", "osparams", "depends"})
        if unknown:
            raise BadRequest("Invalid body parameters: %s: unknown (known:"
                             " os, start, osparams)" % ", ".join(unknown))
        os_name = body.get("os")
        start = body.get("start", True)
        if not isinstance(start, bool):
            raise BadRequest("Invalid body parameters: start: expected a"
                             " boolean, got %r" % (start,))
        osparams = body.get("osparams")
    else:
        os_name = req.args.get("os")
        start = not req.args.bool("nostartup")
        osparams = None
    ops = [req.opcode("OP_INSTANCE_SHUTDOWN",
                      req.with_depends({}),
                      static={"instance_name": name}),
           req.opcode("OP_INSTANCE_REINSTALL", static={
               "instance_name": name, "os_type": os_name,
               "osparams": osparams})]
    if start:
        ops.append(req.opcode("OP_INSTANCE_STARTUP",
                              static={"instance_name": name, "force": False}))
    return await req.submit(*ops)


def _disk_list(value, where):
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return [int(v) for v in value.split(",") if v.strip() != ""]
        except ValueError:
            raise BadRequest("Invalid %s: disks: expected a list of disk"
                             " indices or '1,2', got %r" % (where, value))
    return value


async def _instance_replace_disks(req):
    data = req.body_dict()
    if "disks" in data:
        data["disks"] = _disk_list(data["disks"], "body")
    query = _from_query(req, {"mode": ("mode", "str"),
                              "remote_node": ("remote_node", "str"),
                              "iallocator": ("iallocator", "str"),
                              "early_release": ("early_release", "bool")})
    if "disks" in req.args:
        query["disks"] = _disk_list(req.args.get("disks"), "query")
    for key in query:
        if key in data:
            raise BadRequest("Invalid request: %s: given both in the query"
                             " string and in the body" % key)
    data.update(query)
    data.setdefault("mode", opcodes.REPLACE_DISK_AUTO)
    return await req.submit(req.opcode(
        "OP_INSTANCE_REPLACE_DISKS", data,
        static={"instance_name": req.params["name"]}))


async def _instance_grow(req):
    static = {"instance_name": req.params["name"],
              "disk": req.params["disk_index"]}
    return await req.submit(req.opcode("OP_INSTANCE_GROW_DISK",
                                       req.body_dict(), static=static))


async def _instance_export(req):
    data = baserlib.rename_keys(req.body_dict(),
                                {"destination": "target_node"})
    return await req.submit(req.opcode(
        "OP_BACKUP_EXPORT", data,
        static={"instance_name": req.params["name"]}))


async def _instance_console(req):
    """The instance's console description (the ``console`` query field),
    503 while the instance does not run: like Ganeti, a read that submits
    no job."""
    name = req.params["name"]
    result = await req.query("instance", ["console", "oper_state"],
                             _name_filter(name))
    if not result["data"]:
        raise NotFound(explain="Nothing matches the given URI: Instance '%s'"
                       " not known" % name)
    (_, console), (_, running) = result["data"][0]
    if running is not True or not isinstance(console, dict):
        raise baserlib.ServiceUnavailable("Instance console unavailable")
    return console


_instance = "/2/instances/{name}"
resource("/2/instances", "instances", "Instances",
         Method("GET", _list("instance", "id", "/2/instances/%s", I_FIELDS,
                             _fix_instance),
                "All instances (names and URIs, or full with bulk=1)",
                query=(BULK,), returns=QueryList("instance", I_FIELDS, "id")),
         Method("POST", _instances_create,
                "Create an instance (__version__ 1 body; with forthcoming"
                " true every parameter is optional and the job's result is"
                " the new instance's UUID)", opcodes=("OP_INSTANCE_CREATE",),
                query=(DRY_RUN, REASON), body="instance creation",
                returns="job_id", request=INSTANCE_CREATE_BODY))
resource("/2/instances-multi-alloc", "instances_multi_alloc",
         "Several instances at once",
         Method("POST", _multi_alloc, "Allocate and create instances",
                opcodes=("OP_INSTANCE_MULTI_ALLOC",),
                query=(DRY_RUN, REASON), body="{instances: [...]}",
                returns="job_id", request=Body(
                    op="OP_INSTANCE_MULTI_ALLOC",
                    override={"instances": [INSTANCE_NESTED_BODY]})))
resource(_instance, "instances_name", "One instance (by name, or by UUID)",
         Method("GET", _get("instance", I_FIELDS_ONE, _fix_instance),
                "The instance (bulk format, and whether it is"
                " forthcoming)",
                returns=QueryObject("instance", I_FIELDS_ONE)),
         Method("DELETE", _instance_op("OP_INSTANCE_REMOVE"),
                "Remove the instance", opcodes=("OP_INSTANCE_REMOVE",),
                query=(DRY_RUN, REASON), body="OP_INSTANCE_REMOVE parameters",
                returns="job_id"))
resource(_instance + "/info", "instances_name_info",
         "Detailed instance data (a job)",
         Method("GET", _instance_info, "Submit a job that collects the"
                " instance's data; returns its id",
                opcodes=("OP_INSTANCE_QUERY_DATA",),
                query=(Param("static", "boolean", "configuration data only"),
                       REASON), returns="job_id", request=DEPENDS_ONLY))
_tags_resource(_instance + "/tags", "instances_name_tags",
               constants.TAG_INSTANCE, "name")


async def _autorepair_rows(req, qfilter=None):
    rows = await req.query_dicts("instance", ["name", "autorepair"],
                                 qfilter)
    return [dict(row["autorepair"] or {}, name=row["name"]) for row in rows]


async def _autorepair_all(req):
    return await _autorepair_rows(req)


async def _autorepair_one(req):
    name = req.params["name"]
    rows = await _autorepair_rows(req, ["|", ["=", "name", name],
                                        ["=", "uuid", name]])
    if not rows:
        raise NotFound(explain="Instance %s not known" % name)
    return rows[0]


resource("/2/autorepair", "autorepair",
         "What auto-repair thinks of every instance",
         Method("GET", _autorepair_all, "Per instance: name, state"
                " (healthy, needs-repair, pending, failed, suspended),"
                " policy, allowed type and its source, what it needs, the"
                " pending repair, the last result, ignored tags",
                returns="autorepair_list"))
resource(_instance + "/autorepair", "instances_name_autorepair",
         "What auto-repair thinks of the instance",
         Method("GET", _autorepair_one, "As one entry of /2/autorepair",
                returns="autorepair"))
resource(_instance + "/reboot", "instances_name_reboot", "Reboot",
         Method("POST", _instance_reboot, "Reboot the instance",
                opcodes=("OP_INSTANCE_REBOOT",),
                query=(Param("type", "string", "soft, hard (default) or"
                             " full"),
                       Param("ignore_secondaries", "boolean"), DRY_RUN,
                       REASON), body="OP_INSTANCE_REBOOT parameters",
                returns="job_id", request=Body(
                    op="OP_INSTANCE_REBOOT",
                    filled=("instance_name", "reboot_type",
                            "ignore_secondaries"))))
resource(_instance + "/shutdown", "instances_name_shutdown", "Shutdown",
         Method("PUT", _instance_op("OP_INSTANCE_SHUTDOWN", {
             "no_remember": ("no_remember", "bool")}),
             "Shut the instance down", opcodes=("OP_INSTANCE_SHUTDOWN",),
             query=(Param("no_remember", "boolean"), DRY_RUN, REASON),
             body="OP_INSTANCE_SHUTDOWN parameters (e.g. timeout)",
             returns="job_id"))
resource(_instance + "/startup", "instances_name_startup", "Startup",
         Method("PUT", _instance_op("OP_INSTANCE_STARTUP", {
             "force": ("force", "bool"),
             "no_remember": ("no_remember", "bool")}),
             "Start the instance", opcodes=("OP_INSTANCE_STARTUP",),
             query=(FORCE, Param("no_remember", "boolean"), DRY_RUN, REASON),
             body="OP_INSTANCE_STARTUP parameters", returns="job_id"))
resource(_instance + "/reinstall", "instances_name_reinstall", "Reinstall",
         Method("POST", _instance_reinstall,
                "Reinstall the OS: one job of shutdown, reinstall and"
                " (start) startup",
                opcodes=("OP_INSTANCE_SHUTDOWN", "OP_INSTANCE_REINSTALL",
                         "OP_INSTANCE_STARTUP"),
                query=(Param("os", "string", "legacy: the OS"),
                       Param("nostartup", "boolean", "legacy: do not start"),
                       REASON),
                body="{os, start (default true), osparams}",
                returns="job_id", request=Body(fields={
                    "os": op_param_type("OP_INSTANCE_REINSTALL", "os_type"),
                    "start": ht.BOOL,
                    "osparams": op_param_type("OP_INSTANCE_REINSTALL",
                                              "osparams"),
                    "depends": DEPENDS_ONLY.fields["depends"]})))
resource(_instance + "/replace-disks", "instances_name_replace_disks",
         "Replace disks",
         Method("POST", _instance_replace_disks, "Replace the disks",
                opcodes=("OP_INSTANCE_REPLACE_DISKS",),
                query=(Param("mode", "string"), Param("disks", "string",
                                                      "indices, '0,1'"),
                       Param("remote_node", "string"),
                       Param("iallocator", "string"),
                       Param("early_release", "boolean"), DRY_RUN, REASON),
                body="OP_INSTANCE_REPLACE_DISKS parameters",
                returns="job_id", request=Body(
                    op="OP_INSTANCE_REPLACE_DISKS",
                    filled=("instance_name", "mode", "remote_node",
                            "iallocator", "early_release", "disks"),
                    optional=("mode",),
                    override={"disks": ht.either(
                        op_param_type("OP_INSTANCE_REPLACE_DISKS", "disks"),
                        ht.STR, desc="disk indices: a list, or a string"
                        " '0,1'")})))
resource(_instance + "/activate-disks", "instances_name_activate_disks",
         "Activate disks",
         Method("PUT", _instance_op("OP_INSTANCE_ACTIVATE_DISKS", {
             "ignore_size": ("ignore_size", "bool")}),
             "Activate the instance's disks",
             opcodes=("OP_INSTANCE_ACTIVATE_DISKS",),
             query=(Param("ignore_size", "boolean"), DRY_RUN, REASON),
             body="OP_INSTANCE_ACTIVATE_DISKS parameters", returns="job_id"))
resource(_instance + "/deactivate-disks", "instances_name_deactivate_disks",
         "Deactivate disks",
         Method("PUT", _instance_op("OP_INSTANCE_DEACTIVATE_DISKS", {
             "force": ("force", "bool")}),
             "Deactivate the instance's disks",
             opcodes=("OP_INSTANCE_DEACTIVATE_DISKS",),
             query=(FORCE, DRY_RUN, REASON),
             body="OP_INSTANCE_DEACTIVATE_DISKS parameters",
             returns="job_id"))
resource(_instance + "/recreate-disks", "instances_name_recreate_disks",
         "Recreate disks",
         Method("POST", _instance_op("OP_INSTANCE_RECREATE_DISKS"),
                "Recreate the instance's disks",
                opcodes=("OP_INSTANCE_RECREATE_DISKS",),
                query=(DRY_RUN, REASON),
                body="OP_INSTANCE_RECREATE_DISKS parameters",
                returns="job_id"))
resource(_instance + "/disk/{disk_index}/grow", "instances_name_disk_grow",
         "Grow a disk",
         Method("POST", _instance_grow, "Grow disk {disk_index}",
                opcodes=("OP_INSTANCE_GROW_DISK",), query=(DRY_RUN, REASON),
                body="{amount (MiB), absolute, wait_for_sync, ...}",
                returns="job_id", request=Body(
                    op="OP_INSTANCE_GROW_DISK",
                    filled=("instance_name", "disk"))))
resource(_instance + "/prepare-export", "instances_name_prepare_export",
         "Prepare an export",
         Method("PUT", _instance_op("OP_BACKUP_PREPARE", {
             "mode": ("mode", "str")}, body=False),
             "Prepare the instance for export",
             opcodes=("OP_BACKUP_PREPARE",),
             query=(Param("mode", "string", "local or remote",
                          required=True), REASON), returns="job_id"))
resource(_instance + "/export", "instances_name_export", "Export",
         Method("PUT", _instance_export, "Export the instance",
                opcodes=("OP_BACKUP_EXPORT",), query=(DRY_RUN, REASON),
                body="OP_BACKUP_EXPORT parameters (destination ="
                " target_node)", returns="job_id", request=Body(
                    op="OP_BACKUP_EXPORT",
                    renames={"destination": "target_node"},
                    filled=("instance_name",))))
resource(_instance + "/migrate", "instances_name_migrate", "Migrate",
         Method("PUT", _instance_op("OP_INSTANCE_MIGRATE"),
                "Migrate the instance", opcodes=("OP_INSTANCE_MIGRATE",),
                query=(DRY_RUN, REASON),
                body="OP_INSTANCE_MIGRATE parameters", returns="job_id"))
resource(_instance + "/failover", "instances_name_failover", "Failover",
         Method("PUT", _instance_op("OP_INSTANCE_FAILOVER"),
                "Fail the instance over", opcodes=("OP_INSTANCE_FAILOVER",),
                query=(DRY_RUN, REASON),
                body="OP_INSTANCE_FAILOVER parameters", returns="job_id"))
resource(_instance + "/rename", "instances_name_rename",
         "Rename (also names a forthcoming instance given by UUID)",
         Method("PUT", _instance_op("OP_INSTANCE_RENAME"),
                "Rename the instance", opcodes=("OP_INSTANCE_RENAME",),
                query=(DRY_RUN, REASON),
                body="{new_name, ip_check, name_check}", returns="job_id"))
resource(_instance + "/modify", "instances_name_modify",
         "Modify (also a forthcoming instance given by UUID)",
         Method("PUT", _instance_op("OP_INSTANCE_SET_PARAMS",
                                    renames=INSTANCE_MODIFY_RENAMES),
                "Change the instance's parameters",
                opcodes=("OP_INSTANCE_SET_PARAMS",), query=(DRY_RUN, REASON),
                body="OP_INSTANCE_SET_PARAMS parameters", returns="job_id"))
resource(_instance + "/create", "instances_name_create",
         "Create a forthcoming instance for real",
         Method("POST", _instance_commit,
                "Turn the forthcoming instance into a real one (body: the"
                " creation parameters it still lacks)",
                opcodes=("OP_INSTANCE_CREATE",), query=(DRY_RUN, REASON),
                body="instance creation parameters", returns="job_id",
                request=Body(op="OP_INSTANCE_CREATE",
                             renames=INSTANCE_RENAMES,
                             filled=("instance_name", "commit"),
                             optional=("mode", "disks", "nics"),
                             extra={"__version__": ht.ANY})))
resource(_instance + "/console", "instances_name_console", "Console",
         Method("GET", _instance_console, "How to reach the console of a"
                " running instance (Ganeti's console description; a query,"
                " no job)", access=READ_WRITE, returns="console"))
# the serial console itself, relayed by the master (docs/console.rst)
_sessions = _instance + "/console/sessions"
resource(_sessions, "instances_name_console_sessions",
         "Serial console sessions (kvm instances with serial_console)",
         Method("POST", rapi_console.open_session, "Open a session on the"
                " serial console of the running instance (a new one ends"
                " the instance's previous session); no job",
                access=WRITE, returns="console_session"))
resource(_sessions + "/{session}", "instances_name_console_sessions_id",
         "One console session (its owner's only)",
         Method("DELETE", rapi_console.close_session, "End the session",
                access=WRITE, returns="console_closed"))
resource(_sessions + "/{session}/output",
         "instances_name_console_sessions_id_output",
         "The console's output, numbered by byte offset",
         Method("GET", rapi_console.read_output, "The output after"
                " ?offset=N: a long poll (up to ?wait=20 seconds) answering"
                " JSON, or with Accept: text/event-stream Server-Sent Events"
                " (output events of base64 data whose id is the offset to"
                " resume from with Last-Event-ID; gap, closed, error"
                " events)", access=WRITE, streams=True,
                query=(Param("offset", "integer", "the byte offset to read"
                             " from (default 0)"),
                       Param("wait", "integer", "seconds to wait for output"
                             " (at most 20; default 20)")),
                returns="console_output"))
resource(_sessions + "/{session}/input",
         "instances_name_console_sessions_id_input",
         "Input to the console",
         Method("POST", rapi_console.write_input, "Send keystrokes to the"
                " console", access=WRITE, body="{data, encoding}",
                returns="console_written", request=Body(
                    fields={"data": ht.NESTR,
                            "encoding": ht.one_of(*rapi_console.ENCODINGS)},
                    required=("data",), name="ConsoleInput")))


# --- Nodes ------------------------------------------------------------------

async def _node_get(req):
    row = await _one(req, "node", N_FIELDS, req.params["name"], _fix_node)
    row["secondary_ip"] = row.get("sip")
    return row


async def _node_role_get(req):
    rows = await req.query_dicts("node", ["role"],
                                 _name_filter(req.params["name"]))
    if not rows:
        raise NotFound(explain="Nothing matches the given URI: node %r does"
                       " not exist" % req.params["name"])
    return NODE_ROLES.get(rows[0]["role"], rows[0]["role"])


_ROLE_FLAGS = {
    "master-candidate": {"master_candidate": True},
    "regular": {"master_candidate": False, "drained": False,
                "offline": False},
    "drained": {"drained": True},
    "offline": {"offline": True},
}


async def _node_role_set(req):
    role = req.body
    if role == "master":
        raise BadRequest("Invalid body: the role 'master' cannot be set;"
                         " use a master failover")
    if not isinstance(role, str) or role not in _ROLE_FLAGS:
        raise BadRequest("Invalid body: expected a role (one of %s) as a"
                         " JSON string, got %r"
                         % (", ".join(sorted(_ROLE_FLAGS)), role))
    static = dict(_ROLE_FLAGS[role])
    static["node_name"] = req.params["name"]
    static["force"] = req.args.bool("force")
    static.update(_from_query(req, {"auto-promote": ("auto_promote",
                                                     "bool")}))
    return await req.submit(req.opcode("OP_NODE_SET_PARAMS", static=static))


_node_op = functools.partial(_named_op, "node_name")


async def _node_migrate(req):
    if req.body is not None:
        data = req.body_dict()
    else:
        data = {}
        if "live" in req.args:
            data["mode"] = (constants.HT_MIGRATION_LIVE
                            if req.args.bool("live")
                            else constants.HT_MIGRATION_NONLIVE)
        if "mode" in req.args:
            data["mode"] = req.args.get("mode")
    return await req.submit(req.opcode(
        "OP_NODE_MIGRATE", data, static={"node_name": req.params["name"]}))


async def _node_storage(req):
    await _require(req, "node", req.params["name"])
    static = {"nodes": [req.params["name"]],
              "storage_type": req.args.get("storage_type"),
              "output_fields": [f for f in req.args.required(
                  "output_fields").split(",") if f]}
    if "name" in req.args:
        static["name"] = req.args.get("name")
    return await req.submit(req.opcode("OP_NODE_QUERY_STORAGE",
                                       req.with_depends({}), static=static))


async def _node_storage_modify(req):
    changes = {}
    if "allocatable" in req.args:
        changes["allocatable"] = req.args.bool("allocatable")
    static = {"node_name": req.params["name"],
              "storage_type": req.args.required("storage_type"),
              "name": req.args.required("name"), "changes": changes}
    return await req.submit(req.opcode("OP_NODE_MODIFY_STORAGE",
                                       req.with_depends({}), static=static))


async def _node_storage_repair(req):
    static = {"node_name": req.params["name"],
              "storage_type": req.args.required("storage_type"),
              "name": req.args.required("name")}
    if "ignore_consistency" in req.args:
        static["ignore_consistency"] = req.args.bool("ignore_consistency")
    return await req.submit(req.opcode("OP_REPAIR_NODE_STORAGE",
                                       req.with_depends({}), static=static))


_node = "/2/nodes/{name}"
resource("/2/nodes", "nodes", "Nodes",
         Method("GET", _list("node", "id", "/2/nodes/%s", N_FIELDS,
                             _fix_node),
                "All nodes (names and URIs, or full with bulk=1)",
                query=(BULK,), returns=QueryList("node", N_FIELDS, "id")))
resource(_node, "nodes_name", "One node",
         Method("GET", _node_get, "The node (bulk format plus"
                " secondary_ip)", returns=QueryObject(
                    "node", N_FIELDS, {"secondary_ip": "sip"})))
resource(_node + "/role", "nodes_name_role", "The node's role",
         Method("GET", _node_role_get, "master, master-candidate, regular,"
                " drained or offline", returns="node_role"),
         Method("PUT", _node_role_set, "Set the role (body: the role as a"
                " JSON string)", opcodes=("OP_NODE_SET_PARAMS",),
                query=(FORCE, Param("auto-promote", "boolean"), DRY_RUN,
                       REASON), body="role string", returns="job_id",
                request=Body(whole=ht.one_of(*sorted(_ROLE_FLAGS)))))
resource(_node + "/evacuate", "nodes_name_evacuate", "Evacuate",
         Method("POST", _node_op("OP_NODE_EVACUATE"),
                "Move instances off the node (the job's result lists the"
                " evacuation jobs)", opcodes=("OP_NODE_EVACUATE",),
                query=(DRY_RUN, REASON),
                body="{mode, iallocator, remote_node, early_release}",
                returns="job_id"))
resource(_node + "/migrate", "nodes_name_migrate", "Migrate all primaries",
         Method("POST", _node_migrate, "Migrate the node's primary"
                " instances", opcodes=("OP_NODE_MIGRATE",),
                query=(Param("live", "boolean", "legacy"),
                       Param("mode", "string", "legacy"), DRY_RUN, REASON),
                body="OP_NODE_MIGRATE parameters", returns="job_id",
                request=Body(op="OP_NODE_MIGRATE", filled=("node_name",))))
resource(_node + "/modify", "nodes_name_modify", "Modify",
         Method("POST", _node_op("OP_NODE_SET_PARAMS"),
                "Change the node's parameters",
                opcodes=("OP_NODE_SET_PARAMS",), query=(DRY_RUN, REASON),
                body="OP_NODE_SET_PARAMS parameters", returns="job_id"))
resource(_node + "/powercycle", "nodes_name_powercycle", "Power cycle",
         Method("POST", _node_op("OP_NODE_POWERCYCLE",
                                 {"force": ("force", "bool")}, body=False),
                "Power-cycle the node", opcodes=("OP_NODE_POWERCYCLE",),
                query=(FORCE, REASON), returns="job_id"))
resource(_node + "/storage", "nodes_name_storage", "Storage units",
         Method("GET", _node_storage, "Submit a storage query job",
                access=WRITE, opcodes=("OP_NODE_QUERY_STORAGE",),
                query=(Param("storage_type", "string"),
                       Param("output_fields", "string", "comma-separated",
                             required=True), REASON), returns="job_id",
                request=DEPENDS_ONLY))
resource(_node + "/storage/modify", "nodes_name_storage_modify",
         "Modify a storage unit",
         Method("PUT", _node_storage_modify, "Change a storage unit",
                opcodes=("OP_NODE_MODIFY_STORAGE",),
                query=(Param("storage_type", "string", required=True),
                       Param("name", "string", required=True),
                       Param("allocatable", "boolean"), REASON),
                returns="job_id", request=DEPENDS_ONLY))
resource(_node + "/storage/repair", "nodes_name_storage_repair",
         "Repair a storage unit",
         Method("PUT", _node_storage_repair, "Repair a storage unit",
                opcodes=("OP_REPAIR_NODE_STORAGE",),
                query=(Param("storage_type", "string", required=True),
                       Param("name", "string", required=True),
                       Param("ignore_consistency", "boolean"), REASON),
                returns="job_id", request=DEPENDS_ONLY))
_tags_resource(_node + "/tags", "nodes_name_tags", constants.TAG_NODE,
               "name")


# --- Node groups ------------------------------------------------------------

GROUP_MODIFY_RENAMES = {"custom_ndparams": "ndparams",
                        "custom_ipolicy": "ipolicy",
                        "custom_diskparams": "diskparams"}


_group_op = functools.partial(_named_op, "group_name")

_group = "/2/groups/{name}"
resource("/2/groups", "groups", "Node groups",
         Method("GET", _list("group", "name", "/2/groups/%s", G_FIELDS),
                "All groups (names and URIs, or full with bulk=1)",
                query=(BULK,), returns=QueryList("group", G_FIELDS, "name")),
         Method("POST", _add("OP_GROUP_ADD", "group_name"),
                "Add a group (body: name, alloc_policy, ...)",
                opcodes=("OP_GROUP_ADD",),
                query=(DRY_RUN, REASON), body="OP_GROUP_ADD parameters",
                returns="job_id"))
resource(_group, "groups_name", "One node group",
         Method("GET", _get("group", G_FIELDS), "The group (bulk format)",
                returns=QueryObject("group", G_FIELDS)),
         Method("DELETE", _group_op("OP_GROUP_REMOVE"), "Remove the group",
                opcodes=("OP_GROUP_REMOVE",), query=(DRY_RUN, REASON),
                returns="job_id"))
resource(_group + "/modify", "groups_name_modify", "Modify",
         Method("PUT", _group_op("OP_GROUP_SET_PARAMS",
                                 renames=GROUP_MODIFY_RENAMES),
                "Change the group's parameters",
                opcodes=("OP_GROUP_SET_PARAMS",), query=(DRY_RUN, REASON),
                body="OP_GROUP_SET_PARAMS parameters", returns="job_id"))
resource(_group + "/rename", "groups_name_rename", "Rename",
         Method("PUT", _group_op("OP_GROUP_RENAME"), "Rename the group",
                opcodes=("OP_GROUP_RENAME",), query=(DRY_RUN, REASON),
                body="{new_name}", returns="job_id"))
resource(_group + "/assign-nodes", "groups_name_assign_nodes",
         "Assign nodes",
         Method("PUT", _group_op("OP_GROUP_ASSIGN_NODES",
                                 {"force": ("force", "bool")}),
                "Move nodes into the group",
                opcodes=("OP_GROUP_ASSIGN_NODES",),
                query=(FORCE, DRY_RUN, REASON), body="{nodes}",
                returns="job_id"))
resource(_group + "/evacuate", "groups_name_evacuate",
         "Evacuate (this project's addition)",
         Method("POST", _group_op("OP_GROUP_EVACUATE"),
                "Move every instance out of the group, as an instance"
                " allocator plans it (the job's result lists the jobs it"
                " submitted)", opcodes=("OP_GROUP_EVACUATE",),
                query=(DRY_RUN, REASON),
                body="{iallocator, target_groups, early_release,"
                " sequential, force_failover, iallocator_params}",
                returns="job_id"))
_tags_resource(_group + "/tags", "groups_name_tags",
               constants.TAG_NODEGROUP, "name")


# --- Networks ---------------------------------------------------------------

_network_op = functools.partial(_named_op, "network_name")

_network = "/2/networks/{name}"
resource("/2/networks", "networks", "Networks",
         Method("GET", _list("network", "name", "/2/networks/%s",
                             NET_FIELDS),
                "All networks (names and URIs, or full with bulk=1)",
                query=(BULK,),
                returns=QueryList("network", NET_FIELDS, "name")),
         Method("POST", _add("OP_NETWORK_ADD", "network_name"),
                "Add a network",
                opcodes=("OP_NETWORK_ADD",), query=(DRY_RUN, REASON),
                body="OP_NETWORK_ADD parameters (name = network_name)",
                returns="job_id"))
resource(_network, "networks_name", "One network",
         Method("GET", _get("network", NET_FIELDS),
                "The network (bulk format)",
                returns=QueryObject("network", NET_FIELDS)),
         Method("DELETE", _network_op("OP_NETWORK_REMOVE"),
                "Remove the network", opcodes=("OP_NETWORK_REMOVE",),
                query=(DRY_RUN, REASON), returns="job_id"))
resource(_network + "/connect", "networks_name_connect", "Connect",
         Method("PUT", _network_op("OP_NETWORK_CONNECT"),
                "Connect the network to a group",
                opcodes=("OP_NETWORK_CONNECT",), query=(DRY_RUN, REASON),
                body="{group_name, network_mode, network_link}",
                returns="job_id"))
resource(_network + "/disconnect", "networks_name_disconnect", "Disconnect",
         Method("PUT", _network_op("OP_NETWORK_DISCONNECT"),
                "Disconnect the network from a group",
                opcodes=("OP_NETWORK_DISCONNECT",), query=(DRY_RUN, REASON),
                body="{group_name}", returns="job_id"))
resource(_network + "/modify", "networks_name_modify", "Modify",
         Method("PUT", _network_op("OP_NETWORK_SET_PARAMS"),
                "Change the network's parameters",
                opcodes=("OP_NETWORK_SET_PARAMS",), query=(DRY_RUN, REASON),
                body="OP_NETWORK_SET_PARAMS parameters", returns="job_id"))
_tags_resource(_network + "/tags", "networks_name_tags",
               constants.TAG_NETWORK, "name")


# --- Jobs -------------------------------------------------------------------

async def _jobs_list(req):
    if req.args.bool("bulk"):
        rows = await req.call(luxi.REQ_QUERY_JOBS, None, J_FIELDS_BULK)
        return [dict(zip(J_FIELDS_BULK, row)) for row in rows
                if row is not None]
    rows = await req.call(luxi.REQ_QUERY_JOBS, None, ["id"])
    ids = sorted(row[0] for row in rows if row is not None)
    return baserlib.id_list(ids, "id", "/2/jobs/%s")


def _unknown_job(job_id):
    return NotFound(explain="Nothing matches the given URI: job %s does not"
                    " exist" % job_id)


async def _job_get(req):
    job_id = req.params["job_id"]
    rows = await req.call(luxi.REQ_QUERY_JOBS, [job_id], J_FIELDS)
    if not rows or rows[0] is None:
        raise _unknown_job(job_id)
    return dict(zip(J_FIELDS, rows[0]))


async def _job_cancel(req):
    job_id = req.params["job_id"]
    rows = await req.call(luxi.REQ_QUERY_JOBS, [job_id], ["id"])
    if not rows or rows[0] is None:
        raise _unknown_job(job_id)
    return await req.call(luxi.REQ_CANCEL_JOB, job_id, False)


async def _job_wait(req):
    job_id = req.params["job_id"]
    body = req.body_dict()
    fields = body.get("fields")
    if not isinstance(fields, list) or \
            not all(isinstance(f, str) for f in fields):
        raise BadRequest("Invalid body parameters: fields: expected a list"
                         " of job field names, got %r" % (fields,))
    prev_info = body.get("previous_job_info")
    if prev_info is not None and not isinstance(prev_info, list):
        raise BadRequest("Invalid body parameters: previous_job_info:"
                         " expected a list or null, got %r" % (prev_info,))
    prev_serial = body.get("previous_log_serial")
    if prev_serial is not None and (not isinstance(prev_serial, int)
                                    or isinstance(prev_serial, bool)):
        raise BadRequest("Invalid body parameters: previous_log_serial:"
                         " expected an integer or null, got %r"
                         % (prev_serial,))
    try:
        result = await req.app.long_poll.call(
            luxi.REQ_WAIT_FOR_JOB_CHANGE, job_id, fields, prev_info,
            prev_serial, WAIT_TIMEOUT)
    except errors.JobLost:
        raise _unknown_job(job_id)
    if result is None:
        raise _unknown_job(job_id)
    if result == luxi.JOB_NOTCHANGED:
        return None
    job_info, log_entries = result
    return {"job_info": job_info, "log_entries": log_entries}


resource("/2/jobs", "jobs", "Jobs",
         Method("GET", _jobs_list, "All jobs (ids and URIs, or full with"
                " bulk=1)", query=(BULK,),
                returns=QueryList("job", J_FIELDS_BULK, "id")))
resource("/2/jobs/{job_id}", "jobs_id", "One job",
         Method("GET", _job_get, "The job: id, ops, status, summary,"
                " opstatus, timestamps, oplog, opresult",
                returns=QueryObject("job", J_FIELDS)),
         Method("DELETE", _job_cancel, "Cancel the job: [success, message]",
                returns="job_cancel"))
resource("/2/jobs/{job_id}/wait", "jobs_id_wait", "Wait for a job change",
         Method("GET", _job_wait, "Long poll (up to 10 s): null when nothing"
                " changed, else {job_info, log_entries}", access=WRITE,
                body="{fields, previous_job_info, previous_log_serial}",
                returns="job_wait", request=Body(fields={
                    "fields": ht.list_of(ht.STR),
                    "previous_job_info": ht.maybe(ht.list_of(ht.ANY)),
                    "previous_log_serial": ht.maybe(ht.INT)},
                    required=("fields",), lenient=True)))


# --- Generic queries --------------------------------------------------------

def _query_resource(req):
    what = req.params["resource"]
    if what not in QUERY_RESOURCES:
        raise NotFound(explain="Nothing matches the given URI: %r is not a"
                       " query resource (known: %s)"
                       % (what, ", ".join(QUERY_RESOURCES)))
    return what


def _not_queryable(err, what):
    text = str(err.args[0]) if err.args else ""
    if "cannot be queried" in text:
        return baserlib.NotImplementedHere(
            "Querying %r is not implemented by this cluster's master"
            " daemon yet" % what)
    return err


async def _query_call(req, method, *args):
    try:
        return await req.call(method, *args)
    except errors.OpPrereqError as err:
        raise _not_queryable(err, args[0])


def _whole_answer(result):
    return {"fields": result["fields"], "data": result["data"]}


async def _query_answer(req, what, fields, qfilter):
    try:
        return await req.query_rendered(what, fields, _whole_answer, qfilter)
    except errors.OpPrereqError as err:
        raise _not_queryable(err, what)


async def _query_get(req):
    what = _query_resource(req)
    fields = [f for f in req.args.required("fields").split(",") if f]
    return await _query_answer(req, what, fields, None)


async def _query_put(req):
    what = _query_resource(req)
    body = req.body_dict()
    unknown = sorted(set(body) - {"fields", "qfilter", "filter"})
    if unknown:
        raise BadRequest("Invalid body parameters: %s: unknown (known:"
                         " fields, qfilter)" % ", ".join(unknown))
    fields = body.get("fields")
    if not isinstance(fields, list) or not fields or \
            not all(isinstance(f, str) for f in fields):
        raise BadRequest("Invalid body parameters: fields: expected a"
                         " non-empty list of field names, got %r"
                         % (fields,))
    qfilter = body.get("qfilter", body.get("filter"))
    if qfilter is not None and not isinstance(qfilter, list):
        raise BadRequest("Invalid body parameters: qfilter: expected a"
                         " filter (a list) or null, got %r" % (qfilter,))
    return await _query_answer(req, what, fields, qfilter)


async def _query_fields(req):
    what = _query_resource(req)
    fields = req.args.get("fields")
    names = [f for f in fields.split(",") if f] if fields else None
    return await _query_call(req, luxi.REQ_QUERY_FIELDS, what, names)


resource("/2/query/{resource}", "query", "Generic query",
         Method("GET", _query_get, "Query (fields=a,b)", access=READ_WRITE,
                query=(Param("fields", "string", "comma-separated",
                             required=True),), returns="query"),
         Method("PUT", _query_put, "Query with a filter", access=READ_WRITE,
                body="{fields, qfilter}", returns="query", request=Body(
                    fields={"fields": ht.list_of(ht.STR, nonempty=True),
                            "qfilter": ht.maybe(ht.list_of(ht.ANY)),
                            "filter": ht.maybe(ht.list_of(ht.ANY))},
                    required=("fields",))))
resource("/2/query/{resource}/fields", "query_fields",
         "Field definitions",
         Method("GET", _query_fields, "Definitions of the fields (all, or"
                " fields=a,b)", query=(Param("fields", "string"),),
                returns="query_fields"))


# --- Filters ----------------------------------------------------------------

_FILTER_KEYS = {"priority", "predicates", "action", "reason"}
FILTER_ACTIONS = ("CONTINUE", "ACCEPT", "PAUSE", "REJECT")
FILTER_BODY = Body(fields={
    "priority": ht.NONNEG_INT,
    "predicates": ht.list_of(ht.ANY),
    "action": ht.either(ht.one_of(*FILTER_ACTIONS),
                        ht.tuple_of(ht.one_of("RATE_LIMIT"), ht.INT)),
    "reason": ht.list_of(ht.ANY)}, name="FilterRule")


def _filter_args(req):
    body = req.body_dict()
    unknown = sorted(set(body) - _FILTER_KEYS)
    if unknown:
        raise BadRequest("Invalid body parameters: %s: unknown (known: %s)"
                         % (", ".join(unknown),
                            ", ".join(sorted(_FILTER_KEYS))))
    priority = body.get("priority", 0)
    if not isinstance(priority, int) or isinstance(priority, bool) or \
            priority < 0:
        raise BadRequest("Invalid body parameters: priority: expected a"
                         " non-negative integer, got %r" % (priority,))
    predicates = body.get("predicates", [])
    if not isinstance(predicates, list):
        raise BadRequest("Invalid body parameters: predicates: expected a"
                         " list, got %r" % (predicates,))
    action = body.get("action", "CONTINUE")
    valid = action in FILTER_ACTIONS or (
        isinstance(action, list) and len(action) == 2 and
        action[0] == "RATE_LIMIT" and isinstance(action[1], int))
    if not valid:
        raise BadRequest("Invalid body parameters: action: expected"
                         " CONTINUE, ACCEPT, PAUSE, REJECT or"
                         " [\"RATE_LIMIT\", n], got %r" % (action,))
    reason = body.get("reason", [])
    if not isinstance(reason, list):
        raise BadRequest("Invalid body parameters: reason: expected a list,"
                         " got %r" % (reason,))
    return priority, predicates, action, req.reason_trail(reason)


async def _filter_call(req, method, *args):
    from ganeti.rapi.master import is_unsupported_method
    try:
        return await req.call(method, *args)
    except errors.LuxiError as err:
        if is_unsupported_method(err):
            raise baserlib.NotImplementedHere(
                "Job filters are not implemented by this cluster's master"
                " daemon yet (luxi %s)" % method)
        raise


async def _filters_list(req):
    if req.args.bool("bulk"):
        rows = await _filter_call(req, luxi.REQ_QUERY_FILTERS, None,
                                  FILTER_FIELDS)
        return [dict(zip(FILTER_FIELDS, r)) for r in rows if r is not None]
    rows = await _filter_call(req, luxi.REQ_QUERY_FILTERS, None, ["uuid"])
    return baserlib.id_list(sorted(r[0] for r in rows if r is not None),
                            "uuid", "/2/filters/%s")


async def _filters_add(req):
    return await _filter_call(req, luxi.REQ_REPLACE_FILTER, None,
                              *_filter_args(req))


async def _filter_get(req):
    rows = await _filter_call(req, luxi.REQ_QUERY_FILTERS,
                              [req.params["uuid"]], FILTER_FIELDS)
    if not rows or rows[0] is None:
        raise NotFound(explain="Nothing matches the given URI: filter %s"
                       " does not exist" % req.params["uuid"])
    return dict(zip(FILTER_FIELDS, rows[0]))


async def _filter_put(req):
    return await _filter_call(req, luxi.REQ_REPLACE_FILTER,
                              req.params["uuid"], *_filter_args(req))


async def _filter_delete(req):
    return await _filter_call(req, luxi.REQ_DELETE_FILTER,
                              req.params["uuid"])


resource("/2/filters", "filters", "Job filter rules",
         Method("GET", _filters_list, "All filters (uuids and URIs, or full"
                " with bulk=1)", query=(BULK,),
                returns=QueryList("filter", FILTER_FIELDS, "uuid")),
         Method("POST", _filters_add, "Add a filter; returns its UUID",
                body="{priority, predicates, action, reason}",
                returns="string", request=FILTER_BODY))
resource("/2/filters/{uuid}", "filters_uuid", "One job filter rule",
         Method("GET", _filter_get, "The filter",
                returns=QueryObject("filter", FILTER_FIELDS)),
         Method("PUT", _filter_put, "Replace or create the filter",
                body="{priority, predicates, action, reason}",
                returns="string", request=FILTER_BODY),
         Method("DELETE", _filter_delete, "Remove the filter",
                returns="null"))

