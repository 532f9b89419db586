"""The public margins as one Excel workbook (`release --xlsx`): a sheet describing the release, a notes sheet (the
guarantee in words and each margin's margin of error), then a cross-tab sheet per released margin. It holds what
`public/` holds already (release.json's description and the margin CSVs' values, with their sums as totals) and the
plan's margins of error, which depend on the noise scales and the estimator alone: nothing read from the counts.
Written with openpyxl (the `excel` extra)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ._files import _cut, _file_key
from .errors import TabreleaseError
from .tables.metadata import WORDS  # the workbook's own labels; a metadata file's "words" replace them

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


# Excel's limits on a sheet (openpyxl writes past them, and past 18,278 columns fails: after the charge, a review's
# trial found, at every retry): a margin whose sheet would not fit is refused before the charge.
EXCEL_MAX_ROWS = 1_048_576
EXCEL_MAX_COLUMNS = 16_384


def sheet_extent(shape: Sequence[int]) -> tuple[int, int]:
    """The rows and columns of a margin's sheet as `_write_margin` lays it out, from the margin's shape alone.

    Parameters
    ----------
    shape : sequence of int
        The margin's levels per variable, in its order.

    Returns
    -------
    (int, int)
        Rows and columns: a one-way margin is its title, a header, its levels, a total, a blank row and the note, in
        two columns; a higher margin its title, two header rows, then per combination of the levels of all but its
        last two variables (one block where there are none) a block title (only where there are such variables),
        a row per level of the second last, a total and a blank row, then the note; in a column of row labels, one
        per level of the last variable, and one of totals.
    """
    from math import prod

    shape = [int(k) for k in shape]
    if len(shape) == 1:
        return shape[0] + 5, 2
    blocks = prod(shape[:-2])
    return 3 + blocks * ((len(shape) > 2) + shape[-2] + 2) + 1, shape[-1] + 2


def check_workbook_fits(margin_shapes: Sequence[Sequence[int]]) -> None:
    """Refuse, before the charge, margins whose sheets Excel cannot hold (`sheet_extent`).

    Parameters
    ----------
    margin_shapes : sequence of sequence of int
        Each released margin's shape.

    Raises
    ------
    TabreleaseError
        A margin's sheet has more rows or columns than Excel's limits; nothing is charged.
    """
    for shape in margin_shapes:
        rows, columns = sheet_extent(shape)
        if columns > EXCEL_MAX_COLUMNS or rows > EXCEL_MAX_ROWS:
            what = (f"{columns:,} columns (Excel holds {EXCEL_MAX_COLUMNS:,})" if columns > EXCEL_MAX_COLUMNS
                    else f"{rows:,} rows (Excel holds {EXCEL_MAX_ROWS:,})")
            raise TabreleaseError(f"--xlsx: the sheet of a margin of shape {' x '.join(map(str, shape))} would have "
                                  f"{what}: release without --xlsx (the CSV files hold every margin); nothing was "
                                  "charged")


def sheet_names(files: Sequence[str]) -> list[str]:
    """A valid, distinct sheet name for each margin file: its name without .csv (or .simulation.csv), NFC-normalised,
    as it is but for what Excel forbids, shortened where needed.

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
        while _file_key(name) in taken:
            number += 1
            name = _sheet_cut(base, f"~{number}")
        taken.add(_file_key(name))
        names.append(name)
    return names


def _sheet_base(file: str) -> str:
    import unicodedata

    # A simulated release's files end in .simulation.csv: the workbook says simulation in its own release sheet.
    suffix = next((x for x in (".simulation.csv", ".csv") if file.lower().endswith(x)), "")
    stem = unicodedata.normalize("NFC", file[:len(file) - len(suffix)])
    stem = "".join("_" if c in _SHEET_FORBIDDEN or unicodedata.category(c) == "Cc" else c for c in stem)
    return stem.strip("'").strip() or "margin"


