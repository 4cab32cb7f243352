"""Statistics of measured latencies."""


def percentile(values, pct):
    """The ``pct`` percentile of ``values`` (nearest rank); NaN if empty."""
    if not values:
        return float("nan")
    values = sorted(values)
    index = min(len(values) - 1, int(round(pct / 100.0 * (len(values) - 1))))
    return values[index]
