//! `gadfly example --harness LANG DIR`: a minimal hardened harness to start
//! a campaign of one's own from (`examples/harness/LANG`, embedded), with
//! its spec, a deliberately plain initial kernel and a git workspace.
//! docs/HARNESS.md says what each of its checks defends against.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use include_dir::{include_dir, Dir};

static TEMPLATES: Dir<'_> = include_dir!("$CARGO_MANIFEST_DIR/examples/harness");

/// The languages a template is written for.
pub const LANGUAGES: &[&str] = &["python", "c", "cuda"];

/// Writes the template for `language` into `root` (a new or empty folder),
/// makes its workspace a git repository with one commit, and returns the
/// spec's path.
pub fn materialize(language: &str, root: &Path) -> anyhow::Result<PathBuf> {
    let Some(dir) = TEMPLATES.get_dir(language).filter(|_| LANGUAGES.contains(&language)) else {
        bail!("no harness template for `{language}`: expected one of {}", LANGUAGES.join(", "));
    };
    extract(dir, root)?;
    let spec = root.join("campaign.toml");
    let text = std::fs::read_to_string(&spec).with_context(|| format!("reading {}", spec.display()))?;
    let workspace = toml::from_str::<toml::Table>(&text)
        .with_context(|| format!("the template's {} does not parse", spec.display()))?
        .get("workspace")
        .and_then(|w| w.as_str().map(String::from))
        .unwrap_or_else(|| ".".into());
    let ws = root.join(workspace);
    if !ws.join(".gitignore").exists() {
        std::fs::write(ws.join(".gitignore"), "__pycache__/\nbuild/\n")?;
    }
    git(&ws, &["init", "-q"])?;
    git(&ws, &["add", "-A"])?;
    git(
        &ws,
        &["-c", "user.name=gadfly example", "-c", "user.email=example@gadfly.invalid", "commit", "-qm", "initial kernel"],
    )?;
    Ok(spec)
}

/// Writes every file of the embedded folder `dir` under `dest` (build
/// outputs left out).
pub(crate) fn extract(dir: &Dir<'_>, dest: &Path) -> anyhow::Result<()> {
    for file in all_files(dir) {
        let rel = file.path();
        if rel.components().any(|c| c.as_os_str() == "build") {
            continue;
        }
        // Paths inside a nested Dir are relative to the embedded root.
        let target = dest.join(rel.strip_prefix(dir.path()).unwrap_or(rel));
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&target, file.contents()).with_context(|| format!("writing {}", target.display()))?;
    }
    Ok(())
}

fn all_files<'a>(dir: &'a Dir<'a>) -> Vec<&'a include_dir::File<'a>> {
    let mut out: Vec<&include_dir::File<'a>> = dir.files().collect();
    for d in dir.dirs() {
        out.extend(all_files(d));
    }
    out
}

/// Runs git in `dir`; its error output when it fails.
pub(crate) fn git(dir: &Path, args: &[&str]) -> anyhow::Result<()> {
    let out = std::process::Command::new("git").arg("-C").arg(dir).args(args).output().context("running git")?;
    if !out.status.success() {
        bail!("git {} failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_is_embedded_with_a_spec_that_parses() {
        for lang in LANGUAGES {
            let dir = TEMPLATES.get_dir(*lang).unwrap_or_else(|| panic!("no template for {lang}"));
            let spec = dir.get_file(format!("{lang}/campaign.toml")).unwrap_or_else(|| panic!("{lang}: no campaign.toml"));
            let root = tempfile::tempdir().unwrap();
            let path = materialize(lang, root.path()).unwrap();
            assert!(path.exists());
            let text = std::str::from_utf8(spec.contents()).unwrap();
            let parsed = crate::campaign::parse(text, &path.display().to_string(), root.path());
            assert!(parsed.is_ok(), "{lang}: {:?}", parsed.err());
        }
        let root = tempfile::tempdir().unwrap();
        let err = materialize("fortran", root.path()).unwrap_err().to_string();
        assert!(err.contains("python, c, cuda"), "{err}");
    }
}
