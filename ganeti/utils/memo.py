"""Values computed once per owner: a config snapshot, a query run."""


class Memo(object):
    """Call with ``(key, compute)``: ``compute()`` runs on a key's first use.

    What it returns is kept for the life of the owner; ``key in memo`` tells
    whether a value is kept.
    """

    def __init__(self):
        self._values = {}

    def __call__(self, key, compute):
        try:
            return self._values[key]
        except KeyError:
            value = self._values[key] = compute()
            return value

    def __contains__(self, key):
        return key in self._values
