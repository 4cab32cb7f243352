"""The OpenAPI 3 document of the remote API (``GET /2/openapi.json``).

Built from the same table the Klein app routes from
(:data:`ganeti.rapi.resources.RESOURCES`), so it describes exactly what is
served; a test checks it against Klein's routes.  Ganeti has no such
document; the extensions ``x-ganeti-access`` (the users file options that
may call an operation; empty: anonymous) and ``x-ganeti-opcodes`` (what it
submits; the server answers 501 while the master lacks one) say what the
standard fields cannot.
"""

import re

from ganeti import constants
from ganeti.rapi import resources

OPENAPI_VERSION = "3.0.3"

_ERRORS = {
    "400": "Bad input: the message names the field and the reason",
    "401": "No or wrong credentials",
    "403": "The user lacks the right",
    "404": "No such path or object",
    "415": "A body that is not application/json",
    "429": "The client submits jobs too fast (see Retry-After) or has too"
           " many unfinished query jobs; nothing was submitted",
    "501": "Method not supported here, or its opcode is not implemented by"
           " the master yet",
    "502": "The master daemon cannot be reached",
    "503": "The job queue is drained, full of unfinished jobs, or holds"
           " as many query jobs as it takes",
    "504": "The master daemon did not answer in time",
}

_RETURNS = {
    "job_id": {"$ref": "#/components/schemas/JobId"},
    "list": {"type": "array", "items": {}},
    "object": {"type": "object", "additionalProperties": True},
    "integer": {"type": "integer"},
    "string": {"type": "string"},
    "null": {"nullable": True},
}

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


def _operation(res, method):
    access = list(method.required_access)
    op = {
        "operationId": "%s_%s" % (res.rlib, method.verb.lower()),
        "summary": method.summary,
        "security": [{"basicAuth": []}] if access else [{}, {"basicAuth": []}],
        "x-ganeti-access": access,
        "x-ganeti-opcodes": list(method.opcodes),
        "responses": {"200": {
            "description": "Success",
            "content": {"application/json": {
                "schema": dict(_RETURNS[method.returns])}}}},
    }
    params = [_query_param(p) for p in method.query]
    if params:
        op["parameters"] = params
    if method.body:
        op["requestBody"] = {
            "description": method.body,
            "required": False,
            "content": {"application/json": {"schema": {}}},
        }
    for code, text in _ERRORS.items():
        op["responses"][code] = {"$ref": "#/components/responses/E%s" % code}
    return op


def document():
    """The OpenAPI document as a dict."""
    paths = {}
    for res in resources.RESOURCES:
        item = {}
        pparams = _path_params(res.path)
        if pparams:
            item["parameters"] = pparams
        if res.doc:
            item["description"] = res.doc
        for verb in sorted(res.methods):
            item[verb.lower()] = _operation(res, res.methods[verb])
        paths[res.path] = item
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
                                              "scheme": "basic"}},
            "schemas": {
                "JobId": {"type": "integer", "minimum": 0,
                          "description": "The id of the submitted job"},
                "Error": {
                    "type": "object",
                    "required": ["code", "message", "explain"],
                    "properties": {
                        "code": {"type": "integer"},
                        "message": {"type": "string"},
                        "explain": {"type": "string"},
                    },
                },
            },
            "responses": dict(
                ("E%s" % code, {
                    "description": text,
                    "content": {"application/json": {"schema": {
                        "$ref": "#/components/schemas/Error"}}}})
                for code, text in _ERRORS.items()),
        },
    }
