"""The human's side of safe_lanes: adding, approving, denying, changing and revoking grants, and
reviewing, applying or discarding the changes held for review.

Import it only where the human decides (a command line, an approval page, a process of its
own), never in what serves the agent: `safe_lanes` alone cannot widen anyone's authority nor
let a held change into a folder. Every decision is recorded in the audit log (a grant's also in
the manifest's changelog) as the OS user running the process (`uid:N`, followed by the `actor`
name given).
"""

from ._native import (
    ChangeReview,
    Decided,
    Grant,
    Grants,
    HeldChanges,
    HeldSet,
    HeldView,
    Proposal,
    Request,
    SetReview,
)

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
