//! MPI's transport (feature `mpi`): rsmpi over the system's MPI library. Only the
//! communication thread calls MPI once the job has started (the main thread initialises
//! and finalises it), so the library must give `MPI_THREAD_SERIALIZED` or more.

use std::collections::HashMap;

use mpi::request::{Request, StaticScope};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use mpi::Threading;

use crate::transport::{size_mismatch, Req, Transport};
use crate::DistError;

/// The tags of the control messages, on a communicator of their own (a second duplicate of
/// the job's communicator), so that they never meet the data's (tag = handle id).
const CLOCK_TAG: i32 = 1;
const NAMES_TAG: i32 = 2;
const BEAT_TAG: i32 = 3;

/// What a beat carries (nothing but its arrival).
static BEAT: u8 = 0;

/// MPI, as long as it lives; dropping it finalises MPI (after every rank's runtime has
/// shut down).
pub struct MpiUniverse {
    _universe: mpi::environment::Universe,
    /// The thread level the library gave.
    pub threading: Threading,
}

impl std::fmt::Debug for MpiUniverse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiUniverse")
            .field("threading", &self.threading)
            .finish()
    }
}

/// Point-to-point messages over a duplicate of the job's communicator (`MPI_COMM_WORLD`, or
/// the one given to [`MpiTransport::with_communicator`]): taskwatt's messages never meet
/// the application's own.
pub struct MpiTransport {
    rank: usize,
    size: usize,
    data: SimpleCommunicator,
    control: SimpleCommunicator,
    reqs: HashMap<Req, Request<'static, [u8], StaticScope>>,
    /// Receives whose message has not arrived yet: source, tag, buffer and its length.
    /// Each is matched by a probe first, so that a message of another size is refused
    /// with the sizes named, where a receive posted at once would die inside MPI
    /// (`MPI_ERR_TRUNCATE`, fatal under the default error handler) when it is larger.
    unmatched: HashMap<Req, (usize, u32, *mut u8, usize)>,
    next: Req,
    /// Beats sent and not yet known to be done.
    beats: Vec<Request<'static, u8, StaticScope>>,
}

// SAFETY: the requests refer to buffers the caller keeps alive until they complete, and
// only the communication thread that owns the transport uses it (MPI is initialised with
// at least MPI_THREAD_SERIALIZED).
unsafe impl Send for MpiTransport {}

impl std::fmt::Debug for MpiTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiTransport")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("in_flight", &self.reqs.len())
            .finish()
    }
}

impl MpiTransport {
    /// Initialises MPI (once per process) and returns it with this rank's transport.
    pub fn init() -> Result<(MpiUniverse, MpiTransport), DistError> {
        let (universe, threading) = mpi::initialize_with_threading(Threading::Multiple)
            .ok_or_else(|| {
                DistError::NoMpi(
                    "MPI was already initialised in this process, or could not start; run \
                     under mpirun (Open MPI: `mpirun -np 4 taskwatt run cholesky --mpi`)"
                        .into(),
                )
            })?;
        if threading < Threading::Serialized {
            return Err(DistError::NoMpi(format!(
                "the MPI library gives thread level {threading:?}; taskwatt's communication \
                 thread needs MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE (Open MPI gives \
                 both)"
            )));
        }
        let t = MpiTransport::with_communicator(&universe.world());
        Ok((
            MpiUniverse {
                _universe: universe,
                threading,
            },
            t,
        ))
    }

    /// This rank's transport over `comm`, a communicator of the application's (a part of
    /// the job, say): the ranks are `comm`'s, and taskwatt's messages go on duplicates of
    /// it. MPI must have been initialised with `MPI_THREAD_SERIALIZED` or more (taskwatt's
    /// communication thread calls MPI), and stay so while the runtime lives. Every rank of
    /// `comm` calls it (duplicating a communicator is collective).
    pub fn with_communicator(comm: &SimpleCommunicator) -> MpiTransport {
        MpiTransport {
            rank: comm.rank() as usize,
            size: comm.size() as usize,
            data: comm.duplicate(),
            control: comm.duplicate(),
            reqs: HashMap::new(),
            unmatched: HashMap::new(),
            next: 0,
            beats: Vec::new(),
        }
    }
}

