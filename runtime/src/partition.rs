//! Partitioning: a registered vector or matrix split into parts that tasks access as
//! handles of their own (StarPU's filters, `starpu_data_partition` and
//! `starpu_data_unpartition`).
//!
//! The parts are views on the parent's memory, not copies. [`Runtime::partition`] waits
//! for every access submitted to the parent before it (as `acquire_mut` does), then holds
//! the parent: while it is partitioned, a task, acquisition or unregistration on it is
//! refused with [`RuntimeError::Partitioned`], so the parts are the only way to the data
//! and their views never alias anything the runtime hands out. [`Runtime::unpartition`]
//! (or dropping the [`Partitioned`]) waits for every access submitted to the parts, makes
//! the parts unusable (later submissions on a clone of one are refused, as for an
//! unregistered handle), and gives the parent back: what is submitted to it afterwards
//! sees every write made through the parts. Dependencies are thus right across the two
//! views, at the price of the calling thread waiting at both ends, as with StarPU's
//! synchronous pair (its `_submit` variants, which do not wait, are not built yet).

use crate::DataSize as _;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::Ordering;

use crate::acquire::WriteGuard;
use crate::error::RuntimeError;
use crate::handle::Handle;
use crate::runtime::Runtime;

/// How to split data into parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Filter {
    /// A vector into `n` contiguous blocks whose lengths differ by at most one, the
    /// longer first (StarPU's `starpu_vector_filter_block`).
    Blocks(usize),
    /// A matrix into a grid of `rows` × `cols` blocks, each row (column) of blocks as
    /// tall (wide) as the others give or take one (StarPU's `starpu_matrix_filter_block`
    /// and `starpu_matrix_filter_vertical_block` together). Parts are listed by block
    /// column, then block row, as a column-major matrix stores its elements.
    Grid {
        /// Blocks down a column.
        rows: usize,
        /// Blocks across a row.
        cols: usize,
    },
}

/// Data that [`Runtime::partition`] can split.
///
/// # Safety
/// `split` returns parts that view disjoint memory owned by `self`, which stays valid and
/// in place as long as `self` is neither accessed nor dropped (the runtime guarantees both
/// while the data is partitioned); a part may be sent to and used from any thread.
pub unsafe trait Partition: Send + Sync + 'static {
    /// The type of a part.
    type Part: Send + Sync + 'static;

    /// The parts `filter` makes, each with the bytes it counts for in task footprints;
    /// an error says why the filter does not apply.
    fn split(&mut self, filter: Filter) -> Result<Vec<(Self::Part, u64)>, String>;

    /// How a part is copied to a device when the partitioned handle could be (it was
    /// registered with `register_replicated` or `register_device`): `None` keeps the
    /// parts on CPU workers (the default).
    #[doc(hidden)]
    fn part_copier() -> Option<PartCopier> {
        None
    }
}

/// How the parts of a [`Partition`] are copied to devices (opaque).
#[doc(hidden)]
pub struct PartCopier(&'static crate::handle::Copier);

/// A vector part's copier: with its bytes (CUDA too) for the built-in element types,
/// clones only (emulated devices) for the others.
fn vector_part_copier<T: Clone + Send + Sync + 'static>() -> PartCopier {
    use std::any::TypeId;
    macro_rules! elements {
        ($($e:ty),*) => { $(
            if TypeId::of::<T>() == TypeId::of::<$e>() {
                return PartCopier(crate::handle::device_copier::<VectorPart<$e>>());
            }
        )* };
    }
    elements!(f32, f64, u8, u16, u32, u64, i8, i16, i32, i64);
    PartCopier(crate::handle::replicated_copier::<VectorPart<T>>())
}

/// The bounds of `parts` near-equal pieces of `len` elements: the first `len % parts` get
/// one more.
fn pieces(len: usize, parts: usize) -> impl Iterator<Item = (usize, usize)> {
    let (q, r) = (len / parts, len % parts);
    (0..parts).map(move |i| {
        let start = i * q + i.min(r);
        (start, q + usize::from(i < r))
    })
}

/// A part of a vector: a view on a contiguous slice of its parent.
pub struct VectorPart<T> {
    ptr: *mut T,
    len: usize,
    /// A device's copy of a part (see [`Clone`]) owns its elements (held for its drop
    /// only: `ptr` points into it); a part of a parent views them.
    #[allow(dead_code)]
    own: Option<Box<[T]>>,
    _t: PhantomData<T>,
}

