"""The exceptions of safe_lanes: every failure of the library is an `Error`."""


class Error(Exception):
    """A failure of the library.

    `code` is the stable snake_case code (`traversal`, `outside_allowlist`, `too_large`, `io`,
    ...; codes are only ever added), `message` says what was refused and why, without control
    characters. `str(error)` is `"<code>: <message>"`, what an agent should be shown.
    """

    code: str
    message: str

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class Refused(Error):
    """The input was refused (every code but `io`): the CLI's exit status 3."""


class Failed(Error):
    """The operation failed for a reason that is not a refusal (`io`): the CLI's exit status 1."""
