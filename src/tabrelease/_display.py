"""How a record shows itself in Jupyter (`_repr_html_`), without the record importing the presentation layer.

A record's `_repr_html_` calls `html_for(self)`. The renderers are registered from above, by the presentation
layer (`tabrelease.notebook` calls `register_html` for each record it draws), so that the records (the `Release`,
a `MechanismPlan`, a `LogLinearFit`) import nothing above their own layer.

A Jupyter user who only imported `tabrelease` has not imported `tabrelease.notebook` and should still see the
summary: the first time an object is shown and no renderer is registered yet, `html_for` loads the modules the
package's `__init__` named in `_hooks` (the wiring is done from the top; this module names nothing above it).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from markupsafe import escape

from . import _hooks

_RENDERERS: dict[str, Callable[[object], str]] = {}


def register_html(type_name: str, render: Callable[[object], str]) -> None:
    """Show objects of the type named `type_name` ("module.QualifiedName", as `type_key` gives) by `render(obj)`.

    Parameters
    ----------
    type_name : str
        The type's key, as `type_key` gives it.
    render : callable
        Takes the object, returns its HTML (a str). Replaces any renderer registered under the same key.
    """
    _RENDERERS[type_name] = render


def type_key(cls: type) -> str:
    """The name a renderer is registered under: the class's module and qualified name.

    Parameters
    ----------
    cls : type

    Returns
    -------
    str
        "module.QualifiedName".
    """
    return f"{cls.__module__}.{cls.__qualname__}"


def _renderer(obj) -> Callable[[object], str] | None:
    for cls in type(obj).__mro__:
        render = _RENDERERS.get(type_key(cls))
        if render is not None:
            return render
    return None


def html_for(obj) -> str:
    """The HTML summary of `obj` by the renderer registered for its type (or a base type); its escaped repr if none.

    Parameters
    ----------
    obj : object
        The object to show (a record's `_repr_html_` passes itself).

    Returns
    -------
    str
        HTML.
    """
    render = _renderer(obj)
    if render is None:
        for name in _hooks.RENDERER_MODULES:  # named by the package's __init__ (see _hooks)
            importlib.import_module(name)
        render = _renderer(obj)
    if render is None:
        return f"<pre>{escape(repr(obj))}</pre>"
    return render(obj)
