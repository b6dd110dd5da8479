//! From what a command changed to what is done with it: each change judged by the rule, and
//! the journal that publishes what may be published and holds the rest.
//!
//! A value first: [`decide`] looks at nothing but the changes, the rule and the facts it is
//! given, and returns the journal (tested as tables in `tests`); [`super::journal::run`] then
//! acts on it.

use std::path::PathBuf;

use serde_json::json;

use super::journal::{Journal, Op, Pending, Tree};
use super::rule::{After, Change, Facts, Rule, Verdict, Why};
use super::scan::{Item, ItemKind, Put};
use super::set::Meta;
use super::{ChangeWord, HeldEntry};

/// One layer's changes to decide: its index and grant alias, the rule of its grant, what the
/// rule may look at, and the changes.
pub(crate) struct Layer<'a> {
    pub(crate) index: usize,
    pub(crate) alias: &'a str,
    pub(crate) rule: &'a Rule<'a>,
    pub(crate) facts: &'a dyn Facts,
    pub(crate) items: Vec<Item>,
}

/// What a set's changes come to.
#[derive(Debug)]
pub(crate) struct Decided {
    /// The journal that does it.
    pub(crate) journal: Journal,
    /// How many changes are published.
    pub(crate) published: u64,
    /// How many are dropped (never created).
    pub(crate) dropped: u64,
}

/// How the set is decided: by the rule, or held whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Each change as the rule says.
    Rule,
    /// Everything held, as `why` (its gateway ended before deciding, or it could not be read
    /// whole), but what is dropped.
    HoldAll(Why),
}

/// Decide the changes of `layers` for the set `meta`; `offset` is where the audit log ends now.
pub(crate) fn decide(meta: &Meta, layers: Vec<Layer<'_>>, mode: Mode, offset: u64) -> Decided {
    let mut drops = Vec::new();
    let mut holds = Vec::new();
    let mut puts = Vec::new();
    let mut modes = Vec::new();
    let mut deletes = Vec::new();
    let mut held = Vec::new();
    let mut published_lines = Vec::new();
    let (mut published, mut dropped) = (0u64, 0u64);
    for layer in layers {
        let mut held_dirs: Vec<PathBuf> = Vec::new();
        for item in &layer.items {
            if held_dirs.iter().any(|d| item.path.starts_with(d)) {
                // It waits with its held directory; what is never created is taken out of it
                // first, so the human's apply cannot bring it.
                if let Verdict::Drop(_) = judge(layer.rule, layer.facts, item) {
                    dropped += 1;
                    drops.push(Op::Drop {
                        layer: layer.index,
                        path: item.path.clone(),
                    });
                }
                continue;
            }
            let verdict = match mode {
                Mode::Rule => judge(layer.rule, layer.facts, item),
                Mode::HoldAll(why) => match judge(layer.rule, layer.facts, item) {
                    Verdict::Drop(d) => Verdict::Drop(d),
                    Verdict::Hold(w, what) if w != Why::Interrupted && w != Why::Revoked => {
                        Verdict::Hold(w, what)
                    }
                    _ => Verdict::Hold(why, hold_all_what(why).into()),
                },
            };
            let entry = HeldEntry {
                grant: layer.alias.to_owned(),
                layer: layer.index,
                path: item.path.clone(),
                change: word(item),
                why: Why::Interrupted,
                what: String::new(),
                mode: match item.kind {
                    ItemKind::Mode(mode) => Some(mode),
                    _ => None,
                },
            };
            let (index, path) = (layer.index, item.path.clone());
            match verdict {
                Verdict::Publish => {
                    published += 1;
                    published_lines.push(format!(
                        "{index}\t{}\t{}\n",
                        path.display(),
                        entry.change.as_str()
                    ));
                    match &item.kind {
                        ItemKind::Put(_) | ItemKind::NewDir if item.carried => {}
                        ItemKind::Put(_) | ItemKind::NewDir => {
                            let Some(layer_entry) = item.layer else {
                                continue;
                            };
                            puts.push(match item.before {
                                None => Op::Create {
                                    from: Tree::Upper,
                                    layer: index,
                                    path,
                                    entry: layer_entry,
                                    change: entry.change,
                                },
                                Some((_, before)) => Op::Replace {
                                    from: Tree::Upper,
                                    layer: index,
                                    path,
                                    entry: layer_entry,
                                    before,
                                    change: entry.change,
                                },
                            });
                        }
                        ItemKind::Mode(mode) => {
                            if let Some((_, before)) = item.before {
                                modes.push(Op::Mode {
                                    layer: index,
                                    path,
                                    mode: *mode,
                                    before,
                                    change: entry.change,
                                });
                            }
                        }
                        ItemKind::Delete => {
                            if let Some((_, before)) = item.before {
                                deletes.push(Op::Delete {
                                    layer: index,
                                    path,
                                    before,
                                    trash: deletes.len(),
                                    change: entry.change,
                                });
                            }
                        }
                    }
                }
                Verdict::Hold(why, what) => {
                    if matches!(item.kind, ItemKind::Put(_) | ItemKind::NewDir) {
                        holds.push(Op::Hold {
                            layer: index,
                            path: path.clone(),
                        });
                        if matches!(item.kind, ItemKind::NewDir) {
                            held_dirs.push(path);
                        }
                    }
                    held.push(HeldEntry {
                        why,
                        what: what.into_owned(),
                        ..entry
                    });
                }
                Verdict::Drop(_) => {
                    dropped += 1;
                    drops.push(Op::Drop { layer: index, path });
                }
            }
        }
    }
    let record = record(
        meta,
        published,
        dropped,
        &held,
        &published_lines,
        mode != Mode::Rule,
    );
    let mut ops = drops;
    ops.extend(holds);
    ops.extend(puts);
    ops.extend(modes);
    ops.extend(deletes);
    let ends_set = held.is_empty();
    Decided {
        journal: Journal {
            ops,
            held,
            record,
            offset,
            ends_set,
        },
        published,
        dropped,
    }
}

