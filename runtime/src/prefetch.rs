//! Prefetching a cache line that this core is about to write.
//!
//! Most of a fine-grained task's cost on the runtime's side is lines that another core
//! wrote last: a node the submitter filled, a dependency counter the other predecessor
//! decremented. Asking for such a line early, while something else runs, takes its
//! transfer off the path to the next task.
//!
//! The line must arrive in a state this core may write (`prefetchw`, x86's PRFCHW
//! feature): a plain prefetch (`prefetcht0`) brings a shared copy, and the write that
//! follows still waits for the other core to drop its own. `_mm_prefetch` with
//! `_MM_HINT_ET0` is no help here: without the `prfchw` target feature at build time, it
//! compiles to `prefetcht0`. So `prefetchw` is written in assembly, used where the CPU
//! reports it (checked once), and `prefetcht0` is the fallback.

/// Asks for the line holding `p` in this core's cache, ready to be written. A hint only:
/// it never faults and never changes what the program computes.
#[inline(always)]
pub(crate) fn for_write<T>(p: *const T) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        if has_prefetchw() {
            // SAFETY: a prefetch reads no memory architecturally and cannot fault,
            // whatever the address; it writes no register, flag or stack.
            unsafe {
                core::arch::asm!(
                    "prefetchw [{0}]",
                    in(reg) p,
                    options(nostack, preserves_flags, readonly)
                )
            };
        } else {
            for_read(p);
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = p;
}

/// Asks for the line holding `p` in this core's cache, to be read. A hint only.
#[inline(always)]
pub(crate) fn for_read<T>(p: *const T) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch reads no memory architecturally and cannot fault.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p as *const i8) };
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = p;
}

/// Whether the CPU implements `prefetchw` (CPUID 0x8000_0001, ECX bit 8), read once.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[inline(always)]
fn has_prefetchw() -> bool {
    use std::sync::atomic::{AtomicU8, Ordering};
    // 0: not read yet, 1: no, 2: yes. Relaxed: every thread computes the same value.
    static STATE: AtomicU8 = AtomicU8::new(0);
    match STATE.load(Ordering::Relaxed) {
        2 => true,
        1 => false,
        _ => {
            let yes = detect_prefetchw();
            STATE.store(if yes { 2 } else { 1 }, Ordering::Relaxed);
            yes
        }
    }
}

#[cfg(all(target_arch = "x86_64", not(miri)))]
#[cold]
fn detect_prefetchw() -> bool {
    use core::arch::x86_64::__cpuid;
    #[allow(unused_unsafe)]
    // SAFETY: CPUID exists on every x86_64 CPU; leaf 0x8000_0001 is read only when leaf
    // 0x8000_0000 says it exists.
    unsafe {
        __cpuid(0x8000_0000).eax >= 0x8000_0001 && __cpuid(0x8000_0001).ecx & (1 << 8) != 0
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn prefetching_changes_nothing_and_agrees_with_the_cpu_flags() {
        let mut x = [7u64; 16];
        for v in &x {
            super::for_write(v);
        }
        x[3] += 1;
        assert_eq!(x[3], 8);
        assert_eq!(x.iter().sum::<u64>(), 7 * 16 + 1);
        #[cfg(all(target_arch = "x86_64", not(miri), target_os = "linux"))]
        if let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") {
            // Linux names the PRFCHW bit `3dnowprefetch`.
            let flag = info
                .lines()
                .find(|l| l.starts_with("flags"))
                .is_some_and(|l| l.split_whitespace().any(|f| f == "3dnowprefetch"));
            assert_eq!(super::has_prefetchw(), flag);
        }
    }
}
