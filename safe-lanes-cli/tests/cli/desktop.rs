//! `grant add --pick`: the folder chosen in the desktop's own dialog, through the desktop
//! portal on the session bus (a stand-in portal on a private bus, answering as the real one
//! does); and what happens without one.

use safe_lanes_testkit::portal::{Answer, Portal};

use crate::util::Env;

fn add_picked(env: &Env, bus: &str) -> crate::util::Run {
    env.run_env(
        &[
            "--json",
            "grant",
            "add",
            "--pick",
            "--alias",
            "docs",
            "--access",
            "read_only",
            "--reason",
            "the agent reads it",
        ],
        b"",
        &[("DBUS_SESSION_BUS_ADDRESS", bus)],
    )
}

#[test]
fn the_folder_chosen_in_the_desktops_dialog_is_granted() {
    let env = Env::new();
    let folder = env.tmp.path().join("Q3 reports – Zoë");
    std::fs::create_dir(&folder).unwrap();
    let portal = Portal::start(Answer::Folder(folder.clone()));
    let run = add_picked(&env, portal.address());
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(
        run.json()["path"].as_str(),
        folder.to_str(),
        "{}",
        run.stdout
    );
    let asked = portal.asked();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(asked[0].directory && !asked[0].multiple, "{asked:?}");
    assert!(asked[0].title.contains("grant"), "{asked:?}");
}

#[test]
fn a_closed_dialog_grants_nothing() {
    let env = Env::new();
    let portal = Portal::start(Answer::Cancelled);
    let run = add_picked(&env, portal.address());
    assert_eq!(
        (run.status, run.code()),
        (3, "invalid_argument".to_owned()),
        "{run:?}"
    );
    assert!(run.stdout.contains("closed"), "{}", run.stdout);
    let listed = env.run(&["--json", "grant", "list"], b"").json();
    assert_eq!(listed["grants"], serde_json::json!([]), "{listed}");
}

/// Without a portal on the bus, or without a bus, `--pick` says where to choose instead.
#[test]
fn without_a_desktop_portal_pick_points_to_path_and_the_page() {
    let env = Env::new();
    let bare = Portal::without_portal();
    for bus in [bare.address(), "unix:path=/nonexistent/bus"] {
        let run = add_picked(&env, bus);
        assert_eq!(
            (run.status, run.code()),
            (3, "not_configured".to_owned()),
            "{run:?}"
        );
        for hint in ["--path", "safe-lanes ui"] {
            assert!(run.stdout.contains(hint), "{bus}: {}", run.stdout);
        }
    }
    let run = env.run(
        &["grant", "add", "--alias", "docs", "--access", "read_only"],
        b"",
    );
    assert_eq!(
        run.status, 2,
        "neither --path nor --pick is a usage error: {run:?}"
    );
}
