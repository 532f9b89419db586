"""The tool's exceptions, one type per kind of failure, each with the exit status the command line gives it.

| type                    | exit | what happened                                                              |
|-------------------------|------|----------------------------------------------------------------------------|
| TabreleaseError         | 2    | bad input or an impossible request: nothing charged, nothing written       |
| InternalError           | 3    | a fault of the tool itself (a bug): reported by kind only, never its text  |
| ChargedReleaseFailed    | 4    | the release was charged to the ledger, then failed: the charge stands      |
| BudgetRefused           | 5    | the ledger's rules refused a release or a budget: nothing charged          |
| LedgerIntegrityError    | 6    | the ledger, its key, links or anchor fail verification: nothing charged    |

All are ValueErrors, so code that already guards against ValueError keeps working; a scheduler tells them apart by
type or by exit status, never by parsing the message. (Exit status 1 is never used; 130 is an interrupt and 128 + N
a signal N.)
"""


class TabreleaseError(ValueError):
    """Bad input or an impossible request, with a message fit to show a user as it is."""

    exit_status = 2


class InternalError(TabreleaseError):
    """A fault of the tool itself: an exception it did not expect. The command line names its kind only (the text
    of an unexpected exception could hold something derived from the counts)."""

    exit_status = 3


class BudgetRefused(TabreleaseError):
    """A release or budget refused by the ledger's rules (over budget, no guarantee under the budget's unit, an
    alias, no budget): nothing was charged."""

    exit_status = 5


class LedgerIntegrityError(TabreleaseError):
    """The ledger (or its anchor, key or links) fails verification: nothing is spent or set."""

    exit_status = 6


class ChargedReleaseFailed(TabreleaseError):
    """The release was charged to the ledger, and then failed (full disk, a signal, memory, an internal error).

    The charge stands (noise may have been drawn) and the ledger records the failure. `entry` is the ledger's
    record of the charge."""

    exit_status = 4

    def __init__(self, message: str, entry=None):
        super().__init__(message)
        self.entry = entry


# Every type, by exit status (documented in the README; a test keeps the two in step).
EXIT_STATUSES = {cls.exit_status: cls for cls in (TabreleaseError, InternalError, ChargedReleaseFailed, BudgetRefused,
                                                  LedgerIntegrityError)}
