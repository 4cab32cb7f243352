"""The OpenAPI 3 document of the remote API (``GET /2/openapi.json``).

Built from the same table the Klein app routes from
(:data:`ganeti.rapi.resources.RESOURCES`), so it describes exactly what is
served; a test checks it against Klein's routes.  Ganeti has no such
document; the extensions ``x-ganeti-access`` (the users file options that
may call an operation; empty: anonymous) and ``x-ganeti-opcodes`` (what it
submits; the server answers 501 while the master lacks one) say what the
standard fields cannot.

Request bodies are the :class:`ganeti.rapi.resources.Body` of each method
(an opcode's parameters as the handler changes them, or keys of its own)
translated from the ht type language by :mod:`ganeti.rapi.schemas`; the
answers are ``Method.returns``: the query fields of the list and bulk
resources (:class:`~ganeti.rapi.resources.QueryList`,
:class:`~ganeti.rapi.resources.QueryObject`) or one of the shapes named in
:data:`_RETURNS`.  docs/rapi.rst, "The OpenAPI document".
"""

import re

from ganeti import constants
from ganeti import errors
from ganeti import events
from ganeti import opcodes
from ganeti.query import base as query_base
from ganeti.rapi import resources
from ganeti.rapi import schemas

OPENAPI_VERSION = "3.0.3"

_ERRORS = {
    "400": "Bad input: the message names the field and the reason",
    "401": "No or wrong credentials",
    "403": "The user lacks the right",
    "404": "No such path or object",
    "409": "The object is not in a state that allows it (the console of"
           " an instance that does not run)",
    "415": "A body that is not application/json",
    "429": "The client submits jobs too fast (see Retry-After) or has too"
           " many unfinished query jobs; nothing was submitted",
    "500": "An unexpected error of the master daemon or of this server",
    "501": "Method not supported here, or its opcode is not implemented by"
           " the master yet",
    "502": "The master daemon cannot be reached",
    "503": "The job queue is drained, full of unfinished jobs, or holds"
           " as many query jobs as it takes",
    "504": "The master daemon did not answer in time",
}

_REF = "#/components/schemas/%s"

#: the answers not made of query fields (``Method.returns``)
_RETURNS = {
    "job_id": {"$ref": _REF % "JobId"},
    "object": {"type": "object", "additionalProperties": True},
    "integer": {"type": "integer"},
    "string": {"type": "string"},
    "strings": {"type": "array", "items": {"type": "string"}},
    "null": dict(schemas.NULL_ONLY),
    "info": {"$ref": _REF % "ClusterInfo"},
    "maintenance": {"$ref": _REF % "Maintenance"},
    "autorepair": {"$ref": _REF % "AutoRepair"},
    "autorepair_list": {"type": "array",
                        "items": {"$ref": _REF % "AutoRepair"}},
    "console": {"$ref": _REF % "InstanceConsole"},
    "node_role": {"type": "string",
                  "enum": sorted(resources.NODE_ROLES.values())},
    "job_cancel": {"type": "array", "minItems": 2, "maxItems": 2,
                   "items": {"anyOf": [{"type": "boolean"},
                                       {"type": "string"}]},
                   "description": "[whether it was canceled, message]"},
    "job_wait": {"type": "object", "nullable": True,
                 "required": ["job_info", "log_entries"],
                 "properties": {
                     "job_info": {"type": "array", "items": {},
                                  "description": "the values of the"
                                  " fields asked for"},
                     "log_entries": {"type": "array",
                                     "items": {"$ref": _REF % "LogEntry"}}},
                 "additionalProperties": False,
                 "description": "null when nothing changed in time"},
    "query": {"$ref": _REF % "QueryResult"},
    "query_fields": {"$ref": _REF % "QueryFields"},
    "session": {"$ref": _REF % "Session"},
    "session_info": {"$ref": _REF % "SessionInfo"},
}

def _obj(required, properties, description, closed=False):
    return {"type": "object", "required": sorted(required),
            "properties": properties, "additionalProperties": not closed,
            "description": description}


