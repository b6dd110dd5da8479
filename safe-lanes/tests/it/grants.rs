//! Folder grants: validation rules, manifest round-trips, concurrent writers, the request →
//! approve/deny flow, live revocation, and resolution inside a grant.

use std::os::fd::AsFd;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use safe_lanes::grants::{Action, Narrowing, Resolved};
use safe_lanes::input::RelPath;
use safe_lanes::{Access, Alias, Code, Grants, Session, Want};
use serde_json::{Value, json};

use crate::util::Fixture;

/// Resolve the strings an agent would send, made into typed inputs as an adapter makes them.
trait Resolve {
    fn at(&self, alias: &str, rel: &str, want: Want) -> safe_lanes::Result<Resolved>;
}

impl Resolve for Session {
    fn at(&self, alias: &str, rel: &str, want: Want) -> safe_lanes::Result<Resolved> {
        self.resolve(&Alias::new(alias)?, RelPath::new(rel)?, want)
    }
}

struct World {
    fx: Fixture,
    grants: Arc<Grants>,
}

impl std::ops::Deref for World {
    type Target = Fixture;
    fn deref(&self) -> &Fixture {
        &self.fx
    }
}

impl World {
    fn new() -> Self {
        let fx = Fixture::new();
        fx.layout(
            &["proj/src", "proj/docs", "proj2", "other", "sibling"],
            &[
                ("proj/src/main.rs", "fn main() {}"),
                ("sibling/secret", "secret"),
            ],
        );
        let grants = fx.grants();
        Self { fx, grants }
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.fx.path(rel)
    }

    fn manifest(&self) -> PathBuf {
        self.root.default_manifest()
    }

    fn add(
        &self,
        alias: &str,
        rel: &str,
        access: Access,
    ) -> safe_lanes::Result<safe_lanes::grants::Grant> {
        self.grants
            .add(alias, &self.p(rel), access, "test", "alice")
            .map(safe_lanes::grants::Recorded::into_inner)
    }
}

fn code<T: std::fmt::Debug>(r: safe_lanes::Result<T>) -> Code {
    r.unwrap_err().code()
}

#[test]
fn a_grant_is_stored_canonical_with_id_host_and_time() {
    let w = World::new();
    symlink(w.p("proj"), w.p("proj-link")).unwrap();
    let g = w
        .grants
        .add(
            "rts-source",
            &w.p("proj-link/src/../docs/.."),
            Access::ReadWrite,
            "work",
            "alice",
        )
        .unwrap();
    assert_eq!(g.path, w.p("proj"));
    assert!(g.id.starts_with("folder_") && g.id.len() > 10, "{}", g.id);
    assert_eq!(g.host.as_deref(), Some(w.grants.host()));
    assert!(humantime::parse_rfc3339(g.created_at.as_deref().unwrap()).is_ok());
    let listing = w.grants.list().unwrap();
    assert_eq!(listing.grants.len(), 1);
    assert_eq!(listing.grants[0].env, "WORKFLOW_FOLDER_RTS_SOURCE");
    assert!(listing.grants[0].available);
    let stored: Value = serde_json::from_slice(&std::fs::read(w.manifest()).unwrap()).unwrap();
    assert_eq!(stored["folder_access"][0]["alias"], "rts-source");
    assert_eq!(stored["folder_access"][0]["access"], "read_write");
}

#[test]
fn alias_rules_and_uniqueness() {
    let w = World::new();
    for bad in [
        "",
        "Caps",
        "-lead",
        "has space",
        "a/b",
        "é",
        &"x".repeat(49),
    ] {
        assert_eq!(
            code(w.add(bad, "proj", Access::ReadOnly)),
            Code::InvalidAlias,
            "{bad:?}"
        );
    }
    w.add("rts-source", "proj", Access::ReadOnly).unwrap();
    assert_eq!(
        code(w.add("rts-source", "proj2", Access::ReadOnly)),
        Code::AliasTaken
    );
    assert_eq!(
        code(w.add("rts_source", "proj2", Access::ReadOnly)),
        Code::AliasTaken,
        "same env key"
    );
    w.add("rts-source2", "proj2", Access::ReadOnly).unwrap();
}

#[test]
fn path_rules() {
    let w = World::new();
    let cases: Vec<(PathBuf, Code)> = vec![
        (PathBuf::from("relative/dir"), Code::RelativePath),
        (w.p("missing"), Code::NotFound),
        (w.p("proj/src/main.rs"), Code::NotFound),
        (PathBuf::from("/"), Code::StateRoot),
        (w.p("state"), Code::StateRoot),
        (w.p("state/.downloads"), Code::StateRoot),
        (w.tmp.path().to_path_buf(), Code::StateRoot),
    ];
    for (path, want) in cases {
        let got = w
            .grants
            .add("x", &path, Access::ReadOnly, "a reason", "alice");
        assert_eq!(code(got), want, "{}", path.display());
    }
    // Each refusal says how the folder meets the state root.
    for (path, why) in [
        (PathBuf::from("/"), "it grants `/`"),
        (
            w.tmp.path().to_path_buf(),
            "it covers the safe-lanes state root",
        ),
    ] {
        let refused = w
            .grants
            .add("x", &path, Access::ReadOnly, "a reason", "alice");
        let message = refused.unwrap_err().to_string();
        assert!(message.ends_with(why), "{message}");
    }
    let nul = Path::new(std::ffi::OsStr::new("/tmp/a\0b"));
    assert_eq!(
        code(
            w.grants
                .add("x", nul, Access::ReadOnly, "a reason", "alice")
        ),
        Code::NulByte
    );
    assert!(
        w.grants.list().unwrap().grants.is_empty(),
        "nothing was recorded"
    );
}

#[test]
fn a_grant_that_would_contain_the_manifest_is_refused() {
    let w = World::new();
    let manifest = w.p("proj/workflow.json");
    let grants = Grants::open(&w.root, Some(&manifest)).unwrap();
    let err = grants
        .add("proj", &w.p("proj"), Access::ReadWrite, "a reason", "alice")
        .unwrap_err();
    assert_eq!(err.code(), Code::StateRoot);
    assert!(
        err.to_string().ends_with("it contains the grants manifest"),
        "{err}"
    );
    // A manifest moved inside an existing grant is refused when opened.
    w.add("proj", "proj", Access::ReadOnly).unwrap();
    std::fs::copy(w.manifest(), &manifest).unwrap();
    assert_eq!(
        code(Grants::open(&w.root, Some(&manifest))),
        Code::InvalidManifest
    );
}

#[test]
fn overlapping_grants() {
    let w = World::new();
    w.add("proj", "proj", Access::ReadWrite).unwrap();
    assert_eq!(
        code(w.add("src", "proj/src", Access::ReadOnly)),
        Code::OverlappingGrant
    );
    assert_eq!(
        code(w.add("again", "proj", Access::ReadOnly)),
        Code::OverlappingGrant
    );
    // Read-write inside read-write, or inside read-only, can be enforced.
    w.add("src", "proj/src", Access::ReadWrite).unwrap();
    // …but narrowing the inner one to read-only inside the outer read-write cannot.
    assert_eq!(
        code(
            w.grants
                .set_access("src", Access::ReadOnly, "a reason", "alice")
        ),
        Code::OverlappingGrant
    );
    w.grants
        .set_access("proj", Access::ReadOnly, "narrow", "alice")
        .unwrap();
    w.grants
        .set_access("src", Access::ReadOnly, "a reason", "alice")
        .unwrap();
    // Widening the outer one again would now hold a read-only grant inside a read-write one.
    assert_eq!(
        code(
            w.grants
                .set_access("proj", Access::ReadWrite, "a reason", "alice")
        ),
        Code::OverlappingGrant
    );
}

