"""The query filter language: list filters, the text form, helpers."""

import re

from twisted.trial import unittest

from ganeti import errors
from ganeti import qlang
from ganeti.qlang import UNDECIDED, NO_VALUE


class F(object):
    """A stand-in field."""

    def __init__(self, name, kind, flags=()):
        self.name = name
        self.kind = kind
        self.flags = frozenset(flags)


FIELDS = dict((f.name, f) for f in [
    F("name", qlang.QFT_TEXT, [qlang.FF_HOSTNAME]),
    F("os", qlang.QFT_TEXT),
    F("offline", qlang.QFT_BOOL),
    F("count", qlang.QFT_NUMBER),
    F("ratio", qlang.QFT_NUMBER_FLOAT),
    F("mem", qlang.QFT_UNIT),
    F("ctime", qlang.QFT_TIMESTAMP),
    F("tags", qlang.QFT_OTHER),
    F("id", qlang.QFT_NUMBER, [qlang.FF_JOB_ID]),
    F("received_ts", qlang.QFT_OTHER, [qlang.FF_SPLIT_TIMESTAMP]),
    F("mystery", qlang.QFT_UNKNOWN),
])


def compile_(qfilter):
    return qlang.compile_filter(qfilter, FIELDS.get)


def run(qfilter, **values):
    """Evaluate ``qfilter`` on an item with ``values`` (missing: NO_VALUE)."""
    pred = compile_(qfilter)
    return pred(lambda field: values.get(field.name, NO_VALUE))


ITEM = dict(name="node1.example.com", os="debian", offline=False, count=3,
            ratio=1.5, mem=2048, ctime=1000.5, tags=["a", "web"],
            id=17, received_ts=[100, 500000])


class ListFilterTests(unittest.TestCase):

    def check(self, qfilter, expected, item=ITEM):
        self.assertIs(run(qfilter, **item), expected, qfilter)

    def test_none_filter_is_no_filter(self):
        self.assertIsNone(qlang.compile_filter(None, FIELDS.get))

    def test_equality_both_spellings(self):
        self.check(["=", "os", "debian"], True)
        self.check(["==", "os", "debian"], True)
        self.check(["==", "os", "centos"], False)
        self.check(["!=", "os", "centos"], True)
        self.check(["!=", "os", "debian"], False)

    def test_hostname_fields_match_short_names(self):
        self.check(["=", "name", "node1"], True)
        self.check(["=", "name", "NODE1.example"], True)
        self.check(["=", "name", "node1.example.com"], True)
        self.check(["=", "name", "node"], False)
        self.check(["!=", "name", "node1"], False)
        # Only name fields: os compares exactly.
        self.check(["=", "os", "deb"], False)

    def test_bool_and_number_do_not_mix(self):
        self.check(["=", "offline", False], True)
        self.assertRaises(errors.QueryFilterParseError, compile_,
                          ["=", "count", True])
        self.assertRaises(errors.QueryFilterParseError, compile_,
                          ["=", "offline", 0])

    def test_comparisons(self):
        self.check(["<", "count", 4], True)
        self.check(["<", "count", 3], False)
        self.check(["<=", "count", 3], True)
        self.check([">", "mem", 1024], True)
        self.check([">=", "mem", 4096], False)
        self.check([">", "ratio", 1], True)
        self.check(["<", "ctime", 2000], True)
        self.check(["<", "os", "e"], True)  # strings order as strings

    def test_regex(self):
        self.check(["=~", "name", "^node[0-9]+\\."], True)
        self.check(["=~", "name", "^web"], False)
        self.check(["=~", "os", "bia"], True)  # search, not match
        # Non-string values never match.
        self.check(["=~", "tags", "web"], False)

    def test_contains(self):
        self.check(["=[]", "tags", "web"], True)
        self.check(["=[]", "tags", "db"], False)
        self.check(["=[]", "os", "deb"], True)  # substring of a string
        self.check(["=[]", "count", 3], False)

    def test_truth_and_negation(self):
        self.check(["?", "offline"], False)
        self.check(["!", ["?", "offline"]], True)
        self.check(["?", "tags"], True)
        self.check(["?", "tags"], False, dict(ITEM, tags=[]))
        self.check(["!", ["=", "os", "debian"]], False)

    def test_logic(self):
        yes = ["=", "os", "debian"]
        no = ["=", "os", "x"]
        self.check(["&", yes, yes], True)
        self.check(["&", yes, no], False)
        self.check(["|", no, yes], True)
        self.check(["|", no, no], False)
        self.check(["&"], True)
        self.check(["|"], False)
        self.check(["&", ["=", "name", "inst1"], ["!", ["?", "offline"]]],
                   False)

    def test_non_normal_values_never_match(self):
        # NO_VALUE (offline node, no data ...): every test is false, and
        # negating it makes it true, as in Ganeti.
        item = dict(ITEM)
        del item["mem"]
        self.check([">", "mem", 0], False, item)
        self.check(["<", "mem", 0], False, item)
        self.check(["=", "mem", 0], False, item)
        self.check(["!=", "mem", 0], False, item)
        self.check(["?", "mem"], False, item)
        self.check(["!", [">", "mem", 0]], True, item)

    def test_job_ids_accept_numeric_strings(self):
        self.check(["=", "id", "17"], True)
        self.check(["=", "id", 17], True)
        self.check([">", "id", "20"], False)
        self.assertRaises(errors.QueryFilterParseError, compile_,
                          ["=", "id", "x17"])

    def test_split_timestamps_compare_as_seconds(self):
        self.check([">", "received_ts", 100], True)
        self.check(["<", "received_ts", 100.6], True)
        self.check(["=", "received_ts", [100, 500000]], True)
        self.check(["<", "received_ts", [100, 400000]], False)

    def test_three_valued_logic(self):
        pred = compile_(["&", ["=", "os", "debian"], [">", "mem", 100]])

        def fetch(unknown):
            return lambda f: UNDECIDED if f.name in unknown else ITEM[f.name]
        self.assertIs(pred(fetch({"mem"})), UNDECIDED)
        self.assertIs(pred(fetch(set())), True)
        pred = compile_(["&", ["=", "os", "centos"], [">", "mem", 100]])
        self.assertIs(pred(fetch({"mem"})), False)  # decided without mem
        pred = compile_(["|", ["=", "os", "debian"], [">", "mem", 100]])
        self.assertIs(pred(fetch({"mem"})), True)
        pred = compile_(["!", [">", "mem", 100]])
        self.assertIs(pred(fetch({"mem"})), UNDECIDED)

    def test_fields_read_are_reported(self):
        pred = compile_(["|", ["=", "os", "a"], ["&", ["?", "offline"],
                                                  ["=", "os", "b"]]])
        self.assertEqual([f.name for f in pred.fields], ["os", "offline"])


