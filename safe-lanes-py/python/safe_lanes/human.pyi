"""The human's side of safe_lanes: adding, approving, denying, changing and revoking grants, and
reviewing, applying or discarding the changes held for review."""

import os
from pathlib import Path
from typing import Any, Optional, Sequence, Union

from . import GrantsList, RequestInfo, StateRoot

StrPath = Union[str, "os.PathLike[str]"]

__all__ = [
    "ChangeReview",
    "Decided",
    "Grant",
    "Grants",
    "HeldChanges",
    "HeldSet",
    "HeldView",
    "Proposal",
    "Request",
    "SetReview",
]

class Grant:
    """A grant as a change left it."""

    @property
    def id(self) -> str: ...
    @property
    def alias(self) -> str: ...
    @property
    def path(self) -> Path: ...
    @property
    def access(self) -> str: ...
    @property
    def created_at(self) -> Optional[str]: ...
    @property
    def host(self) -> Optional[str]: ...
    @property
    def kind(self) -> str: ...
    @property
    def direct(self) -> bool:
        """Whether it is a direct read-write grant: commands write it at once, nothing waits
        for review."""
    @property
    def warning(self) -> Optional[str]:
        """What every listing warns of a direct grant; `None` for any other."""
    @property
    def recorded(self) -> bool:
        """Whether the change's record is in the audit log."""
    def to_dict(self) -> dict[str, Any]: ...

class Request:
    """A request as a decision left it."""

    @property
    def id(self) -> str: ...
    @property
    def alias(self) -> str: ...
    @property
    def access(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def path(self) -> Optional[Path]: ...
    @property
    def requested_by(self) -> Optional[str]: ...
    @property
    def recorded(self) -> bool: ...
    def to_dict(self) -> dict[str, Any]: ...

class Proposal:
    """A pending request and the change approving it makes now."""

    @property
    def request(self) -> RequestInfo: ...
    @property
    def change(self) -> str: ...
    @property
    def alias(self) -> str: ...
    @property
    def access(self) -> str: ...
    @property
    def path(self) -> Optional[Path]: ...
    @property
    def raises_access(self) -> bool: ...
    @property
    def digest(self) -> str: ...
    def to_dict(self) -> dict[str, Any]: ...

class Grants:
    """The grants of one manifest, managed by the human; changes are recorded as `uid:N`."""

    def __init__(self, root: StateRoot, manifest: Optional[StrPath] = None) -> None: ...
    def list(self) -> GrantsList: ...
    def proposals(self) -> list[Proposal]: ...
    def proposal(self, request_id: str) -> Proposal: ...
    def add(
        self,
        alias: str,
        path: StrPath,
        access: str,
        *,
        reason: str,
        actor: Optional[str] = None,
    ) -> Grant: ...
    def approve(
        self,
        request_id: str,
        *,
        alias: str,
        access: str,
        reason: str,
        path: Optional[StrPath] = None,
        digest: Optional[str] = None,
        actor: Optional[str] = None,
    ) -> Grant:
        """Approve the request bound to the change shown (`alias`, `access`, `path`, `digest`);
        refused (`invalid_argument`) when the request no longer makes that change."""
    def deny(self, request_id: str, *, reason: str, actor: Optional[str] = None) -> Request: ...
    def set_access(self, alias: str, access: str, *, reason: str, actor: Optional[str] = None) -> Grant: ...
    def set_direct(self, alias: str, direct: bool, *, reason: str, actor: Optional[str] = None) -> Grant:
        """Make a read-write folder grant direct (commands write it at once, nothing held) or
        layered again; refused (`invalid_argument`) for any other grant."""
    def revoke(self, alias: str, *, reason: str, actor: Optional[str] = None) -> Grant: ...

class HeldView:
    """One held change, as a listing shows it."""

    @property
    def grant(self) -> str: ...
    @property
    def path(self) -> str:
        """Relative to the grant's folder (escaped)."""
    @property
    def change(self) -> str:
        """`created`, `modified`, `deleted`, `mode` or `link`."""
    @property
    def why(self) -> str:
        """`git_state`, `tool_config`, `agent_config`, `editor_config`, `start_up`,
        `link_outside`, `conflict` or `interrupted`."""
    @property
    def what(self) -> str: ...
    def to_dict(self) -> dict[str, Any]: ...

class HeldSet:
    """A held change set, as `safe-lanes changes --json` lists it."""

    @property
    def id(self) -> str: ...
    @property
    def grant(self) -> str: ...
    @property
    def grants(self) -> list[str]: ...
    @property
    def origin(self) -> str:
        """`exec` (a confined command) or `patch`."""
    @property
    def command(self) -> str: ...
    @property
    def started(self) -> str: ...
    @property
    def actor(self) -> str: ...
    @property
    def held(self) -> list[HeldView]: ...
    def to_dict(self) -> dict[str, Any]: ...

class ChangeReview:
    """One held change in full."""

    @property
    def grant(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def change(self) -> str: ...
    @property
    def why(self) -> str: ...
    @property
    def what(self) -> str: ...
    @property
    def kind(self) -> str:
        """What the path would be: `file`, `directory`, `link` or `absent`."""
    @property
    def current(self) -> str:
        """What the folder has there now: `file`, `directory`, `link`, `other` or `absent`."""
    @property
    def mode(self) -> Optional[str]: ...
    @property
    def bytes(self) -> Optional[int]: ...
    @property
    def sha256(self) -> Optional[str]: ...
    @property
    def target(self) -> Optional[str]: ...
    @property
    def entries(self) -> list[str]: ...
    @property
    def diff(self) -> Optional[str]: ...
    @property
    def warnings(self) -> list[str]: ...
    def to_dict(self) -> dict[str, Any]: ...

class SetReview:
    """A held change set in full, as `safe-lanes changes show ID --json` prints it."""

    @property
    def id(self) -> str: ...
    @property
    def grant(self) -> str: ...
    @property
    def grants(self) -> list[str]: ...
    @property
    def origin(self) -> str: ...
    @property
    def command(self) -> str: ...
    @property
    def started(self) -> str: ...
    @property
    def actor(self) -> str: ...
    @property
    def held(self) -> list[HeldView]: ...
    @property
    def changes(self) -> list[ChangeReview]: ...
    @property
    def digest(self) -> str:
        """Give it to `HeldChanges.apply`: it binds what was shown."""
    def to_dict(self) -> dict[str, Any]: ...

class Decided:
    """What applying or discarding a held set did."""

    @property
    def id(self) -> str: ...
    @property
    def paths(self) -> list[str]: ...
    @property
    def still_held(self) -> list[HeldView]: ...
    @property
    def recorded(self) -> bool: ...
    def to_dict(self) -> dict[str, Any]: ...

class HeldChanges:
    """The changes held for the human's review; decisions are recorded as `uid:N`."""

    def __init__(self, root: StateRoot, manifest: Optional[StrPath] = None) -> None: ...
    def list(self) -> list[HeldSet]: ...
    def show(self, id: str) -> SetReview: ...
    def apply(
        self,
        id: str,
        digest: str,
        *,
        reason: str,
        paths: Optional[Sequence[str]] = None,
        actor: Optional[str] = None,
    ) -> Decided:
        """Apply what `show(id)` showed with `digest` (all, or `paths`); refused
        (`invalid_argument`) when the set or the folder changed since."""
    def discard(self, id: str, *, reason: str, digest: Optional[str] = None, actor: Optional[str] = None) -> Decided: ...
