//! Which bank groups fit each moment: the pure mapping the gate and the
//! application use to pick a question for a moment.

/// Bank groups that fit each moment, best first.
pub fn groups_for(moment: &str) -> &'static [&'static str] {
    match moment {
        "start" => &["bound", "measurement", "algorithm_family"],
        "plateau" => &["gap_analysis", "algorithm_family", "campaign_process", "memory_hierarchy"],
        "limit_claim" => &["bound", "gap_analysis", "campaign_process"],
        "suspicious_gain" => &["benchmark_validity", "measurement", "correctness"],
        "correctness_dismissal" => &["correctness", "measurement"],
        "edit_loop" => &["campaign_process", "algorithm_family"],
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_moment_maps_to_core_groups() {
        assert!(groups_for("start").contains(&"bound"));
        assert!(groups_for("unknown").is_empty());
        for m in crate::bank::MOMENTS {
            for g in groups_for(m) {
                assert!(crate::bank::CORE_GROUPS.contains(g), "{m}: {g}");
            }
        }
    }
}