/// The folder picker offers a folder exactly when granting it would succeed: its verdicts are
/// the checks granting makes, for either access.
#[test]
fn the_folder_picker_offers_exactly_what_granting_accepts() {
    let w = World::new();
    w.add("proj", "proj", Access::ReadWrite).unwrap();
    w.add("other", "other", Access::ReadOnly).unwrap();
    std::fs::write(w.p("a-file"), "x").unwrap();
    symlink(w.p("proj2"), w.p("a-link")).unwrap();
    let mut checked = 0;
    for dir in [
        w.tmp.path().to_path_buf(),
        w.p("proj"),
        w.root.path().to_path_buf(),
    ] {
        for access in [Access::ReadOnly, Access::ReadWrite] {
            let listing = w.grants.folders(&dir, access).unwrap();
            let names: Vec<_> = listing.folders.iter().map(|f| f.name.as_str()).collect();
            assert!(
                !names.contains(&"a-file") && !names.contains(&"a-link"),
                "{names:?}"
            );
            let here = (listing.path.clone(), listing.refused.clone());
            let rows = listing
                .folders
                .iter()
                .map(|f| (f.path.clone(), f.refused.clone()));
            for (path, refused) in rows.chain([here]) {
                let granted = w.grants.add("probe", &path, access, "a reason", "alice");
                assert_eq!(
                    refused.is_none(),
                    granted.is_ok(),
                    "{path:?} {access}: {refused:?} vs {granted:?}"
                );
                if granted.is_ok() {
                    w.grants.revoke("probe", "a reason", "alice").unwrap();
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 10, "{checked}");
    let top = w.grants.folders(Path::new("/"), Access::ReadOnly).unwrap();
    assert!(top.refused.is_some() && top.parent.is_none(), "{top:?}");
    assert_eq!(
        code(w.grants.folders(Path::new("relative"), Access::ReadOnly)),
        Code::RelativePath
    );
    assert_eq!(
        code(w.grants.folders(&w.p("a-file"), Access::ReadOnly)),
        Code::NotFound
    );
}

/// Tools and caches are grants under every grant rule, with their kind's access fixed: a
/// tool cannot be widened, a hand-edited tool that says read-write is not used, no two grants
/// set one variable, and an agent's request for a tool becomes exactly that tool.
#[test]
fn tools_and_caches_keep_their_kind() {
    use safe_lanes::grants::{Asked, Kind, Toolchain};
    let w = World::new();
    let vars = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let tool = Toolchain::parse(Kind::Tool, &vars(&["PROJ_HOME"]), Some("src")).unwrap();
    let added = w
        .grants
        .add_with("proj-tool", &w.p("proj"), None, tool, "a reason", "alice")
        .unwrap();
    assert_eq!(
        (added.toolchain.kind, added.access),
        (Kind::Tool, Access::ReadOnly)
    );
    assert_eq!(
        code(
            w.grants
                .set_access("proj-tool", Access::ReadWrite, "a reason", "alice")
        ),
        Code::InvalidArgument
    );
    let same_var = Toolchain::parse(Kind::Cache, &vars(&["proj_home"]), None).unwrap();
    let clash = w
        .grants
        .add_with("c", &w.p("other"), None, same_var, "a reason", "alice");
    assert_eq!(code(clash), Code::InvalidArgument);
    // The state root's rules hold for tools too.
    let home_tool = Toolchain::parse(Kind::Tool, &[], None).unwrap();
    let at_root = w
        .grants
        .add_with("t", w.tmp.path(), None, home_tool, "a reason", "alice");
    assert_eq!(code(at_root), Code::StateRoot);

    // An agent asks for a cache; approving it makes exactly that cache.
    let asked = Asked {
        access: Access::ReadWrite,
        path: Some(&w.p("proj2")),
        toolchain: Toolchain::parse(Kind::Cache, &vars(&["PROJ2_CACHE"]), None).unwrap(),
    };
    let r = w
        .grants
        .request_toolchain("proj2-cache", asked, "downloads", "agent")
        .unwrap();
    let proposal = w.grants.proposal(&r.id).unwrap();
    assert!(
        proposal
            .change
            .describe()
            .starts_with("new cache `proj2-cache` read_write")
    );
    let g = w.grants.approve(&r.id, None, "a reason", "alice").unwrap();
    assert_eq!(
        (g.toolchain.kind, g.toolchain.vars[0].as_str()),
        (Kind::Cache, "PROJ2_CACHE")
    );

    // A tool stored read-write (edited by hand) is not used.
    let text = std::fs::read_to_string(w.manifest()).unwrap();
    let mut doc: Value = serde_json::from_str(&text).unwrap();
    for g in doc["folder_access"].as_array_mut().unwrap() {
        if g["alias"] == "proj-tool" {
            g["access"] = json!("read_write");
        }
    }
    std::fs::write(w.manifest(), serde_json::to_vec(&doc).unwrap()).unwrap();
    let listing = w.grants.list().unwrap();
    let edited = listing
        .grants
        .iter()
        .find(|g| g.grant.alias.as_str() == "proj-tool")
        .unwrap();
    assert!(!edited.available, "{edited:?}");
    assert!(
        edited
            .unavailable
            .as_deref()
            .unwrap()
            .contains("a tool is read-only")
    );
}

#[test]
fn unknown_keys_are_kept_and_a_read_never_writes() {
    let w = World::new();
    let original = "{\n  \"name\": \"My workflow\",\n  \"steps\": [1, 2.5, {\"x\": null}],\n  \"zeta\": true\n}\n";
    std::fs::write(w.manifest(), original).unwrap();
    let before = std::fs::metadata(w.manifest()).unwrap().modified().unwrap();
    // Reads of a file without folder_access change nothing.
    w.grants.list().unwrap();
    w.grants.session().snapshot().unwrap();
    Grants::open(&w.root, None).unwrap();
    assert_eq!(std::fs::read_to_string(w.manifest()).unwrap(), original);
    assert_eq!(
        std::fs::metadata(w.manifest()).unwrap().modified().unwrap(),
        before
    );
    // A write keeps every other key, in its place.
    w.add("proj", "proj", Access::ReadOnly).unwrap();
    let text = std::fs::read_to_string(w.manifest()).unwrap();
    let after: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(after["name"], "My workflow");
    assert_eq!(after["steps"], json!([1, 2.5, {"x": null}]));
    assert_eq!(after["zeta"], true);
    let keys: Vec<&str> = after
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "name",
            "steps",
            "zeta",
            "folder_access",
            "folder_access_changelog"
        ]
    );
    // Round trip: removing the grant gives back the other keys exactly.
    w.grants.revoke("proj", "done", "alice").unwrap();
    let again: Value = serde_json::from_slice(&std::fs::read(w.manifest()).unwrap()).unwrap();
    let mut expected: Value = serde_json::from_str(original).unwrap();
    expected["folder_access"] = json!([]);
    expected["folder_access_changelog"] = again["folder_access_changelog"].clone();
    assert_eq!(again, expected);
}

#[test]
fn an_invalid_manifest_is_refused_and_left_untouched() {
    let w = World::new();
    let grant = |alias: &str, path: &str| json!({"id": format!("folder_{alias}"), "alias": alias, "path": path, "access": "read_only"});
    let p = w.p("proj").display().to_string();
    let q = w.p("proj2").display().to_string();
    let cases: Vec<(&str, String)> = vec![
        ("not json", "{ nope".to_owned()),
        ("not an object", "[1, 2]".to_owned()),
        (
            "bad alias",
            json!({"folder_access": [grant("Bad Alias", &p)]}).to_string(),
        ),
        (
            "root path",
            json!({"folder_access": [grant("root", "/")]}).to_string(),
        ),
        (
            "relative path",
            json!({"folder_access": [grant("rel", "rel/dir")]}).to_string(),
        ),
        (
            "duplicate",
            json!({"folder_access": [grant("a", &p), grant("a", &q)]}).to_string(),
        ),
        (
            "env collision",
            json!({"folder_access": [grant("a-b", &p), grant("a_b", &q)]}).to_string(),
        ),
        (
            "bad access",
            json!({"folder_access": [{"id": "x", "alias": "a", "path": p, "access": "all"}]})
                .to_string(),
        ),
        (
            "folder_access not a list",
            json!({"folder_access": {"a": 1}}).to_string(),
        ),
    ];
    for (what, text) in cases {
        std::fs::write(w.manifest(), &text).unwrap();
        assert_eq!(code(w.grants.list()), Code::InvalidManifest, "{what}");
        assert_eq!(
            code(w.add("new", "other", Access::ReadOnly)),
            Code::InvalidManifest,
            "{what}"
        );
        assert_eq!(
            code(w.grants.session().snapshot()),
            Code::InvalidManifest,
            "{what}"
        );
        assert_eq!(
            std::fs::read_to_string(w.manifest()).unwrap(),
            text,
            "{what}: untouched"
        );
    }
}

#[test]
fn concurrent_writers_never_lose_a_change() {
    let w = World::new();
    for i in 0..40 {
        std::fs::create_dir(w.p(&format!("d{i}"))).unwrap();
    }
    std::thread::scope(|s| {
        for t in 0..2 {
            let w = &w;
            s.spawn(move || {
                // A separate handle per writer, as separate processes would have.
                let grants = Grants::open(&w.root, None).unwrap();
                for i in (t..40).step_by(2) {
                    grants
                        .add(
                            &format!("d{i}"),
                            &w.p(&format!("d{i}")),
                            Access::ReadOnly,
                            "a reason",
                            "t",
                        )
                        .unwrap();
                }
            });
        }
    });
    let listing = w.grants.list().unwrap();
    assert_eq!(listing.grants.len(), 40);
    assert_eq!(w.grants.changelog().unwrap().len(), 40);
}

#[test]
fn a_request_is_inert_until_approved() {
    let w = World::new();
    let session = w.grants.session();
    let r = w
        .grants
        .request(
            "docs",
            Access::ReadOnly,
            "read the docs",
            Some(&w.p("proj/docs")),
            "agent",
        )
        .unwrap();
    assert!(r.id.starts_with("req_"));
    assert_eq!(
        code(session.at("docs", ".", Want::Read)),
        Code::UnknownAlias
    );
    assert!(w.grants.list().unwrap().grants.is_empty());
    assert_eq!(w.grants.list().unwrap().requests.len(), 1);
    // A second request for the alias replaces the pending one, under a new id.
    let r2 = w
        .grants
        .request("docs", Access::ReadWrite, "edit the docs", None, "agent")
        .unwrap();
    assert_ne!(r2.id, r.id);
    let pending = w.grants.list().unwrap().requests;
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].access, Access::ReadWrite);
    assert_eq!(pending[0].reason, "edit the docs");
    assert_eq!(pending[0].path, None);
    // The first version is gone; without a proposed path, approval needs the human's path.
    assert_eq!(
        code(
            w.grants
                .approve(&r.id, Some(&w.p("proj/docs")), "a reason", "alice")
        ),
        Code::NotFound
    );
    assert_eq!(
        code(w.grants.approve(&r2.id, None, "a reason", "alice")),
        Code::InvalidArgument
    );
    let g = w
        .grants
        .approve(&r2.id, Some(&w.p("proj/docs")), "ok", "alice")
        .unwrap();
    assert_eq!((g.alias.as_str(), g.access), ("docs", Access::ReadWrite));
    assert!(w.grants.list().unwrap().requests.is_empty());
    assert!(
        session.at("docs", ".", Want::Write).is_ok(),
        "live session sees it"
    );
}

#[test]
fn approval_runs_the_full_validation_and_denial_records_why() {
    let w = World::new();
    let bad = w
        .grants
        .request(
            "everything",
            Access::ReadWrite,
            "pls",
            Some(Path::new("/")),
            "agent",
        )
        .unwrap();
    assert_eq!(
        code(w.grants.approve(&bad.id, None, "a reason", "alice")),
        Code::StateRoot
    );
    assert_eq!(
        w.grants.list().unwrap().requests.len(),
        1,
        "still pending after a failed approval"
    );
    w.grants.deny(&bad.id, "no way", "alice").unwrap();
    assert!(w.grants.list().unwrap().requests.is_empty());
    assert_eq!(
        code(w.grants.deny(&bad.id, "again", "alice")),
        Code::NotFound
    );
    let log = w.grants.changelog().unwrap();
    let deny = log.iter().find(|c| c.action == Action::Deny).unwrap();
    assert_eq!(
        (deny.actor.as_str(), deny.reason.as_str()),
        ("alice", "no way")
    );
    // Agent-side input is checked too.
    assert_eq!(
        code(w.grants.request("Bad", Access::ReadOnly, "", None, "agent")),
        Code::InvalidAlias
    );
    assert_eq!(
        code(
            w.grants
                .request("ok", Access::ReadOnly, "", Some(Path::new("rel")), "agent")
        ),
        Code::RelativePath
    );
}

