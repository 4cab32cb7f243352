"""Checking request bodies and answers against the remote API's OpenAPI
document (``GET /2/openapi.json``), for the RAPI tests.

:class:`Checker` finds the operation of a (method, path) and validates a
value against the schema of its request body or of its answer with
openapi-schema-validator (the OpenAPI 3.0 dialect: ``nullable``).  The
validators are a test dependency (tox.ini); a missing one is an error,
not a skip: set ``GANETI_SKIP_OPENAPI_CHECKS=1`` to run without them.
"""

import os
import re

from twisted.trial import unittest

from ganeti.rapi import openapi


def _import():
    """The validator class and the document validator."""
    try:
        from openapi_schema_validator import OAS30Validator
        from openapi_spec_validator import validate
    except ImportError as err:
        if os.environ.get("GANETI_SKIP_OPENAPI_CHECKS"):
            raise unittest.SkipTest("OpenAPI validators not installed (%s)"
                                    % err)
        raise
    return OAS30Validator, validate


def validate_document(doc):
    _import()[1](doc)


def shared_checker():
    """One :class:`Checker` of this code's document for every test (its
    validators are kept); None when the validators are missing and
    ``GANETI_SKIP_OPENAPI_CHECKS`` is set."""
    if not _SHARED:
        try:
            _SHARED.append(Checker())
        except unittest.SkipTest:
            _SHARED.append(None)
    return _SHARED[0]


_SHARED = []


class Checker(object):
    """The operations of the OpenAPI document ``doc``."""

    def __init__(self, doc=None):
        self.doc = doc if doc is not None else openapi.document()
        self.validator_class = _import()[0]
        self.paths = []
        for path, item in self.doc["paths"].items():
            regex = "^" + re.sub(r"\\\{\w+\\\}", "[^/]+", re.escape(path)) \
                + "$"
            self.paths.append((re.compile(regex), path, item))
        self._validators = {}

    def operation(self, method, url):
        """``(path template, operation)`` of a concrete URL (without the
        query string), or None if the document lacks it."""
        path = url.split("?", 1)[0]
        for regex, template, item in self.paths:
            if regex.match(path) and method.lower() in item:
                return template, item[method.lower()]
        return None

    def _validator(self, schema):
        key = repr(schema)
        if key not in self._validators:
            root = {"allOf": [schema], "components": self.doc["components"]}
            self._validators[key] = self.validator_class(root)
        return self._validators[key]

    def errors(self, schema, value):
        """What is wrong with ``value`` for ``schema`` (texts; none: it
        is valid)."""
        return ["%s at %s" % (err.message, list(err.absolute_path))
                for err in self._validator(schema).iter_errors(value)]

    def body_schema(self, method, url):
        op = self.operation(method, url)
        if op is None or "requestBody" not in op[1]:
            return None
        return op[1]["requestBody"]["content"]["application/json"]["schema"]

    def answer_schema(self, method, url, code):
        op = self.operation(method, url)
        if op is None:
            return None
        response = op[1]["responses"].get(str(code))
        if response is None:
            return None
        if "$ref" in response:
            name = response["$ref"].rsplit("/", 1)[1]
            response = self.doc["components"]["responses"][name]
        return response["content"]["application/json"]["schema"]

    def body_errors(self, method, url, body):
        schema = self.body_schema(method, url)
        if schema is None:
            return ["%s %s takes no body" % (method, url)]
        return self.errors(schema, body)

    def answer_errors(self, method, url, code, value):
        schema = self.answer_schema(method, url, code)
        if schema is None:
            return ["%s %s: no answer %s documented" % (method, url, code)]
        return self.errors(schema, value)