_STR = {"type": "string"}
_NSTR = {"type": "string", "nullable": True}
_INT = {"type": "integer"}
_NUM = {"type": "number"}
_BOOL = {"type": "boolean"}
_OBJ = {"type": "object", "additionalProperties": True}
_STRS = {"type": "array", "items": _STR}

#: the serial console's answers (docs/console.rst)
_RETURNS.update({
    "console_session": _obj(
        ["session", "instance"], {"session": _STR, "instance": _STR},
        "A new console session: its id goes into the session's paths",
        closed=True),
    "console_output": _obj(
        ["offset", "next", "data", "dropped", "closed"],
        {"offset": _INT, "next": _INT,
         "data": {"type": "string", "format": "byte"},
         "dropped": _INT, "closed": _NSTR},
        "Console output: data (base64) starts at byte offset; read on from"
        " next; dropped bytes before it were no longer kept; closed says"
        " why the session ended (null: it is open)", closed=True),
    "console_written": _obj(["written"], {"written": _INT},
                            "Bytes sent to the console", closed=True),
    "console_closed": _obj(["closed"], {"closed": _STR},
                           "The session ended", closed=True),
})


#: the shapes several answers share
_COMPONENTS = {
    "JobId": {"type": "integer", "minimum": 0,
              "description": "The id of the submitted job"},
    "Error": _obj(["code", "message", "explain"],
                  {"code": _INT, "message": _STR, "explain": _STR},
                  "An error answer", closed=True),
    "LogEntry": {"type": "array", "minItems": 4, "maxItems": 4,
                 "items": {},
                 "description": "A job log entry: [serial, [seconds,"
                 " microseconds], type, message]"},
    "FieldDefinition": _obj(
        ["name", "title", "kind", "doc"],
        {"name": _STR, "title": _STR, "doc": _STR,
         "kind": {"type": "string", "enum": sorted(query_base.QFT_ALL)}},
        "A query field", closed=True),
    "QueryResult": _obj(
        ["fields", "data"],
        {"fields": {"type": "array",
                    "items": {"$ref": _REF % "FieldDefinition"}},
         "data": {"type": "array", "items": {
             "type": "array", "description": "one row: a [status, value]"
             " per field (status 0: normal, 1: unknown field, 2: no data,"
             " 3: unavailable, 4: offline node)",
             "items": {"type": "array", "minItems": 2, "maxItems": 2,
                       "items": {}}}}},
        "A query answer: the field definitions and the rows",
        closed=True),
    "QueryFields": _obj(
        ["fields"], {"fields": {"type": "array", "items": {
            "$ref": _REF % "FieldDefinition"}}},
        "Field definitions", closed=True),
    "ClusterInfo": _obj(
        ["name", "master", "software_version", "protocol_version",
         "config_version", "os_api_version", "export_version",
         "architecture", "default_hypervisor", "enabled_hypervisors",
         "hvparams", "beparams", "osparams", "nicparams", "ndparams",
         "diskparams", "ipolicy", "candidate_pool_size", "uuid", "tags",
         "vg_name", "drbd_helper", "enabled_disk_templates"],
        {"name": _STR, "master": _NSTR, "software_version": _STR,
         "protocol_version": _INT, "config_version": _INT,
         "os_api_version": _INT, "export_version": _INT,
         "architecture": _STRS, "default_hypervisor": _STR,
         "enabled_hypervisors": _STRS, "hvparams": _OBJ, "beparams": _OBJ,
         "osparams": _OBJ, "nicparams": _OBJ, "ndparams": _OBJ,
         "diskparams": _OBJ, "ipolicy": _OBJ, "candidate_pool_size": _INT,
         "uuid": _STR, "tags": _STRS, "vg_name": _NSTR,
         "volume_group_name": _NSTR, "drbd_helper": _NSTR,
         "drbd_usermode_helper": _NSTR, "enabled_disk_templates": _STRS,
         "ctime": dict(_NUM, nullable=True),
         "mtime": dict(_NUM, nullable=True),
         "maintenance": {"$ref": _REF % "Maintenance"}},
        "Cluster information (luxi QueryClusterInfo, the answer of"
        " OP_CLUSTER_QUERY) plus vg_name and drbd_helper, Ganeti's names"
        " of volume_group_name and drbd_usermode_helper"),
    "Session": _obj(
        ["token", "user", "rights", "expires", "idle_timeout"],
        {"token": _STR, "user": _STR, "rights": _STRS, "expires": _NUM,
         "idle_timeout": _NUM},
        "A web console session: its token (send it as Authorization:"
        " Bearer TOKEN), the user, the user's rights now (the users file"
        " decides on every request), when it ends at the latest (seconds"
        " since the epoch) and after how many idle seconds",
        closed=True),
    "SessionInfo": _obj(
        ["user", "rights", "expires", "idle_timeout"],
        {"user": _STR, "rights": _STRS, "expires": _NUM,
         "idle_timeout": _NUM},
        "The session of the request's Bearer token (its token left out)",
        closed=True),
    "Maintenance": _obj(
        ["incidents", "jobs", "evacuated"],
        {"incidents": {"type": "array", "items": _obj(
            ["id", "node", "action"],
            {"id": _STR, "node": _STR, "node_name": _NSTR,
             "original": {"description": "what the node reported"},
             "action": _NSTR, "repair-status": _NSTR,
             "jobs": {"type": "array", "items": {}}, "tag": _NSTR},
            "An incident of the maintenance daemon")},
         "jobs": {"type": "array", "items": {}},
         "evacuated": _STRS, "evacuated_names": _STRS},
        "The maintenance daemon's switches, jobs and incidents"),
    "AutoRepair": _obj(["name"], {"name": _STR},
                       "What auto-repair thinks of an instance"),
    "InstanceConsole": _obj(
        ["instance", "kind"],
        {"instance": _STR,
         "kind": {"type": "string", "enum": ["msg", "spice", "ssh", "vnc"]},
         "message": _NSTR, "host": _NSTR,
         "port": dict(_INT, nullable=True), "user": _NSTR,
         "command": {"type": "array", "items": _STR, "nullable": True},
         "display": dict(_INT, nullable=True)},
        "How to reach an instance's console (Ganeti's console"
        " description)"),
}


