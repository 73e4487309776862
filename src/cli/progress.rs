//! The progress line of a running graph: tasks done over submitted, on stderr.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use taskwatt::runtime::Runtime;

/// Shows tasks done / submitted on stderr while the graph runs (hidden when stderr is
/// not a terminal).
pub(crate) struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    pub(crate) fn start(rt: &Runtime, label: String) -> Progress {
        let stop = Arc::new(AtomicBool::new(false));
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len} tasks {per_sec}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar.set_message(label);
        let stats = rt.stats_probe();
        // Count the application's tasks only: what ran before (calibration) is not its.
        let before = stats();
        let (sub0, done0) = (
            before.submitted,
            before.executed + before.failed + before.cancelled,
        );
        bar.reset_elapsed();
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let st = stats();
                bar.set_length(st.submitted.saturating_sub(sub0));
                bar.set_position((st.executed + st.failed + st.cancelled).saturating_sub(done0));
                std::thread::sleep(Duration::from_millis(100));
            }
            bar.finish_and_clear();
        });
        Progress {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
