"""The one exception type the tool raises for bad input.

The CLI turns it into a one-line message and a non-zero exit; library users can catch it
(it is a ValueError, so code that already guards against ValueError keeps working).
"""


class TabreleaseError(ValueError):
    """Bad input or an impossible request, with a message fit to show a user as it is."""
