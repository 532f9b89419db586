"""The tool's exceptions, one type per kind of failure, each with the exit status the command line gives it.

| type                    | exit | what happened                                                              |
|-------------------------|------|----------------------------------------------------------------------------|
| TabreleaseError         | 2    | bad input or an impossible request: nothing charged, nothing written       |
| BudgetRefused           | 2    | the ledger's rules refused a release or a budget: nothing charged          |
| LedgerIntegrityError    | 2    | the ledger, its key, links or anchor fail verification: nothing charged    |
| ChargedReleaseFailed    | 4    | the release was charged to the ledger, then failed: the charge stands      |

All are ValueErrors, so code that already guards against ValueError keeps working; a scheduler tells them apart by
type or by exit status, never by parsing the message.
"""


class TabreleaseError(ValueError):
    """Bad input or an impossible request, with a message fit to show a user as it is."""

    exit_status = 2


class BudgetRefused(TabreleaseError):
    """A release or budget refused by the ledger's rules (over budget, no guarantee under the budget's unit, an
    alias, no budget): nothing was charged."""


class LedgerIntegrityError(TabreleaseError):
    """The ledger (or its anchor, key or links) fails verification: nothing is spent or set."""


class ChargedReleaseFailed(TabreleaseError):
    """The release was charged to the ledger, and then failed (full disk, a signal, memory, an internal error).

    The charge stands (noise may have been drawn) and the ledger records the failure. `entry` is the ledger's
    record of the charge."""

    exit_status = 4

    def __init__(self, message: str, entry=None):
        super().__init__(message)
        self.entry = entry
