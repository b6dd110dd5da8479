"""Safe local-disk access for AI-agent gateways: the agent's side (see `safe_lanes.human` for the
human's)."""

import io
import os
from pathlib import Path
from typing import Any, BinaryIO, Iterable, Optional, Sequence, Tuple, Union

__all__ = [
    "AgentDesk",
    "Changes",
    "CommandReport",
    "Control",
    "DownloadLane",
    "DownloadList",
    "Entry",
    "Error",
    "Failed",
    "GrantInfo",
    "GrantsList",
    "Hardening",
    "HeldPath",
    "Opened",
    "Patched",
    "Refused",
    "RequestInfo",
    "RequestOutcome",
    "Requested",
    "SandboxSupport",
    "Saved",
    "Sent",
    "Source",
    "Staged",
    "StateRoot",
    "UploadDeposit",
    "UploadSource",
    "Uploaded",
    "UploadedContent",
    "Uploader",
    "harden",
    "sandbox_support",
    "sanitize",
]

Content = Union[bytes, bytearray, memoryview, BinaryIO, io.RawIOBase, io.BufferedIOBase, Iterable[bytes]]
"""What a save or a stage takes: bytes, a binary file object (read with `read(n)` until
`b""`), or an iterable of bytes; a file or an iterable is streamed, never held whole."""

Hint = Union[str, bytes]
"""A name hint: text, or bytes (a name that is not UTF-8). Never a path."""

StrPath = Union[str, "os.PathLike[str]"]

class Error(Exception):
    """A failure of the library: `code` is the stable snake_case code, `message` says what was
    refused and why; `str(error)` is `"<code>: <message>"`."""

    code: str
    message: str
    def __init__(self, code: str, message: str) -> None: ...

class Refused(Error):
    """The input was refused (every code but `io`)."""

class Failed(Error):
    """The operation failed for a reason that is not a refusal (`io`)."""

class StateRoot:
    """The state root: opened once, checked (0700, owned by this user), held by descriptor."""

    @staticmethod
    def open(path: Optional[StrPath] = None) -> "StateRoot":
        """Open (creating what is missing) the state root at `path`, else `SAFE_LANES_ROOT`, else
        `GWSA_ROOT`, else `$XDG_STATE_HOME/safe-lanes`, else `~/.local/state/safe-lanes`.

        Raises `Refused` (`insecure_root`), `Failed` (`io`)."""
    @property
    def path(self) -> Path:
        """The canonical path of the root."""
    @property
    def downloads(self) -> Path:
        """`<root>/.downloads`, the download lane."""
    @property
    def uploads(self) -> Path:
        """`<root>/.uploads`, the deposit."""
    def broken(self) -> list[str]:
        """Every broken piece of the root, each in a sentence with what it disables."""

class Control:
    """A handle to stop an operation from another thread and to read a command's output while
    it runs."""

    def __init__(self) -> None: ...
    def stop(self, why: str = "stopped by the gateway") -> None:
        """Ask the operation to stop (a command is killed within 100 ms, a save fails at its
        next read)."""
    @property
    def stopped(self) -> Optional[str]:
        """Why the operation was asked to stop, if it was."""
    @property
    def elapsed(self) -> float:
        """Seconds since the handle was made."""
    def output(self) -> Tuple[str, str, bool]:
        """What the command printed since the last call: `(stdout, stderr, truncated)`."""

class Saved:
    """A file saved in the download lane."""

    @property
    def path(self) -> Path: ...
    @property
    def name(self) -> str: ...
    @property
    def bytes(self) -> int: ...
    @property
    def sha256(self) -> str: ...
    @property
    def recorded(self) -> bool: ...
    def to_dict(self) -> dict[str, Any]:
        """The report's JSON form (what the MCP server sends for the same work)."""

class Entry:
    """A file found in the download lane."""

    @property
    def path(self) -> Path: ...
    @property
    def name(self) -> str: ...
    @property
    def raw_name(self) -> bytes: ...
    @property
    def bytes(self) -> int: ...
    @property
    def modified(self) -> str: ...
    def to_dict(self) -> dict[str, Any]: ...

class DownloadList:
    """A page of the download lane's files."""

    @property
    def path(self) -> str: ...
    @property
    def files(self) -> list[Entry]: ...
    @property
    def next_cursor(self) -> Optional[str]: ...
    def to_dict(self) -> dict[str, Any]: ...

