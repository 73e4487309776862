//! Type-erased values stored inline when they are small: a task's argument (StarPU's
//! `cl_arg`) and a data handle's value.
//!
//! Boxing every argument cost an allocation by the submitting thread and a free by the
//! worker that ran the task, which is a free into another thread's heap: with mimalloc,
//! `perf annotate` showed the worker waiting on the compare-and-swap of that heap's
//! cross-thread free list, on the path from a task's end to the release of its
//! successors. Boxing every registered value cost an allocation and a free per handle:
//! in the fan-out/fan-in overhead benchmark, which registers a handle for every two
//! tasks, glibc's malloc and free were 42 % of the submitting thread's instructions.
//!
//! An [`Inline<W>`] holds a value of at most `W` machine words and pointer alignment in
//! place, with its type id and drop function in a per-type table; a larger or
//! over-aligned value is boxed and the box's fat pointer stored in the same words.
//! Arguments use two words ([`Arg`]: an index, a pair of coordinates, a flag array) to keep
//! task nodes small; handle values four ([`Value`]: a `Vec`, a `String`, four `f64`s).

use std::any::{Any, TypeId};
use std::mem::{align_of, size_of, ManuallyDrop, MaybeUninit};

/// A task's argument: 24 bytes, values of up to 16 bytes inline.
pub(crate) type Arg = Inline<2>;

/// A data handle's value: 40 bytes, values of up to 32 bytes inline.
pub(crate) type Value = Inline<4>;

type Words<const W: usize> = [MaybeUninit<usize>; W];

/// A boxed value, itself stored in the words (a fat pointer: 2 words).
type Boxed = Box<dyn Any + Send + Sync>;

/// What the words hold, and how to drop it.
pub(crate) struct Meta<const W: usize> {
    /// The type of the value in the words: the stored one's, or [`Boxed`]'s.
    type_id: fn() -> TypeId,
    /// Drops the value in place.
    drop: unsafe fn(*mut Words<W>),
}

trait HasMeta<const W: usize> {
    const META: Meta<W>;
}

impl<A: Any, const W: usize> HasMeta<W> for A {
    const META: Meta<W> = Meta {
        type_id: TypeId::of::<A>,
        drop: drop_inline::<A, W>,
    };
}

/// The type of "no value": private, so no caller can ask for it.
struct Empty;

/// # Safety
/// `words` holds a valid `A`, written by [`Inline::store`], not dropped or moved out yet.
unsafe fn drop_inline<A, const W: usize>(words: *mut Words<W>) {
    // SAFETY: by the contract, the storage holds an initialised `A`, suitably aligned
    // (checked by `Inline::store`), and nothing reads it after this drop.
    unsafe { std::ptr::drop_in_place(words.cast::<A>()) }
}

/// A value of at most `W` words stored in `words`, or a [`Boxed`] one (whose fat pointer
/// is stored there), or none (an `Empty`).
pub(crate) struct Inline<const W: usize> {
    /// Holds a value of the type `meta` describes.
    words: Words<W>,
    meta: &'static Meta<W>,
}

// SAFETY: the words hold an `A: Send + Sync` (the bound of `Inline::new`), a `Boxed` (Send +
// Sync), or an `Empty` (no data), so sending or sharing the `Inline` sends or shares only
// that.
unsafe impl<const W: usize> Send for Inline<W> {}
unsafe impl<const W: usize> Sync for Inline<W> {}

impl<const W: usize> Inline<W> {
    /// No value.
    pub(crate) const NONE: Inline<W> = Inline {
        words: [MaybeUninit::uninit(); W],
        meta: &<Empty as HasMeta<W>>::META,
    };

    /// Stores `value`, inline if it fits, else boxed.
    #[inline]
    pub(crate) fn new<A: Any + Send + Sync>(value: A) -> Inline<W> {
        if Self::fits::<A>() {
            Self::store(value)
        } else {
            Self::store::<Boxed>(Box::new(value))
        }
    }

    fn fits<A>() -> bool {
        size_of::<A>() <= size_of::<Words<W>>() && align_of::<A>() <= align_of::<Words<W>>()
    }

