//! [`Tile`]: the unit of data every kernel works on.
//!
//! A tile is a square `nb x nb` block of a [`Scalar`] (`f64` unless said otherwise, `f32`
//! for single precision) stored column-major in one contiguous `Vec`: element `(i, j)` (row `i`, column `j`) lives at `i + j * nb`. This is the
//! layout BLAS and LAPACK expect with a leading dimension of `nb`, so the `blas` backend
//! passes the buffer straight through. Moving a `Tile` moves three words; cloning copies
//! the data.

use std::fmt;

use crate::{KernelError, Scalar};

/// A square `nb x nb` matrix of `T` (`f64` by default), column-major, contiguous.
///
/// `Send + Sync` (it is a plain `Vec`), so a runtime can hand tiles to worker threads.
#[derive(Clone, PartialEq)]
pub struct Tile<T: Scalar = f64> {
    nb: usize,
    data: Vec<T>,
}

impl<T: Scalar> Tile<T> {
    /// An `nb x nb` tile without storage yet: a distributed run's copy of another rank's
    /// tile, which takes no memory until a message fills it (the first write of its
    /// bytes, `DeviceData::device_bytes_mut`, makes it). Until then it has no elements:
    /// read it only after that.
    pub fn unallocated(nb: usize) -> Self {
        Self {
            nb,
            data: Vec::new(),
        }
    }

    /// Whether the tile has its storage (see [`Tile::unallocated`]).
    pub fn is_allocated(&self) -> bool {
        self.data.len() == self.nb * self.nb
    }

    /// An `nb x nb` tile of zeros.
    pub fn zeros(nb: usize) -> Self {
        Self {
            nb,
            data: written_zeros(nb * nb),
        }
    }

    /// An `nb x nb` tile whose element `(i, j)` is `f(i, j)`.
    ///
    /// `f` is called column by column (`j` outer, `i` inner), in memory order.
    pub fn from_fn(nb: usize, mut f: impl FnMut(usize, usize) -> T) -> Self {
        let mut data = Vec::with_capacity(nb * nb);
        for j in 0..nb {
            for i in 0..nb {
                data.push(f(i, j));
            }
        }
        Self { nb, data }
    }

    /// Wraps a column-major buffer of length `nb * nb` without copying.
    pub fn from_col_major(nb: usize, data: Vec<T>) -> Result<Self, KernelError> {
        if data.len() != nb * nb {
            return Err(KernelError::WrongLength {
                what: "tile data (nb * nb, column-major)",
                expected: nb * nb,
                got: data.len(),
            });
        }
        Ok(Self { nb, data })
    }

    /// The order of the tile (it has `nb` rows and `nb` columns).
    #[inline]
    pub fn nb(&self) -> usize {
        self.nb
    }

    /// The elements, column-major (`(i, j)` at `i + j * nb`).
    #[inline]
    pub fn as_slice(&self) -> &[T] {
        &self.data
    }

    /// The elements, column-major, writable.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.data
    }

    /// Column `j` as a contiguous slice of `nb` elements.
    ///
    /// # Panics
    /// If `j >= nb`.
    #[inline]
    pub fn col(&self, j: usize) -> &[T] {
        &self.data[j * self.nb..(j + 1) * self.nb]
    }

    /// Element `(i, j)`: row `i`, column `j`.
    ///
    /// # Panics
    /// If `i >= nb` or `j >= nb`.
    #[inline]
    pub fn get(&self, i: usize, j: usize) -> T {
        assert!(
            i < self.nb && j < self.nb,
            "Tile::get({i}, {j}) out of bounds for nb = {}",
            self.nb
        );
        self.data[i + j * self.nb]
    }

    /// Sets element `(i, j)` to `value`.
    ///
    /// # Panics
    /// If `i >= nb` or `j >= nb`.
    #[inline]
    pub fn set(&mut self, i: usize, j: usize, value: T) {
        assert!(
            i < self.nb && j < self.nb,
            "Tile::set({i}, {j}) out of bounds for nb = {}",
            self.nb
        );
        self.data[i + j * self.nb] = value;
    }

    /// Gives the buffer back (column-major, length `nb * nb`).
    pub fn into_vec(self) -> Vec<T> {
        self.data
    }
}

