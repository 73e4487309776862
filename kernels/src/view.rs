//! Strided column-major views into a tile: the vocabulary of the blocked algorithms.
//!
//! The recursive potrf/trsm/syrk in `pure.rs` work on sub-blocks of a tile
//! (`A11`, `A21`, `A22`...) that interleave in memory: two row blocks of a column-major
//! matrix share every column's cache lines but no element. Slices cannot express that, so
//! the views hold a raw pointer plus `(rows, cols, ld)` and a lifetime.
//!
//! Invariants (upheld by every constructor and split, relied on by every `SAFETY:` below):
//! 1. every element `(i, j)` with `i < rows`, `j < cols` lies at `ptr + i + j * ld` inside
//!    the allocation the view was made from, and `rows <= ld` whenever `cols > 1`;
//! 2. a `MatMut` has exclusive access to its elements for `'a`: splits hand out views on
//!    disjoint element sets and consume the parent.

// With `blas`, only `gemm_view` (used by the residual checks) and the views it needs are
// live in the library; the rest is still compiled and cross-checked against BLAS in tests.
#![cfg_attr(feature = "blas", allow(dead_code))]

use std::marker::PhantomData;

use crate::Scalar;

/// Read-only view of a `rows x cols` column-major block with leading dimension `ld`.
#[derive(Clone, Copy)]
pub(crate) struct MatRef<'a, T: Scalar = f64> {
    ptr: *const T,
    rows: usize,
    cols: usize,
    ld: usize,
    _life: PhantomData<&'a T>,
}

/// Exclusive view of a `rows x cols` column-major block with leading dimension `ld`.
pub(crate) struct MatMut<'a, T: Scalar = f64> {
    ptr: *mut T,
    rows: usize,
    cols: usize,
    ld: usize,
    _life: PhantomData<&'a mut T>,
}

fn check_fits(len: usize, rows: usize, cols: usize, ld: usize) {
    assert!(cols <= 1 || rows <= ld, "view: rows {rows} > ld {ld}");
    if rows > 0 && cols > 0 {
        let last = (rows - 1) + (cols - 1) * ld;
        assert!(
            last < len,
            "view: {rows}x{cols} (ld {ld}) does not fit in {len} elements"
        );
    }
}

impl<'a, T: Scalar> MatRef<'a, T> {
    /// Views `s` as `rows x cols` with leading dimension `ld`.
    pub(crate) fn from_slice(s: &'a [T], rows: usize, cols: usize, ld: usize) -> Self {
        check_fits(s.len(), rows, cols, ld);
        Self {
            ptr: s.as_ptr(),
            rows,
            cols,
            ld,
            _life: PhantomData,
        }
    }

    pub(crate) fn rows(&self) -> usize {
        self.rows
    }
    pub(crate) fn cols(&self) -> usize {
        self.cols
    }
    pub(crate) fn ld(&self) -> usize {
        self.ld
    }
    pub(crate) fn as_ptr(&self) -> *const T {
        self.ptr
    }

    /// The `rows x cols` block starting at `(r0, c0)`.
    pub(crate) fn sub(self, r0: usize, c0: usize, rows: usize, cols: usize) -> MatRef<'a, T> {
        assert!(
            r0 + rows <= self.rows && c0 + cols <= self.cols,
            "MatRef::sub out of bounds"
        );
        MatRef {
            // SAFETY: for a non-empty block, (r0, c0) is an element of the view (asserted
            // above), so the offset stays inside the allocation (invariant 1). An empty
            // block keeps the parent's pointer and is never read.
            ptr: if rows > 0 && cols > 0 {
                unsafe { self.ptr.add(r0 + c0 * self.ld) }
            } else {
                self.ptr
            },
            rows,
            cols,
            ld: self.ld,
            _life: PhantomData,
        }
    }

    /// Column `j` as a slice of `rows` elements.
    #[inline]
    pub(crate) fn col(self, j: usize) -> &'a [T] {
        assert!(j < self.cols, "MatRef::col out of bounds");
        // SAFETY: a column is `rows` contiguous elements inside the view (invariant 1);
        // the view is shared for 'a, so no `&mut` to them exists.
        unsafe { std::slice::from_raw_parts(self.ptr.add(j * self.ld), self.rows) }
    }
}

impl<'a, T: Scalar> MatMut<'a, T> {
    /// Views `s` as `rows x cols` with leading dimension `ld`.
    pub(crate) fn from_slice(s: &'a mut [T], rows: usize, cols: usize, ld: usize) -> Self {
        check_fits(s.len(), rows, cols, ld);
        Self {
            ptr: s.as_mut_ptr(),
            rows,
            cols,
            ld,
            _life: PhantomData,
        }
    }

    pub(crate) fn rows(&self) -> usize {
        self.rows
    }
    pub(crate) fn cols(&self) -> usize {
        self.cols
    }
    pub(crate) fn ld(&self) -> usize {
        self.ld
    }
    pub(crate) fn as_mut_ptr(&mut self) -> *mut T {
        self.ptr
    }

