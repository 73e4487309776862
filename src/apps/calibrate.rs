//! Type calibration: each codelet of an app run alone on every worker for a while, before
//! the graph.
//!
//! In a task graph, task types often run in nearly fixed proportions (in a tiled Cholesky,
//! every panel step runs one trsm and one syrk per tile row), so the intervals of the
//! natural run determine their sum well and their split badly. A short phase where each
//! type runs alone adds intervals in which only that type's time is non-zero, which
//! separates them, as idle calibration pins the base power. The phases are marked
//! `type-calibration:<codelet>` in the trace; the attribution needs nothing else.
//!
//! Calibration tasks are the app's own codelets (the same objects, so the same task types),
//! each on its own scratch tile, in batches of two per worker, restoring their input from a
//! pristine copy first when the kernel works in place (the copy is a small part of the
//! task: 0.5 MiB against 2 to 34 MFlop for 256 x 256 tiles).

use std::time::{Duration, Instant};

use taskwatt_runtime::{Runtime, RuntimeError, Task};
use taskwatt_traces::{Chunk, Clock, Marker, TraceSink};

/// Prefix of the markers around type-calibration phases.
pub const TYPE_CALIBRATION: &str = "type-calibration";

/// The argument that tells an app's codelet it runs a calibration task: restore the
/// in-place operand from the last buffer before computing.
#[derive(Clone, Copy, Debug)]
pub struct Calibration;

/// Runs `make(slot)` tasks in batches of two per worker until `duration` has passed, then
/// marks the phase `type-calibration:<name>` in `sink`. `make` gets the task's slot in the
/// batch (0 .. 2 * workers), so that tasks of one batch use distinct scratch data.
pub(crate) fn phase<'a>(
    rt: &Runtime,
    sink: &TraceSink,
    name: &str,
    duration: Duration,
    make: &dyn Fn(usize) -> Task<'a>,
) -> Result<(), RuntimeError> {
    if duration.is_zero() {
        return Ok(());
    }
    let slots = 2 * rt.workers().len();
    let start = Clock::now();
    let t0 = Instant::now();
    while t0.elapsed() < duration {
        for slot in 0..slots {
            rt.submit(make(slot))?;
        }
        rt.wait_all()?;
    }
    sink.send(Chunk::Markers(vec![Marker {
        name: format!("{TYPE_CALIBRATION}:{name}"),
        start,
        end: Clock::now(),
    }]));
    Ok(())
}