/// The tile's elements (`nb² · size_of::<T>()` bytes, allocated or not).
impl<T: Scalar> taskwatt_runtime::DataSize for Tile<T> {
    fn data_bytes(&self) -> u64 {
        (self.nb * self.nb * std::mem::size_of::<T>()) as u64
    }
}

// SAFETY: a tile's state is its column-major elements (its order is fixed by their count,
// which a device copy does not change); any bytes are valid `f32`/`f64` values. A tile
// without storage (`Tile::unallocated`) gets it, zeroed, at the first `device_bytes_mut`,
// before the bytes are handed out, and keeps it until `release_storage`.
unsafe impl<T: Scalar> taskwatt_runtime::DeviceData for Tile<T> {
    fn device_bytes(&self) -> &[u8] {
        taskwatt_runtime::bytes_of(&self.data)
    }
    fn device_bytes_mut(&mut self) -> &mut [u8] {
        if self.data.is_empty() && self.nb > 0 {
            self.data = vec![T::ZERO; self.nb * self.nb];
        }
        taskwatt_runtime::bytes_of_mut(&mut self.data)
    }
    fn device_len(&self) -> usize {
        self.nb * self.nb * std::mem::size_of::<T>()
    }
    fn release_storage(&mut self) {
        self.data = Vec::new();
    }
}

/// Prints the size and, for tiles up to 8 x 8, the elements: a 256 x 256 tile would
/// otherwise flood a test failure message.
impl<T: Scalar> fmt::Debug for Tile<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.nb > 8 {
            return write!(f, "Tile {{ nb: {}, .. }}", self.nb);
        }
        let rows: Vec<Vec<T>> = (0..self.nb)
            .map(|i| (0..self.nb).map(|j| self.get(i, j)).collect())
            .collect();
        f.debug_struct("Tile")
            .field("nb", &self.nb)
            .field("rows", &rows)
            .finish()
    }
}

/// `len` zeros, written. `vec![0.0; len]` asks the allocator for zeroed memory, which
/// fresh pages from the OS already are: the kernel maps them all to its one zero page
/// until each is written. The first write to each 4 KiB page of such a tile, in a task,
/// then swaps in a real page and flushes that mapping from every CPU running the process:
/// an inter-processor interrupt, which on a VM stops both vCPUs. GEMM's output matrix
/// (128 MiB at n = 4096 f64) took 32 000 such flushes in a two-worker run, which took
/// 1.81 s instead of 1.38 s (BENCHMARKS.md, issue 31, stop 49). Written here, the pages are
/// real from the start, on the thread that makes the data.
pub(crate) fn written_zeros<T: Copy + Default>(len: usize) -> Vec<T> {
    let mut v = Vec::with_capacity(len);
    // Through `black_box`: a fill the compiler knows is zero may become a zeroed
    // allocation again (LLVM folds an allocation and a zero `memset` into one).
    v.resize(len, std::hint::black_box(T::default()));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_column_major() {
        let t = Tile::from_fn(3, |i, j| (10 * i + j) as f64);
        assert_eq!(
            t.as_slice(),
            &[0.0, 10.0, 20.0, 1.0, 11.0, 21.0, 2.0, 12.0, 22.0]
        );
        assert_eq!(t.get(2, 1), 21.0);
        assert_eq!(t.col(1), &[1.0, 11.0, 21.0]);
    }

    #[test]
    fn from_col_major_checks_length() {
        assert!(Tile::from_col_major(2, vec![0.0; 4]).is_ok());
        let err = Tile::from_col_major(2, vec![0.0; 3]).unwrap_err();
        assert!(err.to_string().contains("expected 4"), "{err}");
    }

    #[test]
    fn set_then_get() {
        let mut t = Tile::zeros(4);
        t.set(3, 0, 7.5);
        assert_eq!(t.get(3, 0), 7.5);
        assert_eq!(t.as_slice()[3], 7.5);
    }

    #[test]
    #[should_panic(expected = "out of bounds")]
    fn get_out_of_bounds_panics() {
        Tile::<f64>::zeros(2).get(2, 0);
    }

    #[test]
    fn is_send_sync() {
        fn check<T: Send + Sync>() {}
        check::<Tile>();
        check::<Tile<f32>>();
    }
}
