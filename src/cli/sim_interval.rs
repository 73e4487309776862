//! The prediction interval `simulate` and `compare` give from a simulation's replicas, and
//! the verdicts `simulate` draws from them.

/// A 95 % prediction interval for one more run, around `centre`, from `values` (the
/// replicas): `centre ± t·s·√(1 + 1/K)`, with Student's quantile at `K − 1` degrees of
/// freedom, on the logarithms where every value is positive (makespans and energies are,
/// and their replicas skew right: a few draws of a recording's slow tasks on the critical
/// path). On the values themselves, 8 replicas of 2.3 to 10.8 ms around 3.9 ms gave
/// "0.0 to 14.1 ms"; on their logarithms, a positive lower bound and a factor each way.
/// `None` with fewer than two.
pub(crate) fn interval(centre: f64, values: &[f64]) -> Option<[f64; 2]> {
    let k = values.len();
    if k < 2 {
        return None;
    }
    let logs = centre > 0.0 && values.iter().all(|v| *v > 0.0);
    let (c, xs): (f64, Vec<f64>) = if logs {
        (centre.ln(), values.iter().map(|v| v.ln()).collect())
    } else {
        (centre, values.to_vec())
    };
    let mean = xs.iter().sum::<f64>() / k as f64;
    let sd = (xs.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (k - 1) as f64).sqrt();
    let h = t975(k - 1) * sd * (1.0 + 1.0 / k as f64).sqrt();
    // The replicas' own mean may sit off the recorded durations' run: the interval holds
    // both.
    let (lo, hi) = ((c - h).min(mean - h), (c + h).max(mean + h));
    Some(if logs {
        [lo.exp(), hi.exp()]
    } else {
        [lo.max(0.0), hi]
    })
}

/// The 95 % interval of a fitted model's prediction `p` of a simulated run's energy, from
/// two sources taken as independent: the replicas' spread, `relative` (the platform
/// meter's interval divided by its value: the model's energy moves with the tasks'
/// durations as the meter's does), and the model's own interval for a measurement over
/// the run, `model` (its powers' uncertainty and the meter's noise). Each side's
/// half-widths add in quadrature; either alone gives its own. `None` with neither.
pub(crate) fn combine(
    p: f64,
    relative: Option<[f64; 2]>,
    model: Option<[f64; 2]>,
) -> Option<[f64; 2]> {
    if relative.is_none() && model.is_none() {
        return None;
    }
    let (r, m) = (relative.unwrap_or([1.0, 1.0]), model.unwrap_or([p, p]));
    let down = (p * (1.0 - r[0])).max(0.0).hypot((p - m[0]).max(0.0));
    let up = (p * (r[1] - 1.0)).max(0.0).hypot((m[1] - p).max(0.0));
    Some([(p - down).max(0.0), p + up])
}

/// Student's 0.975 quantile at `dof` degrees of freedom (a table, then Cornish-Fisher).
fn t975(dof: usize) -> f64 {
    const T: [f64; 5] = [12.706, 4.303, 3.182, 2.776, 2.571];
    match dof {
        0 => f64::INFINITY,
        1..=5 => T[dof - 1],
        _ => {
            let (z, v) = (1.959_964f64, dof as f64);
            z + (z.powi(3) + z) / (4.0 * v)
                + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * v * v)
        }
    }
}