_TIMESTAMP_PAIR = {"type": "array", "minItems": 2, "maxItems": 2,
                   "items": {"type": "integer"},
                   "description": "[seconds, microseconds]"}

#: query fields of kind QFT_OTHER whose shape is known
_FIELD_OVERRIDES = {
    "tags": {"type": "array", "items": {"type": "string"}},
    ("job", "ops"): {"type": "array", "items": {"$ref": _REF % "OpCode"}},
    ("job", "opstatus"): {"type": "array", "items": {
        "type": "string", "enum": sorted(opcodes.OP_STATUS_ALL)}},
    ("job", "summary"): {"type": "array", "items": {"type": "string"}},
    ("job", "opresult"): {"type": "array", "items": {}},
    ("job", "oplog"): {"type": "array", "items": {
        "type": "array", "items": {"$ref": _REF % "LogEntry"}}},
    ("job", "received_ts"): schemas.nullable(_TIMESTAMP_PAIR),
    ("job", "start_ts"): schemas.nullable(_TIMESTAMP_PAIR),
    ("job", "end_ts"): schemas.nullable(_TIMESTAMP_PAIR),
}


def _overrides(what, fields):
    result = {}
    for name in fields:
        for key in ((what, name), name):
            if key in _FIELD_OVERRIDES:
                result[name] = _FIELD_OVERRIDES[key]
                break
    return result


