//! The communication thread: posts a send when the data it sends is ready and a receive
//! when the buffer it fills is free (deferred acquisitions of the local runtime), tests
//! them without blocking any worker, releases the data when done, and gives up with an
//! error naming the peer when a message does not come in time.
//!
//! # Hangs against long tasks
//! A rank waiting for a message cannot tell a peer that hangs (dead, or a different task
//! flow) from one that computes for long before it sends, nor from one that waits for a
//! third rank that computes. So each rank that computes sends every other rank a beat
//! every quarter of the limit ([`Transport::send_beat`]): a rank computes while one of its
//! workers is not parked, or while its application's thread runs code of its own
//! (generating its data, say) rather than waiting in taskwatt (`wait_all`, `unregister`,
//! a rendezvous, the memory limit). A pending message is given up only when no message of
//! this rank completed, and no beat came from any rank, for the whole limit: the job as a
//! whole stalled. A task that computes for an hour keeps its waiters waiting; a job whose
//! ranks all wait (for a message that will never come, or nothing) ends after the limit.
//! A rank blocked in an MPI call of the application's own counts as computing: a deadlock
//! between the application's messages and taskwatt's is not detected.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use taskwatt_runtime::DeferredAccess;
use taskwatt_traces::{Chunk, Clock, CommChunk, CommRecord, Timestamp, TraceSink};

use crate::transport::{Req, Transport};
use crate::DistError;

/// A message to post once its data is granted.
pub(crate) struct Op {
    pub(crate) send: bool,
    pub(crate) peer: usize,
    pub(crate) handle: u32,
    pub(crate) access: DeferredAccess,
    /// A receive's place among this rank's receives from `peer` with this tag, in the
    /// flow's order: the peer sends them in that order, and each must take its own message
    /// whenever its buffer comes free (a reduction's buffer is free at once, the copy a
    /// value goes to only after its readers).
    pub(crate) seq: u64,
}

pub(crate) enum Cmd {
    Post(Op),
    /// Answered when every message posted before it is done.
    Flush(Sender<Result<(), String>>),
    /// A clock-offset rendezvous.
    Clock(Sender<Result<(i64, u64), String>>),
    /// Every rank's node name (an all-gather).
    Names(Sender<Result<Vec<String>, String>>),
    /// A barrier of every rank (sent once this rank's messages are all done).
    Barrier(Sender<Result<(), String>>),
    /// Once granted (every access submitted before it is done), run the function on the
    /// acquisition, then release it: a cached copy's storage freed, or made.
    /// The last, if any, runs once the acquisition is released (a freed copy's bytes go
    /// back to the memory account, `crate::memory`).
    Apply(
        DeferredAccess,
        fn(&mut DeferredAccess),
        Option<crate::memory::Freed>,
    ),
    Stop,
    /// The application's thread on this rank ended without shutting it down (a panic, an
    /// early return): end the job, as a rank that dies would.
    Abort(String),
}

/// What the thread hands back at the end.
#[derive(Debug, Default)]
pub(crate) struct CommLog {
    pub(crate) events: Vec<CommRecord>,
}

/// Whether this rank computes (a worker not parked, or the application's thread outside
/// taskwatt's waits).
pub(crate) type Busy = Box<dyn Fn() -> bool + Send>;

/// The first task failure of this rank, reported by its `wait_all` or not
/// (`Runtime::failure_probe`).
pub(crate) type FailedTask = Box<dyn Fn() -> Option<String> + Send>;

/// How many of the application's calls wait in taskwatt now: a rank whose application
/// runs code of its own computes (the module's "Hangs against long tasks").
#[derive(Clone, Default)]
pub(crate) struct AppWaits(Arc<AtomicUsize>);

impl AppWaits {
    /// Whether this rank computes: `awake` (a worker not parked), or the application's
    /// thread outside taskwatt's waits.
    pub(crate) fn busy(&self, awake: impl Fn() -> bool + Send + 'static) -> Busy {
        let w = self.0.clone();
        Box::new(move || awake() || w.load(Ordering::SeqCst) == 0)
    }

    /// Marks the application's thread as waiting in taskwatt until the guard drops.
    pub(crate) fn enter(&self) -> Waiting {
        self.0.fetch_add(1, Ordering::SeqCst);
        Waiting(self.0.clone())
    }
}

