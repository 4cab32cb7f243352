"""The plain text table the benchmarks print their results in."""


def table(headers, rows):
    """Print ``rows`` under ``headers``, each column as wide as its widest
    cell, two spaces apart."""
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    line = "  ".join("%%-%ds" % w for w in widths)
    print(line % tuple(headers))
    print(line % tuple("-" * w for w in widths))
    for row in rows:
        print(line % tuple(row))
