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
//! Each phase runs the type alone (one task at a time, so one worker is busy) for two
//! thirds of its time, and on every worker at once (batches of two per worker, the
//! reserved workers on the package's other cores included) for the rest, in alternating
//! rounds of about 100 ms (see `phase`): on a real
//! package a task draws less when others run beside it (contention, docs/attribution.md),
//! and the two parts give the fit the contrast that separates a type's power alone from
//! its power on a full package. Alone gets the larger part because the graph itself runs
//! every type beside others, and a type's power alone rests on its tasks run alone (each
//! task's power varies around its type's).
//!
//! Calibration tasks are the app's own codelets (the same objects, so the same task types),
//! each on its own scratch tile, restoring their input from a pristine copy first when the
//! kernel works in place (the copy is a small part of the task: 0.5 MiB against 2 to 34
//! MFlop for 256 x 256 tiles).

use std::time::{Duration, Instant};

use taskwatt_runtime::{Runtime, RuntimeError, Task};
use taskwatt_traces::{Chunk, Clock, Marker, TraceSink};

/// Prefix of the markers around type-calibration phases.
pub const TYPE_CALIBRATION: &str = "type-calibration";

/// The length of a calibration round: alone, then on every worker (see [`phase`]).
const ROUND: Duration = Duration::from_millis(100);

/// Most rounds in a phase.
const MAX_ROUNDS: f64 = 16.0;

/// The argument that tells an app's codelet it runs a calibration task: restore the
/// in-place operand from the last buffer before computing.
#[derive(Clone, Copy, Debug)]
pub struct Calibration;

/// Runs `make(slot)` tasks one at a time for two thirds of `duration`, then in batches of two
/// per worker for the rest (with one worker and no reserved one, batches only), in rounds of
/// about 100 ms that alternate the two (at most 16 rounds), then marks
/// the phase `type-calibration:<name>` in `sink`. `make` gets the task's slot in the batch
/// (0 .. 2 * workers, reserved workers included), so that tasks of one batch use distinct
/// scratch data. The runtime's reserved workers (`RuntimeBuilder::reserved_workers`) take
/// two tasks each of every batch, pinned to them: a run on fewer workers than its package
/// has cores then calibrates on every core all the same.
pub fn phase<'a>(
    rt: &Runtime,
    sink: &TraceSink,
    name: &str,
    duration: Duration,
    make: &dyn Fn(usize) -> Task<'a>,
) -> Result<(), RuntimeError> {
    if duration.is_zero() {
        return Ok(());
    }
    let reserved = rt.reserved_workers();
    let slots = 2 * rt.workers().len();
    let scheduled = slots - 2 * reserved.len();
    let start = Clock::now();
    let t0 = Instant::now();
    // Rounds of about ROUND each (at least one), each alone for two thirds of it, then
    // on every worker: a machine whose speed or base power drifts over the phase (a busy
    // neighbour on a VM, a warming package) then drifts alike under both parts, instead
    // of reading as the difference between alone and beside others.
    let rounds = (duration.as_secs_f64() / ROUND.as_secs_f64()).clamp(1.0, MAX_ROUNDS) as u32;
    for round in 1..=rounds {
        let end = duration * round / rounds;
        if rt.workers().len() > 1 {
            let alone_until = duration * (round - 1) / rounds + (duration / rounds) * 2 / 3;
            while t0.elapsed() < alone_until {
                rt.submit(make(0))?;
                rt.wait_all()?;
            }
        }
        while t0.elapsed() < end {
            for slot in 0..slots {
                let task = make(slot);
                rt.submit(match slot.checked_sub(scheduled) {
                    Some(i) => task.on_worker(reserved[i / 2]),
                    None => task,
                })?;
            }
            rt.wait_all()?;
        }
    }
    sink.send(Chunk::Markers(vec![Marker {
        name: format!("{TYPE_CALIBRATION}:{name}"),
        start,
        end: Clock::now(),
    }]));
    Ok(())
}