def _sheet_cut(base: str, suffix: str) -> str:
    """`base` shortened so that it and `suffix` fit in a sheet name (Excel counts UTF-16 units), without an
    apostrophe or a space left at its end."""

    def units(text: str) -> int:
        return len(text.encode("utf-16-le")) // 2

    cut = _cut(base, lambda start: units(start) + units(suffix) <= SHEET_MAX, SHEET_MAX)
    return (cut.rstrip("' ") or "margin"[: SHEET_MAX - units(suffix)]) + suffix


NOTES_SHEET = "notes"
# The two-sided 90% interval of a normal error: +- this many standard deviations.
INTERVAL_LEVEL = 0.90


def write_workbook(path: Path, public: Mapping, margin_values: Sequence, margin_errors: Sequence | None = None) -> None:
    """The public margins as one workbook people can publish: a sheet describing the release, a notes sheet (the
    guarantee in words and each margin's planned margin of error), then one cross-tab sheet per margin.

    A one-way margin is a column with its total; a two-way margin a cross-tab (the first variable down, the second
    across) with row and column totals; a higher margin stacked cross-tabs of its last two variables, one titled
    block per combination of the levels of the others. Variables and levels carry their labels for people
    (release.json's, from a metadata file where one gave them; the codes otherwise). Every value is the released
    margin's, or a sum of them: nothing else is read.

    Parameters
    ----------
    path : Path
        The .xlsx file written (replaced if it exists).
    public : mapping
        release.json's document (its margins, variables, guarantee, noise, warnings and description are read).
    margin_values : sequence of numpy.ndarray
        Per margin, in the order of ``public["margins"]``: its released values, one axis per variable of the
        margin in its order.
    margin_errors : sequence or None
        Per margin, its planned error (an object with ``cell_sd``, as `planning.MarginError`) or None where the
        mechanism has none; computed from the plan alone. None: no margin has one.

    Raises
    ------
    ImportError
        openpyxl is missing (`check_workbook_support` says so before any charge).
    """
    from openpyxl import Workbook

    from .privacy import PrivacyGuarantee

    book = Workbook()
    about = book.active
    about.title = "release"
    rows = [("what", "value"),
            ("tool", f"{public.get('tool')} {public.get('tool_version')}"),
            ("mechanism", public.get("mechanism")),
            ("estimator", public.get("estimator")),
            ("rounding", public.get("rounding")),
            ("guarantee", PrivacyGuarantee.from_dict(public["guarantee"]).describe()
             if public.get("guarantee") else None),
            # The settings asked for: the guarantee above, where they differ (a public total: noise calibrated per
            # add-remove step, the guarantee for replace neighbours at twice the epsilon), is what holds.
            ("epsilon asked for", public.get("epsilon")),
            ("delta asked for", public.get("delta")),
            ("neighbours asked for", public.get("neighbours")),
            ("privacy", public.get("privacy")),
            ("noise mode", public.get("noise", {}).get("mode")),
            ("sampler", public.get("noise", {}).get("sampler")),
            ("consistency", public.get("consistency"))]
    files = [m["file"] for m in public["margins"]]
    # The notes sheet named first, so that sheet_names keeps every margin's sheet from taking its name.
    notes_name, *names = sheet_names([f"{NOTES_SHEET}.csv", *files])
    people = {v["name"]: v.get("label") or v["name"] for v in public.get("variables", [])}
    rows.append((f"sheet {notes_name}", "the privacy guarantee in words and each margin's margin of error"))
    for name, margin in zip(names, public["margins"]):
        rows.append((f"sheet {name}", f"margin {margin['label']}: "
                     f"{', '.join(people.get(v, v) for v in margin['variables'])} ({margin['file']})"))
    rows += [("warning", w) for w in public.get("warnings", [])]
    for row in rows:
        append_row(about, ["" if v is None else v for v in row])
    # Column A as wide as its longest label (a sheet's name runs to 31 characters); B's values read from the left,
    # numbers too (epsilon would otherwise sit alone at the right edge of a wide column).
    from openpyxl.styles import Alignment

    about.column_dimensions["A"].width = min(max(len(str(row[0])) for row in rows) + 2, 45)
    about.column_dimensions["B"].width = 100
    for cell in about["B"]:
        cell.alignment = Alignment(horizontal="left")
    errors = list(margin_errors) if margin_errors is not None else [None] * len(files)
    figures = [margin_of_error(e) for e in errors]
    _write_notes(book.create_sheet(notes_name), public, figures)
    variables = {v["name"]: v for v in public.get("variables", [])}
    words = {**WORDS, **public.get("words", {})}  # "Total" and "count" in the user's language, where declared
    for name, margin, values, figure in zip(names, public["margins"], margin_values, figures):
        described = [variables.get(v, {"name": v}) for v in margin["variables"]]
        _write_margin(book.create_sheet(name), margin, described, values, figure, notes_name, words)
    for sheet in book.worksheets:
        _fit_to_page_width(sheet)
    book.save(path)
    _without_save_time(path)


