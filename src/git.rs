//! The hardened `git` command: every git call gadfly makes on a repository
//! starts from [`hardened_git`]. A leaf (it names no module of the crate),
//! so the snapshot code, the beam and the spec's workspace check all use
//! the one definition and none imports another for it.

use std::path::Path;
use std::process::{Command, Stdio};

/// `git` in a scrubbed environment: no inherited `GIT_*` variable, no
/// system or global config, no replace objects, no system attributes,
/// `HOME` and `XDG_CONFIG_HOME` pointed at `home`, and command-line
/// settings (which win over any repository's config) that switch off
/// fsmonitor, hooks, the untracked cache and the user's attribute and
/// exclude files. For a repository gadfly does not own (the beam reads the
/// workspace's refs), use it with `-C`; snapshots use
/// `crate::snapshot::scrubbed_git`.
pub fn hardened_git(home: &Path) -> Command {
    let mut cmd = Command::new("git");
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GIT_") {
            cmd.env_remove(&key);
        }
    }
    cmd.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_NO_REPLACE_OBJECTS", "1")
        .env("GIT_ATTR_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_NO_LAZY_FETCH", "1")
        .env("GIT_PAGER", "cat")
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home)
        .stdin(Stdio::null());
    for setting in [
        "core.fsmonitor=false",
        "core.hooksPath=/dev/null",
        "core.untrackedCache=false",
        "core.attributesFile=/dev/null",
        "core.excludesFile=/dev/null",
        "core.splitIndex=false",
        "core.sparseCheckout=false",
        "core.pager=cat",
        "gc.auto=0",
        "maintenance.auto=false",
        // The daemon, run as a user of its own (the recommended deployment),
        // reads repositories the agent's user owns: git's ownership check
        // would refuse them. What that check guards against (the owner's
        // hooks, fsmonitor and the like running as the daemon) is what the
        // settings above switch off.
        "safe.directory=*",
    ] {
        cmd.args(["-c", setting]);
    }
    cmd
}
