"""Contingency tables: named variables, ordered levels, a non-negative integer count per cell.

A table is built from a long-format frame (one column per variable plus a count column),
from microdata (one row per person), or by name from the built-in tables; it goes back out as
a long frame. Everything else in the tool takes a `ContingencyTable`.

Modules: `model` (ContingencyTable, MicrodataTable, margins, long rows), `readers` (CSV, Parquet, .xlsx and
microdata readers, `load_table`, `load_input`), `metadata` (levels and --metadata files), `catalogue` (the
built-in tables). The names other modules use are re-exported here, so `from .tables import X` keeps working.
"""

# The rule against formulas in CSV files (OWASP) is one of _files' rules of writing files; the writers and readers
# here apply it (FORMULA_TRIGGERS and the two functions are also reached from here).
from .._files import FORMULA_TRIGGERS, csv_field_for_label, csv_label_from_field, read_side_file  # noqa: F401
from .model import (check_cells, ContingencyTable, describe_variables, LETTERS, long_rows, margin_counts, margin_of,
    MAX_MARGIN_CELLS, MAX_TABLE_CELLS, MicrodataTable, margin_title, margin_titles, people_names, total_of,
    write_long_csv)
from .metadata import (DeclaredMetadata, read_levels_file, read_metadata, with_declared_metadata)
from .readers import (CsvOptions, LEVELS_FROM_DATA, load_input, load_table, MAX_COUNT, read_csv_frame,
    read_microdata, read_table_csv, read_table_parquet, read_xlsx_frame, SEPARATORS, table_from_frame,
    table_from_microdata)
from .catalogue import (builtin_metadata, builtin_table, BUILTIN_TABLES, counts_digest, describe_builtin_tables,
    holds_builtin_counts, OUTSIDE_TABLES, PAPER_TABLES)

__all__ = [
    "builtin_metadata", "builtin_table", "BUILTIN_TABLES", "check_cells", "ContingencyTable", "counts_digest",
    "csv_field_for_label", "holds_builtin_counts",
    "csv_label_from_field", "CsvOptions", "DeclaredMetadata", "describe_builtin_tables", "describe_variables",
    "FORMULA_TRIGGERS", "LETTERS", "LEVELS_FROM_DATA", "load_input", "load_table", "long_rows", "margin_counts",
    "margin_of", "MAX_COUNT", "MAX_MARGIN_CELLS", "MAX_TABLE_CELLS", "MicrodataTable", "OUTSIDE_TABLES",
    "PAPER_TABLES", "margin_title", "margin_titles", "people_names", "read_csv_frame", "read_levels_file",
    "read_metadata", "read_microdata",
    "read_side_file", "read_table_csv", "read_table_parquet", "read_xlsx_frame", "SEPARATORS", "table_from_frame",
    "table_from_microdata", "total_of", "with_declared_metadata", "write_long_csv",
]
