//! A Task Bench-compatible driver (Slaughter et al., SC 2020;
//! <https://github.com/StanfordLegion/task-bench>), so that Task Bench's METG analysis
//! applies to taskwatt unchanged.
//!
//! - [`TaskGraph`]: `steps` x `width` points and the dependence patterns of Task Bench,
//!   defined as in its core/core.cc.
//! - [`Kernel`]: empty, busy_wait, compute_bound (AVX2/FMA), compute_bound2,
//!   load_imbalance and memory_bound, with Task Bench's FLOP and byte counts.
//! - [`App`]: Task Bench's flags, configuration display and summary lines.
//! - [`System`]: taskwatt (data handles per point, as StarPU's Task Bench, traced or
//!   not), rayon and sequential baselines running the same task body, and external Task
//!   Bench programs (StarPU's, built from benches/starpu/).
//! - [`metg`](fn@metg) and [`sweep`]: METG(50 %) as Task Bench's scripts compute it.
//!
//! ```
//! use taskwatt_taskbench::App;
//!
//! let args: Vec<String> = "-steps 10 -width 4 -type stencil_1d -kernel compute_bound -iter 64 -worker 2"
//!     .split(' ').map(String::from).collect();
//! let app = App::parse(&args).unwrap();
//! let run = app.run().unwrap();
//! assert_eq!(run.tasks_executed, 40);
//! print!("{}", app.report_timing(run.elapsed.as_secs_f64()));
//! ```

mod app;
mod baselines;
mod error;
mod external;
mod graph;
mod kernel;
mod latency;
mod metg;
mod outcome;
mod point;
mod random;
mod steal;
mod stf;
mod system;

pub use app::{c_exp, help, wants_help, App, Totals};

/// `bytes` in GiB, one decimal.
pub(crate) fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}
pub use error::TaskBenchError;
pub use graph::{Dependence, TaskGraph};
pub use kernel::{busy_wait, compute_bound, compute_bound_impl, Kernel, KernelType};
pub use latency::{clock_read_ns, core_to_core_first_pair, core_to_core_ns, first_two_cpus};
pub use metg::{
    measure_peak, median, metg, summarise, sweep, Metg, MetgConfig, Peak, Sample, SweepEta,
    SystemMetg,
};
pub use outcome::BenchOutcome;
pub use point::{execute_point, PointOutput};
pub use steal::CpuTicks;
pub use system::{System, Tracing};