    /// Moves `value` into the words. `A` must fit ([`Inline::fits`]).
    #[inline]
    fn store<A: Any>(value: A) -> Inline<W> {
        assert!(Self::fits::<A>(), "stored only when it fits");
        let mut words: Words<W> = [MaybeUninit::uninit(); W];
        let value = ManuallyDrop::new(value);
        // SAFETY: `A` fits in `words` and needs no stricter alignment (asserted above);
        // the value is moved in bitwise and `ManuallyDrop` keeps it from being dropped
        // here: from now on `words` owns it, and `Drop for Inline` drops it once.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&*value as *const A).cast::<u8>(),
                words.as_mut_ptr().cast::<u8>(),
                size_of::<A>(),
            )
        };
        Inline {
            words,
            meta: &<A as HasMeta<W>>::META,
        }
    }

    /// Whether the words hold a `T`.
    #[inline]
    fn holds<T: Any>(&self) -> bool {
        (self.meta.type_id)() == TypeId::of::<T>()
    }

    /// The value in the words, if it is a `T`.
    #[inline]
    fn stored<T: Any>(&self) -> Option<&T> {
        if self.holds::<T>() {
            // SAFETY: the words hold an initialised `T` (its type id says so), stored by
            // `Inline::store` with `T`'s size and alignment checked; the reference
            // borrows `self`.
            Some(unsafe { &*self.words.as_ptr().cast::<T>() })
        } else {
            None
        }
    }

    /// As [`Inline::stored`], mutably.
    #[inline]
    fn stored_mut<T: Any>(&mut self) -> Option<&mut T> {
        if self.holds::<T>() {
            // SAFETY: as in `stored`; the reference borrows `self` mutably.
            Some(unsafe { &mut *self.words.as_mut_ptr().cast::<T>() })
        } else {
            None
        }
    }

    /// Whether there is a value.
    #[inline]
    pub(crate) fn is_some(&self) -> bool {
        !self.holds::<Empty>()
    }

    /// The value, if it is an `A`.
    #[inline]
    pub(crate) fn get<A: Any>(&self) -> Option<&A> {
        if Self::fits::<A>() {
            self.stored::<A>()
        } else {
            self.stored::<Boxed>()
                .and_then(|b| (&**b as &dyn Any).downcast_ref::<A>())
        }
    }

    /// The value, mutably, if it is an `A`.
    #[inline]
    pub(crate) fn get_mut<A: Any>(&mut self) -> Option<&mut A> {
        if Self::fits::<A>() {
            self.stored_mut::<A>()
        } else {
            self.stored_mut::<Boxed>()
                .and_then(|b| (&mut **b as &mut dyn Any).downcast_mut::<A>())
        }
    }

    /// Moves the value out if it is an `A`, leaving none; otherwise leaves it in place.
    pub(crate) fn take<A: Any>(&mut self) -> Option<A> {
        let inline = Self::fits::<A>();
        let held = if inline {
            self.holds::<A>()
        } else {
            self.get::<A>().is_some()
        };
        if !held {
            return None;
        }
        let words = std::mem::replace(&mut self.words, [MaybeUninit::uninit(); W]);
        // The words are moved out: `self` must not drop them again.
        self.meta = &<Empty as HasMeta<W>>::META;
        let value = if inline {
            // SAFETY: the words held an initialised `A` (checked above), and they were
            // moved out of `self`, which now holds none: this read takes the only copy.
            unsafe { std::ptr::read(words.as_ptr().cast::<A>()) }
        } else {
            // SAFETY: as above, for the `Boxed` the words held (checked by `get`).
            let b: Boxed = unsafe { std::ptr::read(words.as_ptr().cast::<Boxed>()) };
            match b.downcast::<A>() {
                Ok(a) => *a,
                Err(_) => unreachable!("the box was checked to hold an A"),
            }
        };
        Some(value)
    }

    /// Whether the value is inline (for tests).
    #[cfg(test)]
    fn is_inline(&self) -> bool {
        self.is_some() && !self.holds::<Boxed>()
    }
}

