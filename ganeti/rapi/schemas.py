"""JSON Schemas (OpenAPI 3.0.3 dialect) of the values the remote API
takes and answers, generated from the definitions the code itself checks
with, so the OpenAPI document cannot drift from them:

* :func:`ht_schema`: a type of the :mod:`ganeti.ht` type language (opcode
  parameters, request bodies) as a schema;
* :func:`opcode_schema`: an opcode's JSON form (every parameter, the
  required ones in ``required``, defaults as ``default``);
* :func:`field_schema` and :func:`query_object_schema`: the value of a
  query field (by its kind, ``QFT_*``) and an object of such fields (the
  bulk format of instances, nodes, groups, networks, jobs, filters).

OpenAPI 3.0 has no ``null`` type: a value that may be null is marked
``nullable``.  A type the translator does not know is an error, not a
silent "anything": a new kind of type must be described here.
"""

from ganeti import errors
from ganeti import ht
from ganeti import opcodes
from ganeti import qlang

#: matches only null (OpenAPI 3.0 has no "type: null")
NULL_ONLY = {"type": "object", "nullable": True, "enum": [None]}

_HOST_NAME = r"^(?![.-])(?!.*\.\.)[A-Za-z0-9._-]{1,255}$"
_OBJECT_NAME = r"^(?!-)(?!\.\.?$)[^/\s\x00-\x1f\x7f]{1,255}$"
_OS_NAME = r"^[A-Za-z0-9_][A-Za-z0-9._+-]{0,254}$"


def nullable(schema):
    """``schema`` or null."""
    schema = dict(schema)
    if "$ref" in schema:
        return {"anyOf": [schema, dict(NULL_ONLY)]}
    if "anyOf" in schema:
        # nullable next to anyOf does not let null through: each
        # alternative must
        schema["anyOf"] = [nullable(alt) for alt in schema["anyOf"]]
        return schema
    if "enum" in schema and None not in schema["enum"]:
        schema["enum"] = list(schema["enum"]) + [None]
    schema["nullable"] = True
    return schema


def _enum(values):
    values = sorted(values, key=lambda v: (type(v).__name__, repr(v)))
    schema = {"enum": list(values)}
    kinds = set(type(v) for v in values if v is not None)
    if kinds == {str}:
        schema["type"] = "string"
    elif kinds == {bool}:
        schema["type"] = "boolean"
    elif kinds == {int}:
        schema["type"] = "integer"
    if None in values:
        schema["nullable"] = True
    return schema


def _distinct(schemas):
    result = []
    for schema in schemas:
        if schema not in result:
            result.append(schema)
    return result


def ht_schema(typ):
    """The JSON Schema of the values ``typ`` accepts.

    Raises ProgrammerError for a type it does not know.
    """
    schema = _translate(typ)
    if typ.desc and "description" not in schema and "$ref" not in schema:
        schema["description"] = typ.desc
    return schema


def _translate(typ):
    # exact classes: a subclass may check differently
    kind = type(typ)
    if kind is ht._Any:
        return {}
    if kind is ht._Bool:
        return {"type": "boolean"}
    if kind is ht._Int:
        schema = {"type": "integer", "format": "int64"}
        if typ.low is not None:
            schema["minimum"] = typ.low
        if typ.high is not None:
            schema["maximum"] = typ.high
        return schema
    if kind is ht._Number:
        schema = {"type": "number"}
        if typ.low is not None:
            schema["minimum"] = typ.low
        return schema
    if kind is ht._Float:
        return {"type": "number"}
    if kind is ht._Str:
        schema = {"type": "string"}
        if typ.nonempty:
            schema["minLength"] = 1
        return schema
    if kind is ht._OneOf:
        return _enum(typ.values)
    if kind is ht._Maybe:
        return nullable(ht_schema(typ.inner))
    if kind is ht._ListOf:
        schema = {"type": "array", "items": ht_schema(typ.item)}
        if typ.nonempty:
            schema["minItems"] = 1
        return schema
    if kind is ht._DictOf:
        return _dict_schema(typ)
    if kind is ht._Private:
        schema = ht_schema(typ.inner)
        schema["x-ganeti-secret" if typ.secret else "x-ganeti-private"] = \
            True
        return schema
    if kind is ht._Tuple:
        # OpenAPI 3.0 has no per-position item schemas: the items are any
        # of the positions' types, the length is fixed; x-ganeti-tuple
        # gives the type of each position
        items = [ht_schema(t) for t in typ.items]
        alternatives = _distinct(items)
        return {"type": "array", "minItems": len(items),
                "maxItems": len(items),
                "items": (alternatives[0] if len(alternatives) == 1
                          else {"anyOf": alternatives}),
                "x-ganeti-tuple": items}
    if kind is ht._Either:
        if any(type(t) is ht._Any for t in typ.alternatives):
            return {}
        return {"anyOf": _distinct(ht_schema(t) for t in typ.alternatives)}
    if kind in (ht._Where, ht._Converted):
        # the predicate or conversion is described in words
        schema = ht_schema(typ.base)
        schema.pop("description", None)
        return schema
    if kind is ht._HostName:
        schema = {"type": "string", "maxLength": 255,
                  "pattern": _HOST_NAME}
        if typ.empty_ok:
            schema["pattern"] = "^$|" + _HOST_NAME
        return schema
    if kind is ht._ObjectName:
        return {"type": "string", "minLength": 1, "maxLength": 255,
                "pattern": _OBJECT_NAME}
    if kind is ht._OsName:
        return {"type": "string", "minLength": 1, "maxLength": 255,
                "pattern": _OS_NAME}
    if kind is opcodes._ReasonTrail:
        return nullable(ht_schema(opcodes.REASON_TRAIL))
    if kind is opcodes._OpCodeList:
        return {"type": "array",
                "items": {"$ref": "#/components/schemas/%s" % typ.op_id}}
    raise errors.ProgrammerError("no JSON Schema for the type %r (%s)"
                                 % (typ, kind.__name__))


