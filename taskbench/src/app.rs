//! Task Bench's command line and its report (`App` in core/core.cc): the same single-dash
//! flags, the same configuration display and the same summary lines, byte for byte, so
//! that Task Bench's scripts (chart_metg.py and friends) parse taskwatt's logs unchanged.
//! taskwatt adds `-worker`, `--sched` and `--system`.

use std::fmt::Write as _;

use serde::Serialize;

use super::error::TaskBenchError;
use super::graph::{clamp, Dependence, TaskGraph};
use super::kernel::KernelType;
use super::outcome::BenchOutcome;
use super::point::DepTable;
use super::system::{System, Tracing};

/// The flags, with what each takes, as listed in errors and `-h`.
/// The largest `-iter`: 2^30, seconds of compute_bound per task (Task Bench itself takes any
/// `long`, so `-iter 2^32` ran for minutes with no way to stop it but a signal).
const MAX_ITERATIONS: i64 = 1 << 30;

const FLAGS: [(&str, &str, &str); 25] = [
    ("-h", "", "show this help message and exit"),
    (
        "-nodes",
        "[INT]",
        "number of nodes to use for estimating transfer statistics",
    ),
    ("-v", "", "enable verbose output"),
    ("-vv", "", "enable extra verbose output"),
    ("-steps", "[INT]", "height of task graph"),
    ("-width", "[INT]", "width of task graph"),
    (
        "-type",
        "[DEP]",
        "dependency pattern (see available list below)",
    ),
    (
        "-radix",
        "[INT]",
        "radix of dependency pattern (only for nearest, spread, and random)",
    ),
    (
        "-period",
        "[INT]",
        "period of dependency pattern (only for spread and random)",
    ),
    (
        "-fraction",
        "[FLOAT]",
        "fraction of connected dependencies (only for random)",
    ),
    ("-and", "", "start configuring next task graph"),
    (
        "-kernel",
        "[KERNEL]",
        "kernel type (see available list below)",
    ),
    ("-iter", "[INT]", "number of iterations"),
    ("-output", "[INT]", "output bytes per task"),
    (
        "-scratch",
        "[INT]",
        "scratch bytes per task (only for memory-bound kernel)",
    ),
    (
        "-sample",
        "[INT]",
        "number of samples (only for memory-bound kernel)",
    ),
    ("-imbalance", "[FLOAT]", "amount of load imbalance"),
    (
        "-field",
        "[INT]",
        "number of fields (data handles per point; default: steps)",
    ),
    (
        "-skip-graph-validation",
        "",
        "accepted for compatibility (graphs are always checked)",
    ),
    (
        "-worker",
        "[INT]",
        "taskwatt: number of workers (alias -core; default: all cores)",
    ),
    (
        "-core",
        "[INT]",
        "taskwatt: same as -worker (StarPU's Task Bench flag)",
    ),
    (
        "--sched",
        "[POLICY]",
        "taskwatt: scheduling policy (eager, ws, lws, prio; default lws; `lws+submitter`: the submitting thread is the last worker)",
    ),
    (
        "--system",
        "[SYS]",
        "taskwatt: taskwatt, rayon or sequential (default taskwatt)",
    ),
    (
        "--trace",
        "[FILE]",
        "taskwatt: record the run's trace into FILE (.twt; default: no trace)",
    ),
    ("--help", "", "same as -h"),
];

/// A parsed Task Bench command line: the graphs and how to run them.
#[derive(Clone, Debug, Serialize)]
pub struct App {
    /// The graphs, one per `-and`-separated group of flags.
    pub graphs: Vec<TaskGraph>,
    /// `-nodes` (0: no local/nonlocal estimate).
    pub nodes: i64,
    /// `-v` counts 1, `-vv` 2.
    pub verbose: u32,
    /// Workers (`-worker`).
    pub workers: usize,
    /// Where to run (`--system`, `--sched`).
    pub system: System,
}