def _query_object(spec):
    extra = dict((new, schemas.query_object_schema(
        spec.what, [field], overrides=_overrides(spec.what, [field]))
        ["properties"][field]) for new, field in spec.copies.items())
    schema = schemas.query_object_schema(
        spec.what, spec.fields, extra,
        _overrides(spec.what, spec.fields))
    schema["required"] = sorted(schema["required"] + list(spec.copies))
    return schema


def _query_list(spec):
    from ganeti import query
    table = query.RESOURCES[spec.what].fields
    key_field = table.get(spec.key) or table.get("name")
    key = dict(schemas.field_schema(key_field))
    key.pop("nullable", None)
    key.pop("x-ganeti-query-kind", None)
    key["description"] = "the %s's %s" % (spec.what, key_field.name)
    plain = {"type": "object", "required": [spec.key, "uri"],
             "properties": {spec.key: key,
                            "uri": {"type": "string",
                                    "description": "its path"}},
             "additionalProperties": False}
    # an empty list is both: anyOf, not oneOf
    return {"anyOf": [
        {"type": "array", "items": plain,
         "description": "without bulk=1: the %ss and their paths"
         % spec.what},
        {"type": "array", "items": _query_object(
            resources.QueryObject(spec.what, spec.fields)),
         "description": "with bulk=1: the %ss with their fields"
         % spec.what}]}


def returns_schema(returns):
    """The schema of a 200 answer (``Method.returns``)."""
    if isinstance(returns, resources.QueryList):
        return _query_list(returns)
    if isinstance(returns, resources.QueryObject):
        return _query_object(returns)
    return dict(_RETURNS[returns])


# --- Request bodies -------------------------------------------------------------

def body_schema(body):
    """The schema of a request body (a :class:`resources.Body`)."""
    if body.whole is not None:
        return schemas.ht_schema(body.whole)
    if body.op is None:
        properties = dict((k, schemas.ht_schema(t))
                          for k, t in body.fields.items())
        required = set(body.required)
        alias_groups = []
    else:
        base = schemas.opcode_schema(body.op)
        properties = base["properties"]
        required = set(base.get("required", ()))
        for name in body.exclude:
            del properties[name]
            required.discard(name)
        for name in body.filled:
            prop = properties[name]
            prop["description"] = "%s; given by the URL or the query" \
                " string (the body may only repeat the same value)" \
                % prop.get("description", name)
            required.discard(name)
        for name in body.optional:
            required.discard(name)
        for name, typ in body.override.items():
            if isinstance(typ, list):
                properties[name] = {"type": "array", "items": {
                    "$ref": _REF % typ[0].name}}
            else:
                properties[name] = schemas.ht_schema(typ)
        alias_groups = []
        for old, new in body.renames.items():
            prop = dict(properties[new])
            prop["description"] = "%s (Ganeti's RAPI name of %s; give" \
                " one of them)" % (prop.get("description", new), new)
            prop.pop("default", None)
            properties[old] = prop
            if new in required:
                required.discard(new)
                alias_groups.append((old, new))
        for name, typ in body.extra.items():
            properties[name] = schemas.ht_schema(typ)
        required |= set(body.required)
    schema = {"type": "object", "properties": properties,
              "additionalProperties": bool(body.lenient)}
    if body.lenient:
        schema["description"] = "The handler reads %s; other keys are" \
            " ignored" % ", ".join(sorted(properties))
    if required:
        schema["required"] = sorted(required)
    if alias_groups:
        schema["allOf"] = [{"anyOf": [{"required": [old]},
                                      {"required": [new]}]}
                           for old, new in alias_groups]
    if body.op is not None:
        schema["x-ganeti-opcode"] = body.op
    return schema


def _body_name(res, method):
    body = method.body_spec
    return body.name or "%s_%s_body" % (res.rlib, method.verb.lower())


_PARAM_SCHEMAS = {
    "boolean": {"type": "integer", "enum": [0, 1]},
    "integer": {"type": "integer"},
    "string": {"type": "string"},
}


