//! Recycling task nodes: a finished node goes back to the submitters instead of the
//! allocator.
//!
//! Every task needs a node (256 bytes with the `Arc`'s counts), made by the submitting
//! thread and, most often, last referenced by the worker that ran it. Freed there, it goes
//! back to the allocator of another thread: glibc's malloc then takes a lock on the
//! submitter's arena for each free: a probe of empty tasks (traced, 2 workers) measured ~1
//! µs per task with glibc against ~0.55 µs with mimalloc, and 0.38 to 0.42 µs with glibc
//! and the pool.
//!
//! - A worker that holds the only reference to a node it finished keeps it in its batch
//!   (see `worker.rs`, `Done`) and hands the batch over when it reports its finished
//!   tasks: one lock per batch, on `returned`.
//! - A submitter takes a node from `spare`; when `spare` is empty, it swaps it with
//!   `returned`. Workers and submitters thus meet on one lock once per batch, not per task.
//! - A node still referenced when it finishes (by a data handle's last writer or readers,
//!   say) is freed by whoever drops the last reference, except when that is the handle
//!   itself being dropped: the handle then gives back the finished nodes it held
//!   ([`NodePool::recycle`]), into `spare` and, once that is full, into `returned`. A
//!   graph whose outputs are each written once (Task Bench's, or the fan-out/fan-in of the
//!   overhead benchmark) leaves every node in a handle; the next graph reuses them.
//!   Fan-out/fan-in, paired runs: 0.88 times the time; filling both lists rather than
//!   `spare` alone, 0.89 again (the submitting thread's allocations per task 1.6 → 0.7).
//! - A recycled node is rewritten through [`Arc::get_mut`], which checks that nobody else
//!   holds it: the pool needs no unsafe code, and a node that is not unique after all
//!   (impossible while the worker's check holds, see [`NodePool::keep`]) is simply dropped.
//!
//! - Nodes that dropped handles gave back are taken in address order, nodes that workers
//!   gave back last in, first out ([`NodePool::SORT_MIN`]).
//!
//! Each of the two lists holds at most [`NodePool::CAP`] nodes (so the pool at most 4 MiB),
//! or as many as the largest graph that `wait_all` waited for had tasks, up to
//! [`NodePool::CAP_MAX`] ([`NodePool::fit`]); beyond that, nodes are freed as usual.
//!
//! # Data handles
//!
//! The pool also keeps the data handles the application dropped ([`NodePool::keep_handle`],
//! at most [`NodePool::HANDLE_CAP`], 2 MiB, or as many as were registered between two
//! `wait_all`s, up to [`NodePool::HANDLE_CAP_MAX`], 16 MiB; the count is the process's, all
//! runtimes together, an upper bound): a handle nobody else holds is cleared
//! when its last [`Handle`](crate::Handle) is dropped (its value dropped, its nodes given
//! back, as freeing it would) and the next registration rewrites it in place. In the
//! fan-out/fan-in, which registers a handle for every two tasks, the submitting thread's
//! allocations per task went from 0.70 to 0.29. The kept handles hold the pool, and so may
//! the kept nodes (through a codelet whose closure owns a handle); dropping the runtime
//! frees both and closes the pool ([`NodePool::close`]), so no cycle outlives it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::sync::SpinLock;
use crossbeam_utils::CachePadded;
use smallvec::SmallVec;

use crate::handle::HandleCore;
use crate::task::TaskNode;

/// Indices of `NodePool::recycled`.
const SPARE: usize = 0;
const RETURNED: usize = 1;

pub(crate) struct NodePool {
    /// Taken by submitters, one node at a time.
    spare: CachePadded<SpinLock<Vec<Arc<TaskNode>>>>,
    /// Filled by workers, a batch at a time.
    returned: CachePadded<SpinLock<Vec<Arc<TaskNode>>>>,
    /// Data handles dropped by the application, cleared and ready for the next
    /// registration (see [`NodePool::keep_handle`]).
    handles: CachePadded<SpinLock<Handles>>,
    /// Set by [`NodePool::close`] while it holds both node locks: read under either, it
    /// makes the pool keep no node.
    closed: AtomicBool,
    /// `spare` and `returned` hold nodes that dropped handles gave back (see
    /// [`NodePool::SORT_MIN`]). Each written under its list's lock.
    recycled: [AtomicBool; 2],
    /// Most nodes kept in each list: [`NodePool::CAP`], raised to the size of the largest
    /// graph waited for (see [`NodePool::fit`]).
    cap: AtomicUsize,
    /// Most handles kept: [`NodePool::HANDLE_CAP`], raised to the most registered between
    /// two `wait_all`s (see [`NodePool::fit_handles`]).
    handle_cap: AtomicUsize,
}

struct Handles {
    free: Vec<Arc<HandleCore>>,
    /// Set when the runtime is dropped: each pooled handle holds the pool, so keeping
    /// handles after that would make a cycle that is never freed.
    closed: bool,
}

impl NodePool {
    /// Most nodes kept in each list (256 bytes each) until a larger graph was run.
    pub(crate) const CAP: usize = 8192;

    /// The most [`NodePool::fit`] raises the cap to: 16 MiB of nodes per list.
    pub(crate) const CAP_MAX: usize = 65_536;