/// Task Bench's totals over all graphs (`report_timing`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// Tasks.
    pub tasks: i64,
    /// Dependencies (edges between tasks).
    pub dependencies: i64,
    /// Dependencies within a node, estimated with `-nodes`.
    pub local_dependencies: i64,
    /// Dependencies across nodes, estimated with `-nodes`.
    pub nonlocal_dependencies: i64,
    /// FLOPs of all kernels.
    pub flops: i64,
    /// Bytes moved by all kernels.
    pub bytes: i64,
    /// Output bytes read within a node.
    pub local_transfer: i64,
    /// Output bytes read across nodes.
    pub nonlocal_transfer: i64,
}

/// Whether `args` ask for help.
pub fn wants_help(args: &[String]) -> bool {
    args.iter().any(|a| a == "-h" || a == "--help")
}

/// Task Bench's `-h` text, with taskwatt's flags.
pub fn help() -> String {
    let mut s = String::from("taskwatt bench taskbench: A Task Benchmark\n\nOptions:\n");
    for (flag, value, what) in FLAGS {
        let _ = writeln!(s, "  {:<22} {what}", format!("{flag} {value}").trim_end());
    }
    s.push_str("\nSupported dependency patterns:\n");
    for d in Dependence::ALL {
        let _ = writeln!(s, "  {}", d.name());
    }
    s.push_str("\nSupported kernel types:\n");
    for k in KernelType::ALL {
        let _ = writeln!(s, "  {}", k.name());
    }
    s
}

struct Args<'a> {
    args: &'a [String],
    i: usize,
}

impl Args<'_> {
    fn value(&mut self, flag: &str) -> Result<&str, TaskBenchError> {
        let what = FLAGS
            .iter()
            .find(|f| f.0 == flag)
            .map(|f| f.1)
            .unwrap_or("a value");
        self.i += 1;
        self.args
            .get(self.i)
            .map(String::as_str)
            .ok_or_else(|| TaskBenchError::MissingValue {
                flag: flag.to_string(),
                what,
            })
    }

    fn number<T: std::str::FromStr + PartialOrd + Copy + std::fmt::Display>(
        &mut self,
        flag: &str,
        ok: impl Fn(T) -> bool,
        rule: &str,
    ) -> Result<T, TaskBenchError> {
        let v = self.value(flag)?;
        let invalid = |reason: String| TaskBenchError::InvalidValue {
            flag: flag.to_string(),
            value: v.to_string(),
            reason,
        };
        let n: T = v.parse().map_err(|_| {
            // A number this flag's type cannot hold is out of range, not "not a number".
            if v.trim().parse::<f64>().is_ok_and(f64::is_finite) {
                invalid(format!("out of range: must be {rule}"))
            } else {
                invalid(format!("not a number: must be {rule}"))
            }
        })?;
        if !ok(n) {
            return Err(invalid(format!("must be {rule}")));
        }
        Ok(n)
    }
}

