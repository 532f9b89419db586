"""The paper's formulas: its noise scales (Table 1, Theorem 2) and its error bounds (Theorems 1 and 3).

They are defined in `mechanisms._paper_formulas` (the Fourier and Efron-Stein mechanisms' paper calibration reads
them, and a mechanism does not import the experiments above it); the paper's modules read them here.
"""

from ..mechanisms._paper_formulas import paper_noise_scale, paper_theorem_bound, paper_theorem_constant

__all__ = ["paper_noise_scale", "paper_theorem_bound", "paper_theorem_constant"]
