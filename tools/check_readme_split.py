"""The README split into docs/*.md (d0a6912): does every sentence, code line and table row of the README before it
appear in exactly one of README.md and docs/*.md (the tutorial aside, which was not part of it)?

    python tools/check_readme_split.py [OLD_REV]        (default 73024ff, the README before the split)

Prints the units found once, those moved with a cross-reference fixed (FIXES below, as the split made them), those
found in more than one file, those MISSING, and, the other way round, the text of the new files that is not from
the old README (intros, headings, the README's summaries). A one-off check of that move: drop it when it has served.
"""
import json, re, subprocess, sys
from pathlib import Path

root = Path(__file__).resolve().parents[1]
old_rev = sys.argv[1] if len(sys.argv) > 1 else "73024ff"
old_text = subprocess.run(["git", "show", f"{old_rev}:README.md"], cwd=root, capture_output=True, text=True,
                          check=True).stdout
# (file, old text, new text): the cross-references the move broke, as they were fixed.
fixes = json.loads(r"""[
 [
  "README.md",
  "rounds them to the margins of one integer table (see \"The planned release\")",
  "rounds them to the margins of one integer table (see [the planned release](#the-planned-release-the-default))"
 ],
 [
  "README.md",
  "`--xlsx` (the workbook below)",
  "`--xlsx` (the workbook: [`public/`](docs/outputs.md))"
 ],
 [
  "docs/architecture.md",
  "runs the contract every built-in mechanism\n  keeps (below) on a third party's",
  "runs the contract every built-in mechanism\n  keeps ([your own mechanism](mechanisms.md#your-own-mechanism)) on a third party's"
 ],
 [
  "docs/method.md",
  "`benchmarks/bench_total_share.py`, below)",
  "`benchmarks/bench_total_share.py`, in [frontier.md](frontier.md#where-it-is-not-the-best))"
 ],
 [
  "docs/method.md",
  "The ledger composes such releases accordingly (below).",
  "The ledger composes such releases accordingly ([ledger.md](ledger.md#guarantees-and-composition))."
 ],
 [
  "docs/method.md",
  "(The frontier run quoted\nabove was made",
  "(The frontier run quoted\nin [frontier.md](frontier.md) was made"
 ],
 [
  "docs/error-model.md",
  "The union bound derived below, loose",
  "The union bound derived in [method.md](method.md#error-bounds-and-table-8), loose"
 ],
 [
  "docs/model-test.md",
  "`reports/benchmarks/model_test.txt`: the example above with 500 replicates)",
  "`reports/benchmarks/model_test.txt`: the [README's example](../README.md#testing-a-model-on-the-public-margins-alone-tabrelease-test) with 500 replicates)"
 ],
 [
  "docs/model-test.md",
  "The example above took a median",
  "The [README's example](../README.md#testing-a-model-on-the-public-margins-alone-tabrelease-test) took a median"
 ],
 [
  "docs/reproduction.md",
  "[`reports/paper/`](reports/paper/report.md)",
  "[`reports/paper/`](../reports/paper/report.md)"
 ],
 [
  "docs/reproduction.md",
  "journey to work's LP about halved, as measured above)",
  "journey to work's LP about halved, as measured in [the consistency LP](method.md#the-consistency-lp))"
 ],
 [
  "docs/performance.md",
  "(see the dependency notes)",
  "(see the [dependency notes](../README.md#dependency-notes))"
 ],
 [
  "docs/performance.md",
  "(see \"Reproducing the paper\")",
  "(see [\"Reproducing the paper\"](reproduction.md#the-reference-run))"
 ]
]""")

new_files = [root / "README.md"] + sorted(p for p in (root / "docs").glob("*.md") if p.name != "tutorial.md")

def norm(s):
    return re.sub(r"\s+", " ", s).strip()

def units(text):
    """Sentences of prose (list items split apart, leading markers dropped), one unit per line of code and tables,
    headings without their #s."""
    out = []
    lines = text.split("\n")
    i = 0
    para = []
    def flush():
        if not para:
            return
        items, cur = [], []
        for line in para:
            if re.match(r"^\s*([-*]|\d+\.)\s", line) and cur:
                items.append(cur); cur = []
            cur.append(line)
        items.append(cur)
        for item in items:
            t = norm(" ".join(item))
            t = re.sub(r"^([-*]|\d+\.)\s+", "", t)
            for s in re.split(r"(?<=[.!?:;])\s+(?=[A-Z*`(\[\"'])", t):
                if s.strip():
                    out.append(("prose", s.strip()))
        para.clear()
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            flush()
            i += 1
            while not lines[i].startswith("```"):
                if lines[i].strip():
                    out.append(("code", lines[i].rstrip()))
                i += 1
            i += 1
            continue
        if not line.strip():
            flush()
        elif line.lstrip().startswith("|"):
            flush(); out.append(("table", norm(line)))
        elif line.startswith("#"):
            flush(); out.append(("heading", line.lstrip("#").strip()))
        else:
            para.append(line)
        i += 1
    flush()
    return out

texts = {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8") for p in new_files}
normed = {name: norm(t) for name, t in texts.items()}
code_lines = {name: set(l.rstrip() for l in t.split("\n")) for name, t in texts.items()}
heading_sets = {name: {l.lstrip("#").strip() for l in t.split("\n") if l.startswith("#")} for name, t in texts.items()}

def places(kind, u):
    if kind == "code":
        return [n for n in texts if u in code_lines[n]]
    if kind == "heading":
        return [n for n in texts if u in heading_sets[n]]
    return [n for n in texts if norm(u) in normed[n]]

missing, multiple, fixed = [], [], []
old_units = units(old_text)
for kind, u in old_units:
    where = places(kind, u)
    if not where:
        # a cross-reference fixed: the unit with the fix applied
        for name, old, new in fixes:
            if norm(old) in norm(u) or any(norm(part) in norm(u) for part in old.split("\n") if len(part) > 25):
                fixed.append((kind, u, name, old, new))
                break
        else:
            missing.append((kind, u))
    elif len(where) > 1:
        multiple.append((kind, u, where))

print(f"old README: {len(old_units)} units ({sum(k == 'prose' for k, _ in old_units)} sentences, "
      f"{sum(k == 'code' for k, _ in old_units)} code lines, {sum(k == 'table' for k, _ in old_units)} table rows, "
      f"{sum(k == 'heading' for k, _ in old_units)} headings)")
print(f"found in exactly one file: {len(old_units) - len(missing) - len(multiple) - len(fixed)}")
print(f"moved with a cross-reference fixed: {len(fixed)}")
for kind, u, name, old, new in fixed:
    print(f"  [{name}] {old!r} -> {new!r}")
print(f"in more than one file: {len(multiple)}")
for kind, u, where in multiple:
    print(f"  {where}: [{kind}] {u[:150]}")
print(f"MISSING: {len(missing)}")
for kind, u in missing:
    print(f"  [{kind}] {u}")

# The other way round: text in the new files that is not from the old README (intros, summaries, pointers).
old_norm = norm(old_text)
old_code = set(l.rstrip() for l in old_text.split("\n"))
old_headings = {l.lstrip("#").strip() for l in old_text.split("\n") if l.startswith("#")}
print("\nnew text (not in the old README), by file:")
for name, t in texts.items():
    new_units = []
    for kind, u in units(t):
        if kind == "code":
            ok = u in old_code
        elif kind == "heading":
            ok = u in old_headings
        else:
            ok = norm(u) in old_norm
        if not ok:
            new_units.append((kind, u))
    print(f"  {name}: {len(new_units)} units")
    for kind, u in new_units:
        print(f"    [{kind}] {u[:160]}")
