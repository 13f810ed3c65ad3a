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
