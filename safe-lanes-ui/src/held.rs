//! The "Held changes" tab: the change sets the library held for the human — what a confined
//! command or a patch wrote that the one rule does not publish on its own — each reviewed,
//! then confirmed, in two steps, as approvals are.
//!
//! - `GET /changes` lists the sets ([`HeldChanges::list`]);
//! - `GET /changes/review?set=ID` shows one in full ([`HeldChanges::show`]): each change with
//!   its diff and the library's warnings, and the digest of all that was shown. The human
//!   ticks changes and chooses to apply them, to apply all, or to discard the set;
//! - `GET /changes/confirm?…` restates exactly what that will do, carries the digest the
//!   review showed, and asks for a reason;
//! - `POST /changes/apply` and `POST /changes/discard` decide through the library, bound to
//!   that digest: when the set or its folder changed since the review, nothing is applied or
//!   discarded, and the human is sent back to the review as it is now.
//!
//! Showing a page changes nothing. The page holds no rule of its own: what is held, why, and
//! what applying does are the library's.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::response::{Html, IntoResponse, Response};
use safe_lanes::changes::{Decided, HeldChanges, SetReview};
use safe_lanes::{Code, Error};
use serde::Deserialize;

use crate::actions::Refusal;
use crate::app::App;
use crate::guard::{Human, PostedPairs};
use crate::view::{self, ChangeView, Held, HeldConfirm, HeldReview, HeldSetRow, query};

/// The held changes of the page's grants (finishing first what a dead process left).
fn held(app: &App) -> safe_lanes::Result<HeldChanges> {
    HeldChanges::open(Arc::clone(&app.grants))
}

/// The link to the review of set `id`.
fn review_link(id: &str) -> String {
    format!("/changes/review?{}", query(&[("set", id)]))
}

/// What the human chose on a review.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Choice {
    /// Apply the ticked changes only.
    Selected,
    /// Apply every change of the set.
    All,
    /// Discard the whole set.
    Discard,
}

impl Choice {
    fn parse(word: &str) -> Option<Self> {
        match word {
            "selected" => Some(Choice::Selected),
            "all" => Some(Choice::All),
            "discard" => Some(Choice::Discard),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Choice::Selected => "selected",
            Choice::All => "all",
            Choice::Discard => "discard",
        }
    }
}

/// A decision on a held set, as the review's query and the confirmation's form carry it.
#[derive(Debug, Default)]
struct Decision {
    set: String,
    /// The digest of the review the human saw.
    digest: String,
    choice: Option<Choice>,
    /// The ticked changes' paths, as the review listed them.
    paths: Vec<String>,
    reason: String,
}

impl Decision {
    fn of(pairs: Vec<(String, String)>) -> Self {
        let mut d = Decision::default();
        for (name, value) in pairs {
            match name.as_str() {
                "set" => d.set = value,
                "digest" => d.digest = value,
                "do" => d.choice = Choice::parse(&value),
                "path" if !d.paths.contains(&value) => d.paths.push(value),
                "reason" => d.reason = value,
                _ => {}
            }
        }
        d
    }

    /// The paths to hand the library: none to apply every change.
    fn paths(&self) -> &[String] {
        match self.choice {
            Some(Choice::All) => &[],
            _ => &self.paths,
        }
    }

    /// The confirmation step of this decision (where a refused confirmation goes back to).
    fn confirm_link(&self) -> String {
        let mut pairs = vec![("set", self.set.as_str()), ("digest", self.digest.as_str())];
        if let Some(choice) = self.choice {
            pairs.push(("do", choice.as_str()));
        }
        pairs.extend(self.paths.iter().map(|p| ("path", p.as_str())));
        format!("/changes/confirm?{}", query(&pairs))
    }
}

/// `GET /changes`: the held change sets, oldest first.
pub(crate) async fn list(State(app): State<Arc<App>>, human: Human) -> Response {
    let listed = app.blocking(|app| held(app)?.list()).await;
    let mut page = Held {
        chrome: app.chrome(&human, "Held changes", "changes"),
        sets: Vec::new(),
        error: None,
    };
    match listed {
        Ok(sets) => page.sets = sets.iter().map(HeldSetRow::of).collect(),
        Err(e) => page.error = Some(format!("({}) {}", e.code(), e.message())),
    }
    Html(view::render(&page)).into_response()
}

