"""Folder grants through the package: the human's side (`safe_lanes.human`: add, approve bound to
the change shown, deny, set_access, revoke; recorded as the OS user) and the agent's (a listing,
requests that grant nothing, narrowing), with the library's tables of hostile aliases, paths
and narrowing specs (`safe-lanes/tests/it/grants.rs`)."""

import json

import pytest

import safe_lanes
from safe_lanes.human import Grants

from conftest import code_of, me_human


@pytest.fixture
def gw(world):
    world.layout(dirs=["proj/src", "proj2", "other", "sibling"], files=[("proj/src/main.rs", "fn main() {}\n")])
    return world


def test_a_grant_added_by_the_human_is_listed_for_the_agent(gw):
    grants = gw.grants()
    added = grants.add("rts-source", gw.p("proj"), "read_write", reason="the website")
    assert (added.alias, added.access, added.path, added.kind) == ("rts-source", "read_write", gw.p("proj"), "folder")
    assert added.id.startswith("folder_") and added.recorded
    listing = safe_lanes.AgentDesk(gw.root).grants()
    [info] = listing.grants
    assert (info.alias, info.id, info.env, info.available) == ("rts-source", added.id, "WORKFLOW_FOLDER_RTS_SOURCE", True)
    stored = json.loads((gw.root.path / "workflow.json").read_text())
    assert stored["folder_access"][0]["access"] == "read_write"
    assert listing.to_dict()["grants"][0]["alias"] == "rts-source"


@pytest.mark.parametrize("bad", ["", "Caps", "-lead", "has space", "a/b", "\u00e9", "x" * 49, "docs;rm -rf /", "d\u043ecs"])
def test_alias_rules(gw, bad):
    assert code_of(gw.grants().add, bad, gw.p("proj"), "read_only", reason="for the test") == "invalid_alias"


def test_aliases_are_unique_with_their_environment_key(gw):
    grants = gw.grants()
    grants.add("rts-source", gw.p("proj"), "read_only", reason="for the test")
    assert code_of(grants.add, "rts-source", gw.p("proj2"), "read_only", reason="for the test") == "alias_taken"
    assert code_of(grants.add, "rts_source", gw.p("proj2"), "read_only", reason="for the test") == "alias_taken"


def test_path_rules(gw):
    grants = gw.grants()
    cases = [
        ("relative/dir", "relative_path"),
        (str(gw.p("missing")), "not_found"),
        (str(gw.p("proj/src/main.rs")), "not_found"),
        ("/", "state_root"),
        (str(gw.p("state")), "state_root"),
        (str(gw.p("state/.downloads")), "state_root"),
        (str(gw.tmp), "state_root"),
        ("/tmp/a\0b", "nul_byte"),
    ]
    for path, code in cases:
        assert code_of(grants.add, "x", path, "read_only", reason="for the test") == code, path
    assert grants.list().grants == []


def test_an_access_other_than_the_two_is_refused(gw):
    assert code_of(gw.grants().add, "x", gw.p("proj"), "write", reason="for the test") == "invalid_argument"


def test_overlapping_grants(gw):
    grants = gw.grants()
    grants.add("proj", gw.p("proj"), "read_write", reason="for the test")
    assert code_of(grants.add, "src", gw.p("proj/src"), "read_only", reason="for the test") == "overlapping_grant"
    assert code_of(grants.add, "again", gw.p("proj"), "read_only", reason="for the test") == "overlapping_grant"


def test_a_request_grants_nothing_until_the_human_approves_what_was_shown(gw):
    desk = safe_lanes.AgentDesk(gw.root, client="my-agent 1.0")
    asked = desk.request_access("docs", "read_only", "to read the spec", path=str(gw.p("proj2")))
    assert asked.status == "pending" and "grant approve" in asked.approve_with
    assert asked.request.alias == "docs"
    assert desk.grants().grants == [] and [r.id for r in desk.grants().requests] == [asked.request.id]

    grants = gw.grants()
    [proposal] = grants.proposals()
    assert (proposal.alias, proposal.access, proposal.path) == ("docs", "read_only", gw.p("proj2"))
    assert not proposal.raises_access and proposal.request.id == asked.request.id
    # Bound to the change shown: another access, alias, folder or digest is refused.
    rid = asked.request.id
    for wrong in (
        dict(alias="docs", access="read_write"),
        dict(alias="other", access="read_only"),
        dict(alias="docs", access="read_only", digest="0" * 16),
    ):
        assert code_of(grants.approve, rid, reason="ok", **wrong) == "invalid_argument", wrong
    granted = grants.approve(rid, alias="docs", access="read_only", path=gw.p("proj2"), digest=proposal.digest, reason="ok")
    assert (granted.alias, granted.access, granted.path) == ("docs", "read_only", gw.p("proj2"))
    assert [g.alias for g in desk.grants().grants] == ["docs"]
    outcome = [o for o in desk.grants().outcomes if o.id == rid]
    assert outcome and outcome[0].status == "approved"


def test_a_request_updated_after_it_was_shown_is_not_approved(gw):
    desk = safe_lanes.AgentDesk(gw.root)
    first = desk.request_access("docs", "read_only", "read", path=str(gw.p("proj2")))
    desk.request_access("docs", "read_write", "write too", path=str(gw.p("proj2")))
    assert code_of(gw.grants().approve, first.request.id, alias="docs", access="read_only", reason="for the test") == "not_found"


