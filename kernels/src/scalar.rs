//! [`Scalar`]: the element types the kernels work in, `f64` (the default everywhere) and
//! `f32`.
//!
//! Every data type and kernel of the crate is generic over `T: Scalar` with `f64` as the
//! default type parameter ([`Tile`](crate::Tile) is `Tile<f64>`), so code written for f64
//! reads as before and `Tile<f32>` / `TiledMatrix<f32>` select single precision. The
//! pure-Rust kernels are one generic implementation (the `gemm` crate is generic too and
//! has f32 micro-kernels); the `blas` backend calls the `d` or `s` routine through the
//! per-type `Routines` trait in `blas.rs`.
//!
//! The trait is sealed (it has a private supertrait): the kernels rely on `T` being one of
//! the two IEEE types, e.g. that the `blas` backend has a routine for it and that
//! [`Scalar::EPSILON`] bounds its rounding error.
//!
//! Generated matrices and the residual checks compute in f64 and round once to `T`
//! ([`Scalar::from_f64`]); the checks widen `T` to f64 exactly ([`Scalar::to_f64`]), so they
//! measure the error of the f32 factorisation, not of the check.

use std::fmt::Debug;
use std::iter::Sum;
use std::ops::{Add, AddAssign, Div, Mul, MulAssign, Neg, Sub, SubAssign};

/// A floating-point element type of tiles and kernels: `f64` or `f32` (sealed).
pub trait Scalar:
    sealed::Sealed
    + Copy
    + Default
    + Debug
    + PartialEq
    + PartialOrd
    + Send
    + Sync
    + 'static
    + taskwatt_runtime::Element
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + SubAssign
    + MulAssign
    + Sum
{
    /// The type's name as in Rust and on the command line: `"f64"` or `"f32"`.
    const NAME: &'static str;
    /// The machine epsilon (`2^-52` or `2^-23`) as an f64, for tolerances.
    const EPSILON: f64;
    /// `0`.
    const ZERO: Self;
    /// `1`.
    const ONE: Self;

    /// `x` rounded to the nearest `Self` (exact for f64).
    fn from_f64(x: f64) -> Self;
    /// `self` as an f64 (always exact).
    fn to_f64(self) -> f64;
    /// The square root.
    fn sqrt(self) -> Self;
    /// `self * a + b` with one rounding (slow without hardware FMA: prefer a plain multiply
    /// and add unless the code is compiled with the `fma` target feature).
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// Whether `self` is NaN.
    fn is_nan(self) -> bool;
}

pub(crate) mod sealed {
    // `pub` in a private module is the sealing idiom: outside crates can name `Scalar` but
    // cannot implement this supertrait.
    #![allow(unreachable_pub)]

    use crate::{KernelError, Tile};

    /// With `blas`, a scalar type must also have BLAS/LAPACK routines.
    #[cfg(feature = "blas")]
    pub trait Sealed: crate::blas::Routines + Kernels {}
    /// Without `blas`, the tile kernels only.
    #[cfg(not(feature = "blas"))]
    pub trait Sealed: Kernels {}

    /// The tile kernels of one precision, compiled in this crate (dense.rs implements it
    /// for `f64` and `f32`, and says why).
    pub trait Kernels: Sized {
        fn tile_potrf(a: &mut Tile<Self>) -> Result<(), KernelError>
        where
            Self: super::Scalar;
        fn tile_trsm(l: &Tile<Self>, b: &mut Tile<Self>)
        where
            Self: super::Scalar;
        fn tile_syrk(a: &Tile<Self>, c: &mut Tile<Self>)
        where
            Self: super::Scalar;
        fn tile_gemm_nt(a: &Tile<Self>, b: &Tile<Self>, c: &mut Tile<Self>)
        where
            Self: super::Scalar;
        fn tile_gemm_nn(
            alpha: Self,
            a: &Tile<Self>,
            b: &Tile<Self>,
            beta: Self,
            c: &mut Tile<Self>,
        ) where
            Self: super::Scalar;
    }

    impl Sealed for f64 {}
    impl Sealed for f32 {}
}

macro_rules! impl_scalar {
    ($t:ident) => {
        impl Scalar for $t {
            const NAME: &'static str = stringify!($t);
            const EPSILON: f64 = $t::EPSILON as f64;
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;

            #[inline(always)]
            fn from_f64(x: f64) -> Self {
                x as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                $t::sqrt(self)
            }
            #[inline(always)]
            fn mul_add(self, a: Self, b: Self) -> Self {
                $t::mul_add(self, a, b)
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                $t::is_nan(self)
            }
        }
    };
}

impl_scalar!(f64);
impl_scalar!(f32);

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip<T: Scalar>(x: f64) -> f64 {
        T::from_f64(x).to_f64()
    }

    #[test]
    fn constants_and_conversions() {
        assert_eq!(<f64 as Scalar>::EPSILON, 2f64.powi(-52));
        assert_eq!(<f32 as Scalar>::EPSILON, 2f64.powi(-23));
        assert_eq!((f64::NAME, f32::NAME), ("f64", "f32"));
        assert_eq!(roundtrip::<f64>(0.1), 0.1);
        let r = roundtrip::<f32>(0.1);
        assert!(r != 0.1 && (r - 0.1).abs() < 0.1 * 2f64.powi(-24));
        assert_eq!(Scalar::sqrt(9.0f32), 3.0);
        assert_eq!(Scalar::mul_add(2.0f32, 3.0, 1.0), 7.0);
        assert!(Scalar::is_nan(f32::NAN) && !Scalar::is_nan(<f32 as Scalar>::ONE));
    }
}