def _path_params(path):
    params = []
    for name in re.findall(r"\{(\w+)\}", path):
        if name in ("job_id", "disk_index"):
            schema = {"type": "integer", "minimum": 0}
        else:
            schema = {"type": "string", "pattern": r"^[\w._-]+$"}
        params.append({"name": name, "in": "path", "required": True,
                       "schema": schema})
    return params


def _query_param(param):
    if param.kind == "list":
        entry = {"name": param.name, "in": "query",
                 "required": param.required,
                 "schema": {"type": "array", "items": {"type": "string"}},
                 "style": "form", "explode": True}
    else:
        entry = {"name": param.name, "in": "query",
                 "required": param.required,
                 "schema": dict(_PARAM_SCHEMAS[param.kind])}
    if param.doc:
        entry["description"] = param.doc
    return entry


def _operation(res, method, bodies):
    access = list(method.required_access)
    op = {
        "operationId": "%s_%s" % (res.rlib, method.verb.lower()),
        "summary": method.summary,
        "security": ([] if access else [{}]) + [{"basicAuth": []},
                                                {"bearerAuth": []}],
        "x-ganeti-access": access,
        "x-ganeti-opcodes": list(method.opcodes),
        "responses": {"200": {
            "description": "Success",
            "content": {"application/json": {
                "schema": returns_schema(method.returns)}}}},
    }
    if method.streams:
        op["responses"]["200"]["content"]["text/event-stream"] = {
            "schema": {"type": "string", "description": "Server-Sent"
                       " Events, for a request with Accept:"
                       " text/event-stream"}}
    params = [_query_param(p) for p in method.query]
    if params:
        op["parameters"] = params
    body = method.body_spec
    if body is not None:
        name = _body_name(res, method)
        schema = body_schema(body)
        if bodies.get(name, schema) != schema:
            raise errors.ProgrammerError("two request bodies named %s"
                                         % name)
        bodies[name] = schema
        op["requestBody"] = {
            "description": method.body or schema.get(
                "description", "Optional"),
            "required": body.whole is not None or bool(
                schema.get("required")),
            "content": {"application/json": {"schema": {
                "$ref": _REF % name}}},
        }
    for code, text in _ERRORS.items():
        op["responses"][code] = {"$ref": "#/components/responses/E%s" % code}
    return op


#: where the event stream is served (ganeti.rapi.app.EVENTS_PATH)
EVENTS_PATH = "/2/events"
#: the answers GET /2/events may give besides the stream
_EVENTS_ERRORS = ("400", "401", "403", "500", "501", "502", "504")


def _events_item():
    """The event stream: Server-Sent Events, not JSON (docs/events.rst);
    not in :data:`resources.RESOURCES`, served by the app itself."""
    kinds = sorted(events.KINDS)
    names = {"type": "array", "items": {"type": "string"}}
    op = {
        "operationId": "events_get",
        "summary": "The master's event stream (Server-Sent Events)",
        "description": "Every change the master makes, numbered, as"
        " text/event-stream: one block per event (\"id:\" its seq,"
        " \"event:\" its kind, \"data:\" the event as one line of JSON,"
        " see the Event schema) and comment lines keeping an idle stream"
        " alive. A client that cannot resume where it asked gets one"
        " \"reset\" event (list the objects again, then follow); a client"
        " too slow to read gets a final \"cut\" event and the connection"
        " closes. Not in Ganeti.",
        "security": [{"basicAuth": []}, {"bearerAuth": []}],
        "x-ganeti-access": list(resources.READ_WRITE),
        "x-ganeti-opcodes": [],
        "parameters": [
            {"name": "kind", "in": "query", "required": False,
             "schema": {"type": "array", "items": {
                 "type": "string", "enum": kinds}},
             "style": "form", "explode": True,
             "description": "only events of these kinds (repeatable, or"
             " comma-separated); reset and cut come always"},
            {"name": "name", "in": "query", "required": False,
             "schema": names, "style": "form", "explode": True,
             "description": "only events about these objects (by name;"
             " repeatable)"},
            {"name": "id", "in": "query", "required": False,
             "schema": names, "style": "form", "explode": True,
             "description": "only events about these objects (a job's id,"
             " an object's UUID; repeatable)"},
            {"name": "since", "in": "query", "required": False,
             "schema": {"type": "integer", "minimum": 0},
             "description": "first every event after this number still"
             " kept (or a reset), then the live ones; without it the"
             " stream starts with the next event"},
            {"name": "Last-Event-ID", "in": "header", "required": False,
             "schema": {"type": "string", "pattern": "^[0-9]+$"},
             "description": "as since (what EventSource sends when it"
             " reconnects); wins over since"},
        ],
        "responses": {"200": {
            "description": "The stream, until the client goes away or is"
            " cut off",
            "content": {"text/event-stream": {"schema": {
                "type": "string",
                "description": "blocks of \"id: SEQ\", \"event: KIND\","
                " \"data: EVENT\" (an Event as JSON) lines, and"
                " \": comment\" lines"}}}}},
    }
    for code in _EVENTS_ERRORS:
        op["responses"][code] = {"$ref": "#/components/responses/E%s" % code}
    return {"description": "The event stream (docs/events.rst)",
            "get": op}