/// The record a set's decision leaves: `change.published` when nothing is held, else
/// `change.held`; with the counts, the held paths and the digest of the published ones
/// (`published_lines`: one line each, as `decide` writes them).
pub(crate) fn record(
    meta: &Meta,
    published: u64,
    dropped: u64,
    held: &[HeldEntry],
    published_lines: &[String],
    interrupted: bool,
) -> Pending {
    let event = if held.is_empty() {
        "change.published"
    } else {
        "change.held"
    };
    Pending {
        event: event.into(),
        actor: meta.origin.actor.clone(),
        fields: json!({
            "id": meta.id,
            "origin": { "op": meta.origin.op, "command": meta.origin.command },
            "grants": meta.layers.iter().map(|l| &l.alias).collect::<Vec<_>>(),
            "published": published,
            "dropped": dropped,
            "held": held.iter().map(|h| json!({
                "grant": h.grant, "path": h.path.to_string_lossy(), "why": h.why,
            })).collect::<Vec<_>>(),
            "digest": crate::digest::sha256_hex(published_lines.concat().as_bytes()),
            "interrupted": interrupted,
        }),
    }
}

/// What a set held whole says of each change.
fn hold_all_what(why: Why) -> &'static str {
    match why {
        Why::Interrupted => {
            "the command's gateway ended before its changes were decided (killed, or the machine \
             stopped): everything it wrote is held"
        }
        Why::Revoked => {
            "the grant was revoked, narrowed or moved while the command ran: nothing it wrote \
             is published, everything is held"
        }
        _ => "its changes could not be read whole: everything it wrote is held",
    }
}

