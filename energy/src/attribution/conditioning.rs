//! Which task types a fit cannot separate: rank, condition number and the inseparable
//! groups of a column-scaled matrix.
//!
//! Separability follows Belsley, Kuh & Welsch ("Regression Diagnostics", 1980): with the
//! columns scaled to unit length, each singular value σ_j of `X` gives a condition index
//! `η_j = σ_max / σ_j`, and each coefficient's variance splits over the singular
//! directions in proportions `π_kj ∝ V_kj² / σ_j²`. A dependency is reported when
//! `η_j` exceeds a threshold (30) and two or more columns put more than half (0.5) of
//! their variance on that direction: those columns are named as inseparable. Exactly
//! collinear columns (σ_j ≈ 0, e.g. two codelets that always run together in a fixed
//! proportion) are named from the null vector's nonzero entries.

use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};

use super::options::AttributionOptions;
use super::stack::{NULL_LOADING, RANK_TOL};

/// Why a group of columns cannot be separated.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum InseparableReason {
    /// Their columns are exactly linearly dependent: only a combination is identified.
    ExactlyCollinear,
    /// A near dependency (condition index above the threshold).
    NearlyCollinear {
        /// The condition index `σ_max / σ_j` of the dependency.
        condition_index: f64,
    },
    /// Too few tasks of the type inside the sampled window.
    TooFewTasks {
        /// Tasks seen.
        count: u64,
        /// The configured minimum.
        minimum: u64,
    },
    /// The type never ran inside the sampled window.
    NoTimeInWindow,
}

/// Columns (`base` or type names) that the data cannot tell apart.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InseparableGroup {
    /// `base` and/or type names.
    pub members: Vec<String>,
    /// Why.
    pub reason: InseparableReason,
}

pub(crate) struct Conditioning {
    pub(crate) rank: usize,
    pub(crate) condition: Option<f64>,
    pub(crate) singular_values: Vec<f64>,
    pub(crate) groups: Vec<InseparableGroup>,
    pub(crate) warnings: Vec<String>,
}

/// Rank, condition number and inseparable groups of a column-scaled matrix.
pub(crate) fn conditioning(
    a: &DMatrix<f64>,
    labels: &[String],
    opts: &AttributionOptions,
) -> Conditioning {
    let m = a.ncols();
    if m == 0 {
        return Conditioning {
            rank: 0,
            condition: None,
            singular_values: Vec::new(),
            groups: Vec::new(),
            warnings: Vec::new(),
        };
    }
    let svd = a.clone().svd(false, true);
    let s: Vec<f64> = svd.singular_values.iter().copied().collect();
    let v_t = svd.v_t.expect("V was computed");
    let smax = s[0];
    let null = |sj: f64| sj <= RANK_TOL * smax;
    let rank = s.iter().filter(|&&sj| !null(sj)).count();
    let condition = (rank == m).then(|| smax / s[m - 1]);

    // Candidate dependencies, as (members, exact, condition index).
    let mut strong: Vec<(Vec<usize>, bool, f64)> = Vec::new();
    let mut moderate: Vec<(Vec<usize>, bool, f64)> = Vec::new();
    for (j, &sj) in s.iter().enumerate() {
        if null(sj) {
            let members: Vec<usize> = (0..m)
                .filter(|&k| v_t[(j, k)].abs() > NULL_LOADING)
                .collect();
            strong.push((members, true, f64::INFINITY));
        }
    }
    // Variance-decomposition proportions over the identifiable directions.
    let phi = |k: usize, j: usize| v_t[(j, k)].powi(2) / (s[j] * s[j]);
    let totals: Vec<f64> = (0..m)
        .map(|k| (0..m).filter(|&j| !null(s[j])).map(|j| phi(k, j)).sum())
        .collect();
    for (j, &sj) in s.iter().enumerate() {
        let eta = smax / sj;
        if null(sj) || eta <= opts.collinearity_warn_index {
            continue;
        }
        let members: Vec<usize> = (0..m)
            .filter(|&k| phi(k, j) / totals[k] > opts.variance_proportion)
            .collect();
        if members.len() >= 2 {
            let class = if eta > opts.collinearity_index {
                &mut strong
            } else {
                &mut moderate
            };
            class.push((members, false, eta));
        }
    }
    let name = |g: &[usize]| g.iter().map(|&k| labels[k].clone()).collect::<Vec<_>>();
    let groups = merge_overlapping(strong)
        .into_iter()
        .map(|(members, exact, eta)| InseparableGroup {
            members: name(&members),
            reason: if exact {
                InseparableReason::ExactlyCollinear
            } else {
                InseparableReason::NearlyCollinear {
                    condition_index: eta,
                }
            },
        })
        .collect();
    let warnings = merge_overlapping(moderate)
        .into_iter()
        .map(|(members, _, eta)| {
            format!(
                "moderate dependency between {} (condition index {eta:.0}): their standard \
                 errors are inflated; idle intervals or more varied schedules separate them",
                name(&members).join(", ")
            )
        })
        .collect();
    Conditioning {
        rank,
        condition,
        singular_values: s,
        groups,
        warnings,
    }
}

