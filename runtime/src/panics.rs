//! Task panics: caught, reported with their location, and quiet on stderr; and drops that
//! may panic (a task's argument, the last reference to a registered value), run where a
//! panic cannot kill a worker.
//!
//! A panic inside a task is an error the runtime returns ([`RuntimeError::TasksFailed`]
//! names the task, its codelet, the message and where it panicked), so the standard hook
//! printing it as well would only repeat it, out of order, between the program's own
//! output. The runtime's hook stays silent for panics caught inside tasks unless
//! `RUST_BACKTRACE` is set (to anything but `0`): then the previous hook runs as usual,
//! with its backtrace. Every other panic goes to the previous hook.
//!
//! The hook also notes when a caught panic happened ([`take_panic_time`]): a failed
//! task ends there, not once the unwinding (and a backtrace printed under
//! `RUST_BACKTRACE`, 155 ms against the task's 120 µs in one user's run) is over, so that
//! neither its recorded time nor its energy counts the report of its failure.
//!
//! [`RuntimeError::TasksFailed`]: crate::RuntimeError::TasksFailed

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Once, OnceLock};

use taskwatt_traces::TaskId;

thread_local! {
    /// Inside [`catch`] on this thread.
    static CATCHING: Cell<bool> = const { Cell::new(false) };
    /// Where the last caught panic on this thread happened.
    static LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
    /// When (trace clock, ns; 0: none since the last [`take_panic_time`]).
    static PANIC_TIME: Cell<u64> = const { Cell::new(0) };
}

/// When the last panic caught on this thread happened (the trace clock), if one did
/// since the last call.
pub(crate) fn take_panic_time() -> Option<taskwatt_traces::Timestamp> {
    let t = PANIC_TIME.try_with(|t| t.replace(0)).unwrap_or(0);
    (t != 0).then_some(taskwatt_traces::Timestamp(t))
}

/// Installs the hook once per process, around whatever hook is set at that time.
pub(crate) fn install_quiet_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if CATCHING.try_with(Cell::get).unwrap_or(false) {
                // First: the backtrace the previous hook may print is not the task's time.
                let now = taskwatt_traces::Clock::now().as_ns().max(1);
                let _ = PANIC_TIME.try_with(|t| t.set(now));
                let at = info.location().map(|l| l.to_string());
                let _ = LOCATION.try_with(|l| *l.borrow_mut() = at);
                if !verbose() {
                    return;
                }
            }
            previous(info);
        }));
    });
}

fn verbose() -> bool {
    static VERBOSE: OnceLock<bool> = OnceLock::new();
    *VERBOSE.get_or_init(|| std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0"))
}

/// Runs `f`, catching a panic: `Err` holds its message and location. The payload is
/// dropped here too, and a panic in its own `Drop` is caught and forgotten.
pub(crate) fn catch<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            CATCHING.with(|c| c.set(self.0));
        }
    }
    let outer = CATCHING.with(|c| c.replace(true));
    let result = {
        let _reset = Reset(outer);
        catch_unwind(AssertUnwindSafe(f))
    };
    match result {
        Ok(v) => Ok(v),
        Err(payload) => {
            let mut message = panic_message(payload.as_ref());
            if let Some(at) = LOCATION.with(|l| l.borrow_mut().take()) {
                message.push_str(&format!(" (at {at})"));
            }
            drop_payload(payload);
            Err(message)
        }
    }
}

/// Drops a panic payload; one whose `Drop` panics again is leaked, not propagated.
fn drop_payload(payload: Box<dyn Any + Send>) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        std::mem::forget(again);
    }
}

/// Drops `value` (data references, an argument) of task `task`; a panic in a `Drop` is
/// reported through `log` (error level) instead of ending the thread.
pub(crate) fn drop_quietly<T>(value: T, task: Option<TaskId>) {
    if let Err(message) = catch(move || drop(value)) {
        match task {
            Some(id) => log::error!("dropping the data of task {id} panicked: {message}"),
            None => log::error!("dropping task data on a worker panicked: {message}"),
        }
    }
}

pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caught_panic_carries_its_message_and_location() {
        install_quiet_hook();
        let err = catch(|| panic!("boom {}", 7)).unwrap_err();
        assert!(err.starts_with("boom 7 (at "), "{err}");
        assert!(err.contains("panics.rs:"), "{err}");
        // When it happened, once.
        let before = taskwatt_traces::Clock::now();
        let _ = catch(|| panic!("again"));
        let at = take_panic_time().expect("the panic's time");
        assert!(at >= before && at <= taskwatt_traces::Clock::now());
        assert_eq!(take_panic_time(), None);
        assert_eq!(catch(|| 5).unwrap(), 5);
    }

    #[test]
    fn a_payload_whose_drop_panics_is_contained() {
        struct Nasty;
        impl Drop for Nasty {
            fn drop(&mut self) {
                panic!("drop of the payload");
            }
        }
        install_quiet_hook();
        let err = catch(|| std::panic::panic_any(Nasty)).unwrap_err();
        assert!(err.starts_with("non-string panic payload"), "{err}");
        // And a value whose drop panics.
        drop_quietly(Nasty, Some(3));
    }
}
