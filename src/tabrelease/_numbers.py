"""Numbers written by people: the privacy parameters, budgets and targets given as text (flags, TOML strings, API
strings). Python's float() also reads ``0_5`` as 5, ``1_0`` as 10, and digits of other scripts (fullwidth ``１``,
Arabic-Indic ``٠.٥``): a typo that way would charge ten times the epsilon meant (a new user's trial), so text is
read only as ASCII decimal notation. No imports, so the command line checks a flag before loading numpy.
"""

import re

# An optional sign, ASCII digits with an optional point, an optional exponent; "inf" and "nan" are names, kept for
# the callers' own refusal of them (a non-finite epsilon is refused as such, not as "not a number").
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:inf|infinity|nan)",
                      re.IGNORECASE)


def decimal_number(text: str) -> float:
    """A float from text in ASCII decimal notation (surrounding spaces allowed).

    Parameters
    ----------
    text : str

    Returns
    -------
    float

    Raises
    ------
    ValueError
        Anything else: digit separators (``0_5``), digits of other scripts, a decimal comma, words.
    """
    stripped = text.strip()
    if not _DECIMAL.fullmatch(stripped):
        raise ValueError(f"{text!r} is not a number written in the digits 0-9 (no _ between digits)")
    return float(stripped)


def number(value) -> float:
    """`decimal_number` for text, float() for anything else (a number already).

    Parameters
    ----------
    value : str or number

    Returns
    -------
    float

    Raises
    ------
    ValueError, TypeError
        As float() does, and for text `decimal_number` refuses.
    """
    return decimal_number(value) if isinstance(value, str) else float(value)