/// The application's thread waits in taskwatt while this lives ([`AppWaits::enter`]).
pub(crate) struct Waiting(Arc<AtomicUsize>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

pub(crate) struct CommThread {
    pub(crate) tx: Sender<Cmd>,
    /// The thread gives its transport back with its log when it stops.
    join: Option<JoinHandle<(CommLog, Box<dyn Transport>)>>,
    pub(crate) failed: Arc<Mutex<Option<DistError>>>,
}

/// How long a rank may wait with messages pending and none completing:
/// `TASKWATT_MPI_TIMEOUT` seconds, default 300.
pub(crate) fn timeout_s() -> u64 {
    let Ok(v) = std::env::var("TASKWATT_MPI_TIMEOUT") else {
        return 300;
    };
    match v.trim().parse::<u64>() {
        Ok(s) if (1..=u64::from(u32::MAX)).contains(&s) => s,
        // Said, not ignored: `0.5` read as half a second, and the job then waited 300 s.
        _ => {
            eprintln!(
                "taskwatt-mpi: TASKWATT_MPI_TIMEOUT={v:?} is not a whole number of seconds \
                 from 1 to {}: the limit stays 300 s",
                u32::MAX
            );
            300
        }
    }
}

impl CommThread {
    /// Starts the thread over `net`, a message's time limit `limit` s; with `stream`, its
    /// messages also go to that trace as they complete, in partial Comms chunks (so that a
    /// rank killed mid-run leaves them).
    pub(crate) fn start(
        mut net: Box<dyn Transport>,
        limit: u64,
        stream: Option<TraceSink>,
        busy: Busy,
        failed_task: FailedTask,
    ) -> Result<CommThread, DistError> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let failed = Arc::new(Mutex::new(None));
        let f = failed.clone();
        let rank = net.rank();
        let join = std::thread::Builder::new()
            .name(format!("taskwatt-mpi-{rank}"))
            .spawn(move || {
                // A panic here would unwind past requests MPI still writes into: end the
                // process instead (mpirun then ends the job and names the rank).
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    run(&mut *net, &rx, &f, limit, stream, &busy, &failed_task)
                }));
                let log = r.unwrap_or_else(|_| {
                    eprintln!("taskwatt-mpi: rank {rank}: the communication thread panicked");
                    std::process::abort()
                });
                (log, net)
            })
            .map_err(|e| DistError::CommThread {
                rank,
                message: format!("cannot start it: {e}"),
            })?;
        Ok(CommThread {
            tx,
            join: Some(join),
            failed,
        })
    }

    /// Ends the job from this rank (see [`Cmd::Abort`]), then waits for the thread.
    pub(crate) fn abort(&mut self, why: String) {
        let _ = self.tx.send(Cmd::Abort(why));
        if let Some(j) = self.join.take() {
            let _ = j.join();
        }
    }

    /// Stops the thread: its log, and its transport (`None` if the thread is gone).
    pub(crate) fn stop(&mut self) -> (CommLog, Option<Box<dyn Transport>>) {
        let _ = self.tx.send(Cmd::Stop);
        match self.join.take().and_then(|j| j.join().ok()) {
            Some((log, net)) => (log, Some(net)),
            None => (CommLog::default(), None),
        }
    }
}

impl Drop for CommThread {
    fn drop(&mut self) {
        if self.join.is_some() {
            self.stop();
        }
    }
}

struct Posted {
    op: Op,
    /// `None`: a receive whose buffer is free but whose message has not arrived; it is
    /// posted (and its buffer made, for a copy without storage) when it has.
    req: Option<Req>,
    bytes: u64,
    start: Timestamp,
    since: Instant,
}

/// Messages completed since the last partial chunk past which one is sent at once.
const STREAM_EVENTS: usize = 256;
/// The longest a completed message waits for its partial chunk while messages flow.
const STREAM_EVERY: Duration = Duration::from_millis(25);

/// Sends a rank's completed messages to its trace in partial Comms chunks.
struct Streamer {
    sink: Option<TraceSink>,
    rank: u32,
    size: u32,
    /// Messages of the log already sent.
    sent: usize,
    last: Instant,
}

impl Streamer {
    /// Sends the messages completed since the last chunk, when `force`, or when enough of
    /// them wait or the oldest waited long enough.
    fn flush(&mut self, log: &CommLog, force: bool) {
        let Some(sink) = &self.sink else { return };
        let fresh = log.events.len() - self.sent;
        if fresh == 0 || !(force || fresh >= STREAM_EVENTS || self.last.elapsed() >= STREAM_EVERY) {
            return;
        }
        sink.send(Chunk::Comms(CommChunk {
            rank: self.rank,
            size: self.size,
            events: log.events[self.sent..].to_vec(),
            partial: true,
            ..CommChunk::default()
        }));
        self.sent = log.events.len();
        self.last = Instant::now();
    }
}