/// The rule's verdict on `item`: by its path, then — for a change that takes away one of the
/// folder's directories (a removal, or a file in its place) — by each path below it, removed.
fn judge(rule: &Rule<'_>, facts: &dyn Facts, item: &Item) -> Verdict {
    let m = item.meanwhile;
    let change = |path, after| Change {
        path,
        after,
        meanwhile: m,
    };
    let after = match &item.kind {
        ItemKind::Put(Put::File { mode }) => After::File { mode: *mode },
        ItemKind::Put(Put::Link { target }) => After::Link { target },
        ItemKind::Put(Put::Special) => After::Special,
        ItemKind::NewDir | ItemKind::Mode(_) => After::Dir,
        ItemKind::Delete => After::Gone,
    };
    let first = rule.judge(&change(&item.path, after), facts);
    let Some(removes) = &item.removes else {
        return first;
    };
    if first != Verdict::Publish {
        return first;
    }
    if removes.too_large {
        return Verdict::Hold(
            Why::Conflict,
            "a removal of more entries than can be checked for the human's changes".into(),
        );
    }
    removes
        .paths
        .iter()
        .map(|p| rule.judge(&change(p, After::Gone), facts))
        .find(|v| *v != Verdict::Publish)
        .unwrap_or(Verdict::Publish)
}

/// What kind of change `item` is, in the words listings use.
fn word(item: &Item) -> ChangeWord {
    match &item.kind {
        ItemKind::Put(Put::Link { .. }) => ChangeWord::Link,
        ItemKind::Put(_) | ItemKind::NewDir if item.before.is_some() => ChangeWord::Modified,
        ItemKind::Put(_) | ItemKind::NewDir => ChangeWord::Created,
        ItemKind::Mode(_) => ChangeWord::Mode,
        ItemKind::Delete => ChangeWord::Deleted,
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::changes::rule::Kind;
    use crate::changes::scan::Fingerprint;
    use crate::changes::set::{LayerMeta, Origin};

    /// A folder where nothing existed before and everything is what the items say.
    struct Empty;

    impl Facts for Empty {
        fn before(&self, _: &Path) -> Option<Kind> {
            None
        }
        fn after(&self, _: &Path) -> Option<Kind> {
            None
        }
        fn before_bytes(&self, _: &Path) -> Option<Vec<u8>> {
            None
        }
        fn after_bytes(&self, _: &Path) -> Option<Vec<u8>> {
            None
        }
    }

    fn item(path: &str, kind: ItemKind, carried: bool) -> Item {
        let entry = Fingerprint {
            dev: 1,
            ino: 2,
            size: 0,
            mtime: (0, 0),
        };
        Item {
            path: PathBuf::from(path),
            kind,
            carried,
            before: None,
            meanwhile: false,
            layer: Some(entry),
            removes: None,
        }
    }

    /// What is never created is taken out of a held directory before it is held: the
    /// human's apply of the directory cannot bring it.
    #[test]
    fn a_held_directory_loses_set_id_files_and_nodes_first() {
        let meta = Meta {
            id: "set_0000000000000000".into(),
            origin: Origin {
                op: "exec".into(),
                command: "true".into(),
                actor: "agent".into(),
            },
            started: String::new(),
            t0: (0, 0),
            layers: vec![LayerMeta {
                grant: "g".into(),
                alias: "proj".into(),
                path: PathBuf::from("/home/u/proj"),
            }],
        };
        let rule = Rule::new(Path::new("/home/u/proj"), None, &[]);
        let items = vec![
            item(".vscode", ItemKind::NewDir, false),
            item(".vscode/fifo", ItemKind::Put(Put::Special), true),
            item(
                ".vscode/setid",
                ItemKind::Put(Put::File { mode: 0o4755 }),
                true,
            ),
            item(
                ".vscode/tasks.json",
                ItemKind::Put(Put::File { mode: 0o644 }),
                true,
            ),
        ];
        let layer = Layer {
            index: 0,
            alias: "proj",
            rule: &rule,
            facts: &Empty,
            items,
        };
        let decided = decide(&meta, vec![layer], Mode::Rule, 0);
        assert_eq!(decided.dropped, 2);
        let ops: Vec<String> = decided
            .journal
            .ops
            .iter()
            .map(|op| match op {
                Op::Drop { path, .. } => format!("drop {}", path.display()),
                Op::Hold { path, .. } => format!("hold {}", path.display()),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(
            ops,
            ["drop .vscode/fifo", "drop .vscode/setid", "hold .vscode"]
        );
        let held: Vec<_> = decided.journal.held.iter().map(|h| &h.path).collect();
        assert_eq!(held, [Path::new(".vscode")]);
    }
}