# openpyxl stamps the time of making and saving into a workbook (docProps/core.xml's created and modified, and each
# zip entry's date): fixed to one instant here, so that the same release gives the same bytes, as every public file.
FIXED_TIME = "1980-01-01T00:00:00Z"


def _without_save_time(path: Path) -> None:
    """Rewrite the saved workbook at `path` with its time stamps fixed to `FIXED_TIME` (entries, order, compression
    and contents otherwise as openpyxl wrote them)."""
    import re
    import zipfile

    with zipfile.ZipFile(path) as saved:
        entries = [(info, saved.read(info.filename)) for info in saved.infolist()]
    with zipfile.ZipFile(path, "w") as fixed:
        for info, data in entries:
            if info.filename == "docProps/core.xml":
                data = re.sub(rb"(<dcterms:(created|modified)\b[^>]*>)[^<]*(</dcterms:\2>)",
                              rb"\g<1>" + FIXED_TIME.encode() + rb"\g<3>", data)
            entry = zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0))
            entry.compress_type, entry.external_attr = info.compress_type, info.external_attr
            entry.create_system = 3  # as on Unix, whatever the platform (ZipInfo's default is the platform's)
            fixed.writestr(entry, data)


def _fit_to_page_width(sheet) -> None:
    """Printed, a sheet is one page wide (landscape), as many pages long as it needs: a cross-tab's columns are
    never split across pages, and the first sheet's values stay beside their names."""
    sheet.page_setup.orientation = "landscape"
    sheet.sheet_properties.pageSetUpPr.fitToPage = True
    sheet.page_setup.fitToWidth = 1
    sheet.page_setup.fitToHeight = 0


def margin_of_error(error) -> dict | None:
    """A margin's public margin of error from its planned error: the planned standard deviation of each cell and
    the half-width of its two-sided 90% interval under a normal approximation (z = 1.645).

    Parameters
    ----------
    error : planning.MarginError or None
        The plan's expected error of the margin (from the noise scales and the estimator's linear error model,
        never the counts), or None.

    Returns
    -------
    dict or None
        ``cell_sd`` and ``half_width`` (counts), or None when there is no planned error.
    """
    if error is None or error.cell_sd is None:
        return None
    return {"cell_sd": float(error.cell_sd), "half_width": float(_z() * error.cell_sd)}


