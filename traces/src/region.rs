//! Named regions of a run, the way NVTX ranges or Kokkos profiling regions work: an
//! application opens a region around a phase it wants the energy of, and the report gives
//! that region's energy per domain, split into task types and base.
//!
//! A region is a [`Marker`] named `region:<name>` (see [`REGION_PREFIX`]); a region opened
//! several times is the union of its spans. The runtime's own phases use the same
//! mechanism with fixed names: `graph` (the application's task graph, reported as the
//! `application` region) and `idle-calibration` / `type-calibration:<codelet>` (reported
//! together as `calibration`).

use crate::{Chunk, Clock, Marker, TraceSink};

/// Marker names starting with this are user regions: `region:solve`.
pub const REGION_PREFIX: &str = "region:";

/// An open region: records its marker when closed or dropped.
///
/// ```
/// use taskwatt_traces::{Region, TraceSink};
/// let sink = TraceSink::null();
/// {
///     let _r = Region::open(&sink, "assembly");
///     // ... submit and wait for the assembly's tasks ...
/// } // the region closes here
/// ```
#[must_use = "a region closes when dropped: keep it alive for the phase it measures"]
pub struct Region {
    sink: TraceSink,
    name: String,
    start: crate::Timestamp,
    closed: bool,
}

impl Region {
    /// Opens the region `name` now (trace clock).
    pub fn open(sink: &TraceSink, name: impl Into<String>) -> Region {
        Region {
            sink: sink.clone(),
            name: name.into(),
            start: Clock::now(),
            closed: false,
        }
    }

    /// Closes it now (as dropping it does).
    pub fn close(mut self) {
        self.finish();
    }

    fn finish(&mut self) {
        if !self.closed {
            self.closed = true;
            self.sink.send(Chunk::Markers(vec![Marker {
                name: format!("{REGION_PREFIX}{}", self.name),
                start: self.start,
                end: Clock::now(),
            }]));
        }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_region_records_one_marker_when_dropped_or_closed() {
        let (sink, mem) = TraceSink::memory();
        {
            let _r = Region::open(&sink, "assembly");
        }
        Region::open(&sink, "solve").close();
        drop(sink);
        let t = mem.into_trace().unwrap();
        let names: Vec<&str> = t.markers.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["region:assembly", "region:solve"]);
        assert!(t.markers.iter().all(|m| m.start <= m.end));
    }
}
