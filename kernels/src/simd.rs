//! Runtime choice of instruction set for the crate's own loops (the `gemm` crate does the
//! same for its micro-kernels).
//!
//! Without `-C target-cpu`, rustc compiles for baseline x86-64 (SSE2: two f64 lanes, no
//! FMA), which left the potrf/trsm leaves and the stencil at a fraction of what the core
//! can do. [`multiversion!`] compiles one loop body three times: with AVX-512F + FMA, with
//! AVX2 + FMA, and for the baseline, and picks one per call from the CPU's features
//! (`is_x86_feature_detected!` reads a cached bit set: one relaxed load).
//!
//! The body is an `#[inline(always)]` function generic over `const FMA: bool` (and, if it
//! likes, over one type parameter such as `T: Scalar`: each version is then monomorphised
//! per type); it should compute `a * b + c` through [`madd`], which becomes one fused
//! instruction when FMA is available and stays a multiply and an add otherwise
//! (`f64::mul_add` without hardware FMA is a slow library call).

use crate::Scalar;

/// `a * b + c`, fused when `FMA` (the caller was compiled with the `fma` feature).
#[inline(always)]
pub(crate) fn madd<T: Scalar, const FMA: bool>(a: T, b: T, c: T) -> T {
    if FMA {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// Defines `fn $name(args)` that runs `$body::<FMA>(args)` compiled for the best
/// instruction set of the running CPU (see the module docs). With a type parameter,
/// `fn $name<T: Bound>(args)` runs `$body::<T, FMA>(args)`.
macro_rules! multiversion {
    ($(#[$meta:meta])* $vis:vis fn $name:ident<$g:ident : $bound:path>($($arg:ident : $ty:ty),* $(,)?) => $body:ident) => {
        $(#[$meta])*
        $vis fn $name<$g: $bound>($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx2,fma")]
                fn v4<$g: $bound>($($arg: $ty),*) {
                    $body::<$g, true>($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                fn v3<$g: $bound>($($arg: $ty),*) {
                    $body::<$g, true>($($arg),*)
                }
                if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("fma") {
                    // SAFETY: the CPU supports every feature `v4` is compiled for.
                    return unsafe { v4::<$g>($($arg),*) };
                }
                if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                    // SAFETY: the CPU supports every feature `v3` is compiled for.
                    return unsafe { v3::<$g>($($arg),*) };
                }
            }
            $body::<$g, false>($($arg),*)
        }
    };
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident : $ty:ty),* $(,)?) => $body:ident) => {
        $(#[$meta])*
        $vis fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx2,fma")]
                fn v4($($arg: $ty),*) {
                    $body::<true>($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                fn v3($($arg: $ty),*) {
                    $body::<true>($($arg),*)
                }
                if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("fma") {
                    // SAFETY: the CPU supports every feature `v4` is compiled for.
                    return unsafe { v4($($arg),*) };
                }
                if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
                    // SAFETY: the CPU supports every feature `v3` is compiled for.
                    return unsafe { v3($($arg),*) };
                }
            }
            $body::<false>($($arg),*)
        }
    };
}
pub(crate) use multiversion;

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(always)]
    fn dot_body<const FMA: bool>(a: &[f64], b: &[f64], out: &mut f64) {
        *out = a
            .iter()
            .zip(b)
            .fold(0.0, |s, (x, y)| madd::<f64, FMA>(*x, *y, s));
    }
    multiversion!(fn dot(a: &[f64], b: &[f64], out: &mut f64) => dot_body);

    #[test]
    fn every_version_computes_the_same() {
        let a: Vec<f64> = (0..37).map(|x| x as f64 * 0.5).collect();
        let b: Vec<f64> = (0..37).map(|x| 3.0 - x as f64).collect();
        let (mut fast, mut plain) = (0.0, 0.0);
        dot(&a, &b, &mut fast);
        dot_body::<false>(&a, &b, &mut plain);
        assert_eq!(fast, plain); // small integers and halves: exact either way
        assert_eq!(
            madd::<f64, true>(2.0, 3.0, 1.0),
            madd::<f64, false>(2.0, 3.0, 1.0)
        );
        assert_eq!(madd::<f32, true>(2.0, 3.0, 1.0), 7.0);
    }
}