/// Merges groups that share a column (a column in two dependencies is one problem to the
/// user); a merged group is exact if any part was, with the largest condition index.
fn merge_overlapping(found: Vec<(Vec<usize>, bool, f64)>) -> Vec<(Vec<usize>, bool, f64)> {
    let mut merged: Vec<(Vec<usize>, bool, f64)> = Vec::new();
    for mut g in found {
        let mut i = 0;
        while i < merged.len() {
            if merged[i].0.iter().any(|k| g.0.contains(k)) {
                let h = merged.swap_remove(i);
                g.0.extend(h.0);
                g.0.sort_unstable();
                g.0.dedup();
                g.1 |= h.1;
                g.2 = g.2.max(h.2);
                i = 0;
            } else {
                i += 1;
            }
        }
        merged.push(g);
    }
    merged.retain(|g| g.0.len() >= 2);
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::stack::scaled_variances;

    fn labels(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("c{i}")).collect()
    }

    #[test]
    fn exact_dependency_names_its_columns() {
        // c1 = 2 c2 exactly; c0 independent.
        let a = DMatrix::from_fn(50, 3, |i, j| {
            let t = i as f64;
            match j {
                0 => 1.0 + (t * 0.7).sin(),
                1 => 2.0 * (t * 1.3).cos().abs(),
                _ => (t * 1.3).cos().abs(),
            }
        });
        let c = conditioning(&a, &labels(3), &AttributionOptions::default());
        assert_eq!(c.rank, 2);
        assert_eq!(c.condition, None);
        assert_eq!(c.groups.len(), 1);
        assert_eq!(c.groups[0].members, vec!["c1", "c2"]);
        assert_eq!(c.groups[0].reason, InseparableReason::ExactlyCollinear);
        let var = scaled_variances(&a);
        assert!(var[0].is_some() && var[1].is_none() && var[2].is_none());
    }

    #[test]
    fn near_dependency_is_found_by_variance_proportions() {
        let a = DMatrix::from_fn(200, 3, |i, j| {
            let t = i as f64;
            let u = (t * 1.3).cos().abs();
            match j {
                0 => 1.0 + (t * 0.7).sin(),
                1 => u,
                _ => u + 1e-3 * (t * 5.1).sin(),
            }
        });
        let c = conditioning(&a, &labels(3), &AttributionOptions::default());
        assert_eq!(c.rank, 3);
        assert!(c.condition.unwrap() > 30.0);
        assert_eq!(c.groups.len(), 1, "{:?}", c.groups);
        assert_eq!(c.groups[0].members, vec!["c1", "c2"]);
        assert!(matches!(
            c.groups[0].reason,
            InseparableReason::NearlyCollinear { condition_index } if condition_index > 30.0
        ));
    }

    #[test]
    fn well_separated_columns_raise_nothing() {
        let a = DMatrix::from_fn(100, 3, |i, j| {
            ((i * (j + 2)) % 7) as f64 + (j == 0) as u8 as f64
        });
        let c = conditioning(&a, &labels(3), &AttributionOptions::default());
        assert_eq!(c.rank, 3);
        assert!(c.groups.is_empty(), "{:?}", c.groups);
    }
}