def test_deny_set_access_and_revoke(gw):
    grants = gw.grants()
    desk = safe_lanes.AgentDesk(gw.root)
    asked = desk.request_access("docs", "read_only", "please")
    denied = grants.deny(asked.request.id, reason="not now")
    assert (denied.alias, denied.access, denied.recorded) == ("docs", "read_only", True)
    assert [o.decision for o in desk.grants().outcomes if o.id == asked.request.id] == ["not now"]
    assert code_of(grants.deny, asked.request.id, reason="again") == "not_found"

    grants.add("proj", gw.p("proj"), "read_only", reason="for the test")
    assert code_of(grants.set_access, "proj", "read_write", reason="") == "invalid_argument"
    assert grants.set_access("proj", "read_write", reason="to fix the build").access == "read_write"
    assert grants.revoke("proj", reason="done").alias == "proj"
    assert desk.grants().grants == []
    assert code_of(grants.revoke, "proj", reason="for the test") == "unknown_alias"


def test_the_human_is_recorded_as_the_os_user_and_the_agent_as_the_agent(gw):
    grants = gw.grants()
    grants.add("proj", gw.p("proj"), "read_write", reason="r", actor="alice")
    asked = safe_lanes.AgentDesk(gw.root).request_access("docs", "read_only", "why")
    grants.deny(asked.request.id, reason="no")
    grants.revoke("proj", reason="r")
    actors = {(r["event"], r["actor"]) for r in gw.records() if r["event"].startswith("grant.")}
    assert (f"grant.add", f"{me_human()} (alice)") in actors
    assert ("grant.request", "agent") in {(e, a.split(" ")[0]) for e, a in actors}
    assert ("grant.deny", me_human()) in actors and ("grant.revoke", me_human()) in actors
    changelog = json.loads((gw.root.path / "workflow.json").read_text())["folder_access_changelog"]
    assert [c["actor"].split(" ")[0] for c in changelog] == [me_human(), "agent", me_human(), me_human()]


def test_every_change_of_the_humans_needs_a_reason(gw):
    grants = gw.grants()
    assert code_of(grants.add, "proj", gw.p("proj"), "read_only", reason="") == "invalid_argument"
    assert code_of(grants.add, "proj", gw.p("proj"), "read_only", reason=" \n ") == "invalid_argument"
    grants.add("proj", gw.p("proj"), "read_only", reason="the project")
    asked = safe_lanes.AgentDesk(gw.root).request_access("docs", "read_only", "please")
    assert code_of(grants.deny, asked.request.id, reason="") == "invalid_argument"
    assert code_of(grants.revoke, "proj", reason="") == "invalid_argument"
    manifest = json.loads((gw.root.path / "workflow.json").read_text())
    changes = manifest["folder_access_changelog"]
    assert changes and all(c["reason"].strip() for c in changes)


def test_an_actor_name_cannot_pass_for_the_agent(gw):
    grants = gw.grants()
    grants.add("proj", gw.p("proj"), "read_only", reason="for the test", actor="agent")
    [record] = [r for r in gw.records() if r["event"] == "grant.add"]
    assert record["actor"] == f"{me_human()} (agent)"


def test_the_agents_module_holds_no_way_to_change_a_grant():
    public = set(dir(safe_lanes))
    assert "Grants" not in public and "human" not in safe_lanes.__all__
    desk_methods = {m for m in dir(safe_lanes.AgentDesk) if not m.startswith("_")}
    assert not desk_methods & {"add", "approve", "deny", "revoke", "set_access", "set_direct", "adopt", "apply", "discard"}


@pytest.mark.parametrize(
    "spec,code",
    [
        ("", "invalid_argument"),
        ("docs:", "invalid_argument"),
        ("docs:READ_ONLY", "invalid_argument"),
        ("docs:write", "invalid_argument"),
        ("docs:\u202eread_only", "invalid_argument"),
        (",", "invalid_alias"),
        ("site,,docs", "invalid_alias"),
        ("../docs", "invalid_alias"),
        ("$(id)", "invalid_alias"),
        ("d\u043ecs", "invalid_alias"),
        ("x," * 1000, "invalid_alias"),
    ],
)
def test_a_hostile_narrowing_is_refused(gw, spec, code):
    with pytest.raises(safe_lanes.Refused) as raised:
        safe_lanes.AgentDesk(gw.root, only=spec)
    assert raised.value.code == code and "\n" not in str(raised.value)


def test_a_narrowed_desk_sees_only_its_grants_at_most_its_access(gw):
    grants = gw.grants()
    for alias, folder in (("site", "proj"), ("docs", "proj2"), ("private", "other")):
        grants.add(alias, gw.p(folder), "read_write", reason="for the test")
    child = safe_lanes.AgentDesk(gw.root, only="site,docs:read_only")
    assert [(g.alias, g.access) for g in child.grants().grants] == [("site", "read_write"), ("docs", "read_only")]
    assert code_of(child.apply_patch, "private", "x.txt", "--- /dev/null\n+++ b/x.txt\n@@ -0,0 +1 @@\n+x\n") == "unknown_alias"
    assert code_of(child.apply_patch, "docs", "x.txt", "--- /dev/null\n+++ b/x.txt\n@@ -0,0 +1 @@\n+x\n") == "read_only"


def test_an_invalid_manifest_leaves_the_lanes_working(gw):
    (gw.root.path / "workflow.json").write_text("{not json")
    desk = safe_lanes.AgentDesk(gw.root)
    assert desk.save("still.txt", b"ok").name == "still.txt"
    assert code_of(desk.grants) == "invalid_manifest"
    assert code_of(Grants, gw.root) == "invalid_manifest"
