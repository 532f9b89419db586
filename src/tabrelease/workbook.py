"""The public margins as one Excel workbook (`release --xlsx`): a sheet describing the release, then a sheet per
released margin. It holds exactly what `public/` holds already (release.json's description and the margin CSVs),
nothing else. Written with openpyxl (the `excel` extra)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from .errors import TabreleaseError

WORKBOOK_FILE = "margins.xlsx"
# Excel's limits on a sheet name: at most 31 characters (UTF-16 units), none of []:*?/\, not blank, no apostrophe at
# either end; control characters cannot be written in its XML. "History" is Excel's own.
_SHEET_FORBIDDEN = frozenset("[]:*?/\\")
SHEET_MAX = 31
_SHEET_RESERVED = ("release", "history")  # the first sheet's name, and Excel's


def check_workbook_support() -> None:
    """One line naming the extra, before any budget is charged, when openpyxl is missing."""
    from ._optional import module_available

    found = module_available("openpyxl")
    if not found:
        raise TabreleaseError("--xlsx writes the margins with openpyxl: pip install 'tabrelease[excel]'")


def sheet_names(files: Sequence[str]) -> list[str]:
    """A valid, distinct sheet name for each margin file: its name without .csv, NFC-normalised, as it is but for
    what Excel forbids, shortened where needed.

    Parameters
    ----------
    files : sequence of str
        The margins' CSV file names, in order.

    Returns
    -------
    list of str
        One per file: at most 31 characters (UTF-16 units, as Excel counts them; never inside a character or before
        its accents), any of []:*?/\\ and control characters as "_", no apostrophe at either end, distinct without
        regard to case and never "release" (the first sheet's) or "History" (Excel's); a clash gets a suffix ~2, ~3,
        ... in order.
    """
    names: list[str] = []
    taken = set(_SHEET_RESERVED)
    for file in files:
        base = _sheet_base(file)
        name, number = _sheet_cut(base, ""), 1
        while _sheet_key(name) in taken:
            number += 1
            name = _sheet_cut(base, f"~{number}")
        taken.add(_sheet_key(name))
        names.append(name)
    return names


def _sheet_base(file: str) -> str:
    import unicodedata

    stem = unicodedata.normalize("NFC", file[:-4] if file.lower().endswith(".csv") else file)
    stem = "".join("_" if c in _SHEET_FORBIDDEN or unicodedata.category(c) == "Cc" else c for c in stem)
    return stem.strip("'").strip() or "margin"


def _sheet_cut(base: str, suffix: str) -> str:
    """`base` shortened so that it and `suffix` fit in a sheet name (never inside a character or before its
    accents), without an apostrophe or a space left at its end."""
    import unicodedata

    def units(text: str) -> int:
        return len(text.encode("utf-16-le")) // 2

    end = min(len(base), SHEET_MAX)
    while end and units(base[:end]) + units(suffix) > SHEET_MAX:
        end -= 1
    while 0 < end < len(base) and unicodedata.combining(base[end]):
        end -= 1
    return (base[:end].rstrip("' ") or "margin"[: SHEET_MAX - units(suffix)]) + suffix


def _sheet_key(name: str) -> str:
    # Excel tells sheet names apart without regard to case.
    import unicodedata

    return unicodedata.normalize("NFC", name.casefold())


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
