//! The size of registered data, taken from the value itself: [`DataSize`].

use std::collections::VecDeque;
use std::sync::Arc;

/// A value that knows the size of its data.
///
/// What a handle counts for is what its copies move, what dmda's transfer cost and the
/// performance models' footprints see, what the trace records in its transfers and
/// accesses, and what the what-if replays. [`Runtime::register`](crate::Runtime::register)
/// asks the value for it through [`DataSize`]: the bytes of its data, the heap payload
/// included (a `Vec<f64>` of a million elements counts 8 MB, not its 24-byte header).
///
/// Implemented for the primitive types, `String` and `str`, vectors, slices, arrays,
/// boxes, `VecDeque`, hash and B-tree maps and sets (their entries' data), `Option`, `Arc`
/// and tuples of up to four; [`Matrix`](crate::Matrix)
/// and the kernels' `Tile` implement it too. A type of your own implements it
/// in one line from its fields:
///
/// ```
/// use taskwatt_runtime::DataSize;
///
/// struct Grid {
///     cells: Vec<f64>,
///     width: usize,
/// }
///
/// impl DataSize for Grid {
///     fn data_bytes(&self) -> u64 {
///         self.cells.data_bytes() + self.width.data_bytes()
///     }
/// }
///
/// let g = Grid { cells: vec![0.0; 1000], width: 10 };
/// assert_eq!(g.data_bytes(), 8008);
/// ```
///
/// The size is taken once, at registration (as StarPU fixes a handle's size when it is
/// registered): a task that grows a vector does not change what its handle counts.
/// [`Runtime::register_bytes`](crate::Runtime::register_bytes) gives a size by hand.
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not say the size of its data (`DataSize`)",
    note = "implement `taskwatt::DataSize` for it (one method, `data_bytes`, summing its fields' \
            `data_bytes()`), or register it with `register_bytes(value, bytes)`"
)]
pub trait DataSize {
    /// The bytes of every value of the type, when they all have the same (a plain value
    /// holding no pointer): a collection of them is then sized from its length, without
    /// visiting its elements. `None` (the default) visits them.
    const FIXED: Option<u64> = None;

    /// The bytes of the value's data, its heap payload included.
    fn data_bytes(&self) -> u64;
}

macro_rules! fixed {
    ($($t:ty),*) => { $(
        impl DataSize for $t {
            const FIXED: Option<u64> = Some(std::mem::size_of::<$t>() as u64);
            fn data_bytes(&self) -> u64 {
                std::mem::size_of::<$t>() as u64
            }
        }
    )* };
}
fixed!(
    (),
    bool,
    char,
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    f32,
    f64
);

/// The bytes of `items`, from their count where their type has a fixed size.
fn sum<'a, T: DataSize + 'a>(len: usize, items: impl Iterator<Item = &'a T>) -> u64 {
    match T::FIXED {
        Some(each) => each.saturating_mul(len as u64),
        None => items.map(T::data_bytes).fold(0u64, u64::saturating_add),
    }
}

impl<T: DataSize> DataSize for [T] {
    fn data_bytes(&self) -> u64 {
        sum(self.len(), self.iter())
    }
}

impl<T: DataSize, const N: usize> DataSize for [T; N] {
    const FIXED: Option<u64> = match T::FIXED {
        Some(each) => Some(each * N as u64),
        None => None,
    };
    fn data_bytes(&self) -> u64 {
        sum(N, self.iter())
    }
}

impl<T: DataSize> DataSize for Vec<T> {
    fn data_bytes(&self) -> u64 {
        sum(self.len(), self.iter())
    }
}

impl<T: DataSize> DataSize for VecDeque<T> {
    fn data_bytes(&self) -> u64 {
        sum(self.len(), self.iter())
    }
}

impl<T: DataSize + ?Sized> DataSize for Box<T> {
    fn data_bytes(&self) -> u64 {
        (**self).data_bytes()
    }
}

impl<T: DataSize + ?Sized> DataSize for Arc<T> {
    fn data_bytes(&self) -> u64 {
        (**self).data_bytes()
    }
}

impl<T: DataSize> DataSize for Option<T> {
    fn data_bytes(&self) -> u64 {
        self.as_ref().map_or(0, T::data_bytes)
    }
}

impl<K: DataSize, V: DataSize, S> DataSize for std::collections::HashMap<K, V, S> {
    fn data_bytes(&self) -> u64 {
        self.iter().fold(0u64, |n, (k, v)| {
            n.saturating_add(k.data_bytes())
                .saturating_add(v.data_bytes())
        })
    }
}

impl<K: DataSize, V: DataSize> DataSize for std::collections::BTreeMap<K, V> {
    fn data_bytes(&self) -> u64 {
        self.iter().fold(0u64, |n, (k, v)| {
            n.saturating_add(k.data_bytes())
                .saturating_add(v.data_bytes())
        })
    }
}

impl<T: DataSize, S> DataSize for std::collections::HashSet<T, S> {
    fn data_bytes(&self) -> u64 {
        sum(self.len(), self.iter())
    }
}

impl<T: DataSize> DataSize for std::collections::BTreeSet<T> {
    fn data_bytes(&self) -> u64 {
        sum(self.len(), self.iter())
    }
}

impl DataSize for str {
    fn data_bytes(&self) -> u64 {
        self.len() as u64
    }
}

impl DataSize for String {
    fn data_bytes(&self) -> u64 {
        self.len() as u64
    }
}

macro_rules! tuples {
    ($(($($t:ident $i:tt),+)),*) => { $(
        impl<$($t: DataSize),+> DataSize for ($($t,)+) {
            fn data_bytes(&self) -> u64 {
                0u64 $(.saturating_add(self.$i.data_bytes()))+
            }
        }
    )* };
}
tuples!((A 0, B 1), (A 0, B 1, C 2), (A 0, B 1, C 2, D 3));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_count_the_data_not_the_header() {
        assert_eq!(vec![0.0f64; 1 << 20].data_bytes(), 8 << 20);
        assert_eq!(vec![0u8; 3].data_bytes(), 3);
        assert_eq!(Vec::<f32>::new().data_bytes(), 0);
        assert_eq!(vec![vec![1u16; 3], vec![2u16; 5]].data_bytes(), 16);
        assert_eq!([[0u32; 4]; 2].data_bytes(), 32);
        assert_eq!(<[[u32; 4]; 2]>::FIXED, Some(32));
        assert_eq!(String::from("héllo").data_bytes(), 6);
        assert_eq!(Some(vec![1i64; 2]).data_bytes(), 16);
        assert_eq!(None::<Vec<i64>>.data_bytes(), 0);
        assert_eq!((1u8, vec![0f64; 2], 3u32).data_bytes(), 1 + 16 + 4);
        assert_eq!(Box::<[f32]>::from(vec![0.0; 10]).data_bytes(), 40);
        assert_eq!(Arc::new(vec![0u64; 4]).data_bytes(), 32);
        assert_eq!(VecDeque::from(vec![0u16; 7]).data_bytes(), 14);
        assert_eq!(().data_bytes(), 0);
        let m: std::collections::HashMap<u32, Vec<f64>> = [(1, vec![0.0; 3])].into();
        assert_eq!(m.data_bytes(), 4 + 24);
        let b: std::collections::BTreeSet<u16> = [1, 2, 3].into();
        assert_eq!(b.data_bytes(), 6);
    }
}