    /// A list that dropped handles filled is put in address order before submitters take
    /// from it, if it holds at least this many nodes (256 KiB, more than this VM's L2 per
    /// core). Those nodes come back in the order the application drops its handles: after
    /// a few graphs of 20 000 tasks (the fan-out/fan-in of the overhead benchmark),
    /// submitting walked 5 MB of nodes in an order the hardware prefetchers could not
    /// follow, and each graph took longer than the last (610 to 1000 ns per task over 30
    /// graphs; 570 to 640 with such lists sorted). Nodes that workers give back stay last
    /// in, first out: the next one taken is the one finished last, most likely still in a
    /// cache (sorting those too made an empty chain 1.11 to 1.22 times as long).
    pub(crate) const SORT_MIN: usize = 1024;

    /// Most data handles kept (256 bytes each with the `Arc`'s counts) until a graph
    /// registered more.
    pub(crate) const HANDLE_CAP: usize = 8192;

    /// The most [`NodePool::fit_handles`] raises the handles' cap to (16 MiB).
    pub(crate) const HANDLE_CAP_MAX: usize = 65_536;

    pub(crate) fn new() -> NodePool {
        NodePool {
            spare: CachePadded::new(SpinLock::new(Vec::new())),
            returned: CachePadded::new(SpinLock::new(Vec::new())),
            handles: CachePadded::new(SpinLock::new(Handles {
                free: Vec::new(),
                closed: false,
            })),
            closed: AtomicBool::new(false),
            recycled: [AtomicBool::new(false), AtomicBool::new(false)],
            cap: AtomicUsize::new(Self::CAP),
            handle_cap: AtomicUsize::new(Self::HANDLE_CAP),
        }
    }

    /// Lets each list keep a graph of `tasks` tasks (up to [`NodePool::CAP_MAX`]; the cap
    /// is never lowered). Called by `wait_all` with the tasks submitted since the last
    /// one: the nodes of such a graph all come back, from the workers and from the
    /// handles the application drops, and those over the cap were freed, to be allocated
    /// again by the next graph. The fan-out/fan-in of the overhead benchmark (20 000
    /// tasks) allocated a quarter of its nodes anew in every graph with 8192 per list,
    /// and slowed down from graph to graph (505 to 589 ns per task over 200 graphs,
    /// traced); sized to the graph, it took 0.93 to 0.94 times as long.
    pub(crate) fn fit(&self, tasks: u64) {
        let want = usize::try_from(tasks)
            .unwrap_or(usize::MAX)
            .min(Self::CAP_MAX);
        if want > self.cap.load(Ordering::Relaxed) {
            self.cap.fetch_max(want, Ordering::Relaxed);
        }
    }

    /// Lets the pool keep the `handles` a graph registered (up to
    /// [`NodePool::HANDLE_CAP_MAX`]; never lowered), as [`NodePool::fit`] does for nodes:
    /// called by `wait_all` with the handles registered since the last one. The
    /// fan-out/fan-in of the overhead benchmark registers 10 000 per graph: with 8192
    /// kept, 1808 were allocated anew in every graph (aligned allocations, page faults)
    /// and freed at its end.
    pub(crate) fn fit_handles(&self, handles: u64) {
        let want = usize::try_from(handles)
            .unwrap_or(usize::MAX)
            .min(Self::HANDLE_CAP_MAX);
        if want > self.handle_cap.load(Ordering::Relaxed) {
            self.handle_cap.fetch_max(want, Ordering::Relaxed);
        }
    }

    /// Room left in a list of `len` nodes: none once the pool is closed. Called with the
    /// list's lock held, which orders it after `close`.
    #[inline]
    fn room(&self, len: usize) -> usize {
        if self.closed.load(Ordering::Relaxed) {
            0
        } else {
            self.cap.load(Ordering::Relaxed).saturating_sub(len)
        }
    }

    /// Keeps a cleared data handle (no value, no nodes; see `HandleCore::retire`) for the
    /// next registration, up to [`NodePool::HANDLE_CAP`] and until the pool is closed.
    pub(crate) fn keep_handle(&self, core: Arc<HandleCore>) {
        let mut handles = self.handles.lock();
        if !handles.closed && handles.free.len() < self.handle_cap.load(Ordering::Relaxed) {
            handles.free.push(core);
            return;
        }
        // Freed outside the lock: its drop releases the pool, maybe the last reference.
        drop(handles);
        drop(core);
    }

    /// A cleared data handle to reuse, if one was kept.
    #[inline]
    pub(crate) fn take_handle(&self) -> Option<Arc<HandleCore>> {
        self.handles.lock().free.pop()
    }

    /// Notes that list `which` holds nodes from a dropped handle. Read first: the line is
    /// also read by workers (`closed`), and a store would take it from them.
    #[inline]
    fn mark_recycled(&self, which: usize) {
        if !self.recycled[which].load(Ordering::Relaxed) {
            self.recycled[which].store(true, Ordering::Relaxed);
        }
    }

