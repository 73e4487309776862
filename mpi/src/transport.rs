//! Point-to-point messages between ranks: the [`Transport`] trait, MPI's (feature `mpi`,
//! `crate::mpi_transport`) and an in-process one where ranks are threads
//! ([`ThreadNet`]), which the tests use. It matches messages as MPI does (by source and
//! tag, in order), but its sends complete at once (buffered) and its ranks share one clock:
//! MPI's rendezvous sends and separate clocks are checked by runs under mpirun.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A request's id, unique per transport.
pub type Req = u64;

/// What the communication thread needs from the network. Only that thread calls it.
pub trait Transport: Send {
    /// This rank.
    fn rank(&self) -> usize;
    /// Ranks in the job.
    fn size(&self) -> usize;
    /// Starts sending `len` bytes from `ptr` to `dest` with `tag`.
    ///
    /// # Safety
    /// The bytes stay valid and unchanged until [`Transport::test`] says the request is
    /// done.
    unsafe fn isend(
        &mut self,
        dest: usize,
        tag: u32,
        ptr: *const u8,
        len: usize,
    ) -> Result<Req, String>;
    /// Starts receiving `len` bytes from `src` with `tag` into `ptr`.
    ///
    /// # Safety
    /// The bytes stay valid, and nothing else reads or writes them, until
    /// [`Transport::test`] says the request is done.
    unsafe fn irecv(
        &mut self,
        src: usize,
        tag: u32,
        ptr: *mut u8,
        len: usize,
    ) -> Result<Req, String>;
    /// Whether the request is done (then it is forgotten).
    fn test(&mut self, req: Req) -> Result<bool, String>;
    /// Whether a message from `src` with `tag` has arrived (and a receive posted now would
    /// find it): the communication thread posts a receive, and so makes its buffer, only
    /// then. The default says yes at once.
    fn ready(&mut self, src: usize, tag: u32) -> Result<bool, String> {
        let _ = (src, tag);
        Ok(true)
    }
    /// A clock offset estimate against rank 0 by ping-pong, ns (rank 0: 0), with the
    /// round trip it came from; every rank must call it at the same point.
    fn clock_offset(&mut self, now_ns: &dyn Fn() -> u64) -> Result<(i64, u64), String>;
    /// Every rank's node name, indexed by rank (an all-gather of `mine`); every rank must
    /// call it at the same point.
    fn gather_names(&mut self, mine: &str) -> Result<Vec<String>, String>;
    /// Returns once every rank has called it (a barrier of the job).
    fn barrier(&mut self) -> Result<(), String>;
    /// This rank's node (host) name.
    fn node_name(&self) -> String;
    /// Ends the whole job at once (a rank that cannot go on).
    fn abort(&mut self, code: i32);
    /// Tells `dest` that this rank is computing: a sign of life, so that a rank waiting
    /// for a message from it does not take a long task for a hang (see `crate::comm`).
    /// Fire and forget. The default sends none (peers then wait the limit at most).
    fn send_beat(&mut self, dest: usize) -> Result<(), String> {
        let _ = dest;
        Ok(())
    }
    /// Appends to `from` the ranks whose beats arrived since the last call.
    fn take_beats(&mut self, from: &mut Vec<usize>) -> Result<(), String> {
        let _ = from;
        Ok(())
    }
}

/// What a receive says of a message whose size is not its buffer's.
pub(crate) fn size_mismatch(got: usize, src: usize, tag: u32, len: usize) -> String {
    format!(
        "a message of {got} bytes from rank {src} for handle {tag} (its tag), a buffer of \
         {len}: the ranks registered this handle with different sizes (give every rank the \
         same sizes, tiles and order of registration)"
    )
}

type Mailbox = HashMap<(usize, usize, u32), VecDeque<Vec<u8>>>;

/// Ranks as threads of one process: a shared mailbox per (source, destination, tag), FIFO.
/// Sends are buffered (done at once); a receive is done when its message is there.
#[derive(Clone, Debug)]
pub struct ThreadNet {
    rank: usize,
    size: usize,
    boxes: Arc<Mutex<Mailbox>>,
    pending: HashMap<Req, (usize, u32, *mut u8, usize)>,
    next: Req,
    // The rendezvous for clock_offset: (round, rank 0's clock).
    clock: Arc<Mutex<Vec<Option<u64>>>>,
    names: Arc<Mutex<Vec<Option<String>>>>,
    per_node: usize,
    aborted: Arc<std::sync::atomic::AtomicBool>,
    /// Beats waiting to be taken, by destination rank: the senders.
    beats: Arc<Mutex<Vec<Vec<usize>>>>,
    /// The barrier: its generation and how many ranks reached it.
    barrier: Arc<(Mutex<(u64, usize)>, std::sync::Condvar)>,
}

// SAFETY: the raw pointers are receive buffers the caller of `irecv` keeps valid and
// private until the request is done; only the communication thread that owns this
// transport touches them.
unsafe impl Send for ThreadNet {}

impl ThreadNet {
    /// `size` connected transports, one per rank, all on one node.
    pub fn new(size: usize) -> Vec<ThreadNet> {
        Self::with_nodes(size, size.max(1))
    }

