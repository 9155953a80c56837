"""Whole-number arguments: int() would truncate 1.5 to 1 and read "44" as 44 without a word, and
a number past the engine's integer width would reach it as pybind11's "incompatible function
arguments"."""

import operator


def whole_number(value, what, minimum=None, bits=64):
    """`value` as an int (a Python or numpy integer, or anything with __index__); ValueError
    naming `what` for a float, a string or anything else, for a value below `minimum`, and for
    one outside a signed `bits`-bit integer (what the engine takes)."""
    try:
        number = operator.index(value)
    except TypeError:
        raise ValueError(f"{what} must be an integer, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise ValueError(f"{what} must be >= {minimum}, got {number}")
    if not -2 ** (bits - 1) <= number < 2 ** (bits - 1):
        raise ValueError(f"{what} = {number} does not fit in a {bits}-bit integer")
    return number