#[test]
fn a_request_to_widen_an_existing_grant_changes_its_access_on_approval() {
    let w = World::new();
    w.add("proj", "proj", Access::ReadOnly).unwrap();
    let r = w
        .grants
        .request("proj", Access::ReadWrite, "need to edit", None, "agent")
        .unwrap();
    let session = w.grants.session();
    assert_eq!(code(session.at("proj", "src", Want::Write)), Code::ReadOnly);
    w.grants.approve(&r.id, None, "fine", "alice").unwrap();
    assert!(session.at("proj", "src", Want::Write).is_ok());
}

#[test]
fn every_change_is_in_the_changelog_and_the_audit_chain() {
    let w = World::new();
    w.add("proj", "proj", Access::ReadOnly).unwrap();
    w.grants
        .set_access("proj", Access::ReadWrite, "widen", "bob")
        .unwrap();
    let r = w
        .grants
        .request(
            "other",
            Access::ReadOnly,
            "look",
            Some(&w.p("other")),
            "agent",
        )
        .unwrap();
    w.grants.approve(&r.id, None, "yes", "alice").unwrap();
    let r = w
        .grants
        .request(
            "sib",
            Access::ReadOnly,
            "peek",
            Some(&w.p("sibling")),
            "agent",
        )
        .unwrap();
    w.grants.deny(&r.id, "no", "alice").unwrap();
    w.grants.revoke("proj", "finished", "bob").unwrap();
    let actions: Vec<(Action, String, String)> = w
        .grants
        .changelog()
        .unwrap()
        .into_iter()
        .map(|c| (c.action, c.actor, c.reason))
        .collect();
    assert_eq!(
        actions,
        [
            (Action::Add, "alice".into(), "test".into()),
            (Action::SetAccess, "bob".into(), "widen".into()),
            (Action::Request, "agent".into(), "look".into()),
            (Action::Approve, "alice".into(), "yes".into()),
            (Action::Request, "agent".into(), "peek".into()),
            (Action::Deny, "alice".into(), "no".into()),
            (Action::Revoke, "bob".into(), "finished".into()),
        ]
    );
    let names: Vec<String> = w
        .grants
        .list()
        .unwrap()
        .grants
        .iter()
        .map(|g| g.grant.alias.to_string())
        .collect();
    assert_eq!(
        names,
        ["other"],
        "revoke removes the grant from folder_access"
    );
    let audit = std::fs::read_to_string(w.root.path().join("audit.jsonl")).unwrap();
    let events: Vec<String> = audit
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["event"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        events,
        [
            "grant.add",
            "grant.set_access",
            "grant.request",
            "grant.approve",
            "grant.request",
            "grant.deny",
            "grant.revoke"
        ]
    );
    assert!(w.root.audit().verify().unwrap().is_intact());
}

#[test]
fn a_live_session_sees_a_revoke_on_its_next_operation() {
    let w = World::new();
    w.add("proj", "proj", Access::ReadWrite).unwrap();
    let session = w.grants.session();
    let child = session.child(Narrowing::none());
    assert!(session.at("proj", "src/main.rs", Want::Write).is_ok());
    assert!(child.at("proj", "src/main.rs", Want::Read).is_ok());
    // The human revokes through another handle (as the CLI would, in another process).
    Grants::open(&w.root, None)
        .unwrap()
        .revoke("proj", "stop", "alice")
        .unwrap();
    assert_eq!(
        code(session.at("proj", "src/main.rs", Want::Read)),
        Code::Revoked
    );
    assert_eq!(
        code(child.at("proj", "src/main.rs", Want::Read)),
        Code::Revoked
    );
    // A session created afterwards also says revoked, not unknown.
    assert_eq!(
        code(w.grants.session().at("proj", ".", Want::Read)),
        Code::Revoked
    );
    // Granting the alias again brings it back.
    w.add("proj", "proj", Access::ReadOnly).unwrap();
    assert!(session.at("proj", ".", Want::Read).is_ok());
}

#[test]
fn narrowing_applies_live_and_children_only_narrow() {
    let w = World::new();
    w.add("proj", "proj", Access::ReadWrite).unwrap();
    w.add("other", "other", Access::ReadWrite).unwrap();
    let session = w.grants.session();
    let proj = Alias::new("proj").unwrap();
    let child = session.child(
        Narrowing::none()
            .only([proj.clone()])
            .at_most(proj.clone(), Access::ReadOnly),
    );
    assert_eq!(code(child.at("other", ".", Want::Read)), Code::UnknownAlias);
    assert_eq!(code(child.at("proj", ".", Want::Write)), Code::ReadOnly);
    // A grandchild cannot widen back.
    let grandchild = child.child(Narrowing::none().at_most(proj, Access::ReadWrite));
    assert_eq!(
        code(grandchild.at("proj", ".", Want::Write)),
        Code::ReadOnly
    );
    // The human narrows: the parent session loses write on its next operation.
    assert!(session.at("proj", ".", Want::Write).is_ok());
    w.grants
        .set_access("proj", Access::ReadOnly, "careful", "alice")
        .unwrap();
    assert_eq!(code(session.at("proj", ".", Want::Write)), Code::ReadOnly);
    let snap = session.snapshot().unwrap();
    let envs: Vec<&str> = snap.available().map(|g| g.env.as_str()).collect();
    assert_eq!(envs, ["WORKFLOW_FOLDER_PROJ", "WORKFLOW_FOLDER_OTHER"]);
}

fn alias(text: &str) -> Alias {
    Alias::new(text).unwrap()
}

#[test]
fn a_narrowing_spec_names_the_grants_and_caps_their_access() {
    let (site, docs) = (alias("site"), alias("docs"));
    let ro = Access::ReadOnly;
    let rw = Access::ReadWrite;
    for (spec, expected) in [
        ("site", Narrowing::none().only([site.clone()])),
        (
            "site,docs:read_only",
            Narrowing::none()
                .only([site.clone(), docs.clone()])
                .at_most(docs.clone(), ro),
        ),
        (
            " site , docs : read_only ",
            Narrowing::none()
                .only([site.clone(), docs.clone()])
                .at_most(docs.clone(), ro),
        ),
        (
            "docs:read_write",
            Narrowing::none()
                .only([docs.clone()])
                .at_most(docs.clone(), rw),
        ),
        // Named twice: the lower cap holds, in either order.
        (
            "docs:read_write,docs:read_only",
            Narrowing::none()
                .only([docs.clone()])
                .at_most(docs.clone(), ro),
        ),
        (
            "docs:read_only,docs",
            Narrowing::none()
                .only([docs.clone()])
                .at_most(docs.clone(), ro),
        ),
    ] {
        assert_eq!(Narrowing::parse(spec).unwrap(), expected, "{spec:?}");
        assert_eq!(spec.parse::<Narrowing>().unwrap(), expected, "{spec:?}");
    }
}

#[test]
fn a_hostile_narrowing_spec_is_refused_with_a_clear_code() {
    let long = "a".repeat(49);
    let many = "x,".repeat(100_000);
    for (spec, expected) in [
        ("", Code::InvalidArgument),
        ("   ", Code::InvalidArgument),
        ("docs:", Code::InvalidArgument),
        ("docs:READ_ONLY", Code::InvalidArgument),
        ("docs:read_only:read_write", Code::InvalidArgument),
        ("docs:write", Code::InvalidArgument),
        ("docs:read_only\0", Code::InvalidArgument),
        ("docs:read_\nonly", Code::InvalidArgument),
        ("docs:\u{202e}read_only", Code::InvalidArgument),
        (",", Code::InvalidAlias),
        ("site,", Code::InvalidAlias),
        ("site,,docs", Code::InvalidAlias),
        (":read_only", Code::InvalidAlias),
        ("Docs", Code::InvalidAlias),
        ("../docs", Code::InvalidAlias),
        ("/etc", Code::InvalidAlias),
        ("do cs", Code::InvalidAlias),
        ("docs;rm -rf /", Code::InvalidAlias),
        ("$(id)", Code::InvalidAlias),
        ("docs\0", Code::InvalidAlias),
        ("dоcs", Code::InvalidAlias),
        ("*", Code::InvalidAlias),
        (long.as_str(), Code::InvalidAlias),
        (many.as_str(), Code::InvalidAlias),
    ] {
        let shown: String = spec.chars().take(40).collect();
        let error = Narrowing::parse(spec).expect_err(&shown);
        assert_eq!(error.code(), expected, "{shown:?}: {error}");
        assert!(!error.to_string().contains('\n'), "{error}");
    }
}

#[test]
fn a_narrowed_session_lists_only_its_grants_with_its_access() {
    let w = World::new();
    w.add("proj", "proj", Access::ReadWrite).unwrap();
    w.add("other", "other", Access::ReadWrite).unwrap();
    w.add("docs", "proj2", Access::ReadOnly).unwrap();
    let request = w
        .grants
        .request("more", Access::ReadOnly, "wanted", None, "agent")
        .unwrap();
    let session = w.grants.session();
    let listed = |s: &Session| -> Vec<(String, Access)> {
        s.list()
            .unwrap()
            .grants
            .into_iter()
            .map(|g| (g.grant.alias.to_string(), g.grant.access))
            .collect()
    };
    let all = listed(&session);
    assert_eq!(all.len(), 3, "{all:?}");
    let child = session.child("proj:read_only,docs:read_write,absent".parse().unwrap());
    let seen = listed(&child);
    assert_eq!(
        seen,
        [
            ("proj".to_owned(), Access::ReadOnly),
            ("docs".to_owned(), Access::ReadOnly)
        ]
    );
    // The listing and the session agree.
    assert_eq!(code(child.at("proj", ".", Want::Write)), Code::ReadOnly);
    assert_eq!(code(child.at("other", ".", Want::Read)), Code::UnknownAlias);
    let requests = child.list().unwrap().requests;
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].id, request.id);
    // A grandchild sees the intersection; the human's revoke reaches the listing at once.
    let grandchild = child.child("docs,other".parse().unwrap());
    assert_eq!(listed(&grandchild), [("docs".to_owned(), Access::ReadOnly)]);
    w.grants.revoke("docs", "stop", "alice").unwrap();
    assert!(listed(&grandchild).is_empty());
    assert_eq!(listed(&child), [("proj".to_owned(), Access::ReadOnly)]);
}

