"""Every public function and method of the package documents its parameters and what it returns (numpydoc), and
`help(tabrelease)` starts a user off. A method that overrides a documented one of a base class (a mechanism's
`plan`, an estimator's `estimate`) inherits its documentation, as `inspect.getdoc` and numpydoc read it."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import pkgutil
import re
import signal
from pathlib import Path

import pytest

import tabrelease

ROOT = Path(__file__).resolve().parents[1]


def _doc_files() -> list[Path]:
    """The README and every page under docs/: the documentation users read."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

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


@contextlib.contextmanager
def _signal_handlers_kept():
    """Importing every module has side effects on this process's signals: `tables._dask_worker`, a Dask worker's
    preload, ignores SIGINT as it is imported. Left so, it reached the tests that ran after this one in the same
    process (a command's interrupt, then ignored, let a release be made). The handlers are put back."""
    kept = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in kept.items():
            signal.signal(signum, handler)


def gaps_in(prefixes=("tabrelease",)) -> list[str]:
    """Every public function of the modules under `prefixes` that lacks a numpydoc section."""
    gaps = []
    with _signal_handlers_kept():
        modules = [importlib.import_module(name) for name in _modules() if name.startswith(tuple(prefixes))]
    for module in modules:
        name = module.__name__
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
    level does not hold. Every `tabrelease.x.y` the README and the docs (docs/*.md, the tutorial among them) name in
    backticks resolves."""
    texts = _doc_files()
    assert ROOT / "docs" / "tutorial.md" in texts
    names = {m for path in texts if path.exists()
             for m in re.findall(r"`(tabrelease(?:\.[A-Za-z_]\w*)+)(?:\(\))?`", path.read_text())}
    assert names, "no dotted names found: the pattern is wrong"
    with _signal_handlers_kept():
        missing = _unresolved(sorted(names))
    assert missing == []


def _unresolved(names: list[str]) -> list[str]:
    """The dotted names that name no module, or no attribute of one."""
    missing = []
    for name in names:
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
    return missing


def _anchors(text: str) -> set[str]:
    """The anchors GitHub gives a Markdown file's headings: lower case, punctuation but hyphens and underscores
    dropped, spaces as hyphens, a repeated heading numbered."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", _outside_code(text), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _outside_code(text: str) -> str:
    """The text without its fenced code blocks."""
    return re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)


def test_every_relative_link_of_the_docs_resolves():
    """The README was split into docs/*.md: every relative link of the README and the docs names a file that exists,
    and an anchor (`file.md#heading`, `#heading`) names a heading of that file."""
    broken = []
    for path in _doc_files():
        text = path.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", _outside_code(text)):
            if re.match(r"^[a-z]+:", target):  # https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            if not linked.exists():
                broken.append(f"{path.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked.read_text(encoding="utf-8")):
                broken.append(f"{path.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == []


def test_the_readme_s_exit_codes_are_the_error_types_exit_statuses():
    """The README's table of exit codes names each error type with its status, as `errors.EXIT_STATUSES` has it."""
    import re
    from pathlib import Path

    from tabrelease import errors

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    table = text.split("### Exit codes", 1)[1].split("\n\n", 2)[1]
    named = {int(status): name for status, name in re.findall(r"^\| (\d+) \| `(\w+)` \|", table, flags=re.M)}
    assert named == {status: cls.__name__ for status, cls in errors.EXIT_STATUSES.items()}
    statuses = {int(s) for s in re.findall(r"^\| (\d+) \|", table, flags=re.M)}
    assert {0, 130, 143} <= statuses
