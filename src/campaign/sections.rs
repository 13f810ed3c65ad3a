//! Two small sections of a spec as written and checked: `[redteam]` (the
//! red-team battery before a run, its coverage, the campaign's own
//! attacks) and `[calibration]` (the harness calibrated at create). Errors
//! are spanned, like the rest of the spec's ([`super::parse`]).

use serde::Deserialize;
use toml::Spanned;

use super::parse::Locator;

/// `[calibration]` (see [`super::CalibrationSpec`]).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCalibration {
    #[serde(default)]
    at_create: Option<bool>,
    #[serde(default)]
    runs: Option<Spanned<u32>>,
    #[serde(default)]
    accept_bias: bool,
}

/// `[redteam]` (see [`super::RedteamSpec`]; a typo or a value of the wrong
/// type is a spanned error of the TOML reader).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRedteam {
    #[serde(default)]
    before_start: bool,
    #[serde(default)]
    attacks: Vec<Spanned<String>>,
    #[serde(default)]
    accept_low_coverage: bool,
}

/// `[calibration]` checked: `runs` between 2 and the most a calibration takes.
pub(super) fn calibration(loc: &mut Locator, c: &RawCalibration) -> super::CalibrationSpec {
    let default = super::CalibrationSpec::default();
    let max = super::CALIBRATION_MAX_RUNS;
    let runs = match &c.runs {
        Some(r) if !(2..=max).contains(r.get_ref()) => {
            let why = format!("must be between 2 and {max}: runs of the initial kernel against itself");
            loc.push(r.span(), "calibration.runs", why);
            default.runs
        }
        Some(r) => *r.get_ref(),
        None => default.runs,
    };
    super::CalibrationSpec { at_create: c.at_create.unwrap_or(true), runs, accept_bias: c.accept_bias }
}

/// `[redteam]` checked: each of `attacks` a glob relative to the workspace.
pub(super) fn redteam(loc: &mut Locator, r: RawRedteam) -> super::RedteamSpec {
    for g in &r.attacks {
        let p = g.get_ref();
        if p.starts_with('/') || p.split('/').any(|c| c == "..") {
            loc.push(g.span(), "redteam.attacks", "must be a glob relative to the workspace (no `..`, not absolute)");
        } else if let Err(e) = globset::Glob::new(p) {
            loc.push(g.span(), "redteam.attacks", format!("not a valid glob: {}", e.kind()));
        }
    }
    super::RedteamSpec {
        before_start: r.before_start,
        attacks: r.attacks.into_iter().map(Spanned::into_inner).collect(),
        accept_low_coverage: r.accept_low_coverage,
    }
}

/// `[harness] candidate` globs that match no file of the workspace as a
/// snapshot sees it (`.gitignore` honoured, `.git` skipped) are refused: an
/// evaluation would hand the harness none of the agent's files, so every
/// verdict would judge the harness's own tree, whatever the agent does.
pub(super) fn check_candidate_matches(loc: &mut Locator, workspace: &std::path::Path, globs: &[Spanned<String>]) {
    let matchers: Vec<(usize, globset::GlobMatcher)> = globs
        .iter()
        .enumerate()
        .filter_map(|(i, g)| {
            Some((i, globset::GlobBuilder::new(g.get_ref()).literal_separator(false).build().ok()?.compile_matcher()))
        })
        .collect();
    let mut unmatched: Vec<usize> = matchers.iter().map(|(i, _)| *i).collect();
    let walker = crate::git::snapshot_walk(workspace).build();
    // A workspace of millions of files is not walked to the end.
    for entry in walker.flatten().take(1_000_000) {
        if unmatched.is_empty() {
            return;
        }
        if entry.file_type().is_none_or(|t| t.is_dir()) {
            continue;
        }
        let rel = entry.path().strip_prefix(workspace).unwrap_or(entry.path());
        unmatched.retain(|i| !matchers.iter().any(|(j, m)| j == i && m.is_match(rel)));
    }
    for i in unmatched {
        let g = &globs[i];
        loc.push(
            g.span(),
            "harness.candidate",
            format!(
                "the glob `{}` matches no file of the workspace {}: every evaluation would judge none of the \
                 agent's files; fix the glob (paths are relative to the workspace, e.g. `kernel/**` or `src/*.cu`), \
                 or create the candidate's files (not ignored by .gitignore) before `campaign create`",
                g.get_ref(),
                workspace.display()
            ),
        );
    }
}
