"""Every public function and method of the package documents its parameters and what it returns (numpydoc), and
`help(tabrelease)` starts a user off. A method that overrides a documented one of a base class (a mechanism's
`plan`, an estimator's `estimate`) inherits its documentation, as `inspect.getdoc` and numpydoc read it."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import tabrelease

SKIP_PACKAGES = ("tabrelease.cli", "tabrelease.__main__")  # the command line parses; its functions are documented by --help


def _modules():
    for info in pkgutil.walk_packages(tabrelease.__path__, "tabrelease."):
        if info.name.startswith(SKIP_PACKAGES):
            continue
        yield info.name


def _public_callables(module):
    for name, obj in vars(module).items():
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue
        if inspect.isfunction(obj):
            yield name, obj
        elif inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if attr.startswith("_") or not inspect.isfunction(member):
                    continue
                yield f"{name}.{attr}", getattr(obj, attr)


def _undocumented(func) -> list[str]:
    doc = inspect.getdoc(func) or ""
    signature = inspect.signature(func)
    params = [p for p in signature.parameters if p not in ("self", "cls")]
    missing = []
    if params and "Parameters\n----------" not in doc:
        missing.append("Parameters")
    returns_nothing = signature.return_annotation in (None, "None")
    if not returns_nothing and not any(s in doc for s in ("Returns\n-------", "Yields\n------")):
        missing.append("Returns")
    return missing


def gaps_in(prefixes=("tabrelease",)) -> list[str]:
    """Every public function of the modules under `prefixes` that lacks a numpydoc section."""
    gaps = []
    for name in _modules():
        if not name.startswith(tuple(prefixes)):
            continue
        module = importlib.import_module(name)
        for qualname, func in _public_callables(module):
            missing = _undocumented(func)
            if missing:
                gaps.append(f"{name}.{qualname}: no {' or '.join(missing)}")
    return gaps


def test_every_public_function_documents_its_parameters_and_returns():
    gaps = gaps_in()
    assert not gaps, f"{len(gaps)} public functions lack numpydoc sections:\n" + "\n".join(gaps)


def test_help_starts_a_user_off():
    doc = tabrelease.__doc__
    for name in ("ReleaseSpec", "loss_of", "release_margins", "publish_release", "prepare_release"):
        assert name in doc, f"help(tabrelease) does not mention {name}"
    assert len(tabrelease.__all__) - 1 <= 25, "the top level holds more than 25 names"  # __version__ aside
    for name in tabrelease.__all__:
        assert getattr(tabrelease, name) is not None


def test_every_dotted_name_the_docs_give_exists():
    """A new user's trial: the tutorial named tabrelease.read_microdata and tabrelease.released_frames, which the top
    level does not hold. Every `tabrelease.x.y` the README and the tutorial name in backticks resolves."""
    import importlib
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    texts = [root / "README.md", root / "docs" / "tutorial.md"]
    names = {m for path in texts if path.exists()
             for m in re.findall(r"`(tabrelease(?:\.[A-Za-z_]\w*)+)(?:\(\))?`", path.read_text())}
    assert names, "no dotted names found: the pattern is wrong"
    missing = []
    for name in sorted(names):
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                value = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            try:
                for attribute in parts[cut:]:
                    value = getattr(value, attribute)
            except AttributeError:
                missing.append(name)
            break
        else:
            missing.append(name)
    assert missing == []
