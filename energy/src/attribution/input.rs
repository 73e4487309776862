//! What the attribution reads from a trace, as borrowed slices.
//!
//! The core API works on slices and an iterator of task records rather than on a whole
//! trace, so that a caller can stream tasks (a 10 M-task trace need not be materialised
//! twice) and so that tests build inputs without a file.

use taskwatt_traces::{
    CodeletInfo, DomainInfo, EnergySample, FrequencySample, GroundTruth, Marker,
};

/// The marker name of windows during which every worker was parked (see the docs).
pub const IDLE_CALIBRATION: &str = "idle-calibration";

/// Everything but the tasks: domains, samples, codelets, markers and the simulated
/// meter's truth. Tasks are passed beside it as any iterator of `TaskRecord`s or
/// `&TaskRecord`s.
#[derive(Clone, Copy, Debug)]
pub struct TraceParts<'a> {
    /// Measured domains, with the workers each covers.
    pub domains: &'a [DomainInfo],
    /// Energy samples of every domain, in any order (each domain's are sorted by time).
    pub samples: &'a [EnergySample],
    /// Codelets, to name task types.
    pub codelets: &'a [CodeletInfo],
    /// Markers; those named [`IDLE_CALIBRATION`] pin the base power.
    pub markers: &'a [Marker],
    /// The powers a simulated meter was configured with, if any.
    pub truth: Option<&'a GroundTruth>,
    /// The CPU packages' sampled frequencies (none in traces before format 1.6).
    pub frequencies: &'a [FrequencySample],
}

impl<'a> TraceParts<'a> {
    /// Parts with no markers and no truth.
    pub fn new(
        domains: &'a [DomainInfo],
        samples: &'a [EnergySample],
        codelets: &'a [CodeletInfo],
    ) -> TraceParts<'a> {
        TraceParts {
            domains,
            samples,
            codelets,
            markers: &[],
            truth: None,
            frequencies: &[],
        }
    }
}

impl<'a> TraceParts<'a> {
    /// The parts of a whole trace (its tasks are `trace.tasks`, see [`trace_tasks`]).
    pub fn from_trace(trace: &'a taskwatt_traces::Trace) -> TraceParts<'a> {
        TraceParts {
            domains: &trace.domains,
            samples: &trace.samples,
            codelets: &trace.codelets,
            markers: &trace.markers,
            truth: trace.truth.as_ref(),
            frequencies: &trace.frequencies,
        }
    }
}

/// Every task record of a trace, chunk after chunk.
pub fn trace_tasks(
    trace: &taskwatt_traces::Trace,
) -> impl Iterator<Item = &taskwatt_traces::TaskRecord> + '_ {
    Counted {
        left: trace.tasks.iter().map(|c| c.records.len()).sum(),
        inner: trace.tasks.iter().flat_map(|c| c.records.iter()),
    }
}

/// An iterator that knows how many items are left (a flattened one does not say): the
/// system build sizes its work from it (`size_hint`).
struct Counted<I> {
    inner: I,
    left: usize,
}

impl<I: Iterator> Iterator for Counted<I> {
    type Item = I::Item;

    fn next(&mut self) -> Option<I::Item> {
        let x = self.inner.next()?;
        self.left = self.left.saturating_sub(1);
        Some(x)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}