/// Which set a review is of.
#[derive(Deserialize)]
pub(crate) struct SetQuery {
    set: Option<String>,
}

/// `GET /changes/review?set=ID`: the first step. Every change of the set in full, the
/// library's warnings, the digest of it all, and the choices (nothing is changed here).
pub(crate) async fn review(
    State(app): State<Arc<App>>,
    human: Human,
    Query(q): Query<SetQuery>,
) -> Response {
    let id = q.set.unwrap_or_default();
    match app.blocking(move |app| held(app)?.show(&id)).await {
        Ok(review) => {
            let page = HeldReview {
                chrome: app.chrome(&human, "Review held changes", "changes"),
                set: HeldSetRow::of(&review.set),
                changes: views(&review),
                digest: review.digest.clone(),
            };
            Html(view::render(&page)).into_response()
        }
        Err(e) => app.report_to("/changes", Err(Refusal::Library(e))),
    }
}

fn views(review: &SetReview) -> Vec<ChangeView> {
    review
        .changes
        .iter()
        .enumerate()
        .map(|(i, c)| ChangeView::of(i + 1, c))
        .collect()
}

/// `GET /changes/confirm?set=…&digest=…&do=…&path=…`: the second step. Exactly what the
/// choice applies or discards (and what stays held), bound to the digest the review showed,
/// and the form that asks for the reason. A review that is no longer the set as it is sends
/// the human back to it.
pub(crate) async fn confirm(
    State(app): State<Arc<App>>,
    human: Human,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Response {
    let d = Decision::of(pairs);
    let id = d.set.clone();
    let review = match app.blocking(move |app| held(app)?.show(&id)).await {
        Ok(review) => review,
        Err(e) => return app.report_to("/changes", Err(Refusal::Library(e))),
    };
    let back = review_link(&review.set.id);
    if review.digest != d.digest {
        return app.report_to(&back, Err(Refusal::SetChanged(review.set.id.clone())));
    }
    let Some(choice) = d.choice else {
        return app.report_to(&back, Err(Refusal::NothingTicked));
    };
    if choice == Choice::Selected {
        if d.paths.is_empty() {
            return app.report_to(&back, Err(Refusal::NothingTicked));
        }
        if let Some(p) = d
            .paths
            .iter()
            .find(|p| !review.changes.iter().any(|c| &c.held.path == *p))
        {
            return app.report_to(&back, Err(Refusal::NotInSet(p.clone())));
        }
    }
    let (chosen, kept): (Vec<ChangeView>, Vec<ChangeView>) =
        views(&review).into_iter().partition(|c| {
            choice != Choice::Selected || d.paths.contains(&review.changes[c.n - 1].held.path)
        });
    let n = chosen.len();
    let plural = if n == 1 { "" } else { "s" };
    let (verb, action, confirm) = match choice {
        Choice::Selected => (
            "apply",
            "/changes/apply",
            format!("Apply {n} change{plural}"),
        ),
        Choice::All => (
            "apply",
            "/changes/apply",
            format!("Apply all {n} change{plural}"),
        ),
        Choice::Discard => (
            "discard",
            "/changes/discard",
            format!("Discard the set ({n} change{plural})"),
        ),
    };
    let mut hidden = vec![
        ("set", review.set.id.clone()),
        ("digest", review.digest.clone()),
        ("do", choice.as_str().to_owned()),
    ];
    if choice == Choice::Selected {
        hidden.extend(d.paths.iter().map(|p| ("path", p.clone())));
    }
    let page = HeldConfirm {
        chrome: app.chrome(&human, "Confirm held changes", "changes"),
        set: HeldSetRow::of(&review.set),
        verb,
        chosen,
        kept,
        digest: review.digest.clone(),
        action,
        hidden,
        confirm,
        back,
    };
    Html(view::render(&page)).into_response()
}

/// Where the human goes after a decision, and what the page says there.
struct Outcome {
    next: String,
    said: Result<String, Refusal>,
}

impl App {
    fn decided(&self, outcome: Outcome) -> Response {
        self.report_to(&outcome.next, outcome.said)
    }
}

/// `POST /changes/apply`: apply the changes confirmed — the ticked ones, or all — exactly as
/// the review showed them (the digest binds them), for the human's reason.
pub(crate) async fn apply(
    State(app): State<Arc<App>>,
    PostedPairs(pairs): PostedPairs,
) -> Response {
    let d = Decision::of(pairs);
    let outcome = app
        .blocking(move |app| {
            // With no path the library applies every change: "apply the ticked ones" with
            // none ticked must not become "apply all".
            let ticked = d.choice == Some(Choice::Selected) && !d.paths.is_empty();
            if !ticked && d.choice != Some(Choice::All) {
                return Outcome {
                    next: review_link(&d.set),
                    said: Err(Refusal::NothingTicked),
                };
            }
            let held = match held(app) {
                Ok(held) => held,
                Err(e) => return refused(None, &d, e),
            };
            match held.apply(&d.set, d.paths(), &d.digest, &d.reason, &app.actor) {
                Ok(done) => Outcome {
                    next: "/changes".to_owned(),
                    said: Ok(applied_text(&done)),
                },
                Err(e) => refused(Some(&held), &d, e),
            }
        })
        .await;
    app.decided(outcome)
}

/// `POST /changes/discard`: discard the set the review showed, whole, for the human's reason;
/// nothing of it reaches the folder. Refused when the set or its folder changed since the
/// review, as applying is.
pub(crate) async fn discard(
    State(app): State<Arc<App>>,
    PostedPairs(pairs): PostedPairs,
) -> Response {
    let d = Decision::of(pairs);
    let outcome = app
        .blocking(move |app| {
            let held = match held(app) {
                Ok(held) => held,
                Err(e) => return refused(None, &d, e),
            };
            // Bound to the review, as applying is.
            match held.discard(&d.set, Some(&d.digest), &d.reason, &app.actor) {
                Ok(done) => Outcome {
                    next: "/changes".to_owned(),
                    said: Ok(format!(
                        "Discarded change set {}: {} change{} removed, none reached the folder{}",
                        done.id,
                        done.paths.len(),
                        if done.paths.len() == 1 { "" } else { "s" },
                        unrecorded(&done)
                    )),
                },
                Err(e) => refused(Some(&held), &d, e),
            }
        })
        .await;
    app.decided(outcome)
}

/// What the page says, and where it sends the human, when a decision on the set `d` names
/// failed with `e`: back to the review as it is now when the set or its folder changed (its
/// digest is no longer the one reviewed) or when it holds no change at a path named, to the
/// list when the set is gone, back to the confirmation otherwise (a reason to give) — with
/// the library's code and message.
fn refused(held: Option<&HeldChanges>, d: &Decision, e: Error) -> Outcome {
    let (next, said) = match held.map(|held| held.show(&d.set)) {
        Some(Ok(now)) if now.digest != d.digest => {
            (review_link(&d.set), Refusal::SetChanged(now.set.id))
        }
        Some(Err(gone)) if gone.code() == Code::NotFound => {
            ("/changes".to_owned(), Refusal::Library(e))
        }
        // A path the set does not hold: the review shows what it holds.
        Some(Ok(_)) if e.code() == Code::NotFound => (review_link(&d.set), Refusal::Library(e)),
        _ => (d.confirm_link(), Refusal::Library(e)),
    };
    Outcome {
        next,
        said: Err(said),
    }
}

fn applied_text(done: &Decided) -> String {
    let n = done.paths.len();
    let mut text = format!(
        "Applied {n} change{} of change set {}",
        if n == 1 { "" } else { "s" },
        done.id
    );
    if !done.paths.is_empty() {
        let paths: Vec<String> = done
            .paths
            .iter()
            .map(|p| safe_lanes::Shown::text(p).to_string())
            .collect();
        text.push_str(&format!(": {}", paths.join(", ")));
    }
    for s in &done.still_held {
        text.push_str(&format!(
            " — still held: {} ({}: {})",
            s.path,
            s.why,
            safe_lanes::Shown::message(&s.what)
        ));
    }
    text + unrecorded(done)
}

fn unrecorded(done: &Decided) -> &'static str {
    if done.recorded {
        ""
    } else {
        " (not in the audit log yet: the record is kept and written with the next change)"
    }
}