def _dict_schema(typ):
    schema = {"type": "object"}
    value = ht_schema(typ.value)
    if type(typ.key) is ht._OneOf and \
            all(isinstance(k, str) for k in typ.key.values):
        # a closed set of keys
        schema["properties"] = dict((k, dict(value))
                                    for k in sorted(typ.key.values))
        schema["additionalProperties"] = False
        return schema
    schema["additionalProperties"] = value if value else True
    return schema


def param_schema(param):
    """The schema of one opcode parameter, with its default."""
    schema = ht_schema(param.type)
    if not param.required:
        default = param.default_value()
        if default is not None or schema.get("nullable") or \
                "anyOf" in schema and all(a.get("nullable")
                                          for a in schema["anyOf"]):
            schema["default"] = default
    if param.extension:
        schema["x-ganeti-extension"] = True
    return schema


def opcode_schema(op_id):
    """The JSON form of the opcode ``op_id`` (what a job holds and what
    luxi's SubmitJob takes)."""
    klass = opcodes.opcode_class(op_id)
    properties = {"OP_ID": {"type": "string", "enum": [op_id]}}
    for param in klass.PARAMS:
        properties[param.name] = param_schema(param)
    schema = {
        "type": "object",
        "description": "The opcode %s (its parameters)" % op_id,
        "properties": properties,
        "additionalProperties": False,
    }
    required = sorted(p.name for p in klass.PARAMS if p.required)
    if required:
        schema["required"] = required
    if op_id in opcodes.EXTENSION_OP_IDS:
        schema["x-ganeti-extension"] = True
    return schema


# --- Query fields -------------------------------------------------------------

_KINDS = {
    qlang.QFT_TEXT: {"type": "string"},
    qlang.QFT_BOOL: {"type": "boolean"},
    qlang.QFT_NUMBER: {"type": "integer"},
    qlang.QFT_NUMBER_FLOAT: {"type": "number"},
    qlang.QFT_UNIT: {"type": "integer", "description": "MiB"},
    qlang.QFT_TIMESTAMP: {"type": "number",
                          "description": "seconds since the epoch"},
    qlang.QFT_OTHER: {},
    qlang.QFT_UNKNOWN: {},
}


def field_schema(field):
    """The value of a query field in the bulk format: by its kind, null
    when the value is not available (an offline node, no live data)."""
    schema = dict(_KINDS[field.kind])
    if schema:
        schema = nullable(schema)
    text = field.doc
    if "description" in schema and schema["description"] not in text:
        text = "%s (%s)" % (text, schema["description"])
    schema["description"] = text
    schema["x-ganeti-query-kind"] = field.kind
    return schema


def query_object_schema(what, fields, extra=None, overrides=None):
    """An object of the query fields ``fields`` of the resource ``what``
    (as the bulk format answers them); ``extra`` adds properties the
    handler adds, ``overrides`` replaces the schema of some fields whose
    kind (QFT_OTHER) says too little."""
    from ganeti import query
    table = query.RESOURCES[what].fields
    properties = {}
    for name in fields:
        field = table.get(name)
        if field is None:
            raise errors.ProgrammerError("%s has no query field %s"
                                         % (what, name))
        properties[name] = field_schema(field)
        if overrides and name in overrides:
            properties[name] = dict(overrides[name],
                                    description=field.doc,
                                    **{"x-ganeti-query-kind": field.kind})
    properties.update(extra or {})
    return {"type": "object", "properties": properties,
            "required": sorted(fields),
            "additionalProperties": False}
