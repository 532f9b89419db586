"""Junction trees of sets of variables: what lets a fit work on clique margins instead of every cell.

A set of margins whose interaction graph is chordal, with the margins as its maximal cliques, is
decomposable: a table is determined up to its clique margins, any clique margins that agree on their
separators are the margins of one non-negative table (glue them along the tree), and a hierarchical
log-linear MLE is a ratio of clique and separator margins. Where the margins are not decomposable, a
triangulation (fill-in edges added until the graph is chordal) gives larger cliques that contain every
margin; its junction tree serves the same way at the cost of those larger cliques.

Cliques come out in a running-intersection order: each clique's intersection with all earlier ones lies
inside one earlier clique, its parent, and that intersection is its separator.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from math import log, prod

from .models import Margin, maximal_margins


@dataclass(frozen=True)
class JunctionTree:
    """Cliques in a running-intersection order; `parents[i]` is the earlier clique holding `separators[i]`
    (None for the first clique of each connected component, whose separator is empty)."""

    cliques: tuple[Margin, ...]
    parents: tuple[int | None, ...]
    separators: tuple[Margin, ...]
    decomposable: bool  # the cliques are the given margins themselves (no fill-in was needed)

    def clique_cells(self, shape: Sequence[int]) -> int:
        """Cells over all cliques: what a fit on the tree holds.

        Parameters
        ----------
        shape : sequence of int
            The table's levels per variable.

        Returns
        -------
        int
            The sum over cliques of the product of their variables' levels.
        """
        return sum(prod(int(shape[j]) for j in c) for c in self.cliques)

    def largest_clique_cells(self, shape: Sequence[int]) -> int:
        """The number of cells of the largest clique's margin.

        Parameters
        ----------
        shape : sequence of int
            The table's levels per variable.

        Returns
        -------
        int
            The largest product of a clique's variables' levels.
        """
        return max(prod(int(shape[j]) for j in c) for c in self.cliques)

    def clique_of(self, variables: Iterable[int]) -> int:
        """The index of the first clique that contains `variables`.

        Parameters
        ----------
        variables : iterable of int
            Axes of the table.

        Returns
        -------
        int
            An index into `cliques`.

        Raises
        ------
        StopIteration
            If no clique contains them all.
        """
        wanted = set(variables)
        return next(i for i, c in enumerate(self.cliques) if wanted <= set(c))


def junction_tree(margins: Iterable[Margin], shape: Sequence[int]) -> JunctionTree:
    """The junction tree of `margins` on a table of this shape: of the margins themselves where they are
    decomposable, else of a triangulation of their interaction graph (greedy minimum fill-in weight, ties to
    the smaller clique) that covers every variable of the table.

    Parameters
    ----------
    margins : iterable of Margin
        The margins (each an iterable of axes; sorted and deduplicated here).
    shape : sequence of int
        The table's levels per variable (a variable in no margin becomes a clique of its own).

    Returns
    -------
    JunctionTree
        Cliques in a running-intersection order, with their parents and separators.
    """
    k = len(shape)
    generators, _ = maximal_margins(tuple(sorted(set(m))) for m in margins)
    covered = {j for g in generators for j in g}
    generators = tuple(generators) + tuple((j,) for j in range(k) if j not in covered)
    if _is_decomposable(generators):
        cliques = generators
        decomposable = True
    else:
        cliques = _triangulated_cliques(generators, shape)
        decomposable = False
    ordered, parents, separators = _running_intersection(cliques, shape)
    return JunctionTree(ordered, parents, separators, decomposable)


def _is_decomposable(generators: Sequence[Margin]) -> bool:
    # GYO reduction per connected component: the hypergraph is acyclic iff it reduces to one edge per component.
    from .loglinear.design import is_decomposable

    return all(is_decomposable(component) for component in _components(generators))


def _components(generators: Sequence[Margin]) -> list[list[Margin]]:
    groups: list[tuple[set[int], list[Margin]]] = []
    for g in generators:
        touching = [grp for grp in groups if grp[0] & set(g)]
        merged_vars, merged = set(g), [g]
        for grp in touching:
            merged_vars |= grp[0]
            merged += grp[1]
            groups.remove(grp)
        groups.append((merged_vars, merged))
    return [members for _, members in groups]


def _triangulated_cliques(generators: Sequence[Margin], shape: Sequence[int]) -> tuple[Margin, ...]:
    """Maximal cliques of a chordal supergraph, by greedy elimination (the vertex whose elimination adds the least
    fill-in, weighted by the log-size of the clique it creates)."""
    neighbours: dict[int, set[int]] = {j: set() for g in generators for j in g}
    for g in generators:
        for a in g:
            neighbours[a].update(b for b in g if b != a)
    remaining = set(neighbours)
    cliques: list[frozenset[int]] = []
    while remaining:
        def cost(v: int) -> tuple[int, float]:
            around = neighbours[v] & remaining
            fill = sum(1 for a in around for b in around if a < b and b not in neighbours[a])
            return fill, sum(log(int(shape[j])) for j in around | {v})

        v = min(sorted(remaining), key=cost)
        around = neighbours[v] & remaining
        for a in around:
            neighbours[a].update(around - {a})
        cliques.append(frozenset(around | {v}))
        remaining.remove(v)
    maximal = [c for c in cliques if not any(c < other for other in cliques)]
    return tuple(dict.fromkeys(tuple(sorted(c)) for c in maximal))


def _running_intersection(cliques: Sequence[Margin], shape: Sequence[int]):
    """Order cliques along a maximum-weight spanning tree of their intersections (Prim), which has the running
    intersection property when the cliques are those of a chordal graph."""
    remaining = list(range(len(cliques)))
    order: list[int] = []
    parents: list[int | None] = []
    separators: list[Margin] = []
    while remaining:
        # A new component starts at its largest clique (the root).
        root = max(remaining, key=lambda i: (prod(int(shape[j]) for j in cliques[i]), -i))
        order.append(root)
        parents.append(None)
        separators.append(())
        remaining.remove(root)
        while True:
            best = None
            for i in remaining:
                for position, placed in enumerate(order):
                    shared = set(cliques[i]) & set(cliques[placed])
                    if shared and (best is None or len(shared) > best[0]):
                        best = (len(shared), i, position, tuple(sorted(shared)))
            if best is None:
                break
            _, i, position, shared = best
            order.append(i)
            parents.append(position)
            separators.append(shared)
            remaining.remove(i)
    return tuple(cliques[i] for i in order), tuple(parents), tuple(separators)