/// What the intervals let one say of the policies' order: for makespan and energy, the
/// best policy and the ones whose intervals overlap its (indistinguishable here), or the
/// ranking when none overlap; that nothing can be ranked without intervals; nothing with
/// one policy.
pub(crate) fn verdicts(rows: &[Ranked<'_>]) -> Vec<String> {
    let mut out = Vec::new();
    if rows.len() < 2 {
        return out;
    }
    // Without replicas nothing is ranked, and silence read as a ranking (`--replicas 0`:
    // 10.99 J against 11.07 J, no word).
    if rows.iter().all(|r| r.makespan.1.is_none()) {
        out.push(
            "no 95% intervals (no replicas: --replicas 0 or 1, or a graph too large for \
             them): differences of a few percent between these rows cannot be told from \
             the tasks' own variation; do not rank them on this simulation"
                .to_owned(),
        );
        return out;
    }
    type Get = fn(&Ranked<'_>) -> Option<(f64, [f64; 2])>;
    let measures: [(&str, Get); 2] = [
        ("makespan", |r| r.makespan.1.map(|c| (r.makespan.0, c))),
        ("energy", |r| r.energy.0.zip(r.energy.1)),
    ];
    for (what, get) in measures {
        let Some(mut v) = rows
            .iter()
            .map(|r| get(r).map(|x| (r.policy, x)))
            .collect::<Option<Vec<_>>>()
        else {
            continue;
        };
        v.sort_by(|a, b| a.1 .0.total_cmp(&b.1 .0));
        let best = v[0];
        let tied: Vec<&str> = v[1..]
            .iter()
            .filter(|(_, (_, c))| c[0] <= best.1 .1[1])
            .map(|(p, _)| *p)
            .collect();
        if tied.is_empty() {
            out.push(format!(
                "{what}: {} is lowest, beyond the others' 95% intervals (order: {})",
                best.0,
                v.iter().map(|(p, _)| *p).collect::<Vec<_>>().join(" < ")
            ));
        } else {
            // "lws, eager and dmda", not "lws and eager, dmda".
            let mut all = vec![best.0];
            all.extend(&tied);
            let last = all.pop().expect("two at least");
            out.push(format!(
                "{what}: {} and {last} are indistinguishable here (their 95% intervals \
                 overlap): do not rank them on this simulation",
                all.join(", ")
            ));
        }
    }
    out
}

/// One simulated policy, as [`verdicts`] ranks it: its makespan (s) and energy (J), each
/// with its 95 % interval when there are replicas.
pub(crate) struct Ranked<'a> {
    pub(crate) policy: &'a str,
    pub(crate) makespan: (f64, Option<[f64; 2]>),
    pub(crate) energy: (Option<f64>, Option<[f64; 2]>),
}

#[cfg(test)]
mod tests {
    use super::{combine, interval};

    #[test]
    fn a_models_interval_holds_the_replicas_spread_and_its_own() {
        let near = |a: [f64; 2], b: [f64; 2]| (a[0] - b[0]).abs() + (a[1] - b[1]).abs() < 1e-9;
        // The replicas alone: ±10 % of the prediction.
        let c = combine(100.0, Some([0.9, 1.1]), None).unwrap();
        assert!(near(c, [90.0, 110.0]), "{c:?}");
        // The model alone: its own interval.
        let c = combine(100.0, None, Some([97.0, 101.0])).unwrap();
        assert!(near(c, [97.0, 101.0]), "{c:?}");
        // Both: each side in quadrature (10 and 3 down: 10.44; 10 and 1 up: 10.05).
        let [lo, hi] = combine(100.0, Some([0.9, 1.1]), Some([97.0, 101.0])).unwrap();
        assert!((lo - (100.0 - 109f64.sqrt())).abs() < 1e-9, "{lo}");
        assert!((hi - (100.0 + 101f64.sqrt())).abs() < 1e-9, "{hi}");
        // Never below 0, and nothing without either source.
        assert_eq!(combine(1.0, Some([-1.0, 3.0]), None), Some([0.0, 3.0]));
        assert_eq!(combine(1.0, None, None), None);
    }

    #[test]
    fn a_right_skewed_spread_keeps_a_positive_lower_bound() {
        // A 2cpu-2gpu dmda replay: three replicas drew slow tasks onto the critical path.
        let ms = [2.75, 4.23, 10.85, 4.96, 10.75, 3.49, 10.44, 2.34];
        let [lo, hi] = interval(3.87, &ms).unwrap();
        assert!(lo > 0.5 && lo < 2.34, "{lo}");
        assert!(hi > 10.85, "{hi}");
        // A tight spread is nearly symmetric, as before.
        let [lo, hi] = interval(100.0, &[99.0, 100.0, 101.0, 100.5, 99.5]).unwrap();
        assert!((100.0 - lo - (hi - 100.0)).abs() < 0.1, "{lo} {hi}");
        // Zero or fewer than two values: on the values, or none.
        assert_eq!(interval(0.0, &[0.0, 0.0]), Some([0.0, 0.0]));
        assert_eq!(interval(1.0, &[1.0]), None);
    }
}
