"""Whole-number arguments: int() would truncate 1.5 to 1 and read "44" as 44 without a word."""

import operator


def whole_number(value, what, minimum=None):
    """`value` as an int (a Python or numpy integer, or anything with __index__); ValueError
    naming `what` for a float, a string or anything else, and for a value below `minimum`."""
    try:
        number = operator.index(value)
    except TypeError:
        raise ValueError(f"{what} must be an integer, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise ValueError(f"{what} must be >= {minimum}, got {number}")
    return number