impl App {
    /// Parses Task Bench's flags (without the program name).
    pub fn parse(args: &[String]) -> Result<App, TaskBenchError> {
        let mut graphs = Vec::new();
        let mut g = TaskGraph::new(0);
        let mut nodes = 0;
        let mut verbose = 0;
        let mut workers = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut system = "taskwatt".to_string();
        let mut sched: Option<String> = None;
        let mut trace: Option<std::path::PathBuf> = None;
        let mut a = Args { args, i: 0 };
        while a.i < args.len() {
            let flag = args[a.i].as_str();
            match flag {
                "-nodes" => nodes = a.number(flag, |v: i64| v > 0, "> 0")?,
                "-v" => verbose += 1,
                "-vv" => verbose += 2,
                "-skip-graph-validation" => {}
                "-steps" => g.timesteps = a.number(flag, |v: i64| v > 0, "> 0")?,
                "-width" => g.max_width = a.number(flag, |v: i64| v > 0, "> 0")?,
                "-type" => g.dependence = Dependence::from_name(a.value(flag)?)?,
                "-radix" => g.radix = a.number(flag, |v: i64| v >= 0, ">= 0")?,
                "-period" => g.period = a.number(flag, |v: i64| v >= 0, ">= 0")?,
                "-fraction" => {
                    g.fraction_connected =
                        a.number(flag, |v: f64| (0.0..=1.0).contains(&v), ">= 0 and <= 1")?
                }
                "-kernel" => g.kernel.kind = KernelType::from_name(a.value(flag)?)?,
                "-iter" => {
                    g.kernel.iterations = a.number(
                        flag,
                        |v: i64| (0..=MAX_ITERATIONS).contains(&v),
                        ">= 0 and <= 2^30 (the kernel's iterations per task: more make \
                         longer tasks)",
                    )?
                }
                "-output" => {
                    g.output_bytes_per_task = a.number(flag, |v: usize| v >= 16, ">= 16")?
                }
                "-scratch" => g.scratch_bytes_per_task = a.number(flag, |_: usize| true, ">= 0")?,
                "-sample" => g.kernel.samples = a.number(flag, |v: i32| v >= 0, ">= 0")?,
                "-imbalance" => {
                    g.kernel.imbalance =
                        a.number(flag, |v: f64| (0.0..=2.0).contains(&v), ">= 0 and <= 2")?
                }
                "-field" => g.nb_fields = a.number(flag, |v: i64| v > 0, "> 0")?,
                // Every system starts that many threads: at most the runtime's limit.
                "-worker" | "-core" => {
                    workers = a.number(
                        flag,
                        |v: usize| v > 0 && v <= taskwatt_runtime::MAX_WORKERS,
                        "from 1 to 4096 (taskwatt's MAX_WORKERS)",
                    )?
                }
                "--sched" => sched = Some(a.value(flag)?.to_string()),
                "--system" => system = a.value(flag)?.to_string(),
                "--trace" => trace = Some(a.value(flag)?.into()),
                "-and" => {
                    let next = TaskGraph::new(graphs.len() as i64 + 1);
                    graphs.push(std::mem::replace(&mut g, next).finish()?);
                }
                _ => {
                    return Err(TaskBenchError::UnknownFlag {
                        flag: flag.to_string(),
                        valid: FLAGS.map(|f| f.0).join(" "),
                    })
                }
            }
            a.i += 1;
        }
        graphs.push(g.finish()?);
        for g in &graphs {
            check_memory(g)?;
        }
        let mut system = System::from_name(&system, sched.as_deref())?;
        // Checked here, before the configuration is printed and anything runs.
        if let System::Taskwatt { policy, .. } = &system {
            let base = policy.strip_suffix("+submitter").unwrap_or(policy);
            taskwatt_runtime::scheduler::check_policy_name(base).map_err(|e| {
                TaskBenchError::InvalidValue {
                    flag: "--sched".into(),
                    value: policy.clone(),
                    reason: e.to_string(),
                }
            })?;
        }
        if let Some(dir) = trace
            .as_deref()
            .and_then(std::path::Path::parent)
            .filter(|d| !d.as_os_str().is_empty() && !d.is_dir())
        {
            return Err(TaskBenchError::InvalidValue {
                flag: "--trace".into(),
                value: trace.as_deref().unwrap_or(dir).display().to_string(),
                reason: format!(
                    "its directory {} does not exist (make it first)",
                    dir.display()
                ),
            });
        }
        if let Some(path) = trace {
            match &mut system {
                System::Taskwatt { tracing, .. } => *tracing = Tracing::File(path),
                other => {
                    return Err(TaskBenchError::InvalidValue {
                        flag: "--trace".into(),
                        value: path.display().to_string(),
                        reason: format!(
                            "only taskwatt records a trace, not {} (drop --trace or use \
                             --system taskwatt)",
                            other.label()
                        ),
                    })
                }
            }
        }
        Ok(App {
            graphs,
            nodes,
            verbose,
            workers,
            system,
        })
    }

