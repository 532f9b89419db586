"""Everything about Yang, Fienberg & Rinaldo (and the printed numbers it rests on), in one place.

* `theorems`: the paper's noise scales (Table 1, Theorem 2) and bounds (Theorems 1 and 3);
* `tables`: Tables 7 and 8 beside what the counts and the formulas give (printed values from tables/*.json);
* `claims`: what section 6 says of its figures, and the stated rules that judge a run against it;
* `reproduce`: the experiment itself, its figures and its report.

The Fourier and Efron-Stein mechanisms are presets of `mechanisms/`; the formulas their paper calibration reads are
defined there (`mechanisms._paper_formulas`, re-exported by `theorems`), so that nothing in the release path
depends on this package.
"""

from .theorems import paper_noise_scale, paper_theorem_bound, paper_theorem_constant

__all__ = ["paper_noise_scale", "paper_theorem_bound", "paper_theorem_constant"]
