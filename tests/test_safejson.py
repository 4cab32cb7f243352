"""JSON from hostile clients (ganeti.utils.safejson)."""

import json
import random

from twisted.trial import unittest

from ganeti.utils import safejson


def depth_of(value):
    """The nesting depth of a value (the reference, recursive)."""
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    return 0


def random_value(rnd, depth):
    """A JSON value whose strings are full of brackets, quotes and
    backslashes."""
    kind = rnd.randrange(5 if depth < 12 else 2)
    if kind == 0:
        return "".join(rnd.choice('[]{}"\\ax\n\u00e9') for _ in
                       range(rnd.randrange(6)))
    if kind == 1:
        return rnd.choice([1, -2.5, None, True, 10 ** 18])
    if kind in (2, 3):
        return [random_value(rnd, depth + 1) for _ in range(rnd.randrange(4))]
    return {random_value(rnd, 20): random_value(rnd, depth + 1)
            for _ in range(rnd.randrange(4))}


class DepthTests(unittest.TestCase):

    def test_strings_do_not_count(self):
        self.assertEqual(safejson.nesting_depth(b'"[[[["'), 0)
        self.assertEqual(safejson.nesting_depth(b'["\\"]]]]", {"a": 1}]'),
                         2)
        self.assertEqual(safejson.nesting_depth(b'["\\\\"]'), 1)
        self.assertEqual(safejson.nesting_depth(b'["\\\\\\"]]"]'), 1)
        self.assertEqual(safejson.nesting_depth('["\u00e9[", [{}]]'), 3)

    def test_matches_the_parsed_value(self):
        rnd = random.Random(4)
        for _ in range(500):
            value = random_value(rnd, 0)
            text = json.dumps(value, ensure_ascii=rnd.random() < 0.5)
            self.assertEqual(safejson.nesting_depth(text), depth_of(value),
                             text)

    def test_limit(self):
        self.assertEqual(safejson.loads(b"[" * 64 + b"]" * 64),
                         json.loads(b"[" * 64 + b"]" * 64))
        for text in (b"[" * 65 + b"]" * 65, b"[" * 100000,
                     b'{"a": ' * 65 + b"1" + b"}" * 65):
            err = self.assertRaises(safejson.JsonLimitError, safejson.loads,
                                    text)
            self.assertEqual(str(err), "the JSON text nests lists and"
                             " objects deeper than the limit of 64 levels")
        self.assertEqual(safejson.loads(b"[[[1]]]", max_depth=3), [[[1]]])
        self.assertRaises(safejson.JsonLimitError, safejson.loads,
                          b"[[[[1]]]]", max_depth=3)


class NumberTests(unittest.TestCase):

    def test_unusable_numbers_named_where(self):
        for text, message in (
                (b'{"a": {"b": 1e400}}', "a/b: 1e400 is not a finite number"),
                (b'[1, [2, -1E999]]', "1/1: -1E999 is not a finite number"),
                (b'{"x": NaN}', "x: NaN is not a finite number"),
                (b'Infinity', "value: Infinity is not a finite number"),
                (b'{"n": 9223372036854775808}', "n: 9223372036854775808 is"
                 " out of range (integers must fit in 64 bits)"),
                (b'{"n": -9223372036854775809}', "n: -9223372036854775809"
                 " is out of range (integers must fit in 64 bits)")):
            err = self.assertRaises(safejson.JsonLimitError, safejson.loads,
                                    text)
            self.assertEqual(str(err), message)

    def test_usable_numbers_kept(self):
        text = (b'{"a": 9223372036854775807, "b": -9223372036854775808,'
                b' "c": 1e300, "d": "1e400 99999999999999999999", "e": 0.5}')
        self.assertEqual(safejson.loads(text), json.loads(text))

    def test_not_json(self):
        self.assertRaises(ValueError, safejson.loads, b"{nope")
        self.assertRaises(UnicodeDecodeError, safejson.loads, b'"\xff"')
