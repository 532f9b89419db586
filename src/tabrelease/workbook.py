"""The public margins as one Excel workbook (`release --xlsx`): a sheet describing the release, then a sheet per
released margin. It holds exactly what `public/` holds already (release.json's description and the margin CSVs),
nothing else. Written with openpyxl (the `excel` extra)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from .errors import TabreleaseError

WORKBOOK_FILE = "margins.xlsx"
# Excel's limits on a sheet name: at most 31 characters, none of []:*?/\ and not blank.
_SHEET_FORBIDDEN = re.compile(r"[\[\]:*?/\\]")
SHEET_MAX = 31


def check_workbook_support() -> None:
    """One line naming the extra, before any budget is charged, when openpyxl is missing."""
    from ._optional import module_available

    found = module_available("openpyxl")
    if not found:
        raise TabreleaseError("--xlsx writes the margins with openpyxl: pip install 'tabrelease[excel]'")


def sheet_names(files: Sequence[str]) -> list[str]:
    """A valid, distinct sheet name for each margin file (its name without .csv, shortened where needed).

    Parameters
    ----------
    files : sequence of str
        The margins' CSV file names, in order.

    Returns
    -------
    list of str
        One per file: at most 31 characters, none of []:*?/\\, distinct without regard to case and never "release"
        (the first sheet's); a clash gets a suffix ~2, ~3, ...
    """
    names: list[str] = []
    for file in files:
        base = _SHEET_FORBIDDEN.sub("_", Path(file).stem).strip("'") or "margin"
        name = base[:SHEET_MAX]
        number = 2
        while name.lower() in {n.lower() for n in names} or name.lower() == "release":
            suffix = f"~{number}"
            name = base[: SHEET_MAX - len(suffix)] + suffix
            number += 1
        names.append(name)
    return names


def write_workbook(path: Path, public: Mapping, margin_rows: Sequence[tuple[list[str], list[list]]]) -> None:
    """`public` is release.json's document; `margin_rows` gives, per released margin (in its order), the header and
    the rows of its CSV file.

    Parameters
    ----------
    path : Path
        The .xlsx file written (replaced if it exists).
    public : mapping
        release.json's document (its margins, variables, warnings and description are read).
    margin_rows : sequence of (list of str, list of list)
        Per margin, in the order of ``public["margins"]``: the header and the rows.

    Raises
    ------
    ImportError
        openpyxl is missing (`check_workbook_support` says so before any charge).
    """
    from openpyxl import Workbook

    book = Workbook()
    about = book.active
    about.title = "release"
    rows = [("what", "value"),
            ("tool", f"{public.get('tool')} {public.get('tool_version')}"),
            ("created", public.get("created")),
            ("mechanism", public.get("mechanism")),
            ("estimator", public.get("estimator")),
            ("rounding", public.get("rounding")),
            ("epsilon", public.get("epsilon")),
            ("delta", public.get("delta")),
            ("neighbours", public.get("neighbours")),
            ("privacy", public.get("privacy")),
            ("noise mode", public.get("noise", {}).get("mode")),
            ("sampler", public.get("noise", {}).get("sampler")),
            ("consistency", public.get("consistency"))]
    files = [m["file"] for m in public["margins"]]
    names = sheet_names(files)
    people = {v["name"]: v.get("label") or v["name"] for v in public.get("variables", [])}
    for name, margin in zip(names, public["margins"]):
        rows.append((f"sheet {name}", f"margin {margin['label']}: "
                     f"{', '.join(people.get(v, v) for v in margin['variables'])} ({margin['file']})"))
    rows += [("warning", w) for w in public.get("warnings", [])]
    for row in rows:
        append_row(about, ["" if v is None else v for v in row])
    about.column_dimensions["A"].width = 24
    about.column_dimensions["B"].width = 100
    for name, (header, body) in zip(names, margin_rows):
        sheet = book.create_sheet(name)
        append_row(sheet, header)
        for row in body:
            append_row(sheet, row)
    book.save(path)


def append_row(sheet, values: Sequence) -> None:
    """Append a row in which every text is a text cell and every number a number cell.

    openpyxl makes a formula of any text that starts with ``=``: a level labelled ``=1+1`` (or a formula that fetches
    a URL) would be live in the published workbook. Text cells are never evaluated. Control characters that XML
    cannot hold (a label read from a file may have one) are written as their visible Unicode pictures (U+2400 on),
    where openpyxl would refuse the whole workbook after the budget was spent.

    Parameters
    ----------
    sheet : openpyxl worksheet
        The sheet to append to.
    values : sequence
        The row: text, numbers (counts stay numbers) or None.
    """
    from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE

    texts = [ILLEGAL_CHARACTERS_RE.sub(lambda m: chr(0x2400 + ord(m.group())), v) if isinstance(v, str) else v
             for v in values]
    sheet.append(texts)
    for cell in sheet[sheet.max_row]:
        if isinstance(cell.value, str):
            cell.data_type = "s"