class DownloadLane:
    """The download lane: third-party content lands in `<root>/.downloads` under a sanitized
    name, never replacing a file (`name (1).ext` on a collision), streamed and hashed."""

    def __init__(self, root: StateRoot, *, max_bytes: Optional[int] = None, durable: bool = False) -> None:
        """`max_bytes` caps each save (`too_large`); `durable` fsyncs the file and the lane before
        a save returns."""
    def save(self, name_hint: Hint, data: Content, *, control: Optional[Control] = None) -> Saved:
        """Save `data` under a name made from `name_hint`; the GIL is released while it runs.

        Raises `Refused` (`too_large`), `Failed` (`io`, or what `data` raised as its cause);
        `TypeError` for `str` data. Nothing is left on error."""
    def list(self, cursor: Optional[str] = None, limit: int = 100) -> DownloadList:
        """A page of the lane's files after `cursor` (a previous page's `next_cursor`)."""
    @property
    def path(self) -> Path: ...

class Source:
    """A source file that passed the allowlist, with its SHA-256."""

    @property
    def path(self) -> Path: ...
    @property
    def root(self) -> Path: ...
    @property
    def bytes(self) -> int: ...
    @property
    def sha256(self) -> str: ...
    def to_dict(self) -> dict[str, Any]: ...

class Opened(io.FileIO):
    """A binary file object on exactly the file `UploadSource.open` checked (its descriptor,
    never re-opened by path)."""

    @property
    def path(self) -> Path:
        """Its canonical path."""
    @property
    def root(self) -> Path:
        """The allowed root it lies in."""
    @property
    def bytes(self) -> int:
        """Its size when it was checked."""

class UploadSource:
    """The upload-source allowlist: `.downloads`, `.upload-roots`, `SAFE_LANES_UPLOAD_ROOTS` /
    `GWSA_UPLOAD_ROOTS`; never the rest of the state root."""

    @staticmethod
    def load(root: StateRoot) -> "UploadSource": ...
    def resolve(self, path: StrPath) -> Source:
        """Check `path` and hash it through the checked descriptor.

        Raises `Refused` (`outside_allowlist`, `state_root`, `not_regular_file`, `hardlinked`,
        `not_found`, `symlink_escape`, `relative_path`, `nul_byte`, `invalid_argument`)."""
    def open(self, path: StrPath) -> Opened:
        """Check `path` and return a file object on exactly the file checked. Raises as
        `resolve`."""
    @property
    def roots(self) -> list[dict[str, Any]]:
        """The allowed roots: `{"path", "origin", "entry", "covers_state_root"}`."""
    @property
    def ignored(self) -> list[dict[str, Any]]:
        """The entries that were ignored: `{"origin", "entry", "at", "why"}`."""

class Uploader:
    """An uploader command, run without a shell: `{file}` (a whole argument) is the staged
    file, `in/<name>` in the uploader's working directory (its upload's own directory), `{name}` the
    content's name as it is, `{name:json}` that name escaped for a JSON string; without
    `{file}` the file is appended."""

    def __init__(
        self,
        template: Union[str, Sequence[str]],
        *,
        timeout: Optional[float] = None,
        max_output: Optional[int] = None,
    ) -> None:
        """Raises `Refused` (`invalid_argument`) for an empty template, unbalanced quotes,
        `{file}` inside a larger argument, a placeholder in the program, or a placeholder in
        (or before) the code of a program that runs code it is handed (`sh -c`, `bash -c`,
        `env … sh`, `python -c`, a script): pass it as an argument after the script instead
        (`sh -c 'up --title "$1" "$2"' sh {name} {file}`)."""

class Staged:
    """A file staged in the deposit, erased when the `with` block ends (or at `erase()`, when
    sent, or when collected)."""

    @property
    def deposit(self) -> Path:
        """The deposit directory; the uploader runs in `path.parent.parent`, its upload's own
        directory, and sees nothing else of the deposit."""
    @property
    def file(self) -> str:
        """The staged file relative to the deposit (`<random>/in/<name>`, `[A-Za-z0-9._/-]`
        only); `in/<name>` is the uploader's `{file}`."""
    @property
    def name(self) -> str:
        """The content's name (what `{name}` becomes)."""
    @property
    def path(self) -> Path: ...
    @property
    def bytes(self) -> int: ...
    @property
    def sha256(self) -> str: ...
    @property
    def erased(self) -> bool: ...
    def erase(self) -> None: ...
    def __enter__(self) -> "Staged": ...
    def __exit__(self, *exc: object) -> bool: ...

class Sent:
    """What one upload did."""

    @property
    def staged(self) -> Path: ...
    @property
    def name(self) -> str: ...
    @property
    def bytes(self) -> int: ...
    @property
    def sha256(self) -> str: ...
    @property
    def exit_code(self) -> Optional[int]: ...
    @property
    def signal(self) -> Optional[int]: ...
    @property
    def stdout(self) -> str: ...
    @property
    def stderr(self) -> str: ...
    @property
    def timed_out(self) -> bool: ...
    @property
    def truncated(self) -> bool: ...
    @property
    def recorded(self) -> bool: ...
    @property
    def success(self) -> bool: ...
    def to_dict(self) -> dict[str, Any]: ...

