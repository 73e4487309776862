//! The test behind a comparison's verdict: whether one policy's runs used measurably more
//! energy than the best one's, by Welch's t-test (unequal variances), two-sided (the best
//! is picked for its low runs), at a level shared over the comparisons made (Bonferroni).
//!
//! Why not the runs' ranges: a policy whose runs all measured more than all of the best
//! one's was called measurably different. With identical policies, 3 runs each, that
//! happened for at least one of 4 policies in 31 % of comparisons (a user's simulation;
//! 71 % with 2 runs each): the lowest of several policies is picked *because* its runs
//! came out low, and two ranges of three runs miss each other often by chance.

/// `ln Γ(x)` for `x > 0` (Lanczos, g = 7, nine coefficients: about 15 digits).
fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection.
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    let t = x + G + 0.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The regularized incomplete beta function `I_x(a, b)`, by its continued fraction
/// (modified Lentz), on the side of `x` where it converges fast.
fn inc_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    if x > (a + 1.0) / (a + b + 2.0) {
        return 1.0 - inc_beta(b, a, 1.0 - x);
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp() / a;
    const TINY: f64 = 1e-300;
    let (mut c, mut d) = (1.0, 1.0 - (a + b) * x / (a + 1.0));
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut f = d;
    for m in 1..300 {
        let m = m as f64;
        // The even step, then the odd one.
        for num in [
            m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0)),
        ] {
            d = 1.0 + num * d;
            if d.abs() < TINY {
                d = TINY;
            }
            c = 1.0 + num / c;
            if c.abs() < TINY {
                c = TINY;
            }
            d = 1.0 / d;
            f *= c * d;
        }
        if (c * d - 1.0).abs() < 1e-15 {
            break;
        }
    }
    front * f
}

/// `P(T > t)` for Student's t with `df` degrees of freedom.
pub(crate) fn t_upper(t: f64, df: f64) -> f64 {
    let tail = 0.5 * inc_beta(df / 2.0, 0.5, df / (df + t * t));
    if t >= 0.0 {
        tail
    } else {
        1.0 - tail
    }
}

/// The one-sided p-value of "`other`'s mean is above `best`'s" by Welch's t-test: small
/// when `other` used measurably more. 1 with fewer than two runs on either side; with no
/// spread on either side, 0 when `other`'s mean is higher and 1 otherwise.
pub(crate) fn welch_more(best: &[f64], other: &[f64]) -> f64 {
    let (nb, no) = (best.len() as f64, other.len() as f64);
    if nb < 2.0 || no < 2.0 {
        return 1.0;
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let var =
        |v: &[f64], m: f64| v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64;
    let (mb, mo) = (mean(best), mean(other));
    let (qb, qo) = (var(best, mb) / nb, var(other, mo) / no);
    let se2 = qb + qo;
    if se2 <= 0.0 {
        return if mo > mb { 0.0 } else { 1.0 };
    }
    let t = (mo - mb) / se2.sqrt();
    // Welch-Satterthwaite.
    let df = se2 * se2 / (qb * qb / (nb - 1.0) + qo * qo / (no - 1.0));
    t_upper(t, df)
}

/// The level of the whole verdict: about the chance that it calls a policy measurably
/// more when none is.
pub(crate) const LEVEL: f64 = 0.05;

/// The p-value below which one of `comparisons` policies is measurably above the best:
/// two-sided (the best was picked for its low runs: with two policies, a one-sided test of
/// the one picked is a two-sided test) and shared over the comparisons (Bonferroni).
/// Identical policies, 3 runs each, are then called different in 3 to 5 % of comparisons
/// of 2 to 6 policies (4 % with 4; 6 % with 5 runs each), where a one-sided level gave 7 to
/// 12 %.
pub(crate) fn threshold(comparisons: usize) -> f64 {
    LEVEL / (2.0 * comparisons.max(1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn student_t_tails_match_the_tables() {
        // t(0.975) at 2, 4 and 10 degrees of freedom; t(0.95) at 3.
        for (t, df, p) in [
            (4.302_653, 2.0, 0.025),
            (2.776_445, 4.0, 0.025),
            (2.228_139, 10.0, 0.025),
            (2.353_363, 3.0, 0.05),
        ] {
            assert!((t_upper(t, df) - p).abs() < 1e-6, "t {t} df {df}");
            assert!((t_upper(-t, df) - (1.0 - p)).abs() < 1e-6);
        }
        assert!((t_upper(0.0, 5.0) - 0.5).abs() < 1e-12);
    }

    /// Identical policies, 3 runs each, 4 policies: the lowest picked, the others tested
    /// against it. The ranges' rule called one of them different in about 31 % of
    /// comparisons; the test keeps it near its level.
    #[test]
    fn identical_policies_are_rarely_called_different() {
        // A small deterministic generator, normal draws by Box-Muller.
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        let mut uniform = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut normal = || {
            let (u, v) = (uniform().max(1e-300), uniform());
            (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
        };
        let (trials, policies, runs) = (4000, 4, 3);
        let (mut by_test, mut by_ranges) = (0, 0);
        for _ in 0..trials {
            let p: Vec<Vec<f64>> = (0..policies)
                .map(|_| (0..runs).map(|_| 100.0 + normal()).collect())
                .collect();
            let mean = |v: &Vec<f64>| v.iter().sum::<f64>() / v.len() as f64;
            let best = (0..policies)
                .min_by(|&a, &b| mean(&p[a]).total_cmp(&mean(&p[b])))
                .unwrap();
            let others = (0..policies).filter(|&i| i != best);
            let level = threshold(policies - 1);
            if others.clone().any(|i| welch_more(&p[best], &p[i]) < level) {
                by_test += 1;
            }
            let hi = p[best].iter().cloned().fold(f64::MIN, f64::max);
            if others.clone().any(|i| p[i].iter().all(|&x| x > hi)) {
                by_ranges += 1;
            }
        }
        let (test, ranges) = (
            by_test as f64 / trials as f64,
            by_ranges as f64 / trials as f64,
        );
        assert!(test <= 0.06, "the test: {test}");
        assert!(ranges > 0.2, "the ranges' rule: {ranges}");
        // And a real difference of 5 standard deviations is found.
        let (a, b) = ([100.0, 101.0, 99.5], [105.0, 106.2, 104.4]);
        assert!(welch_more(&a, &b) < 0.01);
    }
}