_COMPONENTS["Event"] = _obj(
    ["seq", "time", "kind", "type", "name", "id", "data"],
    {"seq": {"type": "integer", "nullable": True,
             "description": "the event's number (null only on a cut)"},
     "time": _NUM,
     "kind": {"type": "string", "enum": sorted(events.KINDS)},
     "type": _STR,
     "name": {"type": "string", "nullable": True},
     "id": {"nullable": True, "description": "a job's id (integer), an"
            " object's UUID or an incident's id (string)"},
     "data": _OBJ},
    "One event of the event stream: the data line of a block of"
    " GET /2/events", closed=True)


def document():
    """The OpenAPI document as a dict."""
    paths = {}
    bodies = {}
    for res in resources.RESOURCES:
        item = {}
        pparams = _path_params(res.path)
        if pparams:
            item["parameters"] = pparams
        if res.doc:
            item["description"] = res.doc
        for verb in sorted(res.methods):
            item[verb.lower()] = _operation(res, res.methods[verb], bodies)
        paths[res.path] = item
    paths[EVENTS_PATH] = _events_item()
    # bodies nested in others (the instances of a multi-allocation)
    for res in resources.RESOURCES:
        for method in res.methods.values():
            body = method.body_spec
            for typ in (body.override.values() if body else ()):
                if isinstance(typ, list) and typ[0].name not in bodies:
                    bodies[typ[0].name] = body_schema(typ[0])
    component_schemas = dict(_COMPONENTS)
    for op_id in sorted(opcodes.ALL_OP_IDS):
        component_schemas[op_id] = schemas.opcode_schema(op_id)
    component_schemas["OpCode"] = {
        "type": "object", "required": ["OP_ID"],
        "properties": {"OP_ID": {"type": "string",
                                 "enum": sorted(opcodes.ALL_OP_IDS)}},
        "additionalProperties": True,
        "description": "An opcode in its JSON form: see the schema named"
        " by its OP_ID"}
    component_schemas.update(bodies)
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "Ganeti remote API (RAPI v2)",
            "version": constants.RELEASE_VERSION,
            "description": "The remote API of this cluster manager,"
            " compatible with Ganeti's RAPI v2. Answers are JSON; write"
            " operations answer a job id to poll at /2/jobs/{job_id}.",
        },
        "servers": [{"url": "/"}],
        "paths": paths,
        "components": {
            "securitySchemes": {"basicAuth": {"type": "http",
                                              "scheme": "basic"},
                                "bearerAuth": {"type": "http",
                                               "scheme": "bearer"}},
            "schemas": component_schemas,
            "responses": dict(
                ("E%s" % code, {
                    "description": text,
                    "content": {"application/json": {"schema": {
                        "$ref": "#/components/schemas/Error"}}}})
                for code, text in _ERRORS.items()),
        },
    }
