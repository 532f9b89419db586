"""Errors and times of the randomized-response and sensitive-attributes mechanisms (README figures).

Run: python benchmarks/bench_rr_sensitive.py > reports/benchmarks/rr_sensitive.txt"""

import itertools
import os
import platform
import time

import numpy as np

from tabrelease.testing import plan_at
from tabrelease.noise import SecureNoise, SimulationNoise
from tabrelease.spec import ReleaseSpec, loss_of, unit_of
from tabrelease.workflow import release_margins
from tabrelease.pipeline import run_plan
from tabrelease.tables import builtin_table

import tabrelease as tr

print(f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs, tabrelease {tr.__version__}; "
      f"load average before: {os.getloadavg()[0]:.2f}")
# Mean L1 error per released margin, 20 seeded draws at epsilon 1, the paper models.
for name in ["czech", "journey_to_work"]:
    t = builtin_table(name)
    for mech, kw in [("planned", {}), ("randomized-response", {}),
                     ("sensitive-attributes", {"neighbours": "replace", "unit": unit_of("replace", sensitive=["A"])}),
                     ("auto", {"neighbours": "replace", "unit": "replace"})]:
        errs = []
        for seed in range(20):
            spec = ReleaseSpec(loss=loss_of(1.0), mechanism=mech, mode="simulation", seed=seed,
                               **{k: v for k, v in kw.items() if k == "unit"})
            r = release_margins(t, spec)
            tm = [t.counts.sum(axis=tuple(j for j in range(t.k) if j not in g)) for g in r.plan.margins]
            errs.append(np.mean([np.abs(a - b).sum() for a, b in zip(r.released_margins, tm)]))
        print(f"{name:16} {mech:20} {kw.get('neighbours','add-remove'):10} mean L1 error per margin {np.mean(errs):8.1f}")

# Times at the frontier's largest size: 1024 cells, n = 14,000, all 2-way margins.
rng = np.random.default_rng(0)
shape = (2,) * 10
counts = rng.multinomial(14000, rng.dirichlet(np.ones(1024))).reshape(shape)
margins = list(itertools.combinations(range(10), 2))
for mech, kw in [("randomized-response", {}), ("sensitive-attributes", {"neighbours": "replace", "options": {"sensitive": (0,)}})]:
    plan = plan_at(shape, margins, 1.0, mechanism=mech, **kw)
    run_plan(plan, counts, SimulationNoise(0))
    s = time.perf_counter()
    for seed in range(1, 4):
        run_plan(plan, counts, SimulationNoise(seed))
    print(f"2^10 n=14000 all 2-way {mech}: simulation {(time.perf_counter()-s)/3:.3f} s/release")
plan = plan_at(shape, margins, 1.0, mechanism="randomized-response")
s = time.perf_counter(); run_plan(plan, counts, SecureNoise()); print(f"randomized-response release mode (OpenDP per record): {time.perf_counter()-s:.2f} s")