    /// Runs the graphs once on the chosen system.
    pub fn run(&self) -> Result<BenchOutcome, TaskBenchError> {
        self.system.run(&self.graphs, self.workers)
    }

    /// Task Bench's `display()`: "Running Task Benchmark" and each graph's configuration
    /// (with `-v`, every timestep's points and dependencies).
    pub fn display(&self) -> String {
        let mut s = String::from("Running Task Benchmark\n  Configuration:\n");
        for (i, g) in self.graphs.iter().enumerate() {
            let _ = write!(
                s,
                "    Task Graph {}:\n      Time Steps: {}\n      Max Width: {}\n      \
                 Dependence Type: {}\n      Radix: {}\n      Period: {}\n      \
                 Fraction Connected: {:.6}\n      Kernel:\n        Type: {}\n        \
                 Iterations: {}\n        Samples: {}\n        Imbalance: {:.6}\n      \
                 Output Bytes: {}\n      Scratch Bytes: {}\n",
                i + 1,
                g.timesteps,
                g.max_width,
                g.dependence,
                g.radix,
                g.period,
                g.fraction_connected,
                g.kernel.kind.name(),
                g.kernel.iterations,
                g.kernel.samples,
                g.kernel.imbalance,
                g.output_bytes_per_task,
                g.scratch_bytes_per_task
            );
            if self.verbose > 0 {
                display_timesteps(&mut s, g, self.verbose > 1);
            }
        }
        s
    }

    /// Task Bench's totals for these graphs.
    pub fn totals(&self) -> Totals {
        let mut tot = Totals::default();
        for g in &self.graphs {
            let (mut deps, mut local, mut nonlocal) = (0, 0, 0);
            for t in 0..g.timesteps {
                let (offset, width) = (g.offset_at_timestep(t), g.width_at_timestep(t));
                let last_offset = g.offset_at_timestep(t - 1);
                let last_width = g.width_at_timestep(t - 1);
                let dset = g.dependence_set_at_timestep(t);
                tot.tasks += width;
                for p in offset..offset + width {
                    let (mut node_first, mut node_last) = (0, -1);
                    if self.nodes > 0 {
                        let node = p * self.nodes / g.max_width;
                        node_first = node * g.max_width / self.nodes;
                        node_last = (node + 1) * g.max_width / self.nodes - 1;
                    }
                    for (first, last) in g.dependencies(dset, p) {
                        let (f, l) = clamp(first, last, last_offset, last_offset + last_width - 1);
                        deps += l - f + 1;
                        if self.nodes > 0 {
                            let (a, b) = clamp(f, l, 0, node_first - 1);
                            let (c, d) = clamp(f, l, node_first, node_last);
                            let (e, h) = clamp(f, l, node_last + 1, g.max_width - 1);
                            nonlocal += (b - a + 1) + (h - e + 1);
                            local += d - c + 1;
                        }
                    }
                    tot.flops += g.kernel.flops_per_task(g.graph_index, t, p);
                    tot.bytes += g.kernel.bytes_per_task(g.scratch_bytes_per_task);
                }
            }
            tot.dependencies += deps;
            tot.local_dependencies += local;
            tot.nonlocal_dependencies += nonlocal;
            tot.local_transfer += local * g.output_bytes_per_task as i64;
            tot.nonlocal_transfer += nonlocal * g.output_bytes_per_task as i64;
        }
        tot
    }

