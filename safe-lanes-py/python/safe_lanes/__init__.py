"""Safe local-disk access for AI-agent gateways: the agent's side.

An agent's arguments may have been written by an attacker (a prompt injection in an e-mail or a
web page). Through this package a gateway lets the agent:

- save received content in the download lane (`DownloadLane`, `AgentDesk.save`): a name hint,
  never a path; nothing is ever replaced;
- upload files only from folders the human allowlisted (`UploadSource`), staged in the deposit
  for an uploader (`UploadDeposit`, `Uploader`) and always erased;
- use folders the human granted: list them, ask for more, patch files and run commands confined
  to them (`AgentDesk`). A command's writes reach a read-write folder when it ends, except
  what the library holds for the human's review (git state, tools' and agent hosts'
  configuration, start-up files …): `CommandReport.changes`, `Patched.held`.

The human's side (approving, revoking, applying held changes) is `safe_lanes.human`; keep it
out of what serves the agent. Every failure raises `Error` (`Refused` or `Failed`) with its
stable `code`. Every call releases the GIL while it works.
"""

from ._errors import Error, Failed, Refused
from ._files import Opened
from ._native import (
    AgentDesk,
    Changes,
    CommandReport,
    Control,
    DownloadLane,
    DownloadList,
    Entry,
    GrantInfo,
    GrantsList,
    Hardening,
    HeldPath,
    Patched,
    RequestInfo,
    RequestOutcome,
    Requested,
    SandboxSupport,
    Saved,
    Sent,
    Source,
    Staged,
    StateRoot,
    UploadDeposit,
    UploadSource,
    Uploaded,
    UploadedContent,
    Uploader,
    harden,
    sandbox_support,
    sanitize,
)

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