/// A clone owns a copy of the elements: what an emulated GPU computes on.
/// `clone_from` copies the elements into the part it is called on, in place: a copy
/// coming back to a part of its parent lands in the parent.
impl<T: Clone> Clone for VectorPart<T> {
    fn clone(&self) -> Self {
        let mut own: Box<[T]> = self.deref().into();
        VectorPart {
            ptr: own.as_mut_ptr(),
            len: own.len(),
            own: Some(own),
            _t: PhantomData,
        }
    }

    fn clone_from(&mut self, src: &Self) {
        if self.len == src.len {
            self.deref_mut().clone_from_slice(src);
        } else {
            *self = src.clone();
        }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for VectorPart<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

// SAFETY: the part's elements, contiguous; `Element` makes any bytes a valid value, and
// the length is fixed.
unsafe impl<E: crate::device::Element> crate::device::DeviceData for VectorPart<E> {
    fn device_bytes(&self) -> &[u8] {
        crate::device::bytes_of(self)
    }
    fn device_bytes_mut(&mut self) -> &mut [u8] {
        crate::device::bytes_of_mut(self)
    }
}

// SAFETY: a part is a `&mut [T]` on memory nobody else accesses while it lives (see
// `Partition`), handed between threads by the runtime's dependencies.
unsafe impl<T: Send> Send for VectorPart<T> {}
// SAFETY: shared access gives `&[T]` only.
unsafe impl<T: Sync> Sync for VectorPart<T> {}

impl<T> Deref for VectorPart<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr..ptr+len` is a live, disjoint part of the parent (see `Partition`).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<T> DerefMut for VectorPart<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as above, and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

// SAFETY: the blocks are disjoint ranges of the vector's buffer, which does not move or
// change length while the vector is not accessed.
unsafe impl<T: crate::DataSize + Clone + Send + Sync + 'static> Partition for Vec<T> {
    type Part = VectorPart<T>;

    fn part_copier() -> Option<PartCopier> {
        Some(vector_part_copier::<T>())
    }

    fn split(&mut self, filter: Filter) -> Result<Vec<(VectorPart<T>, u64)>, String> {
        let Filter::Blocks(n) = filter else {
            return Err(format!(
                "a vector splits with Filter::Blocks(n), not {filter:?}"
            ));
        };
        if n == 0 || n > self.len() {
            return Err(format!(
                "{n} blocks of a vector of {} elements: ask for 1 to {} blocks",
                self.len(),
                self.len()
            ));
        }
        let base = self.as_mut_ptr();
        let bytes: Vec<u64> = pieces(self.len(), n)
            .map(|(start, len)| self[start..start + len].data_bytes())
            .collect();
        Ok(pieces(self.len(), n)
            .zip(bytes)
            .map(|((start, len), bytes)| {
                let part = VectorPart {
                    // SAFETY: `start + len <= self.len()`.
                    ptr: unsafe { base.add(start) },
                    len,
                    own: None,
                    _t: PhantomData,
                };
                (part, bytes)
            })
            .collect())
    }
}

/// A dense matrix, stored by columns (as StarPU's matrix interface and BLAS store it).
#[derive(Clone, Debug, PartialEq)]
pub struct Matrix<T> {
    data: Vec<T>,
    rows: usize,
    cols: usize,
}

impl<T: crate::DataSize> crate::DataSize for Matrix<T> {
    fn data_bytes(&self) -> u64 {
        self.data.data_bytes()
    }
}

impl<T> Matrix<T> {
    /// A `rows` × `cols` matrix whose element (i, j) is `f(i, j)`.
    pub fn from_fn(rows: usize, cols: usize, mut f: impl FnMut(usize, usize) -> T) -> Self {
        let mut data = Vec::with_capacity(rows * cols);
        for j in 0..cols {
            for i in 0..rows {
                data.push(f(i, j));
            }
        }
        Matrix { data, rows, cols }
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Element (i, j).
    ///
    /// # Panics
    /// Out of range.
    pub fn get(&self, i: usize, j: usize) -> &T {
        assert!(i < self.rows && j < self.cols, "({i}, {j}) out of range");
        &self.data[j * self.rows + i]
    }

    /// Element (i, j), to write.
    ///
    /// # Panics
    /// Out of range.
    pub fn get_mut(&mut self, i: usize, j: usize) -> &mut T {
        assert!(i < self.rows && j < self.cols, "({i}, {j}) out of range");
        &mut self.data[j * self.rows + i]
    }

    /// The elements, column after column.
    pub fn as_slice(&self) -> &[T] {
        &self.data
    }
}

/// A block of a [`Matrix`]: a view with the parent's leading dimension.
pub struct MatrixPart<T> {
    ptr: *mut T,
    rows: usize,
    cols: usize,
    ld: usize,
    /// A device's copy owns its elements, packed (`ld == rows`; held for its drop only);
    /// see [`VectorPart`].
    #[allow(dead_code)]
    own: Option<Box<[T]>>,
    _t: PhantomData<T>,
}

/// A clone owns a packed copy of the block (an emulated GPU's); `clone_from` copies the
/// elements into the block it is called on, in place, column by column.
impl<T: Clone> Clone for MatrixPart<T> {
    fn clone(&self) -> Self {
        let mut own: Vec<T> = Vec::with_capacity(self.rows * self.cols);
        for j in 0..self.cols {
            own.extend_from_slice(self.col(j));
        }
        let mut own = own.into_boxed_slice();
        MatrixPart {
            ptr: own.as_mut_ptr(),
            rows: self.rows,
            cols: self.cols,
            ld: self.rows,
            own: Some(own),
            _t: PhantomData,
        }
    }

    fn clone_from(&mut self, src: &Self) {
        if (self.rows, self.cols) == (src.rows, src.cols) {
            for j in 0..self.cols {
                self.col_mut(j).clone_from_slice(src.col(j));
            }
        } else {
            *self = src.clone();
        }
    }
}

// SAFETY: as for `VectorPart`: the block is memory nobody else accesses while it lives.
unsafe impl<T: Send> Send for MatrixPart<T> {}
// SAFETY: shared access gives shared references only.
unsafe impl<T: Sync> Sync for MatrixPart<T> {}

impl<T> MatrixPart<T> {
    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// Column `j` of the block.
    ///
    /// # Panics
    /// Out of range.
    pub fn col(&self, j: usize) -> &[T] {
        assert!(j < self.cols, "column {j} of a block of {}", self.cols);
        // SAFETY: column `j` of the block is `rows` elements from `ptr + j * ld`, inside
        // the parent and inside this block only.
        unsafe { std::slice::from_raw_parts(self.ptr.add(j * self.ld), self.rows) }
    }

    /// Column `j` of the block, to write.
    ///
    /// # Panics
    /// Out of range.
    pub fn col_mut(&mut self, j: usize) -> &mut [T] {
        assert!(j < self.cols, "column {j} of a block of {}", self.cols);
        // SAFETY: as in `col`, and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(j * self.ld), self.rows) }
    }

    /// Element (i, j) of the block.
    pub fn get(&self, i: usize, j: usize) -> &T {
        &self.col(j)[i]
    }

    /// Element (i, j) of the block, to write.
    pub fn get_mut(&mut self, i: usize, j: usize) -> &mut T {
        &mut self.col_mut(j)[i]
    }
}

// SAFETY: the blocks cover disjoint (row range × column range) rectangles of the buffer,
// which does not move while the matrix is not accessed.
unsafe impl<T: Clone + Send + Sync + 'static> Partition for Matrix<T> {
    type Part = MatrixPart<T>;

    /// Blocks are strided: emulated GPUs take them (as packed clones); CUDA GPUs do not
    /// (no 2D copies yet), and their tasks run on CPU workers there.
    fn part_copier() -> Option<PartCopier> {
        Some(PartCopier(
            crate::handle::replicated_copier::<MatrixPart<T>>(),
        ))
    }

    fn split(&mut self, filter: Filter) -> Result<Vec<(MatrixPart<T>, u64)>, String> {
        let Filter::Grid { rows, cols } = filter else {
            return Err(format!(
                "a matrix splits with Filter::Grid {{ rows, cols }}, not {filter:?}"
            ));
        };
        if rows == 0 || cols == 0 || rows > self.rows || cols > self.cols {
            return Err(format!(
                "a grid of {rows} × {cols} blocks of a {} × {} matrix: ask for 1 to {} \
                 block rows and 1 to {} block columns",
                self.rows, self.cols, self.rows, self.cols
            ));
        }
        let base = self.data.as_mut_ptr();
        let ld = self.rows;
        let mut parts = Vec::with_capacity(rows * cols);
        for (c0, nc) in pieces(self.cols, cols) {
            for (r0, nr) in pieces(self.rows, rows) {
                let part = MatrixPart {
                    // SAFETY: (r0, c0) is inside the matrix.
                    ptr: unsafe { base.add(c0 * ld + r0) },
                    rows: nr,
                    cols: nc,
                    ld,
                    own: None,
                    _t: PhantomData,
                };
                parts.push((part, (nr * nc * std::mem::size_of::<T>()) as u64));
            }
        }
        Ok(parts)
    }
}

/// A partitioned handle: its parts, as handles, until [`Runtime::unpartition`] (or the
/// drop of this value) gives the parent back. Derefs to the parts.
pub struct Partitioned<'rt, T: Partition> {
    rt: &'rt Runtime,
    /// The parent, held while partitioned; none once given back.
    parent: Option<WriteGuard<'rt, T>>,
    parts: Vec<Handle<T::Part>>,
}

impl<T: Partition> Deref for Partitioned<'_, T> {
    type Target = [Handle<T::Part>];
    fn deref(&self) -> &[Handle<T::Part>] {
        &self.parts
    }
}

impl<T: Partition> Partitioned<'_, T> {
    /// Waits for the parts' accesses, retires the parts and releases the parent.
    fn give_back(&mut self) -> Result<(), RuntimeError> {
        let Some(parent) = self.parent.take() else {
            return Ok(());
        };
        for part in std::mem::take(&mut self.parts) {
            if let Some(ext) = part.core.ext() {
                ext.part.store(false, Ordering::Release);
            }
            if let Err(e) = self.rt.unregister(part) {
                // The parts' tasks may still run: the parent must stay held, forever.
                std::mem::forget(parent);
                return Err(e);
            }
        }
        if let Some(ext) = parent.core.ext() {
            ext.partitioned.store(false, Ordering::Release);
        }
        drop(parent);
        Ok(())
    }
}

impl<T: Partition> Drop for Partitioned<'_, T> {
    fn drop(&mut self) {
        // Errors here (the runtime was interrupted, or this is a task) leave the parent
        // held: see `give_back`.
        let _ = self.give_back();
    }
}

impl Runtime {
    /// Splits the data of `handle` into parts, each a handle of its own (StarPU's
    /// `starpu_data_partition`). Waits for the accesses submitted to `handle` before; while
    /// the result lives, `handle` itself is refused ([`RuntimeError::Partitioned`]). See
    /// the module's documentation in partition.rs.
    ///
    /// ```
    /// # use taskwatt_runtime::{Codelet, Filter, Runtime, Task, VectorPart};
    /// let rt = Runtime::builder().workers(2).build().unwrap();
    /// let v = rt.register((0..10u64).collect::<Vec<_>>());
    /// let double = Codelet::new("double").cpu(|ctx| {
    ///     ctx.rw::<VectorPart<u64>>(0).iter_mut().for_each(|x| *x *= 2)
    /// });
    /// let parts = rt.partition(&v, Filter::Blocks(3)).unwrap();
    /// for p in parts.iter() {
    ///     rt.submit(Task::new(&double).rw(p)).unwrap();
    /// }
    /// rt.unpartition(parts).unwrap();
    /// assert_eq!(rt.unregister(v).unwrap(), (0..10u64).map(|x| 2 * x).collect::<Vec<_>>());
    /// ```
    pub fn partition<T: Partition>(
        &self,
        handle: &Handle<T>,
        filter: Filter,
    ) -> Result<Partitioned<'_, T>, RuntimeError> {
        let mut parent = self.acquire_mut(handle)?;
        let parts = parent
            .split(filter)
            .map_err(|reason| RuntimeError::BadPartition {
                handle: handle.id(),
                reason,
            })?;
        handle
            .core
            .ext_or_init()
            .partitioned
            .store(true, Ordering::Release);
        // Parts of data that devices could hold can be copied to them too.
        let copier = match handle.core.copier {
            Some(_) => T::part_copier(),
            None => None,
        };
        let parts: Vec<Handle<T::Part>> = parts
            .into_iter()
            .map(|(p, bytes)| {
                let h = match &copier {
                    Some(PartCopier(c)) => {
                        Handle::with_copier(p, bytes, Some(&self.shared.nodes), c)
                    }
                    None => self.register_bytes(p, bytes),
                };
                h.core.ext_or_init().part.store(true, Ordering::Release);
                h
            })
            .collect();
        // Named after their parent (`grid[3]`), so that exports name them too.
        let parent_name = handle.core.ext().and_then(|e| e.name.lock().clone());
        if let Some(name) = parent_name {
            for (i, p) in parts.iter().enumerate() {
                self.set_name(p, format!("{name}[{i}]"));
            }
        }
        Ok(Partitioned {
            rt: self,
            parent: Some(parent),
            parts,
        })
    }

    /// Gives the parent of `parts` back (StarPU's `starpu_data_unpartition`): waits for
    /// every access submitted to the parts, then makes them unusable. Accesses submitted to
    /// the parent afterwards see what the parts' tasks wrote.
    pub fn unpartition<T: Partition>(
        &self,
        mut parts: Partitioned<'_, T>,
    ) -> Result<(), RuntimeError> {
        parts.give_back()
    }
}