#[test]
fn a_grant_from_another_host_is_unavailable() {
    let w = World::new();
    w.add("proj", "proj", Access::ReadWrite).unwrap();
    let mut doc = stored(&w);
    doc["folder_access"][0]["host"] = json!("elsewhere");
    doc["folder_access"][0]["machine"] = json!("f".repeat(32));
    std::fs::write(w.manifest(), doc.to_string()).unwrap();
    let listing = w.grants.list().unwrap();
    assert!(!listing.grants[0].available);
    assert!(
        listing.grants[0]
            .unavailable
            .as_deref()
            .unwrap()
            .contains("elsewhere")
    );
    assert_eq!(
        code(w.grants.session().at("proj", ".", Want::Read)),
        Code::UnavailableOnHost
    );
    assert_eq!(
        w.grants.session().snapshot().unwrap().available().count(),
        0
    );
}

#[test]
fn a_moved_folder_is_unavailable_in_the_listing_and_refused_by_an_open_session() {
    let w = World::new();
    w.add("proj", "proj", Access::ReadWrite).unwrap();
    let session = w.grants.session();
    assert!(session.at("proj", ".", Want::Write).is_ok());
    // Moved away while the session holds its folder: both say it is gone, with a grant-level
    // refusal (not an `io` error), and the session never follows the folder to where it went.
    std::fs::rename(w.p("proj"), w.p("moved")).unwrap();
    let listing = w.grants.list().unwrap();
    assert!(!listing.grants[0].available, "{listing:?}");
    assert_eq!(code(session.at("proj", ".", Want::Write)), Code::NotFound);
    assert_eq!(session.snapshot().unwrap().available().count(), 0);
    // Another folder now at the path: the listing and the same session agree again.
    std::fs::create_dir(w.p("proj")).unwrap();
    assert!(w.grants.list().unwrap().grants[0].available);
    let resolved = session.at("proj", ".", Want::Write).unwrap();
    assert_eq!(
        safe_lanes::beneath::identity(resolved.fd.as_fd()).unwrap(),
        safe_lanes::beneath::identity(
            rustix::fs::open(
                w.p("proj").as_path(),
                rustix::fs::OFlags::PATH,
                rustix::fs::Mode::empty()
            )
            .unwrap()
            .as_fd()
        )
        .unwrap(),
        "the session uses the folder now at the path, not the moved one"
    );
}

#[test]
pub(crate) fn resolution_inside_a_grant_refuses_every_escape() {
    let w = World::new();
    w.add("proj", "proj", Access::ReadWrite).unwrap();
    w.add("docs-ro", "other", Access::ReadOnly).unwrap();
    symlink(w.p("sibling"), w.p("proj/link-out")).unwrap();
    symlink("src", w.p("proj/link-in")).unwrap();
    symlink("../sibling/secret", w.p("proj/secret-link")).unwrap();
    let session = w.grants.session();
    let ok = [
        "src/main.rs",
        "src/../src/main.rs",
        "link-in/main.rs",
        ".",
        "src",
    ];
    for rel in ok {
        let r = session.at("proj", rel, Want::Write).unwrap();
        assert!(r.path.starts_with(w.p("proj")), "{rel}");
    }
    let refused: &[(&str, &str, Want, Code)] = &[
        ("proj", "../sibling/secret", Want::Read, Code::Traversal),
        ("proj", "..", Want::Read, Code::Traversal),
        ("proj", "src/../../sibling", Want::Read, Code::Traversal),
        ("proj", "/etc/passwd", Want::Read, Code::AbsolutePath),
        ("proj", "link-out/secret", Want::Read, Code::SymlinkEscape),
        ("proj", "secret-link", Want::Read, Code::SymlinkEscape),
        ("proj", "src/missing", Want::Read, Code::NotFound),
        ("proj", "src\0/../x", Want::Read, Code::NulByte),
        ("docs-ro", ".", Want::Write, Code::ReadOnly),
        ("nope", ".", Want::Read, Code::UnknownAlias),
        ("Nope!", ".", Want::Read, Code::InvalidAlias),
        ("proj2", ".", Want::Read, Code::UnknownAlias),
    ];
    for &(alias, rel, want, expected) in refused {
        assert_eq!(
            code(session.at(alias, rel, want)),
            expected,
            "{alias} {rel:?}"
        );
    }
}

#[test]
fn a_folder_whose_path_is_not_utf8_cannot_be_stored() {
    use std::os::unix::ffi::OsStrExt;
    let w = World::new();
    let odd = w.tmp.path().join(std::ffi::OsStr::from_bytes(b"caf\xe9"));
    std::fs::create_dir(&odd).unwrap();
    assert_eq!(
        code(
            w.grants
                .add("odd", &odd, Access::ReadOnly, "a reason", "alice")
        ),
        Code::InvalidManifest
    );
    let proposal = w
        .grants
        .request("odd", Access::ReadOnly, "", Some(&odd), "agent");
    assert_eq!(code(proposal), Code::InvalidManifest);
    assert!(w.grants.list().unwrap().grants.is_empty());
}

#[test]
fn an_agent_cannot_flood_the_manifest_with_requests() {
    let w = World::new();
    let long = format!("/{}", "a".repeat(5000));
    assert_eq!(
        code(
            w.grants
                .request("x", Access::ReadOnly, "", Some(Path::new(&long)), "agent")
        ),
        Code::InvalidArgument
    );
    for i in 0..safe_lanes::grants::MAX_PENDING_REQUESTS {
        w.grants
            .request(&format!("r{i}"), Access::ReadOnly, "", None, "agent")
            .unwrap();
    }
    assert_eq!(
        code(
            w.grants
                .request("one-more", Access::ReadOnly, "", None, "agent")
        ),
        Code::TooLarge
    );
    // Updating a pending request is still possible.
    w.grants
        .request("r0", Access::ReadWrite, "changed", None, "agent")
        .unwrap();
    let reason = "x".repeat(5000);
    let r = w
        .grants
        .request("r1", Access::ReadOnly, &reason, None, "agent")
        .unwrap();
    assert_eq!(
        r.reason.chars().count(),
        safe_lanes::grants::MAX_REASON_CHARS
    );
}

#[test]
fn a_request_updated_after_the_human_read_it_cannot_be_approved_by_the_old_id() {
    let w = World::new();
    let seen = w
        .grants
        .request(
            "docs",
            Access::ReadOnly,
            "read",
            Some(&w.p("proj/docs")),
            "agent",
        )
        .unwrap();
    let changed = w
        .grants
        .request(
            "docs",
            Access::ReadWrite,
            "read",
            Some(&w.p("other")),
            "agent",
        )
        .unwrap();
    assert_ne!(seen.id, changed.id);
    assert_eq!(
        code(w.grants.approve(&seen.id, None, "a reason", "alice")),
        Code::NotFound
    );
    assert!(w.grants.list().unwrap().grants.is_empty());
    assert_eq!(
        w.grants.list().unwrap().requests.len(),
        1,
        "one pending version"
    );
}

#[test]
fn a_proposed_path_that_is_not_canonical_needs_an_explicit_path() {
    let w = World::new();
    // The agent plants a link (inside a folder it can write) that looks like a project folder.
    symlink(w.p("sibling"), w.p("proj/docs-link")).unwrap();
    let r = w
        .grants
        .request(
            "docs",
            Access::ReadOnly,
            "",
            Some(&w.p("proj/docs-link")),
            "agent",
        )
        .unwrap();
    assert_eq!(
        code(w.grants.approve(&r.id, None, "a reason", "alice")),
        Code::SymlinkEscape
    );
    assert!(w.grants.list().unwrap().grants.is_empty());
    // A `..` is refused when the request is filed.
    assert_eq!(
        code(w.grants.request(
            "docs",
            Access::ReadOnly,
            "",
            Some(&w.p("proj/src/../docs")),
            "agent",
        )),
        Code::Traversal
    );
    // The human names the folder: granted as named.
    let g = w
        .grants
        .approve(&r.id, Some(&w.p("proj/docs")), "a reason", "alice")
        .unwrap();
    assert_eq!(g.path, w.p("proj/docs"));
}

#[test]
fn a_request_for_an_existing_alias_cannot_move_it() {
    let w = World::new();
    w.add("proj", "proj", Access::ReadOnly).unwrap();
    // Regression: a request naming another folder was filed, and its folder silently put
    // aside; a request for the access the grant has was filed to change nothing. Both are
    // refused to the agent, saying what to ask instead.
    let moved = w
        .grants
        .request("proj", Access::ReadWrite, "", Some(&w.p("other")), "agent");
    let Err(e) = moved else { panic!("filed") };
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.to_string().contains("a request cannot move a grant"),
        "{e}"
    );
    let same = w
        .grants
        .request("proj", Access::ReadOnly, "", None, "agent");
    let Err(e) = same else { panic!("filed") };
    assert!(e.to_string().contains("would change nothing"), "{e}");
    assert!(w.grants.proposals().unwrap().is_empty(), "nothing filed");
    // The grant's own folder, spelled another way, is no move.
    let spelled = std::path::PathBuf::from(format!("{}//", w.p("proj").display()));
    w.grants
        .request("proj", Access::ReadWrite, "", Some(&spelled), "agent")
        .unwrap();
    let r = w
        .grants
        .request("proj", Access::ReadWrite, "", None, "agent")
        .unwrap();
    assert_eq!(
        code(
            w.grants
                .approve(&r.id, Some(&w.p("other")), "a reason", "alice")
        ),
        Code::AliasTaken
    );
    let listed = w.grants.list().unwrap();
    assert_eq!(
        (listed.grants[0].grant.access, &listed.grants[0].grant.path),
        (Access::ReadOnly, &w.p("proj"))
    );
    // Raising an existing grant's access needs a reason.
    assert_eq!(
        code(w.grants.approve(&r.id, Some(&w.p("proj")), " ", "alice")),
        Code::InvalidArgument
    );
    let g = w
        .grants
        .approve(&r.id, Some(&w.p("proj")), "the agent edits it", "alice")
        .unwrap();
    assert_eq!(g.access, Access::ReadWrite);
}