    /// A shared view of the same block, for as long as `self` is borrowed.
    pub(crate) fn rb(&self) -> MatRef<'_, T> {
        MatRef {
            ptr: self.ptr,
            rows: self.rows,
            cols: self.cols,
            ld: self.ld,
            _life: PhantomData,
        }
    }

    /// An exclusive view of the same block, for as long as `self` is borrowed.
    pub(crate) fn rb_mut(&mut self) -> MatMut<'_, T> {
        MatMut {
            ptr: self.ptr,
            rows: self.rows,
            cols: self.cols,
            ld: self.ld,
            _life: PhantomData,
        }
    }

    /// Splits into rows `0..r` and rows `r..rows` (disjoint, both exclusive).
    pub(crate) fn split_rows(self, r: usize) -> (MatMut<'a, T>, MatMut<'a, T>) {
        assert!(r <= self.rows, "MatMut::split_rows out of bounds");
        let top = MatMut { rows: r, ..self };
        let bottom = MatMut {
            // SAFETY: when the bottom block is non-empty, (r, 0) is an element of the view,
            // inside the allocation (invariant 1); an empty block keeps the parent's
            // pointer and is never read. The halves own disjoint rows (invariant 2).
            ptr: if r < self.rows && self.cols > 0 {
                unsafe { self.ptr.add(r) }
            } else {
                self.ptr
            },
            rows: self.rows - r,
            ..self
        };
        (top, bottom)
    }

    /// Splits into columns `0..c` and columns `c..cols` (disjoint, both exclusive).
    pub(crate) fn split_cols(self, c: usize) -> (MatMut<'a, T>, MatMut<'a, T>) {
        assert!(c <= self.cols, "MatMut::split_cols out of bounds");
        let left = MatMut { cols: c, ..self };
        let right = MatMut {
            // SAFETY: when the right block is non-empty, (0, c) is an element of the view
            // (invariant 1); otherwise the parent's pointer is kept and never read. The
            // halves own disjoint columns (invariant 2).
            ptr: if c < self.cols && self.rows > 0 {
                unsafe { self.ptr.add(c * self.ld) }
            } else {
                self.ptr
            },
            cols: self.cols - c,
            ..self
        };
        (left, right)
    }

    /// Column `j`, read-only.
    #[inline]
    pub(crate) fn col(&self, j: usize) -> &[T] {
        self.rb().col(j)
    }

    /// Column `j`, writable.
    #[inline]
    pub(crate) fn col_mut(&mut self, j: usize) -> &mut [T] {
        assert!(j < self.cols, "MatMut::col_mut out of bounds");
        // SAFETY: a column is `rows` contiguous elements inside the view (invariant 1) and
        // the view is exclusive (invariant 2); `&mut self` keeps it borrowed meanwhile.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(j * self.ld), self.rows) }
    }
}

// SAFETY: the views are a (pointer, shape) over `T: Send + Sync` with the aliasing rules
// of & and &mut; sending them across threads is as safe as sending those references.
unsafe impl<T: Scalar> Send for MatRef<'_, T> {}
unsafe impl<T: Scalar> Sync for MatRef<'_, T> {}
unsafe impl<T: Scalar> Send for MatMut<'_, T> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_address_the_right_elements() {
        let mut data: Vec<f64> = (0..12).map(|x| x as f64).collect(); // 4x3, ld 4
        let m = MatMut::from_slice(&mut data, 4, 3, 4);
        let (left, right) = m.split_cols(1);
        assert_eq!(left.col(0), &[0.0, 1.0, 2.0, 3.0]);
        let (top, mut bottom) = right.split_rows(3);
        assert_eq!(top.rows(), 3);
        assert_eq!(top.col(1), &[8.0, 9.0, 10.0]);
        assert_eq!(bottom.col(0), &[7.0]);
        bottom.col_mut(1)[0] = -1.0;
        assert_eq!(data[11], -1.0);
        let r = MatRef::from_slice(&data, 4, 3, 4).sub(1, 1, 2, 2);
        assert_eq!(r.col(0)[0], 5.0);
        assert_eq!(r.col(1)[1], 10.0);
    }

    #[test]
    fn empty_splits_are_fine() {
        let mut data = vec![0.0; 4];
        let m = MatMut::from_slice(&mut data, 2, 2, 2);
        let (l, r) = m.split_cols(2);
        assert_eq!((l.cols(), r.cols()), (2, 0));
        let (t, b) = l.split_rows(2);
        assert_eq!((t.rows(), b.rows()), (2, 0));
    }

    #[test]
    #[should_panic(expected = "does not fit")]
    fn view_larger_than_slice_panics() {
        let data = vec![0.0f64; 5];
        let _ = MatRef::from_slice(&data, 3, 2, 3);
    }
}
