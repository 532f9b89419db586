"""Whether an optional module can be imported, found without importing it (so a check before a budget is charged
costs nothing; the work that needs the module imports it once, later)."""

from __future__ import annotations


def module_available(name: str) -> bool:
    """Whether the module `name` can be imported, found without importing it.

    Parameters
    ----------
    name : str
        A module's dotted name (e.g. "highspy").

    Returns
    -------
    bool
        True if an import would find it; False if not, or if its entry in `sys.modules` is None (blocked).
    """
    from importlib.util import find_spec

    try:
        return find_spec(name) is not None
    except (ImportError, ValueError):  # a module entry of None (blocked, as tests do) raises ValueError
        return False