def _z() -> float:
    """The normal quantile of the two-sided INTERVAL_LEVEL interval (1.645 for 90%)."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + INTERVAL_LEVEL / 2)


def _level_labels(variable: Mapping) -> list[str]:
    return [str(x) for x in (variable.get("level_labels") or variable.get("levels") or [])]


def _label(variable: Mapping) -> str:
    return str(variable.get("label") or variable["name"])


def _number(value):
    """A released value as the CSV file holds it: an int, or a float rounded to 6 decimals."""
    import numpy as np

    return int(value) if isinstance(value, (int, np.integer)) else round(float(value), 6)


def _write_margin(sheet, margin: Mapping, variables: Sequence[Mapping], values, figure: dict | None,
                  notes_name: str, words: Mapping[str, str] = WORDS) -> None:
    """One margin's sheet: a column with a total (one variable) or titled cross-tabs with totals (two or more)."""
    import numpy as np
    from openpyxl.utils import get_column_letter

    values = np.asarray(values)
    if not np.issubdtype(values.dtype, np.integer):
        values = values.astype(float)
    labels = [_label(v) for v in variables]
    total_word, count_word = words["total"], words["count"]
    if any(total_word in _level_labels(v) for v in variables):  # a level is called so ("Total" hearing loss)
        total_word = f"{total_word} (all)"
    _styled(sheet, [f"{margin['label']}: {' × '.join(labels)}"], bold=True)
    if len(variables) == 1:
        _styled(sheet, [labels[0], count_word], bold=True)
        for level, value in zip(_level_labels(variables[0]), values):
            _styled(sheet, [level, _number(value)])
        _styled(sheet, [total_word, _number(values.sum())], bold=True)
        sheet.freeze_panes = "A3"
        columns = [[labels[0], total_word, *_level_labels(variables[0])],
                   [count_word, *map(_number, values.ravel()), _number(values.sum())]]
    else:
        rows_of, across = variables[-2], variables[-1]
        across_levels = _level_labels(across)
        _styled(sheet, ["", labels[-1]], bold=True)
        _styled(sheet, [labels[-2], *across_levels, total_word], bold=True)
        from openpyxl.styles import Alignment

        for cell in sheet[sheet.max_row][1:]:  # over columns of numbers, which Excel and Calc align right
            cell.alignment = Alignment(horizontal="right")
        sheet.freeze_panes = "B4"  # the row labels and the column headers stay in view
        columns = ([[labels[-2], total_word, *_level_labels(rows_of)]] + [[level] for level in across_levels]
                   + [[total_word]])
        outer = variables[:-2]
        for index in np.ndindex(*values.shape[:-2]):
            if outer:
                # A block per combination of the other variables' levels, titled by them.
                _styled(sheet, ["; ".join(f"{_label(v)}: {_level_labels(v)[i]}" for v, i in zip(outer, index))],
                        bold=True)
            block = values[index]
            for level, row in zip(_level_labels(rows_of), block):
                cells = [_number(v) for v in row] + [_number(row.sum())]
                _styled(sheet, [level, *cells])
                for column, cell in zip(columns[1:], cells):
                    column.append(cell)
            totals = [_number(v) for v in block.sum(axis=0)] + [_number(block.sum())]
            _styled(sheet, [total_word, *totals], bold=True)
            for column, cell in zip(columns[1:], totals):
                column.append(cell)
            append_row(sheet, [])  # a blank row after each block (and before the note)
    if figure is not None:
        note = (f"Margin of error: each cell (the totals excepted) within ±{figure['half_width']:.3g} of the count "
                f"it estimates with {INTERVAL_LEVEL:.0%} probability (planned standard deviation "
                f"{figure['cell_sd']:.3g}); see the sheet {notes_name}.")
    else:
        note = f"Margin of error: none planned for this mechanism; see the sheet {notes_name}."
    if len(variables) == 1:
        append_row(sheet, [])
    _styled(sheet, [note])
    for number, column in enumerate(columns, start=1):
        widest = max(len(f"{v:,}") if isinstance(v, (int, float)) else len(str(v)) for v in column)
        # Column A holds the row labels (the title and notes run on to the right); wide enough, never too wide.
        sheet.column_dimensions[get_column_letter(number)].width = min(max(widest + 2, 8), 60)