    /// Task Bench's `report_timing(elapsed)`, line for line.
    pub fn report_timing(&self, elapsed_seconds: f64) -> String {
        let t = self.totals();
        let mut s = String::new();
        let _ = writeln!(s, "Total Tasks {}", t.tasks);
        let _ = writeln!(s, "Total Dependencies {}", t.dependencies);
        if self.nodes > 0 {
            let _ = writeln!(
                s,
                "  Local Dependencies {} (estimated)",
                t.local_dependencies
            );
            let _ = writeln!(
                s,
                "  Nonlocal Dependencies {} (estimated)",
                t.nonlocal_dependencies
            );
            let _ = writeln!(s, "  Number of Nodes (used for estimate) {}", self.nodes);
        } else {
            s.push_str("  Unable to estimate local/nonlocal dependencies\n");
        }
        let _ = writeln!(s, "Total FLOPs {}", t.flops);
        let _ = writeln!(s, "Total Bytes {}", t.bytes);
        let _ = writeln!(s, "Elapsed Time {} seconds", c_exp(elapsed_seconds));
        let _ = writeln!(s, "FLOP/s {}", c_exp(t.flops as f64 / elapsed_seconds));
        let _ = writeln!(s, "B/s {}", c_exp(t.bytes as f64 / elapsed_seconds));
        s.push_str("Transfer (estimated):\n");
        if self.nodes > 0 {
            let _ = writeln!(s, "  Local Bytes {}", t.local_transfer);
            let _ = writeln!(s, "  Nonlocal Bytes {}", t.nonlocal_transfer);
            let _ = writeln!(
                s,
                "  Local Bandwidth {} B/s",
                c_exp(t.local_transfer as f64 / elapsed_seconds)
            );
            let _ = writeln!(
                s,
                "  Nonlocal Bandwidth {} B/s",
                c_exp(t.nonlocal_transfer as f64 / elapsed_seconds)
            );
        } else {
            s.push_str("  Unable to estimate local/nonlocal transfer\n");
        }
        s
    }
}

fn display_timesteps(s: &mut String, g: &TaskGraph, reverse: bool) {
    let deps = DepTable::new(g);
    for t in 0..g.timesteps {
        let (offset, width) = (g.offset_at_timestep(t), g.width_at_timestep(t));
        let (last_offset, last_width) = (g.offset_at_timestep(t - 1), g.width_at_timestep(t - 1));
        let _ = writeln!(
            s,
            "      Timestep {t} (offset {offset}, width {width}, last offset {last_offset}, \
             last width {last_width}):"
        );
        s.push_str("        Points:");
        for p in offset..offset + width {
            let _ = write!(s, " {p}");
        }
        s.push_str("\n        Dependencies:\n");
        for p in offset..offset + width {
            let _ = write!(s, "          Point {p}:");
            for d in deps.inputs(g, t, p) {
                let _ = write!(s, " {d}");
            }
            s.push('\n');
        }
        if reverse {
            s.push_str("        Reverse Dependencies:\n");
            for p in last_offset..last_offset + last_width {
                let _ = write!(s, "          Point {p}:");
                for d in deps.outputs(g, t - 1, p) {
                    let _ = write!(s, " {d}");
                }
                s.push('\n');
            }
        }
    }
}

/// C's `printf("%e")`: six decimals and an exponent of at least two digits with its sign
/// (`1.234568e+00`); `inf` and `nan` as C prints them.
pub fn c_exp(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let s = format!("{v:.6e}");
    let (mantissa, exp) = s.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("{:e} exponent is an integer");
    format!(
        "{mantissa}e{}{:02}",
        if exp < 0 { '-' } else { '+' },
        exp.abs()
    )
}

