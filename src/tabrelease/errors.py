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


class ReleaseInterrupted(KeyboardInterrupt):
    """A Ctrl-C (or a hang-up) came after the release's charge: it was held, and the release made, published and
    charged (`published`, a `workflow.PublishedRelease`). Raised by `publish_release` once the release stands, so
    that a caller's loop stops as a Ctrl-C asks, and the release made is not lost (the command line prints it and
    exits 0; a batch stops after it and exits 130). A KeyboardInterrupt, not a TabreleaseError: nothing failed."""

    def __init__(self, published):
        super().__init__(f"interrupted after its charge: the release was made, published to {published.out}, and it "
                         "stands")
        self.published = published


# Every type, by exit status (the README's table of exit codes; tests/test_docs.py keeps the two in step).
EXIT_STATUSES = {cls.exit_status: cls for cls in (TabreleaseError, InternalError, ChargedReleaseFailed, BudgetRefused,
                                                  LedgerIntegrityError)}
