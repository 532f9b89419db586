"""tabrelease: differentially private release of contingency-table margins, and what it costs.

The public API is what this module re-exports; everything else is internal.
"""

from .errors import TabreleaseError
from .loglinear import (
    LogLinearFit,
    fit_loglinear,
    fit_summary,
    g_squared,
    ipf,
    l1_distance,
    pearson_x2,
    total_variation,
)
from .models import HierarchicalModel, default_model, downward_closure, free_parameters, parse_model
from .tables import (
    BUILTIN_TABLES,
    ContingencyTable,
    builtin_table,
    load_table,
    read_table_csv,
    table_from_frame,
    table_from_microdata,
)

__version__ = "0.1.0"

__all__ = [
    "BUILTIN_TABLES",
    "ContingencyTable",
    "HierarchicalModel",
    "LogLinearFit",
    "TabreleaseError",
    "builtin_table",
    "default_model",
    "downward_closure",
    "fit_loglinear",
    "fit_summary",
    "free_parameters",
    "g_squared",
    "ipf",
    "l1_distance",
    "load_table",
    "parse_model",
    "pearson_x2",
    "read_table_csv",
    "table_from_frame",
    "table_from_microdata",
    "total_variation",
    "__version__",
]