impl<const W: usize> Drop for Inline<W> {
    fn drop(&mut self) {
        // SAFETY: the words hold the value `Inline::store` moved in (or an `Empty`, whose
        // drop does nothing), never dropped nor moved out before (`take` leaves an
        // `Empty`): this is the only place that drops it.
        unsafe { (self.meta.drop)(&mut self.words) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// Counts its drops.
    struct Counted(Arc<AtomicUsize>, u32);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn small_values_are_inline_and_read_back() {
        let a = Arg::new((3u32, -7i32, 9u64));
        assert!(a.is_inline());
        assert_eq!(a.get::<(u32, i32, u64)>(), Some(&(3, -7, 9)));
        assert_eq!(a.get::<u64>(), None, "another type is refused");
        let flags = Arg::new([true, false, true, true]);
        assert_eq!(flags.get::<[bool; 4]>(), Some(&[true, false, true, true]));
        let unit = Arg::new(());
        assert_eq!(unit.get::<()>(), Some(&()));
        assert!(!Arg::NONE.is_some() && unit.is_some());
        assert_eq!(Arg::NONE.get::<()>(), None);
        assert_eq!(size_of::<Arg>(), 24);
        assert_eq!(size_of::<Value>(), 40);
        // Four words hold what two cannot.
        assert!(!Arg::new(vec![1u8]).is_inline());
        let v = Value::new(vec![1u8, 2]);
        assert!(v.is_inline());
        assert_eq!(v.get::<Vec<u8>>().map(|v| v.len()), Some(2));
    }

    #[test]
    fn large_or_overaligned_values_are_boxed() {
        let big = Arg::new([7u64; 3]);
        assert!(big.is_some() && !big.is_inline());
        assert_eq!(big.get::<[u64; 3]>(), Some(&[7; 3]));
        #[repr(align(32))]
        #[derive(Debug, PartialEq)]
        struct Wide(u8);
        let wide = Value::new(Wide(5));
        assert!(wide.is_some() && !wide.is_inline());
        assert_eq!(wide.get::<Wide>(), Some(&Wide(5)));
    }

    #[test]
    fn values_are_written_in_place_inline_or_boxed() {
        let mut small = Value::new(41u64);
        *small.get_mut::<u64>().unwrap() += 1;
        assert_eq!(small.get::<u64>(), Some(&42));
        assert!(small.get_mut::<u32>().is_none(), "another type is refused");
        let mut big = Value::new([1u64; 5]);
        assert!(!big.is_inline());
        big.get_mut::<[u64; 5]>().unwrap()[4] = 9;
        assert_eq!(big.get::<[u64; 5]>().map(|a| a[4]), Some(9));
    }

    #[test]
    fn take_moves_the_value_out_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut inline = Value::new(Counted(drops.clone(), 1));
        assert!(inline.take::<u64>().is_none(), "a wrong type takes nothing");
        assert!(inline.is_some());
        let c = inline.take::<Counted>().expect("holds a Counted");
        assert_eq!(c.1, 1);
        assert!(!inline.is_some() && inline.take::<Counted>().is_none());
        drop(inline);
        assert_eq!(
            drops.load(Ordering::SeqCst),
            0,
            "the taken value is not dropped"
        );
        drop(c);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        let mut boxed = Value::new((Counted(drops.clone(), 2), [0u64; 4]));
        assert!(!boxed.is_inline());
        let (c, _) = boxed.take::<(Counted, [u64; 4])>().expect("holds the pair");
        drop(boxed);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        assert_eq!(c.1, 2);
        drop(c);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn each_value_is_dropped_exactly_once() {
        let drops = Arc::new(AtomicUsize::new(0));
        let inline = Arg::new(Counted(drops.clone(), 1));
        assert!(inline.is_inline());
        assert_eq!(inline.get::<Counted>().map(|c| c.1), Some(1));
        assert_eq!(drops.load(Ordering::SeqCst), 0, "storing does not drop");
        drop(inline);
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        let boxed = Arg::new((Counted(drops.clone(), 2), [0u64; 4]));
        assert!(!boxed.is_inline());
        drop(boxed);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
        // An owning pointer inline: its heap buffer is freed by the drop.
        let s = Arg::new(Box::<str>::from("cl_arg"));
        assert!(s.is_inline());
        assert_eq!(s.get::<Box<str>>().map(|b| &**b), Some("cl_arg"));
        let v = Value::new(vec![Counted(drops.clone(), 3)]);
        assert!(v.is_inline());
        drop(v);
        assert_eq!(drops.load(Ordering::SeqCst), 3);
    }
}