    /// Frees the kept nodes and handles, and keeps no more (the runtime is being
    /// dropped). Kept handles hold the pool, and so may kept nodes, through a codelet
    /// whose closure owns a handle: kept on, either would be a cycle never freed.
    pub(crate) fn close(&self) {
        let mut spare = self.spare.lock();
        let mut returned = self.returned.lock();
        self.closed.store(true, Ordering::Relaxed);
        let nodes = (std::mem::take(&mut *spare), std::mem::take(&mut *returned));
        drop(returned);
        drop(spare);
        let mut handles = self.handles.lock();
        handles.closed = true;
        let free = std::mem::take(&mut handles.free);
        drop(handles);
        // Outside the locks: these drops may drop handles, which come back here.
        drop(nodes);
        drop(free);
    }

    /// Whether `node`, finished, may go back to the pool: the caller holds the only
    /// reference, so nobody can reach the node any more (there are no weak references).
    #[inline]
    pub(crate) fn keep(node: &Arc<TaskNode>) -> bool {
        Arc::strong_count(node) == 1
    }

    /// Takes back the finished nodes of a worker's batch, leaving `batch` empty.
    pub(crate) fn give_back(&self, batch: &mut Vec<Arc<TaskNode>>) {
        if batch.is_empty() {
            return;
        }
        let mut returned = self.returned.lock();
        let room = self.room(returned.len());
        if batch.len() > room {
            // Over the cap: these are freed the usual way (outside the lock).
            let extra = batch.split_off(room);
            returned.append(batch);
            drop(returned);
            drop(extra);
        } else {
            returned.append(batch);
        }
    }

    /// Takes back the nodes a dropped handle held (see `HandleCore`'s `Drop`): those that
    /// finished and that nobody else holds.
    pub(crate) fn recycle(&self, nodes: impl IntoIterator<Item = Arc<TaskNode>>) {
        // The others are dropped after the locks are released: dropping a node may drop
        // its codelet (once the runtime that kept it is gone), whose closure may own a
        // handle, whose drop recycles again. A handle holds a few nodes (its last writer
        // and the readers since): inline, so that dropping one allocates nothing.
        let mut others: SmallVec<[Arc<TaskNode>; 4]> = SmallVec::new();
        let mut spare = None;
        let mut returned = None;
        for node in nodes {
            // A unique node that has not finished cannot exist: an unfinished node is
            // held by its predecessors, the staging list, the policy or its worker. And a
            // node nobody else holds cannot be run by anyone, finished or not: checked in
            // debug builds only, since reading the status costs a cache miss per node
            // (the worker that finished it wrote that line last), which was half of this
            // function's samples in the fan-out/fan-in.
            if Self::keep(&node) {
                debug_assert!(node.is_finished(), "a unique node that never finished");
                // `spare` first; then `returned`, which is within the same bound, so that
                // a graph whose handles held more than one list's worth (the fan-out of
                // the overhead benchmark: 20 000 nodes) keeps twice as many.
                let spare = spare.get_or_insert_with(|| self.spare.lock());
                if self.room(spare.len()) > 0 {
                    spare.push(node);
                    self.mark_recycled(SPARE);
                    continue;
                }
                let returned = returned.get_or_insert_with(|| self.returned.lock());
                if self.room(returned.len()) > 0 {
                    returned.push(node);
                    self.mark_recycled(RETURNED);
                    continue;
                }
            }
            others.push(node);
        }
        drop(returned);
        drop(spare);
        drop(others);
    }

    /// A node for a new task: a recycled one rewritten by `renew` (see
    /// [`TaskNode::renew`]) when one is available, else `make()` in a new allocation.
    #[inline(always)]
    pub(crate) fn node(
        &self,
        make: impl FnOnce() -> TaskNode,
        renew: impl FnOnce(&mut TaskNode),
    ) -> Arc<TaskNode> {
        match self.take() {
            Some(mut recycled) => match Arc::get_mut(&mut recycled) {
                Some(slot) => {
                    // Rewritten in place (see `TaskNode::renew`).
                    renew(slot);
                    recycled
                }
                None => Arc::new(make()),
            },
            None => Arc::new(make()),
        }
    }

    fn take(&self) -> Option<Arc<TaskNode>> {
        let mut spare = self.spare.lock();
        if spare.is_empty() {
            let mut returned = self.returned.lock();
            if returned.is_empty() {
                return None;
            }
            std::mem::swap(&mut *spare, &mut *returned);
            // The flag follows its list. Written only when set: its line is also read by
            // workers (`closed`).
            if self.recycled[RETURNED].load(Ordering::Relaxed) {
                self.recycled[RETURNED].store(false, Ordering::Relaxed);
                self.recycled[SPARE].store(true, Ordering::Relaxed);
            }
        }
        if self.recycled[SPARE].load(Ordering::Relaxed) {
            self.recycled[SPARE].store(false, Ordering::Relaxed);
            sort(&mut spare);
        }
        let node = spare.pop();
        if let Some(next) = spare.last() {
            // A pooled node was last written by the worker that ran it: without this,
            // the submitter's first write to it stalls on that core's copy. One
            // submission ahead of its use.
            next.prefetch_for_write();
        }
        node
    }

    /// Nodes held (spare and returned), for tests.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.spare.lock().len() + self.returned.lock().len()
    }

    /// Data handles kept, for tests.
    #[cfg(test)]
    pub(crate) fn handles_kept(&self) -> usize {
        self.handles.lock().free.len()
    }
}