class BadFilterTests(unittest.TestCase):

    def bad(self, qfilter, *words):
        err = self.assertRaises(errors.QueryFilterParseError, compile_,
                                qfilter)
        for word in words:
            self.assertIn(word, str(err))
        return err

    def test_not_a_list(self):
        self.bad("name", "non-empty list")
        self.bad([], "non-empty list")
        self.bad({"op": "="}, "non-empty list")
        self.bad(["&", "name"], "non-empty list")

    def test_unknown_operator(self):
        self.bad(["~~", "name", "x"], "Unknown query filter operator", "~~")
        self.bad([5, "name", "x"], "Unknown query filter operator")

    def test_unknown_field(self):
        self.bad(["=", "nosuch", "x"], "Unknown field 'nosuch'", "'='")
        self.bad(["?", "nosuch"], "nosuch", "'?'")
        self.bad(["=", "mystery", "x"], "Unknown field 'mystery'")
        self.bad(["=", 5, "x"], "needs a field name")

    def test_operand_counts(self):
        self.bad(["=", "name"], "'='", "field name and a value")
        self.bad(["=", "name", "a", "b"], "'='")
        self.bad(["!"], "'!'", "exactly one operand")
        self.bad(["!", ["?", "offline"], ["?", "offline"]], "'!'")
        self.bad(["?", "offline", "x"], "'?'")

    def test_value_kinds(self):
        self.bad(["=", "os", 5], "field 'os'", "kind 'text'", "a string")
        self.bad(["<", "count", "5"], "field 'count'", "an integer")
        self.bad([">", "mem", 1.5], "field 'mem'")
        self.bad(["=", "offline", "yes"], "a boolean")
        self.bad(["<", "received_ts", "yesterday"], "timestamps")

    def test_regex(self):
        self.bad(["=~", "name", "("], "Invalid regular expression", "name")
        self.bad(["=~", "name", 5], "regular expression string")

    def test_depth(self):
        deep = ["?", "offline"]
        for _ in range(qlang.MAX_DEPTH):
            deep = ["!", deep]
        self.bad(deep, "nested too deeply")
        ok = ["?", "offline"]
        for _ in range(qlang.MAX_DEPTH - 1):
            ok = ["!", ok]
        compile_(ok)


