//! Named regions of a run, the way NVTX ranges or Kokkos profiling regions work: an
//! application opens a region around a phase it wants the energy of, and the report gives
//! that region's energy per domain, split into task types and base.
//!
//! A region is a [`Marker`] named `region:<name>` (see [`REGION_PREFIX`]); a region opened
//! several times is the union of its spans. The runtime's own phases use the same
//! mechanism with fixed names: `graph` (the application's task graph, reported as the
//! `application` region) and `idle-calibration` / `type-calibration:<codelet>` (reported
//! together as `calibration`).

use std::sync::{Arc, Mutex};

use crate::{Chunk, Clock, Marker, Timestamp, TraceSink};

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
    /// The registry it was opened in, and its number there.
    registry: Option<(OpenRegions, u64)>,
}

/// The regions a run opened and has not closed yet, so that the run's end can close them
/// ([`OpenRegions::close_all`]) rather than lose them: a region guard still alive when its
/// trace is finished would send its marker to a trace that has ended.
#[derive(Clone, Debug, Default)]
pub struct OpenRegions(Arc<Mutex<OpenList>>);

#[derive(Debug, Default)]
struct OpenList {
    next: u64,
    open: Vec<(u64, String, Timestamp)>,
}

impl OpenRegions {
    /// Opens the region `name` now, in this registry.
    pub fn open(&self, sink: &TraceSink, name: impl Into<String>) -> Region {
        let name = name.into();
        let start = Clock::now();
        let mut list = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let id = list.next;
        list.next += 1;
        list.open.push((id, name.clone(), start));
        drop(list);
        Region {
            sink: sink.clone(),
            name,
            start,
            closed: false,
            registry: Some((self.clone(), id)),
        }
    }

    /// Closes every region still open now, into `sink`; returns their names. Their guards
    /// then record nothing more when they drop.
    pub fn close_all(&self, sink: &TraceSink) -> Vec<String> {
        let open = std::mem::take(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()).open);
        let end = Clock::now();
        if !open.is_empty() {
            sink.send(Chunk::Markers(
                open.iter()
                    .map(|(_, name, start)| Marker {
                        name: format!("{REGION_PREFIX}{name}"),
                        start: *start,
                        end,
                    })
                    .collect(),
            ));
        }
        open.into_iter().map(|(_, name, _)| name).collect()
    }

    /// Takes region `id` off the list; false if `close_all` closed it already.
    fn take(&self, id: u64) -> bool {
        let mut list = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match list.open.iter().position(|(i, _, _)| *i == id) {
            Some(k) => {
                list.open.swap_remove(k);
                true
            }
            None => false,
        }
    }
}

impl Region {
    /// Opens the region `name` now (trace clock).
    pub fn open(sink: &TraceSink, name: impl Into<String>) -> Region {
        Region {
            sink: sink.clone(),
            name: name.into(),
            start: Clock::now(),
            closed: false,
            registry: None,
        }
    }

    /// Closes it now (as dropping it does).
    pub fn close(mut self) {
        self.finish();
    }

    fn finish(&mut self) {
        if !self.closed {
            self.closed = true;
            if let Some((registry, id)) = &self.registry {
                if !registry.take(*id) {
                    return; // closed by the run's end
                }
            }
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