#[test]
fn a_grant_edited_into_the_manifest_that_breaks_a_rule_is_never_used() {
    let w = World::new();
    let host = w.grants.host().to_owned();
    let grant = |alias: &str, path: &Path, access: &str| json!({"id": format!("folder_{alias}"), "alias": alias, "path": path, "access": access, "host": host});
    let manifest = json!({"folder_access": [
        grant("state", &w.tmp.path().join("state"), "read_write"),
        grant("parent", w.tmp.path(), "read_only"),
        grant("proj", &w.p("proj"), "read_write"),
        grant("src", &w.p("proj/src"), "read_only"),
        grant("ok", &w.p("other"), "read_only"),
    ]});
    std::fs::write(w.manifest(), manifest.to_string()).unwrap();
    let listing = w.grants.list().unwrap();
    let available: Vec<(&str, bool)> = listing
        .grants
        .iter()
        .map(|g| (g.grant.alias.as_str(), g.available))
        .collect();
    assert_eq!(
        available,
        [
            ("state", false),
            ("parent", false),
            ("proj", true),
            ("src", false),
            ("ok", true)
        ]
    );
    let session = w.grants.session();
    for alias in ["state", "parent", "src"] {
        assert_eq!(
            code(session.at(alias, ".", Want::Read)),
            Code::InvalidManifest,
            "{alias}"
        );
    }
    let snapshot = session.snapshot().unwrap();
    let usable: Vec<&str> = snapshot.available().map(|g| g.alias.as_str()).collect();
    assert_eq!(usable, ["proj", "ok"]);
}

/// Regression (found by the `manifest` fuzz target): a number that does not fit 64 bits drifted
/// a little on every rewrite, because floats were not parsed exactly.
#[test]
fn numbers_in_other_keys_do_not_drift_across_rewrites() {
    let w = World::new();
    std::fs::write(
        w.manifest(),
        r#"{"n":[111111111111111111111111111111111111111, 0.1, 1e300, -2.5e-308]}"#,
    )
    .unwrap();
    w.add("a", "proj", Access::ReadOnly).unwrap();
    let first: Value = serde_json::from_slice(&std::fs::read(w.manifest()).unwrap()).unwrap();
    w.add("b", "other", Access::ReadOnly).unwrap();
    let second: Value = serde_json::from_slice(&std::fs::read(w.manifest()).unwrap()).unwrap();
    assert_eq!(first["n"], second["n"]);
    assert_eq!(second["n"][1], json!(0.1));
}

#[test]
fn a_proposed_path_must_be_storable_and_normalized() {
    let w = World::new();
    let control = format!("{}/a\u{1}b", w.tmp.path().display());
    assert_eq!(
        code(w.grants.request(
            "x",
            Access::ReadOnly,
            "",
            Some(Path::new(&control)),
            "agent"
        )),
        Code::InvalidManifest
    );
    assert_eq!(
        code(w.grants.request(
            "x",
            Access::ReadOnly,
            "",
            Some(&w.p("proj/../other")),
            "agent"
        )),
        Code::Traversal
    );
    // Refused requests are audited too.
    let log = std::fs::read_to_string(w.root.path().join("audit.jsonl")).unwrap();
    assert_eq!(
        log.lines()
            .filter(|l| l.contains("grant.request.refused"))
            .count(),
        2
    );
}

#[test]
fn re_filing_does_not_grow_the_manifest_and_the_human_can_deny_by_alias() {
    let w = World::new();
    // Past the point where the manifest moves its older changelog entries out, twice over.
    let filings = 1_200;
    for i in 0..filings {
        w.grants
            .request("docs", Access::ReadOnly, &format!("try {i}"), None, "agent")
            .unwrap();
    }
    let history = w.grants.changelog().unwrap();
    let requests: Vec<&str> = history
        .iter()
        .filter(|c| c.action == Action::Request)
        .map(|c| c.reason.as_str())
        .collect();
    let expected: Vec<String> = (0..filings).map(|i| format!("try {i}")).collect();
    assert_eq!(
        requests, expected,
        "one entry per filing, in order, none twice"
    );
    let records = std::fs::read_to_string(w.root.audit().path())
        .unwrap()
        .lines()
        .filter(|l| l.contains(r#""event":"grant.request""#))
        .count();
    assert_eq!(records, filings, "one record per filing");
    let manifest: Value = serde_json::from_slice(&std::fs::read(w.manifest()).unwrap()).unwrap();
    let kept = manifest["folder_access_changelog"]
        .as_array()
        .unwrap()
        .len();
    assert!(
        kept <= 512,
        "the manifest keeps at most 512 entries: {kept}"
    );
    let archive = w.manifest().with_file_name("workflow.changelog.jsonl");
    let archived = std::fs::read_to_string(&archive).unwrap().lines().count();
    assert_eq!(archived + kept, filings, "the rest are archived beside it");
    let denied = w.grants.deny_alias("docs", "stop asking", "alice").unwrap();
    assert_eq!(denied.reason, format!("try {}", filings - 1));
    assert!(w.grants.list().unwrap().requests.is_empty());
    assert_eq!(
        code(w.grants.deny_alias("docs", "a reason", "alice")),
        Code::NotFound
    );
}

/// Only request entries move to the archive: a revoke and the human's decisions stay in the
/// manifest, where they are read from, however many filings come after them.
#[test]
fn what_was_revoked_and_decided_survives_a_flood_of_filings() {
    let w = World::new();
    w.add("proj", "proj", Access::ReadWrite).unwrap();
    w.grants.revoke("proj", "stop", "alice").unwrap();
    let asked = w
        .grants
        .request("other", Access::ReadOnly, "once", None, "agent")
        .unwrap()
        .into_inner();
    w.grants.deny(&asked.id, "no", "alice").unwrap();
    for i in 0..700 {
        w.grants
            .request("docs", Access::ReadOnly, &format!("try {i}"), None, "agent")
            .unwrap();
    }
    let manifest: Value = serde_json::from_slice(&std::fs::read(w.manifest()).unwrap()).unwrap();
    let kept = manifest["folder_access_changelog"].as_array().unwrap();
    assert!(kept.len() <= 520, "{}", kept.len());
    assert_eq!(
        code(w.grants.session().at("proj", ".", Want::Read)),
        Code::Revoked
    );
    let outcomes = w.grants.list().unwrap().outcomes;
    assert!(
        outcomes.iter().any(|o| o.id == asked.id),
        "the denial is still told to the requester"
    );
    let history = w.grants.changelog().unwrap();
    assert_eq!(history.len(), 1 + 1 + 1 + 1 + 700, "every entry once");
    let times: Vec<&str> = history.iter().map(|c| c.at.as_str()).collect();
    assert!(
        times.windows(2).all(|t| t[0] <= t[1]),
        "in the order of their times"
    );
}

/// A crash between appending to the archive and writing the manifest leaves entries in both:
/// the history shows each once, and the next rotation does not archive them again.
#[test]
fn entries_in_both_the_archive_and_the_manifest_count_once() {
    let w = World::new();
    for i in 0..600 {
        w.grants
            .request("docs", Access::ReadOnly, &format!("try {i}"), None, "agent")
            .unwrap();
    }
    let archive = w.manifest().with_file_name("workflow.changelog.jsonl");
    let archived: Vec<String> = std::fs::read_to_string(&archive)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    // As if the manifest before the rotation were still in place: put the archived entries
    // back in front of its changelog, and cut the archive's last line in half.
    let mut manifest: Value =
        serde_json::from_slice(&std::fs::read(w.manifest()).unwrap()).unwrap();
    let mut changelog: Vec<Value> = archived
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    changelog.extend(
        manifest["folder_access_changelog"]
            .as_array()
            .unwrap()
            .clone(),
    );
    manifest["folder_access_changelog"] = Value::Array(changelog);
    std::fs::write(w.manifest(), serde_json::to_vec(&manifest).unwrap()).unwrap();
    let reasons = |w: &World| -> Vec<String> {
        w.grants
            .changelog()
            .unwrap()
            .into_iter()
            .filter(|c| c.action == Action::Request)
            .map(|c| c.reason)
            .collect()
    };
    let expected: Vec<String> = (0..600).map(|i| format!("try {i}")).collect();
    assert_eq!(reasons(&w), expected);
    let last = archived.last().unwrap();
    let cut = archived.join("\n").len() - last.len() / 2;
    let text = std::fs::read(&archive).unwrap();
    std::fs::write(&archive, &text[..cut]).unwrap();
    for i in 600..1_000 {
        w.grants
            .request("docs", Access::ReadOnly, &format!("try {i}"), None, "agent")
            .unwrap();
    }
    let expected: Vec<String> = (0..1_000).map(|i| format!("try {i}")).collect();
    assert_eq!(reasons(&w), expected, "each once, in order");
}

#[test]
fn stored_paths_with_dot_components_are_refused() {
    let w = World::new();
    let host = w.grants.host().to_owned();
    let dotted = format!("{}/proj/..", w.tmp.path().display());
    let manifest = json!({"folder_access": [
        {"id": "folder_x", "alias": "x", "path": dotted, "access": "read_only", "host": host}
    ]});
    std::fs::write(w.manifest(), manifest.to_string()).unwrap();
    assert_eq!(code(w.grants.list()), Code::InvalidManifest);
    assert_eq!(code(w.grants.session().snapshot()), Code::InvalidManifest);
}

/// A value of every JSON type, for the keys that are not ours.
fn foreign_values() -> Value {
    json!({
        "comment": "kept \"as is\" é \u{1}",
        "count": 12345678901234567u64,
        "negative": -7,
        "ratio": 0.1,
        "huge": 1e300,
        "flag": false,
        "nothing": null,
        "list": [1, "two", [3.5], {"four": null}],
        "nested": {"a": {"b": [true, {"c": "d"}]}, "empty": {}}
    })
}

/// `entry` with the keys of [`foreign_values`] spread through it, before and after its own.
fn with_foreign(entry: Value) -> Value {
    let Value::Object(own) = entry else {
        unreachable!("an entry is an object")
    };
    let Value::Object(foreign) = foreign_values() else {
        unreachable!("an object")
    };
    let mut out = serde_json::Map::new();
    let mut foreign = foreign.into_iter();
    for (key, value) in own {
        out.insert(key, value);
        if let Some((k, v)) = foreign.next() {
            out.insert(k, v);
        }
    }
    out.extend(foreign);
    Value::Object(out)
}

fn stored(w: &World) -> Value {
    serde_json::from_slice(&std::fs::read(w.manifest()).unwrap()).unwrap()
}

/// The keys of `entry` that are not in `ours`, with their values serialized.
fn foreign_of(entry: &Value) -> Vec<(String, String)> {
    let ours = [
        "id",
        "alias",
        "path",
        "access",
        "created_at",
        "host",
        "machine",
        "reason",
        "requested_at",
        "requested_by",
        "at",
        "action",
        "actor",
        "grant_id",
        "request_id",
        "from",
    ];
    entry
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| !ours.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), serde_json::to_string(v).unwrap()))
        .collect()
}

