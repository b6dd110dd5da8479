//! The layouts of confined commands' roots, kept while the grant snapshot they were made from
//! is in use.
//!
//! A [`Layout`] depends only on the system set (with what it covers, [`super::masks`]) and
//! the grants a command sees, not on the command. A session hands out one [`Snapshot`] for as
//! long as the manifest does not change (a grant added, revoked, narrowed or moved makes a new
//! one), so a layout is kept for the snapshot and the list of its grants that were usable when
//! it was made, and is only ever handed out for that very snapshot, that very list and those
//! very covers. A command started after a revoke gets a new snapshot, hence a new layout; one
//! started after a search that found other covers gets a new layout too (a search that finds
//! the same covers hands out the same value).

use std::sync::{Arc, Mutex, Weak};

use super::masks::Masked;
use super::sandbox::Layout;
use crate::error::Result;
use crate::grants::{Alias, Snapshot};

/// How many snapshots' layouts are kept (in practice one per session in use).
const KEPT: usize = 8;

/// A layout, and what it was made for.
struct Kept {
    /// The snapshot: a weak reference holds its allocation, so no other snapshot can take
    /// its address while this entry exists.
    snapshot: Weak<Snapshot>,
    /// The usable grants it shows, in order.
    grants: Vec<Alias>,
    /// What it covers, compared by identity (the same covers are the same value).
    masked: Masked,
    layout: Arc<Layout>,
}

static KEPT_LAYOUTS: Mutex<Vec<Kept>> = Mutex::new(Vec::new());

/// The layout for `grants` (the usable grants of `snapshot`, in order) covering `masked`: a
/// kept one made for the same snapshot, the same grants and the same covers, or else one
/// `make` builds (then kept in place of the oldest, and of those whose snapshot is gone).
///
/// # Errors
///
/// Those of `make`.
pub(super) fn layout_for(
    snapshot: &Arc<Snapshot>,
    grants: &[Alias],
    masked: &Masked,
    make: impl FnOnce() -> Result<Layout>,
) -> Result<Arc<Layout>> {
    let made_for = |k: &Kept| std::ptr::eq(k.snapshot.as_ptr(), Arc::as_ptr(snapshot));
    {
        let kept = crate::sync::lock(&KEPT_LAYOUTS);
        if let Some(k) = kept
            .iter()
            .find(|k| made_for(k) && k.grants == grants && Arc::ptr_eq(&k.masked, masked))
        {
            return Ok(Arc::clone(&k.layout));
        }
    }
    let layout = Arc::new(make()?);
    let mut kept = crate::sync::lock(&KEPT_LAYOUTS);
    kept.retain(|k| k.snapshot.strong_count() > 0 && !made_for(k));
    if kept.len() >= KEPT {
        kept.remove(0);
    }
    kept.push(Kept {
        snapshot: Arc::downgrade(snapshot),
        grants: grants.to_vec(),
        masked: Arc::clone(masked),
        layout: Arc::clone(&layout),
    });
    Ok(layout)
}