/// Puts a list of at least [`NodePool::SORT_MIN`] nodes in descending address order, so
/// that `pop` takes them in ascending order. Out of line: the submission path only calls
/// it.
#[inline(never)]
fn sort(nodes: &mut Vec<Arc<TaskNode>>) {
    if nodes.len() < NodePool::SORT_MIN {
        return;
    }
    if by_slot(nodes) {
        return;
    }
    nodes.sort_unstable_by_key(|n| std::cmp::Reverse(Arc::as_ptr(n) as usize));
}

/// [`sort`] in one pass when the nodes lie close together (they are the same few blocks
/// of allocations, graph after graph): each goes to its slot, its distance from the
/// lowest node in units of one allocation (two distinct nodes are at least that far
/// apart, so slots are distinct), and the slots are read back from the highest. False,
/// leaving `nodes` as it was, when the slots would be more than four times the nodes.
/// The comparison sort it replaces took 7 % of the submitting thread's time in the
/// fan-out/fan-in of the overhead benchmark (20 000 nodes back from its handles).
fn by_slot(nodes: &mut Vec<Arc<TaskNode>>) -> bool {
    // An `Arc`'s allocation: its two counts and the node.
    const STRIDE: usize = std::mem::size_of::<TaskNode>() + 2 * std::mem::size_of::<usize>();
    let addr = |n: &Arc<TaskNode>| Arc::as_ptr(n) as usize;
    let (lo, hi) = nodes
        .iter()
        .map(addr)
        .fold((usize::MAX, 0), |(lo, hi), a| (lo.min(a), hi.max(a)));
    let slots = (hi - lo) / STRIDE + 1;
    if slots > 4 * nodes.len() {
        return false;
    }
    thread_local! {
        /// The slots, kept from one sort to the next on this thread: allocated anew, the
        /// 20 000 nodes' 640 KiB of slots were mapped and faulted in at every sort.
        static SLOTS: std::cell::RefCell<Vec<Option<Arc<TaskNode>>>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }
    SLOTS.with(|at| {
        let Ok(mut at) = at.try_borrow_mut() else {
            return false;
        };
        at.clear();
        at.resize_with(slots, || None);
        for n in nodes.drain(..) {
            let k = (addr(&n) - lo) / STRIDE;
            debug_assert!(at[k].is_none(), "two nodes in one slot");
            at[k] = Some(n);
        }
        nodes.extend(at.iter_mut().rev().filter_map(Option::take));
        true
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::Kind;
    use crate::Codelet;
    use taskwatt_traces::Timestamp;

    fn make(id: u64, codelet: &Codelet) -> TaskNode {
        TaskNode::new(
            id,
            Kind::Codelet,
            codelet.inner.clone(),
            0,
            0,
            0,
            Timestamp::ZERO,
            None,
        )
    }

    /// A node for task `id` of `codelet`, as `Runtime::submit` takes one.
    fn node_of(pool: &NodePool, id: u64, codelet: &Codelet) -> Arc<TaskNode> {
        pool.node(
            || make(id, codelet),
            |n| n.renew(id, Kind::Codelet, &codelet.inner, 0, 0, 0, Timestamp::ZERO),
        )
    }

    #[test]
    fn nodes_are_put_in_descending_address_order_by_slot_or_by_comparison() {
        let pool = NodePool::new();
        let cl = Codelet::new("a").cpu(|_| {});
        let mut nodes: Vec<Arc<TaskNode>> = (0..3000).map(|i| node_of(&pool, i, &cl)).collect();
        // Interleaved, as a fan's handles give them back (a writer, then its readers).
        let (even, odd): (Vec<_>, Vec<_>) =
            nodes.drain(..).enumerate().partition(|(i, _)| i % 2 == 0);
        nodes = odd.into_iter().chain(even).map(|(_, n)| n).collect();
        let mut want: Vec<usize> = nodes.iter().map(|n| Arc::as_ptr(n) as usize).collect();
        want.sort_unstable_by(|a, b| b.cmp(a));
        let by_slots = {
            let mut v = nodes.clone();
            let done = by_slot(&mut v);
            (done, v)
        };
        sort(&mut nodes);
        let got: Vec<usize> = nodes.iter().map(|n| Arc::as_ptr(n) as usize).collect();
        assert_eq!(got, want);
        assert_eq!(nodes.len(), 3000, "every node kept");
        // Where the allocator put them close together (it does here), the one pass did it.
        if by_slots.0 {
            let slots: Vec<usize> = by_slots.1.iter().map(|n| Arc::as_ptr(n) as usize).collect();
            assert_eq!(slots, want);
        }
    }

    #[test]
    fn a_returned_node_is_reused_in_place_and_rewritten() {
        let pool = NodePool::new();
        let cl = Codelet::new("a").cpu(|_| {});
        let first = node_of(&pool, 1, &cl);
        let addr = Arc::as_ptr(&first);
        assert_eq!(
            Arc::strong_count(&cl.inner),
            2,
            "one in `cl`, one in the node"
        );
        assert!(NodePool::keep(&first));
        pool.give_back(&mut vec![first]);
        assert_eq!(pool.len(), 1);
        let second = node_of(&pool, 2, &cl);
        assert_eq!(Arc::as_ptr(&second), addr, "the allocation is reused");
        assert_eq!(second.id, 2, "and holds the new node");
        assert_eq!(pool.len(), 0);
        // The same codelet: one reference in the node still (kept, not replaced).
        assert_eq!(Arc::strong_count(&cl.inner), 2);
        // Another codelet: the old reference is dropped, the new one taken.
        let other = Codelet::new("b").cpu(|_| {});
        second.finish(crate::task::DONE_OK);
        pool.give_back(&mut vec![second]);
        let third = node_of(&pool, 3, &other);
        assert_eq!(Arc::as_ptr(&third), addr);
        assert_eq!(third.codelet_name(), "b");
        assert_eq!(Arc::strong_count(&cl.inner), 1);
        assert_eq!(Arc::strong_count(&other.inner), 2);
    }

    #[test]
    fn a_renewed_node_is_a_new_node() {
        // Everything `finish`, a release, a waiter and a failure write, then renewed: the
        // node must read as `TaskNode::new` makes it.
        let cl = Codelet::new("a").cpu(|_| {});
        let other = Codelet::new("b").cpu(|_| {});
        let mut used = make(1, &cl);
        used.ready.store(7, Ordering::Relaxed);
        used.pending.store(0, Ordering::Relaxed);
        used.cancelled.store(true, Ordering::Relaxed);
        used.has_waiter.store(true, Ordering::Relaxed);
        used.granted.store(true, Ordering::Relaxed);
        used.reported.store(true, Ordering::Relaxed);
        used.finish(crate::task::DONE_FAILED);
        used.renew(9, Kind::Acquire, &other.inner, 5, -3, 64, Timestamp(11));
        let fresh = TaskNode::new(
            9,
            Kind::Acquire,
            other.inner.clone(),
            5,
            -3,
            64,
            Timestamp(11),
            None,
        );
        for n in [&used, &fresh] {
            assert_eq!(n.id, 9);
            assert!(matches!(n.kind, Kind::Acquire));
            assert_eq!((n.codelet_id, n.priority, n.footprint), (5, -3, 64));
            assert_eq!(n.submit, Timestamp(11));
            assert_eq!(n.ready.load(Ordering::Relaxed), 0);
            assert_eq!(n.pending.load(Ordering::Relaxed), 1);
            assert!(!n.cancelled.load(Ordering::Relaxed));
            assert!(!n.is_finished());
            assert!(!n.has_waiter.load(Ordering::Relaxed));
            assert!(!n.granted.load(Ordering::Relaxed));
            assert!(!n.reported.load(Ordering::Relaxed));
            assert_eq!(n.codelet_name(), "b");
            // SAFETY: this thread is the only one to see these nodes.
            assert!(unsafe { n.take_body() }.is_none());
        }
        // Not finished any more: a successor is linked, not released at once.
        let succ = Arc::new(make(10, &cl));
        assert!(Arc::new(used).add_successor(&succ, &mut crate::task::Preds::new()));
    }

    /// Finished nodes, unique, in an order far from their addresses.
    fn shuffled_finished(n: usize, cl: &Codelet) -> Vec<Arc<TaskNode>> {
        let mut nodes: Vec<Arc<TaskNode>> = (0..n as u64)
            .map(|i| {
                let node = Arc::new(make(i, cl));
                node.finish(crate::task::DONE_OK);
                node
            })
            .collect();
        nodes.sort_by_key(|n| (Arc::as_ptr(n) as usize).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        nodes
    }

    fn addresses_taken(pool: &NodePool, n: usize) -> Vec<usize> {
        (0..n)
            .map(|_| Arc::as_ptr(&pool.take().expect("a pooled node")) as usize)
            .collect()
    }

    #[test]
    fn nodes_from_dropped_handles_are_taken_in_address_order() {
        let pool = NodePool::new();
        let cl = Codelet::new("a").cpu(|_| {});
        // Enough to fill `spare` and spill into `returned`: both are sorted.
        let n = NodePool::CAP + NodePool::SORT_MIN;
        let nodes = shuffled_finished(n, &cl);
        pool.recycle(nodes);
        let taken = addresses_taken(&pool, n);
        let (spare, returned) = taken.split_at(NodePool::CAP);
        assert!(spare.is_sorted(), "spare, in ascending addresses");
        assert!(
            returned.is_sorted(),
            "then returned, in ascending addresses"
        );
        assert!(pool.take().is_none());
    }

    #[test]
    fn nodes_workers_give_back_are_taken_last_in_first_out() {
        let pool = NodePool::new();
        let cl = Codelet::new("a").cpu(|_| {});
        let n = 2 * NodePool::SORT_MIN;
        let mut nodes = shuffled_finished(n, &cl);
        let order: Vec<usize> = nodes.iter().map(|n| Arc::as_ptr(n) as usize).collect();
        pool.give_back(&mut nodes);
        let taken = addresses_taken(&pool, n);
        assert!(
            taken.iter().eq(order.iter().rev()),
            "the last given back first"
        );
    }

    #[test]
    fn a_shared_node_is_not_kept_nor_rewritten() {
        let pool = NodePool::new();
        let cl = Codelet::new("a").cpu(|_| {});
        let node = node_of(&pool, 1, &cl);
        let other = node.clone();
        assert!(!NodePool::keep(&node));
        // Even if one slipped in, `get_mut` refuses it and a fresh node is made.
        pool.give_back(&mut vec![node]);
        let fresh = node_of(&pool, 2, &cl);
        assert_ne!(Arc::as_ptr(&fresh), Arc::as_ptr(&other));
        assert_eq!(other.id, 1, "the shared node is untouched");
    }

    #[test]
    fn recycling_keeps_only_nodes_nobody_else_holds() {
        let pool = NodePool::new();
        let cl = Codelet::new("a").cpu(|_| {});
        let done = Arc::new(make(1, &cl));
        done.finish(crate::task::DONE_OK);
        let shared = Arc::new(make(3, &cl));
        shared.finish(crate::task::DONE_OK);
        let other = shared.clone();
        pool.recycle([done, shared]);
        assert_eq!(pool.len(), 1, "only the unique node is kept");
        assert_eq!(
            Arc::strong_count(&other),
            1,
            "the shared one lost a reference"
        );
        // The shared node is gone from the pool's hands: one codelet reference each in
        // `other` and the pooled node, plus `cl`'s.
        assert_eq!(Arc::strong_count(&cl.inner), 3);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "a unique node that never finished")]
    fn recycling_a_unique_unfinished_node_is_a_bug_caught_in_debug_builds() {
        let pool = NodePool::new();
        let cl = Codelet::new("a").cpu(|_| {});
        pool.recycle([Arc::new(make(2, &cl))]);
    }

    #[test]
    fn a_dropped_handle_gives_back_the_nodes_it_held() {
        let rt = crate::Runtime::builder().workers(1).build().unwrap();
        let cl = Codelet::new("w").cpu(|_| {});
        let h = rt.register(0u64);
        // The writer stays the handle's last writer, and the readers its readers: the
        // worker cannot pool them, since the handle holds them too.
        rt.submit(crate::Task::new(&cl).w(&h)).unwrap();
        for _ in 0..3 {
            rt.submit(crate::Task::new(&cl).r(&h)).unwrap();
        }
        rt.wait_all().unwrap();
        let before = rt.shared.nodes.len();
        drop(h);
        assert_eq!(rt.shared.nodes.len(), before + 4);
    }

    /// Counts its drops.
    struct Counted(Arc<std::sync::atomic::AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// A one-worker runtime and a drop counter for the values registered in the test.
    fn runtime_and_counter() -> (crate::Runtime, Arc<std::sync::atomic::AtomicUsize>) {
        (
            crate::Runtime::builder().workers(1).build().unwrap(),
            Arc::new(std::sync::atomic::AtomicUsize::new(0)),
        )
    }

    #[test]
    fn a_dropped_handle_is_cleared_at_once_and_reused_by_the_next_registration() {
        use std::sync::atomic::Ordering::SeqCst;
        let (rt, drops) = runtime_and_counter();
        let cl = Codelet::new("w").cpu(|_| {});
        let h = rt.register_bytes(Counted(drops.clone()), 0);
        rt.submit(crate::Task::new(&cl).rw(&h)).unwrap();
        rt.submit(crate::Task::new(&cl).r(&h)).unwrap();
        rt.wait_all().unwrap();
        // A copy on memory node 1 owns the data now (as a GPU's would).
        h.core.note_access(1, crate::Access::RW);
        assert_eq!(h.replica_state(0), crate::ReplicaState::Invalid);
        let (addr, old_id) = (Arc::as_ptr(&h.core), h.id());
        let nodes = rt.shared.nodes.len();
        drop(h);
        assert_eq!(
            drops.load(SeqCst),
            1,
            "the value is dropped with the handle"
        );
        assert_eq!(rt.shared.nodes.len(), nodes + 2, "its nodes went back");
        assert_eq!(rt.shared.nodes.handles_kept(), 1);

        // Another type, in the same allocation, as new.
        let again = rt.register(vec![1.0f64, 2.0]);
        assert_eq!(Arc::as_ptr(&again.core), addr, "the allocation is reused");
        assert_eq!(rt.shared.nodes.handles_kept(), 0);
        assert_ne!(again.id(), old_id, "with a fresh id");
        assert_eq!(again.bytes(), 16, "the size of its data");
        assert_eq!(again.replica_state(0), crate::ReplicaState::Owner);
        assert_eq!(again.replica_state(1), crate::ReplicaState::Invalid);
        assert!(
            format!("{again:?}").contains("Vec<f64>"),
            "with its new type: {again:?}"
        );
        let add = Codelet::new("add").cpu(|ctx| ctx.rw::<Vec<f64>>(0).push(3.0));
        rt.submit(crate::Task::new(&add).rw(&again)).unwrap();
        assert_eq!(rt.unregister(again).unwrap(), vec![1.0, 2.0, 3.0]);
        // Unregistered, then dropped: kept again, and reused with the flag cleared.
        assert_eq!(rt.shared.nodes.handles_kept(), 1);
        let third = rt.register(7u8);
        assert_eq!(Arc::as_ptr(&third.core), addr);
        rt.submit(crate::Task::new(&cl).r(&third))
            .expect("a reused handle is registered, not unregistered");
        assert_eq!(rt.unregister(third).unwrap(), 7);
        assert_eq!(drops.load(SeqCst), 1);
    }

    #[test]
    fn a_handle_something_else_still_holds_is_freed_by_the_last_holder() {
        use std::sync::atomic::Ordering::SeqCst;
        let (rt, drops) = runtime_and_counter();
        let cl = Codelet::new("r").cpu(|_| {});
        let h = rt.register_bytes(Counted(drops.clone()), 0);
        // A task being built holds the handle too.
        let task = crate::Task::new(&cl).r(&h);
        drop(h);
        assert_eq!(rt.shared.nodes.handles_kept(), 0, "not kept: still held");
        assert_eq!(drops.load(SeqCst), 0, "and its value still alive");
        rt.submit(task).unwrap();
        rt.wait_all().unwrap();
        assert_eq!(drops.load(SeqCst), 1, "freed with the task's reference");
        assert_eq!(rt.shared.nodes.handles_kept(), 0);
    }

    #[test]
    fn no_handle_is_kept_once_the_runtime_is_dropped() {
        let rt = crate::Runtime::builder().workers(1).build().unwrap();
        let pool = rt.shared.nodes.clone();
        let late = rt.register(2u32);
        drop(rt.register(1u32));
        assert_eq!(pool.handles_kept(), 1);
        drop(rt);
        assert_eq!(pool.handles_kept(), 0, "the kept handles are freed");
        drop(late);
        assert_eq!(pool.handles_kept(), 0, "and later ones are not kept");
        assert_eq!(
            Arc::strong_count(&pool),
            1,
            "no kept handle holds the pool: nothing leaks"
        );
    }

    #[test]
    fn a_codelet_owning_a_handle_is_freed_with_the_runtime() {
        use std::sync::atomic::Ordering::SeqCst;
        let (rt, drops) = runtime_and_counter();
        let h = rt.register_bytes(Counted(drops.clone()), 0);
        // The closure owns the handle: a pooled node holding the codelet would hold the
        // handle, which holds the pool, which holds the node.
        let cl = Codelet::new("owner").cpu(move |_| {
            let _ = &h;
        });
        for _ in 0..3 {
            rt.submit(crate::Task::new(&cl)).unwrap();
        }
        rt.wait_all().unwrap();
        assert!(rt.shared.nodes.len() > 0, "the finished nodes were kept");
        drop(rt);
        drop(cl);
        assert_eq!(drops.load(SeqCst), 1, "nothing holds the value any more");
    }

    #[test]
    fn a_value_whose_drop_panics_is_dropped_once_and_the_pool_goes_on() {
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        struct Bomb(Arc<AtomicUsize>);
        impl Drop for Bomb {
            fn drop(&mut self) {
                self.0.fetch_add(1, SeqCst);
                panic!("boom");
            }
        }
        let (rt, drops) = runtime_and_counter();
        let h = rt.register_bytes(Bomb(drops.clone()), 0);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(h)));
        assert!(
            caught.is_err(),
            "the value's panic reaches the dropping thread"
        );
        assert_eq!(drops.load(SeqCst), 1, "dropped once");
        assert_eq!(
            rt.shared.nodes.handles_kept(),
            0,
            "the handle was freed, not kept"
        );
        let next = rt.register(5u32);
        assert_eq!(rt.unregister(next).unwrap(), 5);
        assert_eq!(drops.load(SeqCst), 1);
    }

    #[test]
    fn a_value_owning_a_handle_gives_both_back_without_deadlock() {
        let rt = Arc::new(crate::Runtime::builder().workers(1).build().unwrap());
        let inner = rt.register(1u64);
        let outer = rt.register_bytes(inner, 0);
        // On another thread, so that a deadlock fails the test instead of hanging it.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            drop(outer);
            tx.send(()).unwrap();
        });
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .expect("a handle dropped while another is retired must not deadlock");
        assert_eq!(rt.shared.nodes.handles_kept(), 2, "both kept for reuse");
    }

    #[test]
    fn handles_cloned_and_dropped_on_many_threads_drop_each_value_once() {
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        let rt = crate::Runtime::builder().workers(2).build().unwrap();
        let read = Codelet::new("read").cpu(|ctx| {
            let _ = ctx.r::<Counted>(0);
        });
        let drops = Arc::new(AtomicUsize::new(0));
        let made = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for i in 0..500 {
                        let h = rt.register_bytes(Counted(drops.clone()), 0);
                        made.fetch_add(1, SeqCst);
                        let copy = h.clone();
                        rt.submit(crate::Task::new(&read).r(&h)).unwrap();
                        // Dropped here or there, before or after the task ran.
                        if i % 2 == 0 {
                            drop(h);
                            std::thread::spawn(move || drop(copy));
                        } else {
                            drop(copy);
                        }
                    }
                });
            }
        });
        rt.wait_all().unwrap();
        drop(rt);
        // The detached threads: wait for the last of their drops.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while drops.load(SeqCst) < made.load(SeqCst) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(
            drops.load(SeqCst),
            made.load(SeqCst),
            "every value dropped once"
        );
    }

    #[test]
    fn the_pool_keeps_at_most_its_cap_of_handles() {
        let rt = crate::Runtime::builder().workers(1).build().unwrap();
        let hs: Vec<_> = (0..NodePool::HANDLE_CAP + 5)
            .map(|i| rt.register(i))
            .collect();
        drop(hs);
        assert_eq!(rt.shared.nodes.handles_kept(), NodePool::HANDLE_CAP);
    }

    #[test]
    fn the_handles_cap_grows_to_what_a_graph_registered() {
        let rt = crate::Runtime::builder().workers(1).build().unwrap();
        let n = NodePool::HANDLE_CAP + 2000;
        let hs: Vec<_> = (0..n).map(|i| rt.register(i)).collect();
        rt.wait_all().unwrap();
        drop(hs);
        assert_eq!(rt.shared.nodes.handles_kept(), n);
        // The next graph's registrations take them all: none allocated anew.
        let again: Vec<_> = (0..n).map(|i| rt.register(i)).collect();
        assert_eq!(rt.shared.nodes.handles_kept(), 0);
        drop(again);
    }

    #[test]
    fn a_node_freed_while_recycling_may_drop_a_handle_that_recycles_too() {
        use crate::handle::{Access, Handle};
        use crate::task::{Preds, DONE_OK};
        let pool = Arc::new(NodePool::new());
        let other = Codelet::new("other").cpu(|_| {});
        let finished = |id| {
            let n = Arc::new(make(id, &other));
            n.finish(DONE_OK);
            n
        };
        // A handle holding a finished node: dropping it recycles, taking the pool's lock.
        let h = Handle::new(0u8, 1, Some(&pool));
        let written = finished(1);
        crate::submit::link(&h.core, Access::W, &written, &mut Preds::new());
        drop(written);
        // A codelet whose closure owns that handle, referenced by one node only, which
        // the pool cannot keep since both its lists are full: freeing the node drops the
        // handle.
        let owner = Codelet::new("owner").cpu(move |_| {
            let _ = &h;
        });
        let node = Arc::new(make(2, &owner));
        node.finish(DONE_OK);
        drop(owner);
        pool.recycle((10..10 + 2 * NodePool::CAP as u64).map(finished));
        assert_eq!(pool.len(), 2 * NodePool::CAP);
        // On another thread, so that a deadlock fails the test instead of hanging it.
        let (tx, rx) = std::sync::mpsc::channel();
        let p = pool.clone();
        std::thread::spawn(move || {
            p.recycle([node]);
            tx.send(()).unwrap();
        });
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .expect("recycling a node whose codelet owns a handle must not deadlock");
        assert_eq!(pool.len(), 2 * NodePool::CAP);
    }

    #[test]
    fn the_pool_keeps_at_most_its_cap() {
        let pool = NodePool::new();
        let cl = Codelet::new("a").cpu(|_| {});
        let mut batch: Vec<_> = (0..NodePool::CAP as u64 + 10)
            .map(|i| Arc::new(make(i, &cl)))
            .collect();
        pool.give_back(&mut batch);
        assert!(batch.is_empty());
        assert_eq!(pool.len(), NodePool::CAP);
        // The extra nodes were freed: their codelet references are gone.
        assert_eq!(Arc::strong_count(&cl.inner), 1 + NodePool::CAP);
    }

    #[test]
    fn the_cap_grows_to_the_largest_graph_and_no_further() {
        let pool = NodePool::new();
        let cap = |p: &NodePool| p.cap.load(Ordering::Relaxed);
        pool.fit(100);
        assert_eq!(cap(&pool), NodePool::CAP, "never below the initial cap");
        pool.fit(20_000);
        assert_eq!(cap(&pool), 20_000);
        pool.fit(10_000);
        assert_eq!(cap(&pool), 20_000, "never lowered");
        pool.fit(u64::MAX);
        assert_eq!(cap(&pool), NodePool::CAP_MAX);
        // The raised cap holds: a batch over the initial cap is kept whole.
        let pool = NodePool::new();
        pool.fit(NodePool::CAP as u64 + 10);
        let cl = Codelet::new("a").cpu(|_| {});
        let mut batch: Vec<_> = (0..NodePool::CAP as u64 + 20)
            .map(|i| Arc::new(make(i, &cl)))
            .collect();
        pool.give_back(&mut batch);
        assert_eq!(pool.len(), NodePool::CAP + 10);
    }

    #[test]
    fn wait_all_sizes_the_pool_for_the_graph_it_waited_for() {
        let rt = crate::Runtime::builder().workers(2).build().unwrap();
        let empty = Codelet::new("empty").cpu(|_| {});
        let cap = || rt.shared.nodes.cap.load(Ordering::Relaxed);
        let run = |n: usize| {
            for _ in 0..n {
                rt.submit(crate::Task::new(&empty)).unwrap();
            }
            rt.wait_all().unwrap();
        };
        run(1000);
        assert_eq!(cap(), NodePool::CAP, "a small graph leaves the cap");
        run(NodePool::CAP + 500);
        assert_eq!(cap(), NodePool::CAP + 500, "counted from the last wait_all");
        run(2000);
        assert_eq!(cap(), NodePool::CAP + 500);
    }
}