class RequestedNamesTests(unittest.TestCase):

    def test_name_filters(self):
        self.assertEqual(qlang.requested_names(["=", "name", "a"]), ["a"])
        self.assertEqual(qlang.requested_names(
            ["|", ["=", "name", "a"], ["==", "name", "b"],
             ["=", "name", "a"]]), ["a", "b"])
        self.assertEqual(qlang.requested_names(["|"]), [])
        self.assertEqual(qlang.requested_names(
            qlang.make_simple_filter("id", [1, 2]), "id"), [1, 2])

    def test_other_filters(self):
        for qfilter in [None, ["=", "os", "a"], ["!=", "name", "a"],
                        ["|", ["=", "name", "a"], ["=", "os", "b"]],
                        ["&", ["=", "name", "a"]], ["=~", "name", "a"]]:
            self.assertIsNone(qlang.requested_names(qfilter), qfilter)


class TextFilterTests(unittest.TestCase):

    def parse(self, text):
        return qlang.parse_filter(text)

    def test_conditions(self):
        self.assertEqual(self.parse('name == "x"'), ["==", "name", "x"])
        self.assertEqual(self.parse("name = 'x'"), ["==", "name", "x"])
        self.assertEqual(self.parse("count != 5"), ["!=", "count", 5])
        self.assertEqual(self.parse("mem>=-1"), [">=", "mem", -1])
        self.assertEqual(self.parse("mem < +3"), ["<", "mem", 3])
        self.assertEqual(self.parse("mem <= 3"), ["<=", "mem", 3])
        self.assertEqual(self.parse("mem > 3"), [">", "mem", 3])
        self.assertEqual(self.parse("offline"), ["?", "offline"])
        self.assertEqual(self.parse("be/maxmem > 512"),
                         [">", "be/maxmem", 512])
        self.assertEqual(self.parse("disk.size/0 > 512"),
                         [">", "disk.size/0", 512])

    def test_brief_example(self):
        self.assertEqual(self.parse('name == "x" and not offline'),
                         ["&", ["==", "name", "x"], ["!", ["?", "offline"]]])

    def test_precedence_and_parentheses(self):
        self.assertEqual(
            self.parse("a or b and c"),
            ["|", ["?", "a"], ["&", ["?", "b"], ["?", "c"]]])
        self.assertEqual(
            self.parse("(a or b) and c"),
            ["&", ["|", ["?", "a"], ["?", "b"]], ["?", "c"]])
        self.assertEqual(self.parse("not not a"), ["!", ["!", ["?", "a"]]])
        self.assertEqual(self.parse("a and b and c"),
                         ["&", ["?", "a"], ["?", "b"], ["?", "c"]])
        self.assertEqual(self.parse("not a or b"),
                         ["|", ["!", ["?", "a"]], ["?", "b"]])
        # Keywords must be whole words.
        self.assertEqual(self.parse("order and nothing"),
                         ["&", ["?", "order"], ["?", "nothing"]])

    def test_in(self):
        self.assertEqual(self.parse('"web" in tags'), ["=[]", "tags", "web"])
        self.assertEqual(self.parse("5 not in ids"),
                         ["!", ["=[]", "ids", 5]])

    def test_regex(self):
        self.assertEqual(self.parse("name =~ /^web/"),
                         ["=~", "name", "^web"])
        self.assertEqual(self.parse("name =~ m#a/b#i"),
                         ["=~", "name", "(?i)a/b"])
        self.assertEqual(self.parse("name !~ |x\\|y|si"),
                         ["!", ["=~", "name", "(?is)x|y"]])
        self.assertEqual(self.parse(r"name =~ /a\/b/"),
                         ["=~", "name", "a/b"])
        self.assertEqual(self.parse(r"name =~ /\d+/"),
                         ["=~", "name", r"\d+"])

    def test_glob(self):
        result = self.parse('name =* "web*.site"')
        self.assertEqual(result[:2], ["=~", "name"])
        regex = re.compile(result[2])
        self.assertTrue(regex.match("web1.site"))
        self.assertTrue(regex.match("web1.site.example.com"))
        self.assertFalse(regex.match("web1.x.site"))
        self.assertFalse(regex.match("xweb1.site"))
        result = self.parse("name !* 'a?c'")
        self.assertEqual(result[0], "!")
        self.assertTrue(re.match(result[1][2], "abc.d"))
        self.assertFalse(re.match(result[1][2], "a.c"))

    def test_strings(self):
        self.assertEqual(self.parse(r'os == "a \"b\" c"'),
                         ["==", "os", 'a "b" c'])
        self.assertEqual(self.parse("os == 'say \\'hi\\''"),
                         ["==", "os", "say 'hi'"])
        # Adjacent strings are an error, not a concatenation.
        self.assertRaises(errors.QueryFilterParseError, self.parse,
                          "os == 'it''s'")

    def test_errors(self):
        for text, words in [
                ("", ["empty filter"]),
                ("   ", ["empty filter"]),
                ("name ==", ["expected a number or a quoted string"]),
                ("name == x", ["expected a number or a quoted string"]),
                ('name == "x', ["unterminated string"]),
                ("(a or b", ["missing ')'"]),
                ("a b", ["unexpected text"]),
                ("name =~ web", ["expected a regular expression"]),
                ("name =~ /web", ["unterminated regular expression"]),
                ("name =~ /(/", ["invalid regular expression"]),
                ("name =~ /a/x", ["unknown regular expression flag", "x"]),
                ("5 tags", ["expected 'in'"]),
                ("and", ["expected a field name"]),
                ("a and", ["expected a field name"]),
                ("name =* web", ["quoted glob pattern"])]:
            err = self.assertRaises(errors.QueryFilterParseError,
                                    self.parse, text)
            self.assertIn("Failed to parse query filter", str(err))
            for word in words:
                self.assertIn(word, str(err), text)
        self.assertRaises(errors.QueryFilterParseError, self.parse, None)

    def test_parsed_filters_compile(self):
        pred = compile_(self.parse(
            '(os == "debian" or os =~ /^cent/) and not offline and'
            ' "web" in tags and mem >= 1024'))
        self.assertIs(pred(lambda f: ITEM[f.name]), True)


