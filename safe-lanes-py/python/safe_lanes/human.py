"""The human's side of safe_lanes: adding, approving, denying, changing and revoking grants.

Import it only where the human decides (a command line, an approval page, a process of its
own), never in what serves the agent: `safe_lanes` alone cannot widen anyone's authority.
Every change is recorded in the manifest's changelog and in the audit log as the OS user
running the process (`uid:N`, followed by the `actor` name given).
"""

from ._native import Grant, Grants, Proposal, Request

__all__ = ["Grant", "Grants", "Proposal", "Request"]
