"""Job filter rule rows, from config.data's ``filters`` (docs/filters.rst)."""

import copy

from ganeti.query.base import (Field, FieldTable, Resource, QFT_TEXT,
                               QFT_NUMBER, QFT_OTHER, lookup_by_name)


def _value(key):
    return lambda run, rule: copy.deepcopy(rule.get(key))


def build_fields():
    t = FieldTable()
    t.extend([
        Field("uuid", "UUID", QFT_TEXT, "UUID of the filter rule",
              _value("uuid")),
        Field("watermark", "Watermark", QFT_NUMBER,
              "Highest job id when the rule was added or replaced; it"
              " applies to later jobs only", _value("watermark")),
        Field("priority", "Priority", QFT_NUMBER,
              "Rules apply in increasing priority", _value("priority")),
        Field("predicates", "Predicates", QFT_OTHER,
              "What a job must match for the rule to apply",
              _value("predicates")),
        Field("action", "Action", QFT_OTHER,
              "ACCEPT, PAUSE, REJECT, CONTINUE or [RATE_LIMIT, n]",
              _value("action")),
        Field("reason_trail", "ReasonTrail", QFT_OTHER,
              "Why the rule was added or replaced", _value("reason_trail")),
    ])
    return t


class FilterResource(Resource):
    name = "filter"
    namefield = "uuid"
    noun = "filter"
    fields = build_fields()

    def items(self, run, names):
        rules = run.cfg.filters.values()
        if names is None:
            return list(rules)
        return lookup_by_name(rules, names, self.noun,
                              display=lambda r: r["uuid"], hostname=False)

    def item_name(self, rule):
        return rule["uuid"]