class MakeFilterTests(unittest.TestCase):

    def test_names(self):
        self.assertIsNone(qlang.make_filter([], False))
        self.assertEqual(qlang.make_filter(["a", "b"], False),
                         ["|", ["==", "name", "a"], ["==", "name", "b"]])
        self.assertEqual(qlang.make_simple_filter("name", ["a"]),
                         ["|", ["==", "name", "a"]])
        self.assertIsNone(qlang.make_simple_filter("name", []))

    def test_globs(self):
        result = qlang.make_filter(["web*"], False)
        self.assertEqual(result[0], "|")
        self.assertEqual(result[1][:2], ["=~", "name"])

    def test_numeric(self):
        self.assertEqual(qlang.make_filter(["1", "22"], False, "id", True),
                         ["|", ["==", "id", 1], ["==", "id", 22]])
        self.assertRaises(errors.OpPrereqError, qlang.make_filter, ["x"],
                          False, "id", True)

    def test_filter_detection(self):
        self.assertEqual(qlang.make_filter(["name == 'a'"], False),
                         ["==", "name", "a"])
        self.assertEqual(qlang.make_filter(["offline"], True),
                         ["?", "offline"])
        self.assertRaises(errors.OpPrereqError, qlang.make_filter,
                          ["a", "b"], True)


class NiceSortTests(unittest.TestCase):

    def test_digits_sort_as_numbers(self):
        names = ["node10", "node2", "node1", "node1a", "node", "a10b2",
                 "a10b10", "a9", "10", "9", "b"]
        self.assertEqual(qlang.nice_sort(names),
                         ["9", "10", "a9", "a10b2", "a10b10", "b", "node",
                          "node1", "node1a", "node2", "node10"])

    def test_fqdns(self):
        names = ["node10.example.com", "node2.example.com",
                 "node1.example.com"]
        self.assertEqual(qlang.nice_sort(names),
                         ["node1.example.com", "node2.example.com",
                          "node10.example.com"])

    def test_key_function(self):
        self.assertEqual(qlang.nice_sort([("x10", 1), ("x9", 2)],
                                         key=lambda p: p[0]),
                         [("x9", 2), ("x10", 1)])

    def test_match_hostname(self):
        self.assertTrue(qlang.match_hostname("a.b.c", "a"))
        self.assertTrue(qlang.match_hostname("a.b.c", "a.b"))
        self.assertTrue(qlang.match_hostname("A.b.c", "a.B.c"))
        self.assertFalse(qlang.match_hostname("ab.c", "a"))
        self.assertFalse(qlang.match_hostname("a.b.c", "b"))
        self.assertFalse(qlang.match_hostname(None, "a"))
