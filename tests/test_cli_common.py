"""Command-line parsing and output shared by the gnt-* commands."""

from twisted.trial import unittest

from ganeti import errors
from ganeti.cli import common


class UnitTests(unittest.TestCase):

    def test_sizes_in_mib_rounded_up_to_4(self):
        cases = {"512": 512, "512M": 512, "1G": 1024, "1.5g": 1536,
                 "2T": 2 * 1024 * 1024, "3": 4, "0.1": 4, " 10 GiB ": 10240}
        for text, mib in cases.items():
            self.assertEqual(common.parse_unit(text), mib, text)

    def test_bad_sizes_say_why(self):
        err = self.assertRaises(errors.UnitParseError, common.parse_unit,
                                "12X")
        self.assertIn("unknown unit 'X'", str(err))
        err = self.assertRaises(errors.UnitParseError, common.parse_unit,
                                "big")
        self.assertIn("invalid size 'big'", str(err))

    def test_format_unit(self):
        self.assertEqual(common.format_unit(512), "512M")
        self.assertEqual(common.format_unit(1536), "1.5G")
        self.assertEqual(common.format_unit(1536, "m"), "1536")
        self.assertEqual(common.format_unit(None), "?")


class KeyvalTests(unittest.TestCase):

    def test_forms(self):
        self.assertEqual(common.parse_keyval("memory=512M,no_acpi,vnc,-x"),
                         {"memory": "512M", "acpi": False, "vnc": True,
                          "x": None})
        self.assertEqual(common.parse_keyval(""), {})
        self.assertEqual(common.parse_ident_keyval("0:size=1G,mode=rw"),
                         ("0", {"size": "1G", "mode": "rw"}))

    def test_errors_name_the_option(self):
        err = self.assertRaises(errors.ParameterError, common.parse_keyval,
                                "a=1,a=2", "-B")
        self.assertEqual(err.args[0], "-B")
        self.assertIn("given twice", err.args[1])
        self.assertRaises(errors.ParameterError, common.parse_ident_keyval,
                          ":size=1", "--disk")

    def test_coerce(self):
        params = common.coerce_values({"memory": "1G", "vcpus": "2",
                                       "auto_balance": "no", "x": True},
                                      sizes=["memory"], ints=["vcpus"],
                                      bools=["auto_balance"])
        self.assertEqual(params, {"memory": 1024, "vcpus": 2,
                                  "auto_balance": False, "x": True})
        err = self.assertRaises(errors.ParameterError, common.coerce_values,
                                {"vcpus": "many"}, ints=["vcpus"])
        self.assertEqual(err.args[0], "vcpus")


class TableTests(unittest.TestCase):

    def test_aligned(self):
        lines = common.format_table(["Node", "Memory"],
                                    [["node1", 512], ["node10", 4096]],
                                    numeric=[1])
        self.assertEqual(lines, ["Node   Memory", "node1     512",
                                 "node10   4096"])

    def test_separator_and_no_headers(self):
        lines = common.format_table(["a", "b"], [[1, None]], separator="|",
                                    no_headers=True)
        self.assertEqual(lines, ["1|"])

    def test_field_selection(self):
        self.assertEqual(common.select_fields(["a", "b"], None), ["a", "b"])
        self.assertEqual(common.select_fields(["a", "b"], "c"), ["c"])
        self.assertEqual(common.select_fields(["a", "b"], "+c,d"),
                         ["a", "b", "c", "d"])


class ErrorTests(unittest.TestCase):

    def test_prereq_error_like_ganeti(self):
        msg, code = common.format_error(errors.OpPrereqError(
            "Instance 'x' not known", errors.ECODE_NOENT))
        self.assertEqual(code, 1)
        self.assertEqual(msg, "Failure: prerequisites not met for this"
                         " operation:\nerror type: unknown_entity, error"
                         " details:\nInstance 'x' not known")

    def test_parameter_error(self):
        msg, _ = common.format_error(errors.ParameterError("-B", "bad"))
        self.assertEqual(msg, "Failure: invalid value for -B: bad")