class UploadDeposit:
    """The deposit: content staged in `<root>/.uploads` for an uploader, always erased."""

    def __init__(self, root: StateRoot, *, max_bytes: Optional[int] = None) -> None: ...
    @property
    def path(self) -> Path:
        """The deposit directory."""
    def stage(self, *, data: Content, name: Hint) -> Staged:
        """Stage `data` (streamed) under an inert name made from `name`; use it in `with`."""
    def stage_source(self, opened: Opened) -> Staged:
        """Stage a copy of a file `UploadSource.open` checked; use it in `with`."""
    def send(self, staged: Staged, uploader: Uploader) -> Sent:
        """Run `uploader` on `staged` in the deposit, then erase it. A failing uploader is a
        `Sent` whose `success` is false.

        Raises `Failed` (`io`) when it cannot start; `ValueError` when `staged` is gone."""

class GrantInfo:
    """One approved grant."""

    @property
    def alias(self) -> str: ...
    @property
    def id(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def access(self) -> str: ...
    @property
    def env(self) -> str: ...
    @property
    def available(self) -> bool: ...
    @property
    def unavailable(self) -> Optional[str]: ...
    @property
    def kind(self) -> Optional[str]: ...
    @property
    def vars(self) -> list[str]: ...
    @property
    def allow_protected(self) -> list[str]:
        """The paths whose changes the human lets through without review."""
    @property
    def direct(self) -> bool:
        """Whether the human made this read-write grant direct: commands write it at once,
        nothing waits for review."""
    def to_dict(self) -> dict[str, Any]: ...

class RequestInfo:
    """A pending request."""

    @property
    def id(self) -> str: ...
    @property
    def alias(self) -> str: ...
    @property
    def access(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def path(self) -> Optional[str]: ...
    @property
    def requested_at(self) -> str: ...
    @property
    def kind(self) -> Optional[str]: ...
    def to_dict(self) -> dict[str, Any]: ...

class RequestOutcome:
    """What became of a request."""

    @property
    def id(self) -> str: ...
    @property
    def alias(self) -> str: ...
    @property
    def access(self) -> Optional[str]: ...
    @property
    def status(self) -> str: ...
    @property
    def decision(self) -> Optional[str]: ...
    @property
    def at(self) -> str: ...
    def to_dict(self) -> dict[str, Any]: ...

class GrantsList:
    """The folder grants, as the agent sees them."""

    @property
    def grants(self) -> list[GrantInfo]: ...
    @property
    def requests(self) -> list[RequestInfo]: ...
    @property
    def outcomes(self) -> list[RequestOutcome]: ...
    def to_dict(self) -> dict[str, Any]: ...

class Requested:
    """A request filed for the human."""

    @property
    def request(self) -> RequestInfo: ...
    @property
    def status(self) -> str: ...
    @property
    def approve_with(self) -> str: ...
    def to_dict(self) -> dict[str, Any]: ...

class HeldPath:
    """One change held for the human."""

    @property
    def path(self) -> str:
        """Relative to the grant's folder."""
    @property
    def why(self) -> str:
        """`git_state`, `tool_config`, `agent_config`, `editor_config`, `start_up`,
        `link_outside`, `conflict` or `interrupted`."""
    @property
    def grant(self) -> str:
        """The grant's alias."""
    def to_dict(self) -> dict[str, Any]: ...

class Changes:
    """What became of a command's changes to its read-write folders: published into them, or
    held for the human (not in the folder until the human applies them)."""

    @property
    def published(self) -> int: ...
    @property
    def held(self) -> list[HeldPath]: ...
    @property
    def set(self) -> Optional[str]:
        """The held change set (`set_…`), when something is held."""
    @property
    def dropped(self) -> int:
        """Set-id files, devices, FIFOs and sockets are never created."""
    @property
    def note(self) -> Optional[str]:
        """What was held and how the human applies it, in words."""
    def to_dict(self) -> dict[str, Any]: ...

class CommandReport:
    """A confined command: how it ended, or how a background job is doing."""

    @property
    def status(self) -> str:
        """`running` or `finished`."""
    @property
    def job_id(self) -> Optional[str]: ...
    @property
    def elapsed_s(self) -> float: ...
    @property
    def exit_code(self) -> Optional[int]: ...
    @property
    def signal(self) -> Optional[int]: ...
    @property
    def stdout(self) -> str: ...
    @property
    def stderr(self) -> str: ...
    @property
    def timed_out(self) -> bool: ...
    @property
    def truncated(self) -> bool: ...
    @property
    def stopped(self) -> Optional[str]: ...
    @property
    def recorded(self) -> bool: ...
    @property
    def grants(self) -> list[Tuple[str, str]]: ...
    @property
    def success(self) -> bool: ...
    @property
    def changes(self) -> Changes:
        """What became of its writes to read-write grants (once it has finished)."""
    @property
    def hint(self) -> Optional[str]:
        """A program its shell could not find, with the tool grants that would let it in."""
    def to_dict(self) -> dict[str, Any]: ...

class UploadedContent:
    """The content an uploader received."""

    @property
    def path(self) -> Optional[str]: ...
    @property
    def bytes(self) -> int: ...
    @property
    def sha256(self) -> str: ...
    def to_dict(self) -> dict[str, Any]: ...

class Uploaded:
    """What an upload through the desk did."""

    @property
    def source(self) -> UploadedContent: ...
    @property
    def staged(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def exit_code(self) -> Optional[int]: ...
    @property
    def stdout(self) -> str: ...
    @property
    def stderr(self) -> str: ...
    @property
    def recorded(self) -> bool: ...
    def to_dict(self) -> dict[str, Any]: ...

class Patched:
    """What a patch did."""

    @property
    def path(self) -> Path: ...
    @property
    def change(self) -> str:
        """`modified`, `created` or `deleted`."""
    @property
    def hunks(self) -> int: ...
    @property
    def bytes(self) -> int: ...
    @property
    def held(self) -> bool:
        """Whether the change was held for the human instead of made (the file unchanged)."""
    @property
    def set(self) -> Optional[str]:
        """The change set holding it, when held."""
    @property
    def why(self) -> Optional[str]:
        """Why it is held, when held (`git_state`, `agent_config`, …)."""
    def to_dict(self) -> dict[str, Any]: ...

class AgentDesk:
    """The agent's door: one method per operation an agent may ask for, each checking the
    agent's raw input, recording it as the agent, and answering one report."""

    def __init__(
        self,
        root: StateRoot,
        *,
        manifest: Optional[StrPath] = None,
        only: Optional[str] = None,
        max_bytes: int = 50 << 20,
        uploader: Optional[Uploader] = None,
        max_output: int = 256 << 10,
        max_jobs: int = 8,
        client: Optional[str] = None,
    ) -> None: ...
    def with_client(self, client: str) -> "AgentDesk": ...
    @property
    def can_upload(self) -> bool: ...
    def save(self, name_hint: Hint, data: Content, *, control: Optional[Control] = None) -> Saved: ...
    def downloads(self, cursor: Optional[str] = None, limit: int = 100) -> DownloadList: ...
    def resolve_upload(self, path: str) -> Source: ...
    def upload_file(self, path: str) -> Uploaded: ...
    def upload_content(self, name_hint: str, data: Content) -> Uploaded: ...
    def grants(self) -> GrantsList: ...
    def request_access(
        self,
        alias: str,
        access: str,
        reason: str,
        *,
        path: Optional[str] = None,
        kind: str = "folder",
        vars: Sequence[str] = (),
        bin: Optional[str] = None,
    ) -> Requested: ...
    def apply_patch(self, alias: str, path: str, diff: str) -> Patched:
        """Apply `diff` to `path` of the read-write grant `alias`; a diff to a path the
        human's tools act on is held (`Patched.held`), not applied."""
    def run(
        self,
        command: Union[str, Sequence[str]],
        *,
        cwd: Optional[str] = None,
        timeout: float = 60.0,
        control: Optional[Control] = None,
    ) -> CommandReport:
        """Run `command` confined (`/bin/sh -c`); `control.stop()` or Ctrl-C stops it. Its
        writes to read-write grants reach the folders when it ends, except what is held
        (`CommandReport.changes`)."""
    def run_background(
        self,
        command: Union[str, Sequence[str]],
        *,
        cwd: Optional[str] = None,
        timeout: float = 600.0,
    ) -> CommandReport: ...
    def job_status(self, job_id: str, wait: float = 0.0) -> CommandReport: ...
    def job_stop(self, job_id: str) -> CommandReport: ...

class Hardening:
    """What `harden()` left in place."""

    @property
    def not_dumpable(self) -> bool: ...
    @property
    def no_core_files(self) -> bool: ...
    @property
    def running_as_root(self) -> bool: ...
    @property
    def unavailable(self) -> Optional[str]: ...
    @property
    def warning(self) -> Optional[str]: ...
    def to_dict(self) -> dict[str, Any]: ...

class SandboxSupport:
    """What confined commands get on this host."""

    @property
    def available(self) -> bool: ...
    @property
    def layers(self) -> list[str]: ...
    @property
    def problem(self) -> Optional[str]: ...
    def to_dict(self) -> dict[str, Any]: ...

def harden() -> Hardening:
    """Make this process not dumpable and turn core files off; call it first."""

def sandbox_support() -> SandboxSupport:
    """Whether confined commands can run here, with every layer."""

def sanitize(hint: Hint) -> str:
    """The safe base name `hint` becomes in the lanes."""
