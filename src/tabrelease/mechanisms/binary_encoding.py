"""Dwork, McSherry & Talwar section 5: each variable with k_j levels as ceil(log2 k_j) bits, Fourier coefficients
of the bit table, the LP with the codes >= k_j held at 0 (structural zeros), then decode."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import ceil, log2

import numpy as np

from ..bases import FOURIER, coefficient_basis
from ._coefficients import CoefficientMechanism


@dataclass(frozen=True, eq=False)
class BinaryEncoding:
    """Each variable with k_j levels as ceil(log2 k_j) bits; codes >= k_j are structural zeros."""

    shape: tuple[int, ...]
    bits: tuple[int, ...]

    @property
    def encoded_shape(self) -> tuple[int, ...]:
        return (2,) * sum(self.bits)

    def axes_of(self, variables: Sequence[int]) -> tuple[int, ...]:
        """The axes of the bit table that encode these variables.

        Parameters
        ----------
        variables : sequence of int
            Axes of the original table.

        Returns
        -------
        tuple of int
            Each variable's bit axes, variables in increasing order.
        """
        starts = np.cumsum((0,) + self.bits)
        return tuple(a for j in sorted(variables) for a in range(starts[j], starts[j] + self.bits[j]))

    def encode(self, counts: np.ndarray) -> np.ndarray:
        """The counts on the bit table, with 0 in the structural-zero cells.

        Parameters
        ----------
        counts : numpy.ndarray
            Cell counts of shape `shape`.

        Returns
        -------
        numpy.ndarray
            Float counts of shape `encoded_shape`.
        """
        padded = np.zeros(tuple(2**b for b in self.bits), dtype=float)
        padded[tuple(slice(0, k) for k in self.shape)] = counts
        return padded.reshape(self.encoded_shape)

    def decode(self, encoded: np.ndarray) -> np.ndarray:
        """The original table's cells from a bit table (the structural-zero cells dropped).

        Parameters
        ----------
        encoded : array_like
            Values of `encoded_shape` (or as many values).

        Returns
        -------
        numpy.ndarray
            Of shape `shape`.
        """
        full = np.asarray(encoded).reshape(tuple(2**b for b in self.bits))
        return full[tuple(slice(0, k) for k in self.shape)]

    def structural_zeros(self) -> np.ndarray:
        """Which cells of the bit table are codes no level has.

        Returns
        -------
        numpy.ndarray
            Boolean array of `encoded_shape`: True where a code is >= k_j for some variable.
        """
        valid = np.zeros(tuple(2**b for b in self.bits), dtype=bool)
        valid[tuple(slice(0, k) for k in self.shape)] = True
        return ~valid.reshape(self.encoded_shape)


def binary_encoding(shape: Sequence[int]) -> BinaryEncoding:
    """The binary encoding of a table of this shape: ceil(log2 k_j) bits per variable, at least one.

    Parameters
    ----------
    shape : sequence of int
        The table's levels per variable.

    Returns
    -------
    BinaryEncoding
    """
    return BinaryEncoding(tuple(shape), tuple(max(1, ceil(log2(k))) for k in shape))


class BinaryEncodingMechanism(CoefficientMechanism):
    name = "binary-encoding"
    summary = "Fourier coefficients of a bit encoding; LP with structural zeros held at 0, decode"

    def queries(self, shape, margins, neighbours):
        encoding = binary_encoding(shape)
        basis = coefficient_basis(FOURIER, encoding.encoded_shape, [encoding.axes_of(g) for g in margins])
        notes = ()
        if neighbours == "replace" and any(2**b != k for b, k in zip(encoding.bits, shape)):
            notes = ("replace-one sensitivity is taken over all bit codes, structural zeros included: an upper bound",)
        params = {"bits": list(encoding.bits), "structural_zero_cells": int(encoding.structural_zeros().sum())}
        return basis, encoding, params, notes
