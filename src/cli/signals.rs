//! SIGINT and SIGTERM during `run` and `compare`: the first one stops the measured run
//! and keeps its trace (see `taskwatt::session`, "Interruption"); a second one quits at
//! once. The command then exits with the shell's usual status, 128 + the signal number.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::{Handle, Signals};
use taskwatt::session::StopSignal;

/// Watches for SIGINT and SIGTERM while it lives; dropping it restores the default
/// handling.
pub(crate) struct SignalWatch {
    handle: Handle,
    thread: Option<JoinHandle<()>>,
    signal: Arc<AtomicI32>,
}

impl SignalWatch {
    /// Starts watching: the first signal triggers `stop`.
    pub(crate) fn start(stop: StopSignal) -> std::io::Result<SignalWatch> {
        let mut signals = Signals::new([SIGINT, SIGTERM])?;
        let handle = signals.handle();
        let signal = Arc::new(AtomicI32::new(0));
        let seen = Arc::clone(&signal);
        let thread = std::thread::Builder::new()
            .name("taskwatt-signals".into())
            .spawn(move || {
                for sig in signals.forever() {
                    if seen.swap(sig, Ordering::SeqCst) != 0 {
                        eprintln!("taskwatt: second signal: quitting without finishing the trace");
                        std::process::exit(128 + sig);
                    }
                    eprintln!(
                        "taskwatt: {}: stopping after the running tasks and keeping the trace \
                         (send it again to quit at once)",
                        if sig == SIGINT {
                            "interrupted (SIGINT)"
                        } else {
                            "terminated (SIGTERM)"
                        }
                    );
                    stop.stop();
                }
            })?;
        Ok(SignalWatch {
            handle,
            thread: Some(thread),
            signal,
        })
    }

    /// The signal received, if any.
    pub(crate) fn received(&self) -> Option<i32> {
        match self.signal.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }
}

impl Drop for SignalWatch {
    fn drop(&mut self) {
        self.handle.close();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The error a command returns when a signal stopped it: printed like any error, and the
/// process exits with 128 + `signal`.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct Interrupted {
    pub(crate) signal: i32,
    pub(crate) message: String,
}