def _write_notes(sheet, public: Mapping, figures: Sequence[dict | None]) -> None:
    """The notes sheet: the guarantee and how the noise was drawn, then each margin's margin of error. Everything
    on it comes from release.json's description and the plan: nothing read from the counts."""
    from .privacy import PrivacyGuarantee

    guarantee = PrivacyGuarantee.from_dict(public["guarantee"])
    noise = public.get("noise", {})
    if noise.get("mode") == "release":
        mode = "release: the noise was drawn by OpenDP's secure samplers"
    else:
        mode = (f"{noise.get('mode')}: seeded numpy noise, NOT secure; for trying the release out, not for "
                "publication")
    _styled(sheet, ["Notes"], bold=True)
    rows = [("privacy guarantee", f"differential privacy, {guarantee.describe()}"),
            ("neighbouring data sets", f"differ by {guarantee.unit.describe()}"),
            ("privacy loss", guarantee.loss.describe()),
            ("how", guarantee.how),
            ("statement", public.get("privacy")),
            ("mode", mode),
            ("made by", f"{public.get('tool')} {public.get('tool_version')}: the "
                        f"{public.get('mechanism')} mechanism, then {public.get('estimator')} and "
                        f"{public.get('rounding')} rounding")]
    rows += [("warning", w) for w in public.get("warnings", [])]
    for key, value in rows:
        if value:
            _styled(sheet, [key, str(value)])
    append_row(sheet, [])
    _styled(sheet, ["margin", "variables", "planned standard deviation of a cell",
                    f"{INTERVAL_LEVEL:.0%} margin of error (±)", "note"], bold=True)
    from openpyxl.styles import Alignment

    for cell in sheet[sheet.max_row]:  # the long headers of narrow number columns wrap onto two lines
        cell.alignment = Alignment(wrap_text=True, vertical="bottom")
    sheet.row_dimensions[sheet.max_row].height = 30
    people = {v["name"]: _label(v) for v in public.get("variables", [])}
    for margin, figure in zip(public["margins"], figures):
        names = ", ".join(people.get(v, v) for v in margin["variables"])
        if figure is None:
            _styled(sheet, [margin["label"], names, "", "", f"the {public.get('mechanism')} mechanism has no planned "
                            "error for this margin, so none is stated"])
            continue
        row = [margin["label"], names, figure["cell_sd"], figure["half_width"], ""]
        if public.get("estimator") != "least-squares":
            row[4] = (f"that of the unbiased linear reconstruction of the measurements; the {public.get('estimator')} "
                      "estimator's own error is not derived")
        _styled(sheet, row)
        for cell in sheet[sheet.max_row][2:4]:
            cell.number_format = "0.00"
    append_row(sheet, [])
    for text in ("The margin of error is computed from the plan alone (the noise scales and the estimator's linear "
                 "error model), before any count was read, so it may be published with the margins.",
                 f"Each released cell is within the {INTERVAL_LEVEL:.0%} margin of error of the count it estimates "
                 f"with probability about {INTERVAL_LEVEL:.0%} (a normal approximation: ± {_z():.3f} standard "
                 "deviations). Row and column totals, sums of several cells, have errors of their own.",
                 "It is the error of the unbiased linear estimate: keeping counts non-negative usually makes the "
                 "released cells closer; rounding to whole numbers adds a small change of its own, not counted "
                 "here."):
        _styled(sheet, [text])
    longest = max((len(", ".join(people.get(v, v) for v in m["variables"])) for m in public["margins"]), default=0)
    for column, width in zip("ABCDE", (24, min(max(longest + 2, 20), 80), 20, 20, 60)):
        sheet.column_dimensions[column].width = width


def _styled(sheet, values: Sequence, bold: bool = False) -> None:
    """`append_row`, then integers shown with thousands separators and, if `bold`, the row in bold."""
    from openpyxl.styles import Font
    from openpyxl.styles.fonts import DEFAULT_FONT

    append_row(sheet, values)
    for cell in sheet[sheet.max_row]:
        if bold and cell.value is not None:
            # The workbook's own font, bold (a bare bold Font names no face, and Calc then draws a serif one).
            cell.font = Font(name=DEFAULT_FONT.name, size=DEFAULT_FONT.sz, bold=True)
        if isinstance(cell.value, int):
            cell.number_format = "#,##0"


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
