//! `taskwatt run APP --mpi` under mpirun: one rank of a distributed run in StarPU-MPI's
//! model (crate `taskwatt-mpi`, feature `mpi`), each rank writing its own trace.

#[cfg(feature = "mpi")]
use taskwatt::apps::App;

use super::CliResult;

/// On the first SIGINT or SIGTERM: finishes this rank's trace (if it still has it) with an
/// End chunk saying the run was interrupted, says so naming the rank, and exits with 128 +
/// the signal. Task records a worker has not flushed yet (at most the runtime's flush
/// period, 25 ms) and messages not yet streamed are lost.
#[cfg(feature = "mpi")]
fn on_signal_end_trace(
    rank: usize,
    size: usize,
    writer: taskwatt::recording::WriterSlot,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    std::thread::Builder::new()
        .name("taskwatt-mpi-signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                let name = if sig == SIGINT { "SIGINT" } else { "SIGTERM" };
                let w = writer.lock().unwrap_or_else(|p| p.into_inner()).take();
                let kept = match w {
                    Some(w) => {
                        let path = w.path().display().to_string();
                        match w.finish_with_outcome(taskwatt::traces::RunOutcome::Interrupted) {
                            Ok(_) => format!("its trace {path} ends here, marked interrupted"),
                            Err(e) => format!("its trace could not be finished: {e}"),
                        }
                    }
                    None => "no trace was being written".into(),
                };
                eprintln!("taskwatt: rank {rank}/{size}: {name}: this rank stops; {kept}");
                std::process::exit(128 + sig);
            }
        })
}

/// A rank, recorded into its trace (`--trace`) or not.
#[cfg(feature = "mpi")]
#[allow(clippy::large_enum_variant)] // one, made once per process
enum Rank {
    Measured(taskwatt::DistMeasured),
    Plain(taskwatt_mpi::DistRuntime),
}

#[cfg(feature = "mpi")]
impl Rank {
    fn dist(&mut self) -> &mut taskwatt_mpi::DistRuntime {
        match self {
            Rank::Measured(m) => m.runtime(),
            Rank::Plain(d) => d,
        }
    }
}

/// The distributed app of `app`.
#[cfg(feature = "mpi")]
pub(crate) fn dist_app(app: App) -> taskwatt_mpi::apps::DistApp {
    use taskwatt_mpi::apps::DistApp;
    match app {
        App::Cholesky => DistApp::Cholesky,
        App::Gemm => DistApp::Gemm,
        App::Stencil => DistApp::Stencil,
    }
}

#[cfg(not(feature = "mpi"))]
pub(crate) fn run(_a: &super::args::RunArgs) -> CliResult {
    Err(
        "this taskwatt was built without MPI: rebuild with `cargo build --release --features \
         mpi` (it needs `apt-get install libopenmpi-dev openmpi-bin libclang-dev`), then run \
         `mpirun -np 4 target/release/taskwatt run cholesky --mpi` (docs/mpi.md)"
            .into(),
    )
}

/// mimalloc keeps the memory a process frees for `purge_delay` ms before giving it back to
/// the system: 1 000 ms in the v3 this binary links. A rank frees its copies as their
/// readers finish (a Cholesky's panels, `DistRuntime::flush`), so its peak held up to a
/// second's worth of freed tiles beside what it used: Cholesky 8192 f32 on 4 ranks peaked
/// at up to 91.7 MB per rank, over issue 34's 87.2 MB, and at 64.7-75.5 MB with 10 ms or
/// 0 (no slower: makespans 1.44-1.99 s either way). 10 ms is mimalloc v2's default. A
/// `MIMALLOC_PURGE_DELAY` the user set is left alone.
#[cfg(feature = "mpi")]
fn purge_freed_memory_soon() {
    extern "C" {
        fn mi_option_get(option: std::ffi::c_int) -> std::ffi::c_long;
        fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
    }
    /// `mi_option_purge_delay` in mimalloc v3's `mi_option_e` (its 16th option).
    const PURGE_DELAY: std::ffi::c_int = 15;
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: both calls only read or store one option's value, for an index inside the
    // enum; the value read must be v3's documented default (1 000) before anything is
    // set, so a mimalloc whose enum differs is left as it is.
    unsafe {
        if mi_option_get(PURGE_DELAY) == 1000 {
            mi_option_set(PURGE_DELAY, 10);
        }
    }
}