fn world() -> SimpleCommunicator {
    SimpleCommunicator::world()
}

/// Ends the whole job (`MPI_Abort` on `MPI_COMM_WORLD`): a rank that cannot go on, so that
/// the others do not wait for it.
pub fn abort_job(code: i32) {
    world().abort(code);
}

impl Transport for MpiTransport {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    unsafe fn isend(
        &mut self,
        dest: usize,
        tag: u32,
        ptr: *const u8,
        len: usize,
    ) -> Result<Req, String> {
        if dest >= self.size {
            return Err(format!("no rank {dest}"));
        }
        // SAFETY: the caller keeps the bytes valid and unchanged until the request is
        // done, which `test` waits for before the buffer is released.
        let buf: &'static [u8] = unsafe { std::slice::from_raw_parts(ptr, len) };
        let r = self
            .data
            .process_at_rank(dest as i32)
            .immediate_send_with_tag(StaticScope, buf, tag as i32);
        self.next += 1;
        self.reqs.insert(self.next, r);
        Ok(self.next)
    }

    unsafe fn irecv(
        &mut self,
        src: usize,
        tag: u32,
        ptr: *mut u8,
        len: usize,
    ) -> Result<Req, String> {
        if src >= self.size {
            return Err(format!("no rank {src}"));
        }
        // Matched when its message arrives (`test`). Several receives from one source with
        // one tag may be pending (a reduction's contributions); the communication thread
        // tests them one at a time in the flow's order (`comm::Op::seq`), which keeps
        // MPI's order.
        self.next += 1;
        self.unmatched.insert(self.next, (src, tag, ptr, len));
        Ok(self.next)
    }

    fn test(&mut self, req: Req) -> Result<bool, String> {
        if let Some(&(src, tag, ptr, len)) = self.unmatched.get(&req) {
            let Some((message, status)) = self
                .data
                .process_at_rank(src as i32)
                .immediate_matched_probe_with_tag(tag as i32)
            else {
                return Ok(false);
            };
            self.unmatched.remove(&req);
            let got = status.count(u8::equivalent_datatype()).max(0) as usize;
            if got != len {
                // Take the message off the wire (into a buffer of its size), then refuse it.
                let mut sink = vec![0u8; got];
                message.matched_receive_into(&mut sink[..]);
                return Err(size_mismatch(got, src, tag, len));
            }
            // SAFETY: as `isend`; the buffer is this receive's alone until it is done.
            let buf: &'static mut [u8] = unsafe { std::slice::from_raw_parts_mut(ptr, len) };
            let r = message.immediate_matched_receive_into(StaticScope, buf);
            self.reqs.insert(req, r);
        }
        let Some(r) = self.reqs.remove(&req) else {
            return Err(format!("request {req} is unknown"));
        };
        // A receive's size was checked when its message was matched.
        match r.test() {
            Ok(_) => Ok(true),
            Err(r) => {
                self.reqs.insert(req, r);
                Ok(false)
            }
        }
    }

    fn ready(&mut self, src: usize, tag: u32) -> Result<bool, String> {
        // Only this thread receives on this communicator, so a message seen here is the
        // one the receive posted next will match.
        Ok(self
            .data
            .process_at_rank(src as i32)
            .immediate_probe_with_tag(tag as i32)
            .is_some())
    }

