//! A task's argument (StarPU's `cl_arg`), stored inline when it is small.
//!
//! Boxing every argument cost an allocation by the submitting thread and a free by the
//! worker that ran the task, which is a free into another thread's heap: with mimalloc,
//! `perf annotate` showed the worker waiting on the compare-and-swap of that heap's
//! cross-thread free list, on the path from a task's end to the release of its
//! successors. Arguments of at most [`INLINE_BYTES`] bytes and pointer alignment (an index,
//! a pair of coordinates, a flag array) now live in the task itself; larger ones are still
//! boxed.

use std::any::{Any, TypeId};
use std::mem::{align_of, size_of, ManuallyDrop, MaybeUninit};

/// Largest argument stored without an allocation.
pub(crate) const INLINE_BYTES: usize = 16;

type Words = [MaybeUninit<usize>; INLINE_BYTES / size_of::<usize>()];

/// A boxed argument, itself stored in the words (a fat pointer: 16 bytes).
type Boxed = Box<dyn Any + Send + Sync>;

/// What the words hold, and how to read and drop it.
pub(crate) struct Meta {
    /// The type of the value in the words: the argument's, or [`Boxed`]'s.
    type_id: fn() -> TypeId,
    /// Drops the value in place.
    drop: unsafe fn(*mut Words),
}

trait HasMeta {
    const META: Meta;
}

impl<A: Any> HasMeta for A {
    const META: Meta = Meta {
        type_id: TypeId::of::<A>,
        drop: drop_inline::<A>,
    };
}

/// The type of "no argument": private, so no caller can ask for it.
struct NoArg;

/// # Safety
/// `words` holds a valid `A`, written by [`Arg::store`], not dropped yet.
unsafe fn drop_inline<A>(words: *mut Words) {
    // SAFETY: by the contract, the storage holds an initialised `A`, suitably aligned
    // (checked by `Arg::store`), and nothing reads it after this drop.
    unsafe { std::ptr::drop_in_place(words.cast::<A>()) }
}

/// A task's argument: a value of at most [`INLINE_BYTES`] stored in `words`, or a
/// [`Boxed`] one (whose fat pointer is stored there), or none (a `NoArg`). 24 bytes.
pub(crate) struct Arg {
    /// Holds a value of the type `meta` describes.
    words: Words,
    meta: &'static Meta,
}

// SAFETY: the words hold an `A: Send + Sync` (the bound of `Arg::new`), a `Boxed` (Send +
// Sync), or a `NoArg` (no data), so sending or sharing the `Arg` sends or shares only that.
unsafe impl Send for Arg {}
unsafe impl Sync for Arg {}

impl Arg {
    /// No argument.
    pub(crate) const NONE: Arg = Arg {
        words: [MaybeUninit::uninit(); INLINE_BYTES / size_of::<usize>()],
        meta: &<NoArg as HasMeta>::META,
    };

    /// Stores `value`, inline if it fits, else boxed.
    #[inline]
    pub(crate) fn new<A: Any + Send + Sync>(value: A) -> Arg {
        if Self::fits::<A>() {
            Self::store(value)
        } else {
            Self::store::<Boxed>(Box::new(value))
        }
    }

    fn fits<A>() -> bool {
        size_of::<A>() <= INLINE_BYTES && align_of::<A>() <= align_of::<Words>()
    }

    /// Moves `value` into the words. `A` must fit ([`Arg::fits`]).
    #[inline]
    fn store<A: Any>(value: A) -> Arg {
        assert!(Self::fits::<A>(), "stored only when it fits");
        let mut words: Words = [MaybeUninit::uninit(); INLINE_BYTES / size_of::<usize>()];
        let value = ManuallyDrop::new(value);
        // SAFETY: `A` fits in `words` and needs no stricter alignment (asserted above);
        // the value is moved in bitwise and `ManuallyDrop` keeps it from being dropped
        // here: from now on `words` owns it, and `Drop for Arg` drops it once.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&*value as *const A).cast::<u8>(),
                words.as_mut_ptr().cast::<u8>(),
                size_of::<A>(),
            )
        };
        Arg {
            words,
            meta: &<A as HasMeta>::META,
        }
    }

    /// The value in the words, if it is a `T`.
    #[inline]
    fn stored<T: Any>(&self) -> Option<&T> {
        if (self.meta.type_id)() == TypeId::of::<T>() {
            // SAFETY: the words hold an initialised `T` (its type id says so), stored by
            // `Arg::store` with `T`'s size and alignment checked; the reference borrows
            // `self`.
            Some(unsafe { &*self.words.as_ptr().cast::<T>() })
        } else {
            None
        }
    }

    /// Whether there is an argument.
    pub(crate) fn is_some(&self) -> bool {
        (self.meta.type_id)() != TypeId::of::<NoArg>()
    }

    /// The argument, if it is an `A`.
    #[inline]
    pub(crate) fn get<A: Any>(&self) -> Option<&A> {
        if Self::fits::<A>() {
            self.stored::<A>()
        } else {
            self.stored::<Boxed>()
                .and_then(|b| (&**b as &dyn Any).downcast_ref::<A>())
        }
    }

    /// Whether the argument is inline (for tests).
    #[cfg(test)]
    fn is_inline(&self) -> bool {
        self.is_some() && self.stored::<Boxed>().is_none()
    }
}

impl Drop for Arg {
    fn drop(&mut self) {
        // SAFETY: the words hold the value `Arg::store` moved in (or a `NoArg`, whose drop
        // does nothing), never dropped before: this is the only place that drops it.
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
        assert_eq!(std::mem::size_of::<Arg>(), 24);
    }

    #[test]
    fn large_or_overaligned_values_are_boxed() {
        let big = Arg::new([7u64; 3]);
        assert!(big.is_some() && !big.is_inline());
        assert_eq!(big.get::<[u64; 3]>(), Some(&[7; 3]));
        #[repr(align(32))]
        #[derive(Debug, PartialEq)]
        struct Wide(u8);
        let wide = Arg::new(Wide(5));
        assert!(wide.is_some() && !wide.is_inline());
        assert_eq!(wide.get::<Wide>(), Some(&Wide(5)));
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
    }
}
