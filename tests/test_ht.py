"""The type language of JSON values (ganeti.ht)."""

from twisted.trial import unittest

from ganeti import ht


class TypeTests(unittest.TestCase):

    def invalid(self, typ, value):
        return self.assertRaises(ht.Invalid, typ.check, value).reason

    def test_any_is_a_json_value(self):
        value = {"a": [1, 2.5, None, True, "x", (3, 4)], "b": {}}
        self.assertEqual(ht.ANY.check(value),
                         {"a": [1, 2.5, None, True, "x", [3, 4]], "b": {}})
        self.assertIn("key 1 (int): expected a string",
                      self.invalid(ht.ANY, {1: "x"}))
        self.assertEqual(self.invalid(ht.ANY, {"a": [1, object()]})[:35],
                         "'a': item 1: expected a JSON value,")
        self.assertIn("got {1, 2} (set)", self.invalid(ht.ANY, {1, 2}))

    def test_numbers(self):
        self.assertEqual(ht.FLOAT.check(2), 2.0)
        self.assertIsInstance(ht.NUMBER.check(2), int)
        self.assertEqual(ht.number(1).check(1.5), 1.5)
        self.assertEqual(self.invalid(ht.number(1), 0),
                         "expected a number >= 1, got 0 (int)")
        self.assertEqual(self.invalid(ht.NONNEG_NUMBER, True),
                         "expected a non-negative number, got True")
        self.assertEqual(self.invalid(ht.integer(0, 7), 8),
                         "expected an integer from 0 to 7, got 8 (int)")
        self.assertEqual(self.invalid(ht.INT, 1.0),
                         "expected an integer, got 1.0 (float)")

    def test_numbers_a_parameter_cannot_hold_are_refused(self):
        inf, nan = float("inf"), float("nan")
        for typ in (ht.FLOAT, ht.NUMBER, ht.NONNEG_NUMBER, ht.ANY):
            for value in (inf, -inf, nan):
                self.assertIn("not a finite number",
                              self.invalid(typ, value))
        for typ in (ht.INT, ht.NUMBER, ht.ANY, ht.integer(low=0)):
            self.assertIn("out of range (integers must fit in 64 bits)",
                          self.invalid(typ, 2 ** 63))
            self.assertIn("out of range", self.invalid(typ, -2 ** 63 - 1))
            self.assertEqual(typ.check(2 ** 63 - 1), 2 ** 63 - 1)
        self.assertEqual(ht.INT.check(-2 ** 63), -2 ** 63)
        self.assertEqual(ht.FLOAT.check(1e300), 1e300)
        # deep inside a value: the place is named
        self.assertEqual(
            self.invalid(ht.DICT, {"memory": inf}),
            "'memory': expected a JSON value, got inf (float): not a"
            " finite number")
        self.assertEqual(
            self.invalid(ht.list_of(ht.ANY), [1, [2, 2 ** 64]])[:22],
            "item 1: item 1: expect")

    def test_containers_name_the_place(self):
        typ = ht.dict_of(ht.STR, ht.list_of(ht.tuple_of(ht.INT, ht.NESTR)))
        self.assertEqual(self.invalid(typ, {"k": [[1, "a"], [2, ""]]}),
                         "'k': item 1: item 1: expected a non-empty string,"
                         " got ''")
        self.assertEqual(
            self.invalid(ht.list_of(ht.INT, nonempty=True), []),
            "expected a non-empty list of integers, got [] (list)")

    def test_either_explains_the_closest_form(self):
        typ = ht.either(ht.list_of(ht.INT), ht.STR)
        self.assertEqual(self.invalid(typ, 3),
                         "expected a list of integers or a string, got 3"
                         " (int)")
        self.assertEqual(self.invalid(typ, [1, "x"]),
                         "item 1: expected an integer, got 'x'")

    def test_converted_and_where(self):
        job_id = ht.converted(
            ht.either(ht.NONNEG_INT, ht.where(ht.STR, str.isdigit, "digits")),
            int, desc="a job id")
        self.assertEqual(job_id.check("12"), 12)
        self.assertEqual(self.invalid(job_id, "x1"),
                         "expected a job id, got 'x1'")
        self.assertEqual(ht.maybe(job_id).check(None), None)

    def test_private_values_are_hidden_in_redacting_dumps(self):
        typ = ht.dict_of(ht.STR, ht.private(ht.STR))
        value = typ.check({"pw": "secret"})
        self.assertEqual(typ.dump(value), {"pw": "secret"})
        self.assertEqual(typ.dump(value, redact=True), {"pw": ht.REDACTED})
        # private is not secret: what goes to disk keeps it
        self.assertEqual(typ.dump(value, redact=ht.HIDE_SECRETS),
                         {"pw": "secret"})

    def test_secret_values_are_hidden_from_disk_and_answers(self):
        typ = ht.maybe(ht.dict_of(ht.STR, ht.secret(ht.STR)))
        value = typ.check({"pw": "s3"})
        self.assertEqual(typ.dump(value), {"pw": "s3"})
        self.assertEqual(typ.dump(value, redact=ht.HIDE_SECRETS),
                         {"pw": ht.REDACTED})
        self.assertEqual(typ.dump(value, redact=True), {"pw": ht.REDACTED})

    def test_a_redacting_function_sees_each_private_value(self):
        typ = ht.list_of(ht.either(ht.private(ht.INT), ht.secret(ht.STR)))
        seen = []

        def redact(value, is_secret):
            seen.append((value, is_secret))
            return "hidden"
        self.assertEqual(typ.dump([1, "x"], redact=redact),
                         ["hidden", "hidden"])
        self.assertEqual(seen, [(1, False), ("x", True)])

    def test_one_of_compares_types(self):
        self.assertEqual(self.invalid(ht.one_of(0, 1), False),
                         "expected one of 0, 1, got False")


class CopyValueTests(unittest.TestCase):

    def test_nested_lists_and_dicts_are_independent_copies(self):
        reason = [["gnt:client:gnt-instance", "add", 1], ["rapi", "", 2]]
        params = {"disks": [{"size": 1024, "mode": "rw"}], "reason": reason}
        copied = ht.copy_value(params)
        self.assertEqual(copied, params)
        copied["disks"][0]["size"] = 2048
        copied["reason"][0][1] = "changed"
        self.assertEqual(params["disks"][0]["size"], 1024)
        self.assertEqual(reason[0][1], "add")

    def test_other_containers_are_deep_copied_too(self):
        value = ([1, [2]], {3})
        copied = ht.copy_value(value)
        self.assertEqual(copied, value)
        self.assertIsNot(copied[0], value[0])