    fn clock_offset(&mut self, now_ns: &dyn Fn() -> u64) -> Result<(i64, u64), String> {
        // Rank 0 answers each rank's pings with its clock; a rank keeps the estimate of its
        // fastest round trip: offset = t0 - (t1 + t2) / 2 (NTP's estimate, symmetric paths).
        const ROUNDS: usize = 20;
        let w = &self.control;
        if self.rank == 0 {
            for r in 1..self.size {
                for _ in 0..ROUNDS {
                    let (_ping, _) = w
                        .process_at_rank(r as i32)
                        .receive_with_tag::<u64>(CLOCK_TAG);
                    let t0 = now_ns();
                    w.process_at_rank(r as i32).send_with_tag(&t0, CLOCK_TAG);
                }
            }
            return Ok((0, 0));
        }
        let mut best = (0i64, u64::MAX);
        for _ in 0..ROUNDS {
            let t1 = now_ns();
            w.process_at_rank(0).send_with_tag(&t1, CLOCK_TAG);
            let (t0, _) = w.process_at_rank(0).receive_with_tag::<u64>(CLOCK_TAG);
            let t2 = now_ns();
            let rtt = t2.saturating_sub(t1);
            if rtt < best.1 {
                best = (t0 as i64 - ((t1 as i128 + t2 as i128) / 2) as i64, rtt);
            }
        }
        Ok(best)
    }

    fn barrier(&mut self) -> Result<(), String> {
        self.control.barrier();
        Ok(())
    }

    fn gather_names(&mut self, mine: &str) -> Result<Vec<String>, String> {
        // Rank 0 gathers, then sends the list (newline-separated) to every rank.
        let w = &self.control;
        if self.rank == 0 {
            let mut names = vec![mine.to_owned()];
            for r in 1..self.size {
                let (bytes, _) = w
                    .process_at_rank(r as i32)
                    .receive_vec_with_tag::<u8>(NAMES_TAG);
                names.push(String::from_utf8_lossy(&bytes).into_owned());
            }
            let all = names.join("\n");
            for r in 1..self.size {
                w.process_at_rank(r as i32)
                    .send_with_tag(all.as_bytes(), NAMES_TAG);
            }
            return Ok(names);
        }
        w.process_at_rank(0)
            .send_with_tag(mine.as_bytes(), NAMES_TAG);
        let (bytes, _) = w.process_at_rank(0).receive_vec_with_tag::<u8>(NAMES_TAG);
        let names: Vec<String> = String::from_utf8_lossy(&bytes)
            .split('\n')
            .map(str::to_owned)
            .collect();
        if names.len() != self.size {
            return Err(format!(
                "{} node names for {} ranks",
                names.len(),
                self.size
            ));
        }
        Ok(names)
    }

    fn node_name(&self) -> String {
        mpi::environment::processor_name().unwrap_or_else(|_| "unknown".into())
    }

    fn abort(&mut self, code: i32) {
        self.data.abort(code);
    }

    fn send_beat(&mut self, dest: usize) -> Result<(), String> {
        if dest >= self.size {
            return Err(format!("no rank {dest}"));
        }
        // Forget the beats already done (a byte goes eagerly: at once, as a rule).
        for r in std::mem::take(&mut self.beats) {
            if let Err(r) = r.test() {
                self.beats.push(r);
            }
        }
        let r = self
            .control
            .process_at_rank(dest as i32)
            .immediate_send_with_tag(StaticScope, &BEAT, BEAT_TAG);
        self.beats.push(r);
        Ok(())
    }

    fn take_beats(&mut self, from: &mut Vec<usize>) -> Result<(), String> {
        while let Some((message, status)) = self
            .control
            .any_process()
            .immediate_matched_probe_with_tag(BEAT_TAG)
        {
            let mut b = 0u8;
            message.matched_receive_into(&mut b);
            from.push(status.source_rank().max(0) as usize);
        }
        Ok(())
    }
}

impl Drop for MpiTransport {
    fn drop(&mut self) {
        // A beat still in flight after a second (its peer gone) is left to MPI: dropping
        // an unfinished request would panic in rsmpi.
        let t = std::time::Instant::now();
        while let Some(r) = self.beats.pop() {
            match r.test() {
                Ok(_) => {}
                Err(r) if t.elapsed().as_secs() < 1 => {
                    self.beats.push(r);
                    std::thread::yield_now();
                }
                Err(r) => std::mem::forget(r),
            }
        }
    }
}
