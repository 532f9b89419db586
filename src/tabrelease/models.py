"""Hierarchical log-linear models, written as their generating sets of margins.

`[AD][AB][BE]` is the model whose minimal sufficient statistics are the AD, AB and BE margins.
Generators may be written with the papers' letters (`[ABC]`) or with variable names separated
by commas (`[sex,age][region]`). A generator contained in another adds nothing; it is dropped
and reported, not silently kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import combinations
from math import comb, prod

from .errors import TabreleaseError
from .tables import LETTERS, ContingencyTable

Margin = tuple[int, ...]


@dataclass(frozen=True)
class HierarchicalModel:
    """Maximal generating margins (sorted axis tuples) of a hierarchical log-linear model on k variables."""

    generators: tuple[Margin, ...]
    k: int
    dropped: tuple[Margin, ...] = ()

    def __post_init__(self) -> None:
        if not self.generators:
            raise TabreleaseError("the model is empty; give at least one margin, e.g. [AB]")
        for g in self.generators:
            if not g or any(a < 0 or a >= self.k for a in g):
                raise TabreleaseError(f"margin {g} does not fit a table with {self.k} variables")

    @property
    def closure(self) -> tuple[Margin, ...]:
        return downward_closure(self.generators)

    def free_parameters(self, shape: Sequence[int]) -> int:
        """Dimension of the model on a table of this shape (see the module's `free_parameters`).

        Parameters
        ----------
        shape : sequence of int
            The number of levels of each variable.

        Returns
        -------
        int
            The number of free parameters, the constant term included.
        """
        return free_parameters(self.generators, shape)

    def letters(self) -> str:
        """The generators in the papers' bracket notation, by letter: ``[AB][BC]``.

        Returns
        -------
        str
            The model as brackets of position letters.
        """
        return "".join(margin_label(g, LETTERS) for g in self.generators)

    def names(self, variables: Sequence[str]) -> str:
        """Bracket notation with the variables' own names (letters when the names are letters).

        Parameters
        ----------
        variables : sequence of str
            The table's variable names, in axis order.

        Returns
        -------
        str
            Such as ``[sex,age][region]``, or ``[AB][BC]`` when every name is one character.
        """
        if all(len(v) == 1 for v in variables):
            return "".join(margin_label(g, variables) for g in self.generators)
        return "".join("[" + ",".join(variables[a] for a in g) + "]" for g in self.generators)

    def __str__(self) -> str:
        return self.letters()


def margin_label(margin: Margin, letters: Sequence[str]) -> str:
    """A margin in the papers' bracket notation: [AC] for axes (0, 2) with letters A, B, C.

    Parameters
    ----------
    margin : tuple of int
        The margin's axes.
    letters : sequence of str
        The name of each axis (one character each, for the notation to read back).

    Returns
    -------
    str
        The margin's label, such as ``"[AC]"``.
    """
    return "[" + "".join(letters[j] for j in margin) + "]"


# Margins of at most this many variables are checked by their subsets (2^size each); larger ones pair by pair.
SUBSET_SCAN_MAX_SIZE = 12


def maximal_margins(margins: Iterable[Margin]) -> tuple[tuple[Margin, ...], tuple[Margin, ...]]:
    """Split margins into the maximal ones (order of first appearance kept) and those contained in another.

    Parameters
    ----------
    margins : iterable of tuple of int
        Margins as axes (each sorted and made distinct here; repeats are merged).

    Returns
    -------
    kept : tuple of tuple of int
        The maximal margins.
    dropped : tuple of tuple of int
        The margins contained in a kept one.
    """
    unique = list(dict.fromkeys(tuple(sorted(set(m))) for m in margins))
    present = set(unique)
    # A margin is inside another iff one of its supersets is present. Checking each margin's strict subsets
    # (2^|m| of them) against the set of margins is linear in the margins for small ones, where comparing every
    # pair was quadratic (minutes for the 4,950 two-way margins of 100 variables); past SUBSET_SCAN_MAX_SIZE
    # variables a margin is compared with the others, pair by pair.
    inside = set()
    large = [m for m in unique if len(m) > SUBSET_SCAN_MAX_SIZE]
    for m in unique:
        if len(m) <= SUBSET_SCAN_MAX_SIZE:
            for size in range(len(m)):
                inside.update(sub for sub in combinations(m, size) if sub in present)
    for big in large:
        members = set(big)
        inside.update(m for m in unique if len(m) < len(big) and members.issuperset(m))
    kept = tuple(m for m in unique if m not in inside)
    dropped = tuple(m for m in unique if m in inside)
    return kept, dropped


def make_model(margins: Iterable[Iterable[int]], k: int) -> HierarchicalModel:
    """A model from margins given as axes: the maximal ones kept, those inside another recorded as dropped.

    Parameters
    ----------
    margins : iterable of iterable of int
        The margins, as axes.
    k : int
        The number of variables of the table.

    Returns
    -------
    HierarchicalModel
        The model.

    Raises
    ------
    TabreleaseError
        If no margin is given, or one is empty or has an axis outside 0 to k - 1.
    """
    kept, dropped = maximal_margins(tuple(m) for m in margins)
    return HierarchicalModel(kept, k, dropped)


def downward_closure(generators: Iterable[Margin]) -> tuple[Margin, ...]:
    """Every subset of every generator, the empty set included, by size then lexicographically.

    Parameters
    ----------
    generators : iterable of tuple of int
        The model's generators.

    Returns
    -------
    tuple of tuple of int
        The closure, each subset sorted.
    """
    closed: set[Margin] = set()
    for g in generators:
        for r in range(len(g) + 1):
            closed.update(combinations(sorted(g), r))
    return tuple(sorted(closed, key=lambda s: (len(s), s)))


def free_parameters(generators: Iterable[Margin], shape: Sequence[int]) -> int:
    """Dimension of the model: the sum over the closure of prod(k_j - 1).

    Parameters
    ----------
    generators : iterable of tuple of int
        The model's generators.
    shape : sequence of int
        The number of levels of each variable.

    Returns
    -------
    int
        The number of free parameters, the constant term (the empty set) included.
    """
    return sum(prod(shape[j] - 1 for j in s) for s in downward_closure(generators))


_BRACKET = re.compile(r"\[([^\[\]]*)\]")


def _generator_tokens(spec: str) -> list[str]:
    spec = spec.strip()
    if "[" in spec or "]" in spec:
        tokens = [t.strip() for t in _BRACKET.findall(spec)]
        # Outside brackets only the all-K-way shorthand ("all-2-way [ABC]"), which is never a letter run.
        leftover = [t for t in re.split(r"[\s+]+", _BRACKET.sub(" ", spec)) if t]
        depth = 0
        for character in spec:  # a bracket opened and never closed, or closed and never opened: said as such
            depth += {"[": 1, "]": -1}.get(character, 0)
            if depth < 0 or depth > 1:
                break
        if depth != 0:
            raise TabreleaseError(f"cannot read model {spec!r}: its brackets do not pair ([ ... ] around each margin's "
                                  "variables)")
        if any(_ALL_K_WAY.fullmatch(t) is None for t in leftover):
            raise TabreleaseError(f"cannot read model {spec!r}: {' '.join(leftover)!r} is outside brackets")
        return leftover + tokens
    tokens = [t for t in re.split(r"[\s+]+", spec) if t]
    listed = next((t for t in tokens if "," in t), None)
    if listed is not None:
        # "Hair,Eye" had been read as the one margin [Hair,Eye], where a user who meant two margins of one variable
        # each published a finer table without being told (a new user's trial): names listed need brackets.
        names = [n.strip() for n in listed.split(",") if n.strip()]
        raise TabreleaseError(f"cannot read model {spec!r}: write [{','.join(names)}] for one margin of "
                              f"{' and '.join(names) if len(names) == 2 else 'these variables'} together, or "
                              f"{''.join(f'[{n}]' for n in names)} for a margin of each alone")
    return tokens


def _labelled_axis(word: str, table: ContingencyTable) -> int | None:
    """The axis whose variable's name for people (a built-in table's label: titanic's "class") is `word`, where it
    is one variable's and no other variable's own name; None where no label is `word`. The published files name the
    margins by these labels, so a margin may too."""
    from .tables import people_names

    labelled = [a for a, label in enumerate(people_names(table)[0]) if label == word and label != table.variables[a]]
    if not labelled:
        return None
    if len(labelled) > 1 or word in table.variables:
        raise TabreleaseError(f"{word!r} names more than one variable; name it by its own name or letter")
    return labelled[0]


def _resolve_generator(token: str, table: ContingencyTable) -> Margin:
    if not token:
        raise TabreleaseError("the model has an empty margin []")
    if "," in token:
        parts = [p.strip() for p in token.split(",")]
        if any(not p for p in parts):
            raise TabreleaseError(f"empty variable name in margin [{token}]")
        labelled = [_labelled_axis(p, table) for p in parts]
        axes = [a if a is not None else table.axis(p) for p, a in zip(parts, labelled)]
        if len(set(axes)) != len(axes):
            raise TabreleaseError(f"margin [{token}] names a variable twice")
        return tuple(sorted(axes))
    if token in table.variables:
        _refuse_a_letter_of_two_variables(token, token, table)
        return (table.variables.index(token),)
    if (axis := _labelled_axis(token, table)) is not None:
        return (axis,)
    if token in table.letters:  # a position letter of more than one character (V27 past Z)
        return (table.letters.index(token),)
    # A run of letters: each letter is a variable's own one-letter name or its position letter.
    if len(token) > 1 and not all(ch in table.variables or ch in table.letters for ch in token) and not (
            token.isalpha() and token.isupper()):
        # A word, not a run of letters ("age" where the table has no such variable): named whole, beside the
        # names a user types (the published files' names for people, then the variables' own where they differ).
        from .tables import people_names

        from .tables.model import describe_variables, names_not_shown, near_miss

        shown = people_names(table)[0]
        names = ", ".join(shown) + ("" if tuple(shown) == tuple(table.variables) else
                                    " (or " + ", ".join(table.variables) + ")")
        if names_not_shown(table):
            names = describe_variables(table)

        raise TabreleaseError(f"model names unknown variable {token!r} in [{token}]{near_miss(token, table)}; the table "
                              f"has {names}")
    axes = []
    for ch in token:
        if ch in table.variables or ch in table.letters:
            _refuse_a_letter_of_two_variables(ch, token, table)
            axes.append(table.axis(ch))
        else:
            from .tables.model import describe_variables, names_not_shown

            raise TabreleaseError(f"model names unknown variable {ch!r} in [{token}]; the table has "
                                  + (describe_variables(table) if names_not_shown(table) else
                                     ", ".join(table.variables)))
    if len(set(axes)) != len(axes):
        raise TabreleaseError(f"margin [{token}] names a variable twice")
    return tuple(sorted(axes))


# "all-2-way": every margin of that many variables (the workload of the frontier and of most DP marginal studies).
_ALL_K_WAY = re.compile(r"all-(\d+)-way", re.IGNORECASE)
# The most margins one all-K-way may name: all-2-way of 140 variables is 9,730; a plan over far more is no release.
MAX_SHORTHAND_MARGINS = 10_000


def _margins_of_token(token: str, table: ContingencyTable) -> list[Margin]:
    """The margins one token names: one margin, or every K-variable margin for ``all-K-way`` (a variable of that
    name, or a label for people, is taken as the variable)."""
    shorthand = _ALL_K_WAY.fullmatch(token.strip())
    if shorthand is None or token.strip() in table.variables or _labelled_axis(token.strip(), table) is not None:
        return [_resolve_generator(token, table)]
    size = int(shorthand.group(1))
    if not 1 <= size <= table.k:
        raise TabreleaseError(f"{token.strip()!r} asks for margins of {size} variables; the table has {table.k} "
                              f"(give all-1-way to all-{table.k}-way)")
    # Counted before they are listed: all-15-way of 30 variables is 155 million margins, which exhausted memory.
    count = comb(table.k, size)
    if count > MAX_SHORTHAND_MARGINS:
        raise TabreleaseError(f"{token.strip()!r} names {count} margins of this table's {table.k} variables; at most "
                              f"{MAX_SHORTHAND_MARGINS} can be asked for at once")
    return list(combinations(range(table.k), size))


def _refuse_a_letter_of_two_variables(letter: str, token: str, table) -> None:
    """Refuse a letter without commas that is one variable's one-letter name and another's letter by position (a new
    user's trial: with columns B,A,C, [AC] was read by name, the variables at positions 2 and 3, where the letters
    say 1 and 3)."""
    if letter in table.variables and letter in table.letters and (
            table.variables.index(letter) != table.letters.index(letter)):
        raise TabreleaseError(f"in [{token}], {letter!r} is the name of variable {table.variables.index(letter) + 1} "
                              f"and the letter of variable {table.letters.index(letter) + 1} (by position): name the "
                              "variables with commas between them ([A,C] names them by name)")


def parse_model(spec: str | HierarchicalModel, table: ContingencyTable) -> HierarchicalModel:
    """Read bracket notation against a table's variables (names, or letters by position).

    Parameters
    ----------
    spec : str or HierarchicalModel
        Bracket notation (``"[AB][BC]"``, ``"[sex,age][region]"``; without brackets, generators separated by spaces or
        plus signs), or a model (checked against the table and returned). ``all-K-way``, alone or as one of the
        generators (``"all-2-way [ABC]"``), stands for every margin of K variables.
    table : ContingencyTable
        The table whose variables the notation names.

    Returns
    -------
    HierarchicalModel
        The model, its generators made maximal (contained ones recorded in `dropped`).

    Raises
    ------
    TabreleaseError
        If the text is empty or unreadable, names an unknown variable or one twice in a margin, or the model is for
        another number of variables.
    """
    if isinstance(spec, HierarchicalModel):
        if spec.k != table.k:
            raise TabreleaseError(f"the model is for {spec.k} variables, the table has {table.k}")
        return spec
    if spec is None or not str(spec).strip():
        raise TabreleaseError("the model is empty; give at least one margin, e.g. [AB]")
    tokens = _generator_tokens(str(spec))
    if not tokens:
        raise TabreleaseError(f"the model {spec!r} has no margins")
    return make_model([g for t in tokens for g in _margins_of_token(t, table)], table.k)


def default_model(table: ContingencyTable) -> HierarchicalModel:
    """The built-in table's paper model; other tables need a model given explicitly.

    Parameters
    ----------
    table : ContingencyTable
        The table.

    Returns
    -------
    HierarchicalModel
        The model named in the table's metadata.

    Raises
    ------
    TabreleaseError
        If the table's metadata names no model.
    """
    spec = table.metadata.get("model") if table.metadata else None
    if not spec:
        named = f"the table {table.name}" if getattr(table, "name", None) else "this table"
        raise TabreleaseError(f"{named} has no default model: name its margins, e.g. '[AB][BC]' or all-2-way, with "
                              "--margins (release, plan, sweep) or --model (fit); in the API, margins=[(0, 1), (1, 2)]")
    return parse_model(spec, table)