/// Regression: keys another tool put inside a grant, a request or a changelog entry were
/// dropped by the next write.
#[test]
fn keys_that_are_not_ours_are_kept_inside_every_entry_through_every_write() {
    let w = World::new();
    let host = w.grants.host().to_owned();
    let grant = |alias: &str, rel: &str| {
        with_foreign(json!({"id": format!("folder_{alias}"), "alias": alias,
            "path": w.p(rel), "access": "read_only", "created_at": "2026-01-01T00:00:00Z",
            "host": host}))
    };
    let manifest = json!({
        // The fixture's request is old: keep it pending for this test.
        "folder_access_request_ttl": "36500d",
        "folder_access": [grant("proj", "proj"), grant("keep", "proj2")],
        "folder_access_requests": [with_foreign(json!({"id": "req_1", "alias": "later",
            "access": "read_only", "reason": "r", "requested_at": "2026-01-01T00:00:00Z"}))],
        "folder_access_changelog": [with_foreign(json!({"at": "2026-01-01T00:00:00Z",
            "action": "add", "actor": "someone", "reason": "", "alias": "proj"}))],
    });
    std::fs::write(w.manifest(), serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
    let expected = foreign_of(&with_foreign(json!({})));
    let check = |what: &str| {
        let now = stored(&w);
        for at in [
            "/folder_access/1",
            "/folder_access_requests/0",
            "/folder_access_changelog/0",
        ] {
            let entry = now.pointer(at).unwrap_or_else(|| panic!("{what}: {at}"));
            assert_eq!(foreign_of(entry), expected, "{what}: {at}");
        }
    };
    w.add("other", "other", Access::ReadOnly).unwrap();
    check("add");
    assert_eq!(
        code(w.grants.set_access("proj", Access::ReadWrite, "", "alice")),
        Code::InvalidArgument,
        "widening needs a reason"
    );
    w.grants
        .set_access("proj", Access::ReadWrite, "to edit", "alice")
        .unwrap();
    check("set-access");
    let proj = stored(&w)["folder_access"][0].clone();
    assert_eq!(
        foreign_of(&proj),
        expected,
        "the changed grant keeps them too"
    );
    assert_eq!(proj["access"], "read_write");
    let r = w
        .grants
        .request("sib", Access::ReadOnly, "", Some(&w.p("sibling")), "agent")
        .unwrap();
    check("request");
    w.grants.deny(&r.id, "no", "alice").unwrap();
    check("deny");
    w.grants.revoke("other", "a reason", "alice").unwrap();
    check("revoke");
    let r = w
        .grants
        .request("bad", Access::ReadOnly, "", Some(&w.p("state")), "agent")
        .unwrap();
    assert_eq!(
        code(w.grants.approve(&r.id, None, "a reason", "alice")),
        Code::StateRoot,
        "a refused change writes nothing"
    );
    w.grants.deny(&r.id, "a reason", "alice").unwrap();
    let r = w
        .grants
        .request("proj", Access::ReadOnly, "", None, "agent")
        .unwrap();
    w.grants.approve(&r.id, None, "a reason", "alice").unwrap();
    check("approve");
    let proj = stored(&w)["folder_access"][0].clone();
    assert_eq!(
        foreign_of(&proj),
        expected,
        "the approved grant keeps them too"
    );
    assert_eq!(proj["access"], "read_only");
    // Reading them back gives the same entries, and a listing shows none of them.
    let listing = serde_json::to_value(w.grants.list().unwrap()).unwrap();
    let keep = &listing["grants"][0];
    assert_eq!(keep["alias"], "proj");
    assert!(
        keep.get("comment").is_none() && keep.get("nested").is_none(),
        "{keep}"
    );
    assert_eq!(
        w.grants.list().unwrap().grants[1].grant.other_keys,
        *with_foreign(json!({})).as_object().unwrap()
    );
}

/// Keys of another tool never pose as ours: a grant's own `available` or `env` in the
/// manifest changes nothing in a listing.
#[test]
fn a_key_that_is_not_ours_never_shows_in_a_listing() {
    let w = World::new();
    let manifest = json!({"folder_access": [{"id": "folder_x", "alias": "x",
        "path": w.p("proj"), "access": "read_only", "host": "elsewhere",
        "available": true, "env": "PATH", "unavailable": null}]});
    std::fs::write(w.manifest(), manifest.to_string()).unwrap();
    let listing = serde_json::to_value(w.grants.list().unwrap()).unwrap();
    let g = &listing["grants"][0];
    assert_eq!(g["available"], false, "{g}");
    assert_eq!(g["env"], "WORKFLOW_FOLDER_X");
    assert!(g["unavailable"].as_str().unwrap().contains("elsewhere"));
    // Written back, ours come first and theirs are kept.
    w.add("other", "other", Access::ReadOnly).unwrap();
    let x = &stored(&w)["folder_access"][0];
    assert_eq!(x["available"], true);
    assert_eq!(x["env"], "PATH");
}

/// Regression: a key named twice was read as its last occurrence, and the next write erased
/// the first one's grants.
#[test]
fn a_key_named_twice_anywhere_is_refused_and_the_file_left_untouched() {
    let w = World::new();
    let host = w.grants.host().to_owned();
    let g = |alias: &str, rel: &str| {
        json!({"id": format!("folder_{alias}"), "alias": alias, "path": w.p(rel),
            "access": "read_only", "host": host})
        .to_string()
    };
    let (a, b) = (g("a", "proj"), g("b", "proj2"));
    let cases: Vec<(&str, String)> = vec![
        (
            "folder_access",
            format!(r#"{{"folder_access":[{a}],"x":1,"folder_access":[{b}]}}"#),
        ),
        (
            "alias",
            format!(
                r#"{{"folder_access":[{}, "alias":"b"}}]}}"#,
                a.trim_end_matches('}')
            ),
        ),
        (
            "host",
            format!(r#"{{"folder_access":[{a},{{"host":null,"host":"h"}}]}}"#),
        ),
        (
            "reason",
            r#"{"folder_access_requests":[{"id":"req_1","alias":"r","access":"read_only","reason":"a","requested_at":"t","reason":"b"}]}"#.to_owned(),
        ),
        (
            "actor",
            r#"{"folder_access_changelog":[{"at":"t","action":"add","actor":"a","actor":"b","alias":"x"}]}"#.to_owned(),
        ),
        (
            "deep",
            format!(r#"{{"folder_access":[{a}],"settings":{{"x":[{{}},{{"deep":1,"deep":1}}]}}}}"#),
        ),
        ("name", r#"{"name":"one","name":"two"}"#.to_owned()),
        ("", r#"{"":1,"":2}"#.to_owned()),
    ];
    for (key, text) in cases {
        std::fs::write(w.manifest(), &text).unwrap();
        let err = w.grants.list().unwrap_err();
        assert_eq!(err.code(), Code::InvalidManifest, "{key}: {text}");
        assert!(
            err.to_string()
                .contains(&format!("the key `{key}` appears twice")),
            "{key}: {err}"
        );
        assert_eq!(
            code(w.add("new", "other", Access::ReadOnly)),
            Code::InvalidManifest,
            "{key}"
        );
        assert_eq!(
            code(w.grants.revoke("a", "a reason", "alice")),
            Code::InvalidManifest
        );
        assert_eq!(
            code(w.grants.request("r2", Access::ReadOnly, "", None, "agent")),
            Code::InvalidManifest
        );
        assert_eq!(
            code(w.grants.session().snapshot()),
            Code::InvalidManifest,
            "{key}"
        );
        assert_eq!(
            std::fs::read_to_string(w.manifest()).unwrap(),
            text,
            "{key}: untouched"
        );
    }
}

/// Regression: a grant written without `host` and `created_at` (as other tools write it)
/// gained empty strings on the next write and was listed as "approved on host ``", with no
/// way to use it.
#[test]
fn a_grant_without_a_host_is_unavailable_until_the_human_adopts_it() {
    let w = World::new();
    let manifest = json!({"folder_access": [
        {"id": "folder_a", "alias": "seed", "path": w.p("proj"), "access": "read_write"},
        {"id": "folder_b", "alias": "nulls", "path": w.p("proj2"), "access": "read_only",
         "host": null, "created_at": null},
        {"id": "folder_c", "alias": "empty", "path": w.p("other"), "access": "read_only",
         "host": "", "created_at": "2026-01-02T03:04:05Z"},
    ]});
    std::fs::write(w.manifest(), manifest.to_string()).unwrap();
    let listing = w.grants.list().unwrap();
    for g in &listing.grants {
        assert!(!g.available, "{}", g.grant.alias);
        assert_eq!(g.grant.host, None);
        assert_eq!(
            g.unavailable.as_deref().unwrap(),
            format!(
                "it was approved without a host; adopt it on this host with \
                 `safe-lanes grant adopt {}`",
                g.grant.alias
            )
        );
    }
    assert_eq!(
        code(w.grants.session().at("seed", ".", Want::Read)),
        Code::UnavailableOnHost
    );
    // Another change writes no host or time for them.
    w.add("sib", "sibling", Access::ReadOnly).unwrap();
    let after = stored(&w);
    for i in 0..3 {
        let g = after["folder_access"][i].as_object().unwrap();
        assert!(!g.contains_key("host"), "{g:?}");
    }
    assert!(
        !after["folder_access"][0]
            .as_object()
            .unwrap()
            .contains_key("created_at")
    );
    assert_eq!(
        after["folder_access"][2]["created_at"],
        "2026-01-02T03:04:05Z"
    );
    // The human adopts them: this host, a time if there was none, a changelog entry and an
    // audit record.
    let session = w.grants.session();
    let seed = w.grants.adopt("seed", "mine", "alice").unwrap();
    assert_eq!(seed.host.as_deref(), Some(w.grants.host()));
    assert!(humantime::parse_rfc3339(seed.created_at.as_deref().unwrap()).is_ok());
    assert!(session.at("seed", ".", Want::Write).is_ok(), "live");
    let empty = w.grants.adopt("empty", "a reason", "alice").unwrap();
    assert_eq!(empty.created_at.as_deref(), Some("2026-01-02T03:04:05Z"));
    let listing = w.grants.list().unwrap();
    let available: Vec<(&str, bool)> = listing
        .grants
        .iter()
        .map(|g| (g.grant.alias.as_str(), g.available))
        .collect();
    assert_eq!(
        available,
        [
            ("seed", true),
            ("nulls", false),
            ("empty", true),
            ("sib", true)
        ]
    );
    let log = w.grants.changelog().unwrap();
    let last = log.last().unwrap();
    assert_eq!(
        (last.action, last.alias.as_str(), last.actor.as_str()),
        (Action::Adopt, "empty", "alice")
    );
    assert_eq!(last.grant_id.as_deref(), Some("folder_c"));
    let audit = std::fs::read_to_string(w.root.path().join("audit.jsonl")).unwrap();
    assert_eq!(
        audit
            .lines()
            .filter(|l| l.contains("\"grant.adopt\""))
            .count(),
        2
    );
    assert!(w.root.audit().verify().unwrap().is_intact());
}

/// The human adopts any grant not bound to this machine — one without a host, or one of
/// another host or machine (a manifest restored here: the explicit host mapping) — after the
/// checks of an add; one bound here already is `invalid_argument`.
#[test]
fn a_grant_bound_here_cannot_be_adopted_and_any_other_is_checked_like_an_add() {
    let w = World::new();
    symlink(w.p("proj"), w.p("proj-link")).unwrap();
    let host = w.grants.host().to_owned();
    let manifest = json!({"folder_access": [
        {"id": "folder_1", "alias": "here", "path": w.p("proj"), "access": "read_only", "host": host},
        {"id": "folder_2", "alias": "there", "path": w.p("proj2"), "access": "read_only", "host": "elsewhere"},
        {"id": "folder_3", "alias": "gone", "path": w.p("missing"), "access": "read_only"},
        {"id": "folder_4", "alias": "link", "path": w.p("proj-link"), "access": "read_only"},
        {"id": "folder_5", "alias": "state", "path": w.tmp.path().join("state"), "access": "read_only"},
        {"id": "folder_6", "alias": "inner", "path": w.p("other"), "access": "read_only"},
        {"id": "folder_7", "alias": "outer", "path": w.p("other"), "access": "read_write",
         "host": "elsewhere"},
    ]});
    std::fs::write(w.manifest(), serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
    let before = std::fs::read(w.manifest()).unwrap();
    let cases = [
        ("here", Code::InvalidArgument),
        ("gone", Code::NotFound),
        ("link", Code::SymlinkEscape),
        ("state", Code::StateRoot),
        ("inner", Code::OverlappingGrant),
        ("nope", Code::UnknownAlias),
        ("Bad!", Code::InvalidAlias),
    ];
    for (alias, expected) in cases {
        assert_eq!(
            code(w.grants.adopt(alias, "a reason", "alice")),
            expected,
            "{alias}"
        );
        assert_eq!(
            std::fs::read(w.manifest()).unwrap(),
            before,
            "{alias}: untouched"
        );
    }
    // A grant of another host is adopted: bound here from now on.
    let there = w.grants.adopt("there", "restored here", "alice").unwrap();
    assert_eq!(there.host.as_deref(), Some(host.as_str()));
    assert_eq!(
        code(w.grants.adopt("there", "", "alice")),
        Code::InvalidArgument
    );
}

/// Regression: a writer killed between creating its temporary file and renaming it left
/// `.workflow.json.<hex>.tmp` behind for good.
#[test]
fn a_change_sweeps_the_temporary_files_of_killed_writers_and_nothing_else() {
    let w = World::new();
    w.add("proj", "proj", Access::ReadOnly).unwrap();
    let state = w.root.path();
    let hex = "0123456789abcdef0123456789abcdef";
    let leftovers = [
        format!(".workflow.json.{hex}.tmp"),
        format!(".workflow.json.{}.tmp", "f".repeat(32)),
    ];
    for name in &leftovers {
        std::fs::write(state.join(name), "{\"half\":").unwrap();
    }
    let kept = [
        format!(".workflow.json.{}.tmp", &hex[..31]),
        format!(".workflow.json.{}.tmp", hex.to_uppercase()),
        format!(".other.json.{hex}.tmp"),
        format!("workflow.json.{hex}.tmp"),
        format!(".workflow.json.{hex}.tmp.keep"),
    ];
    for name in &kept {
        std::fs::write(state.join(name), "theirs").unwrap();
    }
    // Not regular files: a directory, and a link to a file outside.
    let dir = format!(".workflow.json.{}.tmp", "a".repeat(32));
    std::fs::create_dir(state.join(&dir)).unwrap();
    let link = format!(".workflow.json.{}.tmp", "b".repeat(32));
    symlink(w.p("proj/src/main.rs"), state.join(&link)).unwrap();
    // A read sweeps nothing.
    w.grants.list().unwrap();
    w.grants.session().snapshot().unwrap();
    assert!(state.join(&leftovers[0]).exists());
    // A change does, whoever makes it.
    w.grants
        .request("docs", Access::ReadOnly, "", None, "agent")
        .unwrap();
    for name in &leftovers {
        assert!(!state.join(name).exists(), "{name} swept");
    }
    for name in kept.iter().chain([&dir, &link]) {
        assert!(
            std::fs::symlink_metadata(state.join(name)).is_ok(),
            "{name} kept"
        );
    }
    assert_eq!(
        std::fs::read_to_string(w.p("proj/src/main.rs")).unwrap(),
        "fn main() {}"
    );
    // And so does one on a manifest of another name, for its own files only.
    let custom = w.p("flows.json");
    let grants = Grants::open(&w.root, Some(&custom)).unwrap();
    let theirs = w.p(&format!(".flows.json.{hex}.tmp"));
    let not_theirs = w.p(&format!(".workflow.json.{hex}.tmp"));
    std::fs::write(&theirs, "").unwrap();
    std::fs::write(&not_theirs, "").unwrap();
    grants
        .add(
            "other",
            &w.p("other"),
            Access::ReadOnly,
            "a reason",
            "alice",
        )
        .unwrap();
    assert!(!theirs.exists());
    assert!(not_theirs.exists());
}

/// Other keys round-trip exactly, and one of ours always wins over an other key of its name,
/// even one put there by a caller of the library.
#[test]
fn other_keys_round_trip_and_never_replace_ours() {
    use safe_lanes::grants::Document;
    let text = json!({"folder_access": [with_foreign(json!({"id": "folder_x", "alias": "x",
        "path": "/srv/x", "access": "read_only", "host": ""}))]})
    .to_string();
    let mut doc = Document::parse(text.as_bytes()).unwrap();
    assert_eq!(doc.grants[0].host, None, "an empty host is no host");
    let written = doc.to_json().unwrap();
    let again = Document::parse(&written).unwrap();
    assert_eq!(again.grants, doc.grants);
    assert_eq!(again.to_json().unwrap(), written, "writing is stable");
    let entry = &serde_json::from_slice::<Value>(&written).unwrap()["folder_access"][0];
    assert!(entry.get("host").is_none(), "{entry}");
    assert_eq!(foreign_of(entry), foreign_of(&with_foreign(json!({}))));
    for (key, forged) in [("id", "folder_forged"), ("access", "read_write")] {
        doc.grants[0].other_keys.insert(key.into(), json!(forged));
    }
    let forged: Value = serde_json::from_slice(&doc.to_json().unwrap()).unwrap();
    assert_eq!(forged["folder_access"][0]["id"], "folder_x");
    assert_eq!(forged["folder_access"][0]["access"], "read_only");
}

/// Regression: a manifest restored on another machine with the same host name was silently
/// active. A grant carries the machine's identity; elsewhere it is unavailable, saying so,
/// until the human adopts it there. Grants written before (host name only) keep working.
#[test]
fn a_grant_from_another_machine_is_unavailable_until_adopted_here() {
    let w = World::new();
    w.add("proj", "proj", Access::ReadWrite).unwrap();
    let mut doc = stored(&w);
    let machine = doc["folder_access"][0]["machine"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(machine.len(), 32, "a digest, never the machine id itself");
    doc["folder_access"][0]["machine"] = json!("0".repeat(32));
    // A grant written before machines were told apart: its host name binds it.
    doc["folder_access"].as_array_mut().unwrap().push(json!({
        "id": "folder_old", "alias": "old", "path": w.p("proj2"), "access": "read_only",
        "host": w.grants.host(), "created_at": "2026-01-02T03:04:05Z"
    }));
    std::fs::write(w.manifest(), doc.to_string()).unwrap();
    let listing = w.grants.list().unwrap();
    let proj = listing
        .grants
        .iter()
        .find(|g| g.grant.alias.as_str() == "proj")
        .unwrap();
    assert!(!proj.available);
    let why = proj.unavailable.as_deref().unwrap();
    assert!(
        why.contains("another machine") && why.contains("grant adopt proj"),
        "{why}"
    );
    let old = listing
        .grants
        .iter()
        .find(|g| g.grant.alias.as_str() == "old")
        .unwrap();
    assert!(old.available, "{:?}", old.unavailable);
    assert_eq!(
        code(w.grants.session().at("proj", ".", Want::Read)),
        Code::UnavailableOnHost
    );
    // Adopted here by the human (audited like every change), it works again.
    w.grants
        .adopt("proj", "restored from a backup", "tester")
        .unwrap();
    assert!(w.grants.session().at("proj", ".", Want::Write).is_ok());
    assert_eq!(stored(&w)["folder_access"][0]["machine"], machine.as_str());
    // A grant of another host, from before machines were told apart, is adopted likewise.
    let mut doc = stored(&w);
    doc["folder_access"][1]["host"] = json!("elsewhere");
    std::fs::write(w.manifest(), doc.to_string()).unwrap();
    let old = w.grants.adopt("old", "moved here", "tester").unwrap();
    assert_eq!(old.host.as_deref(), Some(w.grants.host()));
    assert!(old.machine.is_some());
    // A grant bound to this machine already cannot be adopted again.
    let again = w.grants.adopt("proj", "again", "tester").unwrap_err();
    assert_eq!(again.code(), Code::InvalidArgument);
}

/// The agent learns what became of its requests: approved, denied with the human's reason,
/// or expired (no longer approvable, asked again); pending ones expire after the manifest's
/// `folder_access_request_ttl`, or seven days.
#[test]
fn the_agent_learns_what_became_of_its_requests_and_old_ones_expire() {
    use safe_lanes::grants::Status;
    let w = World::new();
    let agent = w.grants.agent();
    let docs = agent
        .request(
            "docs",
            Access::ReadOnly,
            "read the spec",
            Some(&w.p("proj/docs")),
        )
        .unwrap();
    let other = agent
        .request("other", Access::ReadOnly, "scratch", Some(&w.p("other")))
        .unwrap();
    let old = agent
        .request("sib", Access::ReadOnly, "long ago", Some(&w.p("sibling")))
        .unwrap();
    w.grants.deny(&other.id, "not needed now", "alice").unwrap();
    w.grants.approve(&docs.id, None, "fine", "alice").unwrap();
    // The third was filed long ago.
    let mut doc = stored(&w);
    doc["folder_access_requests"][0]["requested_at"] = json!("2020-01-01T00:00:00Z");
    std::fs::write(w.manifest(), doc.to_string()).unwrap();
    let listing = agent.list().unwrap();
    let status = |id: &str| {
        listing
            .outcomes
            .iter()
            .find(|o| o.id == id)
            .unwrap()
            .clone()
    };
    assert_eq!(status(&docs.id).status, Status::Approved);
    let denied = status(&other.id);
    assert_eq!(
        (denied.status, denied.decision.as_deref()),
        (Status::Denied, Some("not needed now"))
    );
    assert_eq!(status(&old.id).status, Status::Expired);
    assert!(
        listing.requests.is_empty(),
        "an expired request is not pending"
    );
    assert!(w.grants.proposals().unwrap().is_empty());
    assert_eq!(
        code(w.grants.approve(&old.id, None, "a reason", "alice")),
        Code::NotFound
    );
    // A longer time in the manifest keeps it pending.
    let mut doc = stored(&w);
    doc["folder_access_request_ttl"] = json!("36500d");
    std::fs::write(w.manifest(), doc.to_string()).unwrap();
    let listing = agent.list().unwrap();
    assert_eq!(listing.requests.len(), 1);
    assert_eq!(
        listing
            .outcomes
            .iter()
            .find(|o| o.id == old.id)
            .unwrap()
            .status,
        Status::Pending
    );
}

/// Every change the human makes needs a reason (issue: add, approve, revoke, narrow and adopt
/// recorded `reason: ""`): each, with no reason or only blanks, is refused `invalid_argument`,
/// and neither the manifest nor the audit log changes. The agent's request is not the human's
/// change and needs none.
#[test]
fn every_change_of_the_humans_needs_a_reason() {
    let w = World::new();
    w.add("proj", "proj", Access::ReadWrite).unwrap();
    w.add("cache", "other", Access::ReadWrite).unwrap();
    let asked = w
        .grants
        .request("docs", Access::ReadOnly, "", Some(&w.p("proj2")), "agent")
        .unwrap();
    let lifted = [safe_lanes::grants::LiftedPath::new(".vscode").unwrap()];
    for blank in ["", "   ", "\n\t"] {
        let before = std::fs::read(w.manifest()).unwrap();
        let audit_before = std::fs::read(w.root.audit().path()).unwrap();
        let g = &w.grants;
        let refusals: Vec<(&str, Code)> = vec![
            (
                "add",
                code(g.add("new", &w.p("sibling"), Access::ReadOnly, blank, "alice")),
            ),
            (
                "narrow",
                code(g.set_access("proj", Access::ReadOnly, blank, "alice")),
            ),
            ("revoke", code(g.revoke("proj", blank, "alice"))),
            ("adopt", code(g.adopt("proj", blank, "alice"))),
            ("approve", code(g.approve(&asked.id, None, blank, "alice"))),
            ("deny", code(g.deny(&asked.id, blank, "alice"))),
            ("deny by alias", code(g.deny_alias("docs", blank, "alice"))),
            (
                "protect",
                code(g.set_protection("proj", &[], &lifted, blank, "alice")),
            ),
            ("cache-clear", code(g.clear_cache("cache", blank, "alice"))),
        ];
        for (what, got) in refusals {
            assert_eq!(got, Code::InvalidArgument, "{what} with {blank:?}");
        }
        assert_eq!(std::fs::read(w.manifest()).unwrap(), before, "{blank:?}");
        assert_eq!(
            std::fs::read(w.root.audit().path()).unwrap(),
            audit_before,
            "{blank:?}: nothing recorded"
        );
    }
    let message = w
        .grants
        .revoke("proj", "", "alice")
        .unwrap_err()
        .to_string();
    assert!(message.contains("gives no reason"), "{message}");
    // With a reason, each goes through; no human entry of the changelog is without one.
    w.grants
        .approve(&asked.id, None, "the agent reads the notes", "alice")
        .unwrap();
    w.grants
        .set_access("proj", Access::ReadOnly, "done editing", "alice")
        .unwrap();
    w.grants
        .revoke("proj", "no longer needed", "alice")
        .unwrap();
    for change in w.grants.changelog().unwrap() {
        if change.action.is_humans() {
            assert!(!change.reason.trim().is_empty(), "{change:?}");
        }
    }
}

/// Regression: a request whose approval would be refused (here: its folder holds the state
/// root) looked approvable on every screen until the human had typed a reason. One answer,
/// [`Grants::approvable`] — the checks approving makes, on a copy — is what the review, the
/// glance a list shows, and approving itself all say.
#[test]
fn one_answer_says_whether_a_request_can_be_approved_as_it_stands() {
    use safe_lanes::grants::Standing;
    let w = World::new();
    let covering = w
        .grants
        .request("all", Access::ReadOnly, "", Some(w.tmp.path()), "agent")
        .unwrap();
    let p = w.grants.proposal(&covering.id).unwrap();
    let review = w.grants.review_proposal(&p, None);
    let Standing::Refused(why) = &review.standing else {
        panic!("{review:?}")
    };
    assert!(why.contains("state root"), "{why}");
    assert_eq!(review.refused.as_ref(), Some(why));
    assert_eq!(w.grants.glance(&p, None).standing, review.standing);
    let dry = w.grants.approvable(&covering.id, None).unwrap_err();
    let real = w
        .grants
        .approve(&covering.id, None, "a reason", "alice")
        .unwrap_err();
    assert_eq!(
        (dry.code(), dry.to_string()),
        (real.code(), real.to_string())
    );
    // A folder the human names instead is what the review judges, as approving takes it.
    let other = w.p("other");
    let p = w.grants.proposal(&covering.id).unwrap();
    let instead = w.grants.review_proposal(&p, Some(&other));
    assert_eq!(instead.standing, Standing::Approvable, "{instead:?}");
    assert_eq!(instead.path.as_deref(), Some(other.as_path()));

    // A request that names no folder needs one; with one chosen, it can be approved.
    let pathless = w
        .grants
        .request("docs", Access::ReadOnly, "", None, "agent")
        .unwrap();
    let p = w.grants.proposal(&pathless.id).unwrap();
    assert_eq!(w.grants.glance(&p, None).standing, Standing::NeedsFolder);
    assert_eq!(
        w.grants.review_proposal(&p, None).standing,
        Standing::NeedsFolder
    );
    let docs = w.p("proj/docs");
    assert_eq!(
        w.grants.review_proposal(&p, Some(&docs)).standing,
        Standing::Approvable
    );
    assert!(
        w.grants.proposal(&pathless.id).is_ok(),
        "the dry run changed nothing"
    );
    w.grants
        .approve(&pathless.id, Some(&docs), "the docs", "alice")
        .unwrap();
}

/// Hidden paths are set on folder grants only, with patterns the human may give; a tool grant
/// refuses them, and nothing is recorded for a refused change.
#[test]
fn hidden_paths_are_set_on_folders_with_valid_patterns() {
    use safe_lanes::grants::{Kind, Toolchain, check_hidden};
    let w = World::new();
    let hide = vec!["*.sqlite".to_owned()];
    assert_eq!(
        code(check_hidden(Kind::Tool, &hide, &[])),
        Code::InvalidArgument
    );
    assert!(check_hidden(Kind::Tool, &[], &[]).is_ok());
    assert!(check_hidden(Kind::Folder, &hide, &[".env".into()]).is_ok());
    let tool = Toolchain::parse(Kind::Tool, &[], Some("src")).unwrap();
    w.grants
        .add_with("tool", &w.p("proj"), None, tool, "a tool", "alice")
        .unwrap();
    let before = std::fs::read_to_string(w.root.audit().path()).unwrap();
    assert_eq!(
        code(w.grants.set_hidden("tool", &hide, &[], "more", "alice")),
        Code::InvalidArgument
    );
    assert_eq!(
        std::fs::read_to_string(w.root.audit().path()).unwrap(),
        before
    );
    w.add("docs", "proj2", Access::ReadOnly).unwrap();
    let set = w
        .grants
        .set_hidden("docs", &hide, &[".env".into()], "the db is secret", "alice")
        .unwrap()
        .into_inner();
    assert_eq!(
        (set.hide.clone(), set.unhide.clone()),
        (hide, vec![".env".to_owned()])
    );
    let too_many: Vec<String> = (0..65).map(|i| format!("p{i}")).collect();
    assert_eq!(
        code(w.grants.set_hidden("docs", &too_many, &[], "many", "alice")),
        Code::TooLarge
    );
}