#[cfg(feature = "mpi")]
pub(crate) fn run(a: &super::args::RunArgs) -> CliResult {
    purge_freed_memory_soon();
    let (universe, net) = taskwatt_mpi::MpiTransport::init()?;
    let rank = taskwatt_mpi::Transport::rank(&net);
    match run_rank(a, net) {
        Ok(()) => {
            drop(universe);
            Ok(())
        }
        Err(e) => {
            // One rank cannot go on: end the whole job, not only this process (the others
            // would wait for it), naming the rank.
            eprintln!("taskwatt: rank {rank}: {e}; ending the job");
            taskwatt_mpi::abort_job(1);
            Err(e)
        }
    }
}

#[cfg(feature = "mpi")]
fn run_rank(a: &super::args::RunArgs, mut net: taskwatt_mpi::MpiTransport) -> CliResult {
    use taskwatt::runtime::Runtime;
    use taskwatt::{DistMeasure, NodeShare};
    use taskwatt_mpi::DistRuntime;

    let cfg = a.app_config();
    let policy = a
        .sched()
        .unwrap_or(taskwatt::scheduler::DEFAULT_POLICY)
        .to_owned();
    taskwatt::scheduler::check_policy_name(&policy)?;
    let backend = taskwatt::runtime::GpuBackend::from(a.app.gpu_backend);
    // dmdae's task powers: the energy model given or the app's saved one, as without
    // --mpi (a note says which, or that it places tasks as dmda without one).
    let dmdae = match policy.eq_ignore_ascii_case("dmdae") {
        true => Some((
            a.app.task_powers(Some(&policy))?,
            a.app
                .policy_options(Some(&policy), super::run_table::one_gamma(&a.app.gamma)?)?,
        )),
        false => None,
    };
    // The ranks of a node share its cores (each takes its share) and its energy domains
    // (the first of them measures: taskwatt::DistMeasure).
    let builder = |share: &NodeShare| {
        // One worker per core of the rank's share of its node, as without --mpi.
        let nworkers = a.workers().unwrap_or(share.cpus.len().max(1));
        let mut b = Runtime::builder()
            .workers(nworkers)
            .cpus(share.cpus.clone())
            .policy(&policy)
            .app(a.app_name())
            .param("n", cfg.n)
            .param("tile", cfg.tile);
        if let Some((powers, options)) = dmdae.clone() {
            b = b.task_powers(powers).policy_options(options);
        }
        // GPUs on each rank (`--gpus`): the apps' codelets are the built-in ones, with
        // their cuBLAS implementations (taskwatt_apps::codelets); the data is device data.
        if a.app.gpus > 0 {
            b = b
                .gpus(a.app.gpus as usize, backend)
                .param("gpus", format!("{} {backend}", a.app.gpus));
            if let Some(l) = a.app.gpu_memory_limit {
                b = b.gpu_memory_limit(l).param("gpu_memory_limit", l);
            }
        }
        b
    };
    // The rank's recording when it keeps a trace (DistMeasure: the node's first rank
    // meters the node; the simulated meter is run by `taskwatt merge`); the traces are
    // merged by `taskwatt merge`, not here.
    let mut this = match a.trace_path() {
        Some(p) => {
            let gpus = a.app.gpus > 0;
            let detect = taskwatt::energy::DetectOptions {
                emulated_gpus: gpus && backend == taskwatt::runtime::GpuBackend::Emulated,
                cuda_uuids: (gpus && backend == taskwatt::runtime::GpuBackend::Cuda)
                    .then(|| taskwatt::session::cuda_uuids(a.app.gpus as usize))
                    .flatten(),
                ..a.energy_args().detect_options()?
            };
            let m = DistMeasure::new(p)
                .meter(a.energy_args().meter)
                .detect_options(detect)
                .period(a.energy_args().period)
                .energy(!a.no_energy_flag())
                .merge(false)
                .start(Box::new(net), builder)?;
            Rank::Measured(m)
        }
        None => {
            let share = NodeShare::gather(&mut net)?;
            let rt = builder(&share).build()?;
            Rank::Plain(DistRuntime::new(rt, Box::new(net))?)
        }
    };
    // SIGINT or SIGTERM (mpirun forwards them to every rank): this rank ends its trace
    // with an End chunk that says so, names itself, and exits; mpirun ends the others.
    let slot = match &this {
        Rank::Measured(m) => m.writer_slot(),
        Rank::Plain(_) => Default::default(),
    };
    // The time of the rendezvous, not of the call (rank 0 may arrive seconds later).
    let first = match &mut this {
        Rank::Measured(m) => m.first_clock(),
        Rank::Plain(d) => d.clock_sample()?,
    };
    let d = this.dist();
    let (rank, size) = (d.rank(), d.size());
    let _signals = on_signal_end_trace(rank, size, slot)?;
    let nworkers = d.runtime().workers().len();
    let app = dist_app(a.app());
    // `--no-check`: no gather of the result to rank 0, so that no rank holds more than
    // its share (the memory a distributed run saves).
    let check = !a.app.no_check;
    d.set_cache_limit(a.cache_limit_mib.map(|m| m << 20));
    d.set_memory_limit(a.memory_limit_mib.map(|m| m << 20));
    let out = match cfg.precision {
        taskwatt::apps::Precision::F32 => {
            taskwatt_mpi::apps::run_with::<f32>(d, app, cfg.n, cfg.tile, cfg.steps, cfg.seed, check)
        }
        taskwatt::apps::Precision::F64 => {
            taskwatt_mpi::apps::run_with::<f64>(d, app, cfg.n, cfg.tile, cfg.steps, cfg.seed, check)
        }
    };
    // The trace ends with its End chunk whatever failed (`failed` then), before the error
    // ends the job.
    let stats = match this {
        Rank::Measured(mut m) => {
            if out.is_err() {
                m.mark_failed();
            }
            m.finish().map(|r| r.stats).map_err(|e| e.to_string())
        }
        Rank::Plain(mut d) => d
            .clock_sample()
            .and_then(|_| d.shutdown())
            .map(|(stats, _)| stats)
            .map_err(|e| e.to_string()),
    };
    let stats = stats?;
    let out = out?;
    let line = format!(
        "rank {rank}/{size}: {} {} n={} tile={}{} grid {}x{}, {}, policy {policy}: {} tasks \
         run, {} skipped; sent {} messages ({:.1} MiB), received {} ({:.1} MiB), {} cache hits, \
         {} evicted{}; makespan {:.3} s; clock offset to rank 0 {} ns (round trip {} ns)",
        out.app.name(),
        cfg.precision.name(),
        out.n,
        out.nb,
        if out.nb > 0 && !out.n.is_multiple_of(out.nb) {
            format!(
                " (padded to {}: its work is in the makespan)",
                out.n.div_ceil(out.nb) * out.nb
            )
        } else {
            String::new()
        },
        out.grid.p,
        out.grid.q,
        match a.app.gpus {
            0 => format!("{nworkers} worker(s)"),
            g => format!("{nworkers} CPU worker(s) + {g} {backend} GPU(s)"),
        },
        stats.tasks,
        stats.skipped,
        stats.sent.0,
        stats.sent.1 as f64 / (1 << 20) as f64,
        stats.received.0,
        stats.received.1 as f64 / (1 << 20) as f64,
        stats.cache_hits,
        stats.evicted,
        match stats.memory_waits {
            0 => String::new(),
            n => format!(
                ", waited {n} time(s) ({:.3} s) for memory",
                stats.memory_wait_ns as f64 * 1e-9
            ),
        },
        out.makespan_s,
        first.offset_ns,
        first.rtt_ns
    );
    if a.json_output() {
        let v = serde_json::json!({"rank": rank, "size": size, "outcome": out, "stats": stats});
        println!("{}", serde_json::to_string(&v)?);
    } else {
        println!("{line}");
    }
    if let (Some(false), Some(diff)) = (out.check_passed, out.check_rel_diff) {
        return Err(format!(
            "rank 0: the distributed result differs from the sequential one by {diff:e} \
             (relative; tolerance {:e})",
            taskwatt_mpi::apps::CHECK_TOLERANCE
        )
        .into());
    }
    if let Some(diff) = out.check_rel_diff {
        println!(
            "check: the distributed result against the sequential one: relative difference {diff:e} <= {:e}: ok",
            taskwatt_mpi::apps::CHECK_TOLERANCE
        );
    }
    Ok(())
}