    /// `size` connected transports, `per_node` ranks to a node (`node0`, `node1`...).
    pub fn with_nodes(size: usize, per_node: usize) -> Vec<ThreadNet> {
        let boxes = Arc::new(Mutex::new(HashMap::new()));
        let clock = Arc::new(Mutex::new(vec![None; size]));
        let names = Arc::new(Mutex::new(vec![None; size]));
        let aborted = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let beats = Arc::new(Mutex::new(vec![Vec::new(); size]));
        let barrier = Arc::new((Mutex::new((0, 0)), std::sync::Condvar::new()));
        (0..size)
            .map(|rank| ThreadNet {
                rank,
                size,
                boxes: boxes.clone(),
                pending: HashMap::new(),
                next: 0,
                clock: clock.clone(),
                names: names.clone(),
                per_node: per_node.max(1),
                aborted: aborted.clone(),
                beats: beats.clone(),
                barrier: barrier.clone(),
            })
            .collect()
    }

    /// Whether a rank called [`Transport::abort`].
    pub fn aborted(&self) -> bool {
        self.aborted.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Transport for ThreadNet {
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
        // SAFETY: the caller keeps `len` bytes at `ptr` valid during the call.
        let bytes = unsafe { std::slice::from_raw_parts(ptr, len) }.to_vec();
        self.boxes
            .lock()
            .map_err(|_| "the mailbox is poisoned".to_owned())?
            .entry((self.rank, dest, tag))
            .or_default()
            .push_back(bytes);
        self.next += 1;
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
        self.next += 1;
        self.pending.insert(self.next, (src, tag, ptr, len));
        Ok(self.next)
    }

    fn test(&mut self, req: Req) -> Result<bool, String> {
        // Another rank ended the job (as MPI_Abort ends every process): what this rank
        // waits for will not come.
        if self.aborted() {
            return Err("another rank ended the job (its error says why)".into());
        }
        let Some(&(src, tag, ptr, len)) = self.pending.get(&req) else {
            return Ok(true); // a send: buffered
        };
        let mut boxes = self
            .boxes
            .lock()
            .map_err(|_| "the mailbox is poisoned".to_owned())?;
        let Some(msg) = boxes
            .get_mut(&(src, self.rank, tag))
            .and_then(VecDeque::pop_front)
        else {
            return Ok(false);
        };
        if msg.len() != len {
            return Err(size_mismatch(msg.len(), src, tag, len));
        }
        // SAFETY: the receive buffer is valid and private until this request is done.
        unsafe { std::ptr::copy_nonoverlapping(msg.as_ptr(), ptr, len) };
        self.pending.remove(&req);
        Ok(true)
    }

    fn ready(&mut self, src: usize, tag: u32) -> Result<bool, String> {
        // As in `test`: a receive not yet posted waits for a message that will not come.
        if self.aborted() {
            return Err("another rank ended the job (its error says why)".into());
        }
        let boxes = self
            .boxes
            .lock()
            .map_err(|_| "the mailbox is poisoned".to_owned())?;
        Ok(boxes
            .get(&(src, self.rank, tag))
            .is_some_and(|q| !q.is_empty()))
    }

    fn clock_offset(&mut self, now_ns: &dyn Fn() -> u64) -> Result<(i64, u64), String> {
        // One process, one clock: the offset is 0; still a rendezvous, as MPI's is (a
        // rank that arrives first waits for the others, as for rank 0's answers).
        self.barrier()?;
        let t0 = Instant::now();
        if self.rank == 0 {
            self.clock.lock().map_err(|e| e.to_string())?[0] = Some(now_ns());
        }
        Ok((0, t0.elapsed().as_nanos() as u64))
    }

    fn gather_names(&mut self, mine: &str) -> Result<Vec<String>, String> {
        // Between two barriers, so that a second gather (the job's identity after the
        // node names) neither reads the first one's names nor overwrites them before
        // every rank has read them.
        self.names.lock().map_err(|e| e.to_string())?[self.rank] = Some(mine.to_owned());
        self.barrier()?;
        let names = self
            .names
            .lock()
            .map_err(|e| e.to_string())?
            .iter()
            .map(|n| n.clone().unwrap_or_default())
            .collect();
        self.barrier()?;
        Ok(names)
    }

    fn barrier(&mut self) -> Result<(), String> {
        let (lock, arrived) = &*self.barrier;
        let mut g = lock.lock().map_err(|e| e.to_string())?;
        let generation = g.0;
        g.1 += 1;
        if g.1 == self.size {
            *g = (generation + 1, 0);
            arrived.notify_all();
            return Ok(());
        }
        // Woken every 50 ms to see whether another rank ended the job (it will not come).
        let t = Instant::now();
        let mut g = g;
        while g.0 == generation {
            if self.aborted() {
                return Err("another rank ended the job (its error says why)".into());
            }
            if t.elapsed().as_secs() >= 60 {
                return Err("not every rank reached the barrier within 60 s".into());
            }
            g = arrived
                .wait_timeout(g, std::time::Duration::from_millis(50))
                .map_err(|e| e.to_string())?
                .0;
        }
        Ok(())
    }

    fn node_name(&self) -> String {
        format!("node{}", self.rank / self.per_node)
    }

    fn abort(&mut self, _code: i32) {
        self.aborted
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    fn send_beat(&mut self, dest: usize) -> Result<(), String> {
        let mut b = self.beats.lock().map_err(|e| e.to_string())?;
        let inbox = b.get_mut(dest).ok_or_else(|| format!("no rank {dest}"))?;
        inbox.push(self.rank);
        Ok(())
    }

    fn take_beats(&mut self, from: &mut Vec<usize>) -> Result<(), String> {
        let mut b = self.beats.lock().map_err(|e| e.to_string())?;
        from.append(&mut b[self.rank]);
        Ok(())
    }
}
