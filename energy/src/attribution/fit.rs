//! One domain's fit ([`DomainFit`]): its coefficients, residuals, noise, contention and
//! frequency fits, covariance and diagnostics, as `solve.rs` assembles them.

use taskwatt_traces::Domain;

use super::diagnostics::FitDiagnostics;
use super::estimate::*;
use super::key::TypeKey;
use super::system::TypeStats;

/// The fit of one domain.
#[derive(Clone, Debug)]
pub struct DomainFit {
    /// The domain.
    pub domain: Domain,
    /// Its name (from the first trace).
    pub name: String,
    /// The task types, in column order.
    pub keys: Vec<TypeKey>,
    /// Base power `P_base`.
    pub base: Estimate,
    /// Power of each type, parallel to `keys`.
    pub types: Vec<Estimate>,
    /// Per-type counts summed over the stacked traces, parallel to `keys`.
    pub stats: Vec<TypeStats>,
    /// `E_i − Ê_i`, J, one per interval (stacked traces one after the other).
    pub residuals_j: Vec<f64>,
    /// The rows' error variance against their length, from `residuals_j`.
    pub noise: Option<NoiseModel>,
    /// The base power's linear drift over the window (the change from the window's middle
    /// to its end, W; `base` is the window's mean), when modelled.
    pub drift: Option<Estimate>,
    /// The contention, when the domain's occupancy columns exist.
    pub contention: Option<super::contention::ContentionFit>,
    /// How the sampled frequency entered the fit, when the trace has it for the domain.
    pub frequency: Option<super::frequency::FrequencyFit>,
    /// Each type's mean power at the occupancy it ran at, when contention is modelled
    /// (parallel to `keys`; `None` for a type with no time in the window).
    pub types_at_run: Vec<Option<Estimate>>,
    /// Covariance of the unconstrained coefficients in `layout`'s order (the matrix behind
    /// every interval); `None` when a coefficient is not identifiable.
    pub covariance_w2: Option<Vec<Vec<f64>>>,
    /// Without `covariance_w2` (a coefficient not identifiable): the covariance over the
    /// directions the data identify, which gives intervals to the combinations that do
    /// not lean on the others (a region's energy when two types always run together).
    pub estimable_covariance: Option<super::covariance::Estimable>,
    /// The order of `covariance_w2`.
    pub layout: CovLayout,
    /// Student-t 95% quantile for the intervals.
    pub t95: f64,
    /// Fit quality and warnings.
    pub diagnostics: FitDiagnostics,
}

impl DomainFit {
    /// The contention the fit's powers are alone at: `c` when identified, else 0.
    pub fn theta(&self) -> f64 {
        self.contention
            .as_ref()
            .filter(|c| c.identified)
            .map_or(0.0, |c| c.c.value_w)
    }
}
