//! [`PristineFile`]: a protected file as gadfly keeps it. A plain type at
//! the bottom of the crate, so the store (which persists the copies) and
//! the snapshot code (which reads and restores them) both import it and
//! neither imports the other.

/// A protected file as gadfly keeps it, from the tree of the workspace at
/// campaign creation: every evaluation runs with this copy.
#[derive(Debug, Clone, PartialEq)]
pub struct PristineFile {
    pub path: String,
    pub sha256: String,
    pub mode: u32,
    pub content: Vec<u8>,
}