/// A [`Cmd::Apply`] waiting for its grant.
type Apply = (
    DeferredAccess,
    fn(&mut DeferredAccess),
    Option<crate::memory::Freed>,
);

fn run(
    net: &mut dyn Transport,
    rx: &Receiver<Cmd>,
    failed: &Mutex<Option<DistError>>,
    limit: u64,
    stream: Option<TraceSink>,
    busy: &Busy,
    failed_task: &FailedTask,
) -> CommLog {
    let rank = net.rank();
    let size = net.size();
    let limit_d = Duration::from_secs(limit);
    let beat_every = (limit_d / 4).max(Duration::from_millis(100));
    let mut last_beat: Option<Instant> = None;
    // When the last beat came from any peer (it was computing then).
    let mut alive: Option<Instant> = None;
    let mut beats_from = Vec::new();
    let mut last_look = Instant::now();
    let mut streamer = Streamer {
        sink: stream,
        rank: rank as u32,
        size: net.size() as u32,
        sent: 0,
        last: Instant::now(),
    };
    let mut log = CommLog::default();
    let mut waiting: Vec<Op> = Vec::new();
    let mut posted: Vec<Posted> = Vec::new();
    let mut applies: Vec<Apply> = Vec::new();
    // Per peer and tag: the place of the receive whose message comes next.
    let mut next_seq: std::collections::HashMap<(usize, u32), u64> =
        std::collections::HashMap::new();
    let mut flushes: Vec<Sender<Result<(), String>>> = Vec::new();
    let mut error: Option<String> = None;
    let mut idle_spins = 0u32;
    let mut stop = false;
    // The last time a message completed (or none was pending): a rank waits for a message
    // as long as others keep completing; only a stall of the limit is taken as a failure.
    let mut moved = Instant::now();
    loop {
        // Commands: block only when there is nothing to progress.
        if posted.is_empty() {
            moved = Instant::now();
        }
        let cmd = if waiting.is_empty() && posted.is_empty() && applies.is_empty() {
            // About to block: what completed goes to the trace first.
            streamer.flush(&log, true);
            for f in flushes.drain(..) {
                let _ = f.send(error.clone().map_or(Ok(()), Err));
            }
            if stop {
                return log;
            }
            // Wake up to beat while idle on messages but computing.
            match rx.recv_timeout(beat_every) {
                Ok(c) => Some(c),
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => None,
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => Some(Cmd::Stop),
            }
        } else {
            match rx.try_recv() {
                Ok(c) => Some(c),
                Err(TryRecvError::Empty) => None,
                Err(TryRecvError::Disconnected) => Some(Cmd::Stop),
            }
        };
        let mut progressed = false;
        match cmd {
            Some(Cmd::Post(op)) => {
                waiting.push(op);
                progressed = true;
            }
            Some(Cmd::Flush(reply)) => {
                flushes.push(reply);
                progressed = true;
            }
            Some(Cmd::Clock(reply)) => {
                let r = net.clock_offset(&|| Clock::now().as_ns());
                let _ = reply.send(r);
                progressed = true;
            }
            Some(Cmd::Names(reply)) => {
                let mine = net.node_name();
                let _ = reply.send(net.gather_names(&mine));
                progressed = true;
            }
            Some(Cmd::Barrier(reply)) => {
                let _ = reply.send(net.barrier());
                progressed = true;
            }
            Some(Cmd::Apply(access, f, freed)) => {
                applies.push((access, f, freed));
                progressed = true;
            }
            // Finish what is in flight first: the runtime waits for it.
            Some(Cmd::Stop) => stop = true,
            Some(Cmd::Abort(why)) => {
                let e = DistError::CommThread { rank, message: why };
                end_job(net, failed, &mut error, e, posted, waiting, flushes);
                return log;
            }
            None => {}
        }
        // A beat to every peer while this rank computes.
        if last_beat.is_none_or(|t| t.elapsed() >= beat_every) {
            last_beat = Some(Instant::now());
            if size > 1 && busy() {
                for peer in (0..size).filter(|&p| p != rank) {
                    let _ = net.send_beat(peer);
                }
            }
        }
        // The peers' beats, looked at now and then while messages are pending (and once a
        // beat period otherwise, so that they do not pile up).
        let look_every = if posted.is_empty() {
            beat_every
        } else {
            Duration::from_millis(20)
        };
        if last_look.elapsed() >= look_every {
            last_look = Instant::now();
            // A task failed here: its data must not reach the other ranks as if right.
            if let Some(failure) = failed_task() {
                let e = DistError::TaskFailed { rank, failure };
                end_job(net, failed, &mut error, e, posted, waiting, flushes);
                return log;
            }
            beats_from.clear();
            let _ = net.take_beats(&mut beats_from);
            if !beats_from.is_empty() {
                alive = Some(last_look);
            }
        }
        // Free (or make) the copies whose earlier accesses are done.
        let mut i = 0;
        while i < applies.len() {
            match applies[i].0.to_host() {
                Ok(true) => {
                    let (mut access, f, freed) = applies.swap_remove(i);
                    f(&mut access);
                    access.release();
                    if let Some(freed) = freed {
                        freed();
                    }
                    progressed = true;
                }
                Ok(false) => i += 1,
                Err(source) => {
                    let e = DistError::Runtime { rank, source };
                    end_job(net, failed, &mut error, e, posted, waiting, flushes);
                    return log;
                }
            }
        }
        // Post the messages whose data is ready.
        let mut i = 0;
        while i < waiting.len() {
            // Granted, and the data in main memory (copied back from a GPU where need be).
            match waiting[i].access.to_host() {
                Ok(true) => {}
                Ok(false) => {
                    i += 1;
                    continue;
                }
                Err(source) => {
                    let e = DistError::Runtime { rank, source };
                    end_job(net, failed, &mut error, e, posted, waiting, flushes);
                    return log;
                }
            }
            if !waiting[i].send {
                // A receive waits for its message before its buffer is touched, and takes
                // it in its turn (below). Its grant is looked at once: a receive granted
                // between two looks was posted here at once, out of its turn, and the
                // next one from that peer with that tag waited for ever.
                let op = waiting.remove(i);
                posted.push(Posted {
                    op,
                    req: None,
                    bytes: 0,
                    start: Clock::now(),
                    since: Instant::now(),
                });
                progressed = true;
                continue;
            }
            // Never send what a failed task left (or a task it cancelled): end the job.
            if let Some(failure) = failed_task() {
                let e = DistError::TaskFailed { rank, failure };
                end_job(net, failed, &mut error, e, posted, waiting, flushes);
                return log;
            }
            let Some((ptr, len)) = waiting[i].access.bytes() else {
                i += 1;
                continue;
            };
            let op = waiting.remove(i);
            // Its start before it is posted: a buffered send is in the peer's hands when
            // `isend` returns, and the peer may complete the receive at once.
            let start = Clock::now();
            // SAFETY: the acquisition holds the bytes (shared) until it is released, after
            // the request is done.
            let req = unsafe { net.isend(op.peer, op.handle, ptr, len) };
            match req {
                Ok(req) => posted.push(Posted {
                    op,
                    req: Some(req),
                    bytes: len as u64,
                    start,
                    since: Instant::now(),
                }),
                Err(message) => {
                    let peer = op.peer;
                    fail(
                        failed,
                        &mut error,
                        DistError::Transport {
                            rank,
                            peer,
                            message,
                        },
                    );
                    drop(op);
                }
            }
            progressed = true;
        }
        // Complete what is done.
        let mut i = 0;
        while i < posted.len() {
            let key = (posted[i].op.peer, posted[i].op.handle);
            let tested = match posted[i].req {
                Some(req) => net.test(req),
                // Not its turn: an earlier receive from that peer with that tag takes the
                // next message.
                None if next_seq.get(&key).copied().unwrap_or(0) != posted[i].op.seq => Ok(false),
                None => {
                    let p = &mut posted[i];
                    match net.ready(p.op.peer, p.op.handle) {
                        Ok(true) => {
                            *next_seq.entry(key).or_insert(0) += 1;
                            let (ptr, len) = p.op.access.bytes().expect("a granted receive");
                            p.bytes = len as u64;
                            // SAFETY: the write acquisition holds the buffer until it is
                            // released, after the request is done.
                            match unsafe { net.irecv(p.op.peer, p.op.handle, ptr, len) } {
                                Ok(req) => {
                                    p.req = Some(req);
                                    net.test(req)
                                }
                                Err(message) => Err(message),
                            }
                        }
                        Ok(false) => Ok(false),
                        Err(message) => Err(message),
                    }
                }
            };
            match tested {
                Ok(true) => {
                    moved = Instant::now();
                    // In order: receives from one peer with one tag match its messages in
                    // the order they were posted (a reduction's contributions).
                    let p = posted.remove(i);
                    log.events.push(CommRecord {
                        peer: p.op.peer as u32,
                        send: p.op.send,
                        handle: p.op.handle,
                        bytes: p.bytes,
                        start: p.start,
                        end: Clock::now(),
                    });
                    p.op.access.release();
                    progressed = true;
                }
                Ok(false) => {
                    let p = &posted[i];
                    let waited = moved
                        .elapsed()
                        .min(p.since.elapsed())
                        .min(alive.map_or(Duration::MAX, |t| t.elapsed()));
                    if waited > limit_d {
                        if std::env::var_os("TASKWATT_MPI_DEBUG").is_some() {
                            eprintln!("{}", pending(rank, &posted, &waiting, &next_seq));
                        }
                        let e = DistError::Timeout {
                            rank,
                            peer: p.op.peer,
                            what: if p.op.send {
                                "delivery to"
                            } else {
                                "message from"
                            },
                            handle: p.op.handle,
                            waited_s: waited.as_secs_f64(),
                            limit_s: limit,
                        };
                        end_job(net, failed, &mut error, e, posted, waiting, flushes);
                        return log;
                    }
                    i += 1;
                }
                Err(message) => {
                    // A message that cannot be taken (another size than its buffer): the
                    // ranks' data flows differ, and every later message would be wrong or
                    // never come. End the job now, naming it, rather than at the timeout.
                    let p = posted.remove(i);
                    let e = DistError::Transport {
                        rank,
                        peer: p.op.peer,
                        message,
                    };
                    p.op.access.release();
                    end_job(net, failed, &mut error, e, posted, waiting, flushes);
                    return log;
                }
            }
        }
        streamer.flush(&log, false);
        if progressed {
            idle_spins = 0;
        } else {
            // Nothing moved: spin a little, then back off so as not to take a worker's
            // core (the thread polls, as StarPU-MPI's does).
            idle_spins += 1;
            if idle_spins < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }
}

/// What a rank still waits for, for `TASKWATT_MPI_DEBUG`: each message posted (`S`end or
/// `R`eceive, peer, tag, the receive's place and the place whose turn it is, whether MPI
/// has it) and each waiting for its data (whether it is granted).
fn pending(
    rank: usize,
    posted: &[Posted],
    waiting: &[Op],
    next_seq: &std::collections::HashMap<(usize, u32), u64>,
) -> String {
    use std::fmt::Write;
    let kind = |send: bool| if send { 'S' } else { 'R' };
    let mut d = format!("taskwatt-mpi: rank {rank}: posted:");
    for p in posted {
        let turn = next_seq
            .get(&(p.op.peer, p.op.handle))
            .copied()
            .unwrap_or(0);
        let _ = write!(
            d,
            " {}(peer {} tag {} #{} turn {} {})",
            kind(p.op.send),
            p.op.peer,
            p.op.handle,
            p.op.seq,
            turn,
            if p.req.is_some() { "in MPI" } else { "not yet" }
        );
    }
    d += "; waiting for their data:";
    for o in waiting {
        let _ = write!(
            d,
            " {}(peer {} tag {} #{} {})",
            kind(o.send),
            o.peer,
            o.handle,
            o.seq,
            if o.access.is_granted() {
                "granted"
            } else {
                "not granted"
            }
        );
    }
    d
}

/// Ends the job after `e`: says it, records it, aborts every rank, and releases what this
/// rank holds so that its threads can end.
fn end_job(
    net: &mut dyn Transport,
    failed: &Mutex<Option<DistError>>,
    error: &mut Option<String>,
    e: DistError,
    mut posted: Vec<Posted>,
    mut waiting: Vec<Op>,
    mut flushes: Vec<Sender<Result<(), String>>>,
) {
    eprintln!("taskwatt-mpi: {e}; ending the job");
    fail(failed, error, e);
    net.abort(3);
    for p in posted.drain(..) {
        p.op.access.release();
    }
    for op in waiting.drain(..) {
        op.access.release();
    }
    for f in flushes.drain(..) {
        let _ = f.send(Err(error.clone().unwrap_or_default()));
    }
}

fn fail(failed: &Mutex<Option<DistError>>, error: &mut Option<String>, e: DistError) {
    if error.is_none() {
        *error = Some(e.to_string());
    }
    if let Ok(mut f) = failed.lock() {
        f.get_or_insert(e);
    }
}