/// Refuses a graph whose per-point buffers would not fit in this machine's available
/// memory (or overflow), before anything is allocated: each point of the widest timestep
/// keeps `-field` output buffers and a scratch buffer, plus a data handle per output.
fn check_memory(g: &TaskGraph) -> Result<(), TaskBenchError> {
    /// What a registered output costs beyond its bytes (handle, task node share).
    const PER_OUTPUT_OVERHEAD: u64 = 256;
    let per_point = (g.output_bytes_per_task as u64)
        .checked_add(PER_OUTPUT_OVERHEAD)
        .and_then(|b| b.checked_mul(g.nb_fields as u64))
        .and_then(|b| b.checked_add(g.scratch_bytes_per_task as u64));
    let bytes = per_point.and_then(|b| b.checked_mul(g.max_width as u64));
    let available = taskwatt_runtime::available_memory_bytes();
    // The flag to blame: the factor furthest above its default (-width 4, -field = -steps,
    // -output 16, -scratch 0), so that `-output 2^64-1` is not reported as `-width 2`.
    let scratch = g.scratch_bytes_per_task as f64;
    let output = g.output_bytes_per_task as f64 * g.nb_fields as f64;
    let (flag, value) = if scratch > output {
        ("-scratch", g.scratch_bytes_per_task.to_string())
    } else {
        [
            (g.max_width as f64 / 4.0, "-width", g.max_width.to_string()),
            (
                g.output_bytes_per_task as f64 / 16.0,
                "-output",
                g.output_bytes_per_task.to_string(),
            ),
            (
                g.nb_fields as f64 / g.timesteps.max(1) as f64,
                "-field",
                g.nb_fields.to_string(),
            ),
        ]
        .into_iter()
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, f, v)| (f, v))
        .expect("three candidates")
    };
    match bytes {
        Some(b) if available.is_none_or(|a| b <= a) => Ok(()),
        _ => Err(TaskBenchError::InvalidValue {
            flag: flag.into(),
            value,
            reason: format!(
                "graph {} needs {} for its points' buffers (-width x -field x -output, plus -scratch), more than {}; use a smaller {flag}",
                g.graph_index,
                bytes.map_or_else(|| "more than 2^64 bytes".to_string(), crate::gib),
                available.map_or_else(|| "the address space".to_string(), |a| format!("the {} of memory available here", crate::gib(a))),
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<App, TaskBenchError> {
        App::parse(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn c_exp_formats_like_printf() {
        assert_eq!(c_exp(1.0), "1.000000e+00");
        assert_eq!(c_exp(0.000123456789), "1.234568e-04");
        assert_eq!(c_exp(5.5e123), "5.500000e+123");
        assert_eq!(c_exp(0.0), "0.000000e+00");
        assert_eq!(c_exp(f64::INFINITY), "inf");
    }

    #[test]
    fn parses_flags_and_and() {
        let app = parse(
            "-steps 10 -width 4 -type stencil_1d -kernel compute_bound -iter 16 -and \
             -type spread -radix 2 -period 2 -worker 3 --system rayon",
        )
        .unwrap();
        assert_eq!(app.graphs.len(), 2);
        assert_eq!(app.graphs[0].timesteps, 10);
        assert_eq!(app.graphs[0].nb_fields, 10);
        assert_eq!(app.graphs[1].graph_index, 1);
        assert_eq!(app.graphs[1].timesteps, 4);
        assert_eq!(app.graphs[1].period, 2);
        assert_eq!(app.workers, 3);
        assert_eq!(app.system, System::Rayon);
    }

    #[test]
    fn rejects_unknown_flags_values_and_misplaced_sched() {
        let e = parse("-stepz 3").unwrap_err().to_string();
        assert!(e.contains("-stepz") && e.contains("-steps"), "{e}");
        let e = parse("-steps x").unwrap_err().to_string();
        assert!(e.contains("-steps x"), "{e}");
        assert!(parse("-steps 0").is_err());
        assert!(parse("-width")
            .unwrap_err()
            .to_string()
            .contains("requires an argument"));
        assert!(parse("--system rayon --sched ws").is_err());
        assert!(parse("--system mpi").is_err());
        assert!(parse("-type stencil_1d -period 2").is_err());
        // Refused while parsing, before the configuration is printed.
        let e = parse("--sched bogus").unwrap_err().to_string();
        assert!(e.contains("bogus") && e.contains("lws"), "{e}");
        assert!(parse("--sched lws+submitter").is_ok());
        let e = parse("--trace /nonexistent/x.twt").unwrap_err().to_string();
        assert!(
            e.contains("/nonexistent") && e.contains("does not exist"),
            "{e}"
        );
        let e = parse("-iter -5").unwrap_err().to_string();
        assert!(e.contains("iterations per task"), "{e}");
    }

    /// Audit defects 4 and 13: every count that multiplies the run has a bound, an
    /// out-of-range number is called that, and the memory error blames the flag that asked.
    #[test]
    fn counts_are_bounded_and_errors_name_the_flag_at_fault() {
        let e = parse("-steps 4 -width 2 -iter 4294967296 -kernel compute_bound")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("-iter 4294967296") && e.contains("<= 2^30"),
            "{e}"
        );
        assert!(parse("-steps 4 -width 2 -iter 1073741824").is_ok());
        let e = parse("-steps 1000000000000 -width 2")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("more than the 1000000000") && e.contains("-steps"),
            "{e}"
        );
        for flag in ["-iter 18446744073709551615", "-sample 100000000000"] {
            let e = parse(&format!("-steps 4 -width 2 {flag}"))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("out of range") && !e.contains("not a number"),
                "{e}"
            );
        }
        let e = parse("-steps 4 -width 2 -output 18446744073709551615")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("-output 18446744073709551615") && e.contains("smaller -output"),
            "{e}"
        );
        let e = parse("-steps 4 -width 2 -scratch 18446744073709551615")
            .unwrap_err()
            .to_string();
        assert!(e.contains("-scratch"), "{e}");
        let e = parse("-steps 4 -width 16000000 -output 4096")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("-width 16000000") && e.contains("smaller -width"),
            "{e}"
        );
    }

    #[test]
    fn totals_match_hand_counts() {
        // stencil_1d 10 x 4: 40 tasks; per timestep after the first, 2 + 3 + 3 + 2 = 10
        // dependencies: 90. compute_bound 16 iterations: (128 * 16 + 64) FLOPs each.
        let app =
            parse("-steps 10 -width 4 -type stencil_1d -kernel compute_bound -iter 16").unwrap();
        let t = app.totals();
        assert_eq!((t.tasks, t.dependencies), (40, 90));
        assert_eq!(t.flops, 40 * (128 * 16 + 64));
        // dom 4 x 4: widths 1 2 2 1 (offsets 0 0 1 2 ... ) -> tasks = sum of widths.
        let app = parse("-steps 4 -width 4 -type dom").unwrap();
        assert_eq!(app.totals().tasks, 1 + 2 + 2 + 1);
        // -nodes 2 on stencil 1 x ... : width 4, nodes 2: point 1 reads 0,1 (local), 2
        // (nonlocal).
        let app = parse("-steps 2 -width 4 -type stencil_1d -nodes 2").unwrap();
        let t = app.totals();
        assert_eq!(
            t.local_dependencies + t.nonlocal_dependencies,
            t.dependencies
        );
        assert_eq!(t.nonlocal_dependencies, 2);
    }

    #[test]
    fn report_has_task_bench_lines() {
        let app = parse("-steps 2 -width 2 -type no_comm").unwrap();
        let r = app.report_timing(0.5);
        assert_eq!(
            r,
            "Total Tasks 4\nTotal Dependencies 2\n  Unable to estimate local/nonlocal \
             dependencies\nTotal FLOPs 0\nTotal Bytes 0\nElapsed Time 5.000000e-01 seconds\n\
             FLOP/s 0.000000e+00\nB/s 0.000000e+00\nTransfer (estimated):\n  Unable to \
             estimate local/nonlocal transfer\n"
        );
        let d = app.display();
        assert!(
            d.contains("      Time Steps: 2\n      Max Width: 2\n"),
            "{d}"
        );
        assert!(d.contains("      Fraction Connected: 0.250000\n"), "{d}");
        assert!(d.contains("        Iterations: 0\n"), "{d}");
    }
}
