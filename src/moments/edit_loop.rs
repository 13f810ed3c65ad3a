//! Edit loops: an agent that keeps re-adding lines it deleted earlier.
//! From the diffs between successive evaluated snapshots, the share of
//! added lines (over a window of recent diffs) that are byte-identical to
//! a line deleted in an earlier diff of the campaign.

use std::collections::HashSet;
use std::path::Path;

use anyhow::{bail, Context};

/// The lines one snapshot-to-snapshot diff added and deleted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Diff {
    pub added: Vec<String>,
    pub deleted: Vec<String>,
}

/// Lines too common to mean anything (blank, a lone brace, `end`...).
fn trivial(line: &str) -> bool {
    let t = line.trim();
    t.len() < 4 || t.chars().all(|c| "{}()[];,".contains(c) || c.is_whitespace())
}

/// `git diff` between two evaluated trees, in gadfly's private snapshot
/// store `repo` (never the workspace's repository: no external diff, no
/// textconv, no config of the agent's).
pub fn git_diff(repo: &Path, from: &str, to: &str) -> anyhow::Result<Diff> {
    let out = crate::snapshot::scrubbed_git(repo)
        .args(["diff", "--no-color", "--no-ext-diff", "--no-textconv", "--unified=0", from, to])
        .output()
        .context("running git diff")?;
    if !out.status.success() {
        bail!("git diff {from} {to}: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(parse_unified(&String::from_utf8_lossy(&out.stdout)))
}

pub fn parse_unified(text: &str) -> Diff {
    let mut d = Diff::default();
    for line in text.lines() {
        if line.starts_with("+++") || line.starts_with("---") {
            continue;
        }
        if let Some(l) = line.strip_prefix('+') {
            if !trivial(l) {
                d.added.push(l.to_string());
            }
        } else if let Some(l) = line.strip_prefix('-') {
            if !trivial(l) {
                d.deleted.push(l.to_string());
            }
        }
    }
    d
}

/// (re-added, added) over the last `window` diffs of `diffs` (oldest first):
/// an added line counts as re-added when an EARLIER diff deleted it.
pub fn readded(diffs: &[Diff], window: usize) -> (usize, usize) {
    let start = diffs.len().saturating_sub(window);
    let mut deleted_before: HashSet<&str> = HashSet::new();
    let (mut re, mut total) = (0, 0);
    for (i, d) in diffs.iter().enumerate() {
        if i >= start {
            for a in &d.added {
                total += 1;
                if deleted_before.contains(a.as_str()) {
                    re += 1;
                }
            }
        }
        deleted_before.extend(d.deleted.iter().map(String::as_str));
    }
    (re, total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn d(added: &[&str], deleted: &[&str]) -> Diff {
        Diff {
            added: added.iter().map(|s| s.to_string()).collect(),
            deleted: deleted.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn re_added_lines_are_counted_against_earlier_deletions_only() {
        let diffs = vec![
            d(&["x = a * b;", "y = x + 1;"], &["x = a + b;"]),
            d(&["x = a + b;"], &["x = a * b;"]),
            d(&["x = a * b;", "z = 2;"], &["x = a + b;"]),
        ];
        assert_eq!(readded(&diffs, 10), (2, 5));
        assert_eq!(readded(&diffs, 1), (1, 2), "the window counts the last diff only");
        // a line moved within one diff is not a loop
        assert_eq!(readded(&[d(&["same line"], &["same line"])], 5), (0, 1));
    }

    #[test]
    fn unified_diffs_are_parsed_and_trivial_lines_skipped() {
        let text = "diff --git a/k.c b/k.c\n--- a/k.c\n+++ b/k.c\n@@ -1,2 +1,2 @@\n-  for (i = 0; i < n; i++)\n+  for (i = 0; i < n; i += 4)\n+}\n+\n";
        let diff = parse_unified(text);
        assert_eq!(diff.added, vec!["  for (i = 0; i < n; i += 4)"]);
        assert_eq!(diff.deleted, vec!["  for (i = 0; i < n; i++)"]);
    }

    #[test]
    fn real_git_trees_diff() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        let git = |args: &[&str]| assert!(Command::new("git").args(args).current_dir(ws).status().unwrap().success());
        git(&["init", "-q"]);
        let store = tempfile::tempdir().unwrap();
        let (repo, index) = (store.path().join("s.git"), store.path().join("index"));
        std::fs::write(ws.join("k.c"), "int f(int a) {\n  return a + 1;\n}\n").unwrap();
        let t1 = crate::snapshot::tree_hash_with_index(&repo, ws, &index).unwrap();
        std::fs::write(ws.join("k.c"), "int f(int a) {\n  return a * 2;\n}\n").unwrap();
        let t2 = crate::snapshot::tree_hash_with_index(&repo, ws, &index).unwrap();
        let diff = git_diff(&repo, &t1, &t2).unwrap();
        assert_eq!(diff, d(&["  return a * 2;"], &["  return a + 1;"]));
    }
}
