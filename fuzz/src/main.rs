//! `taskwatt-fuzz`: feeds mutated inputs to taskwatt's readers and fails on any panic, any
//! allocation above a limit, and any input that takes too long.
//!
//! cargo-fuzz needs a nightly compiler; this runs on stable, in CI, for a bounded time.
//! It has no coverage instrumentation: instead it keeps, as new corpus entries, inputs
//! whose outcome (the error, with its numbers and offsets taken out, or success) was not
//! seen before, which steers it towards new checks in the readers. See fuzz/README.md.
//!
//! ```text
//! taskwatt-fuzz <target|all> [--seconds N] [--seed S] [--corpus DIR] [--save-new]
//! targets: trace, csv, starpu, model
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashSet;
use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// No single allocation may be larger than this: every length in a file must be checked
/// against the file's size before it sizes a buffer.
const MAX_ALLOCATION: usize = 256 << 20;
/// Nor may the live heap exceed this.
const MAX_LIVE: usize = 1 << 30;
/// An input that takes longer than this is a finding (a reader must be linear).
const MAX_INPUT_TIME: Duration = Duration::from_secs(2);
/// Mutated inputs are cut at this length.
const MAX_LEN: usize = 256 << 10;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static ARMED: AtomicBool = AtomicBool::new(false);
/// Where the first panic inside a reader happened.
static LAST_PANIC_AT: std::sync::OnceLock<String> = std::sync::OnceLock::new();

// SAFETY: forwards to the system allocator; only counts, and aborts (never returns a
// wrong pointer) past the limits.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        // SAFETY: same layout, forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        // SAFETY: same layout, forwarded.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        check(new_size);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

fn check(size: usize) {
    let live = LIVE.fetch_add(size, Ordering::Relaxed) + size;
    if ARMED.load(Ordering::Relaxed) && (size > MAX_ALLOCATION || live > MAX_LIVE) {
        ARMED.store(false, Ordering::Relaxed);
        // No allocation from here on: write with a fixed buffer.
        let mut msg = [0u8; 160];
        let mut w = &mut msg[..];
        let _ = write!(
            w,
            "\nFINDING: allocation of {size} bytes ({live} live) while reading the input in \
             fuzz/findings/current\n"
        );
        let n = 160 - w.len();
        let _ = std::io::stderr().write_all(&msg[..n]);
        std::process::abort();
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Target {
    Trace,
    Csv,
    Starpu,
    Model,
    Platform,
    SimConfig,
    PerfModels,
    Bus,
}

impl Target {
    const ALL: [Target; 8] = [
        Target::Trace,
        Target::Csv,
        Target::Starpu,
        Target::Model,
        Target::Platform,
        Target::SimConfig,
        Target::PerfModels,
        Target::Bus,
    ];

    fn name(self) -> &'static str {
        match self {
            Target::Trace => "trace",
            Target::Csv => "csv",
            Target::Starpu => "starpu",
            Target::Model => "model",
            Target::Platform => "platform",
            Target::SimConfig => "simconfig",
            Target::PerfModels => "perfmodels",
            Target::Bus => "bus",
        }
    }

    fn parse(s: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == s)
    }

    fn binary(self) -> bool {
        self == Target::Trace
    }

    /// Reads `path` (holding the input) the way the CLI would. `Err` is a clean error.
    fn run(self, path: &Path, scratch: &Path) -> Result<(), String> {
        use taskwatt_traces::{import_csv, import_starpu, ImportOptions, TimeUnit};
        match self {
            Target::Trace => {
                let strict = taskwatt_traces::read_trace(path);
                let recovered = taskwatt_traces::recover_trace(path).map(|r| r.trace);
                // Every exporter, streaming from the file and from memory.
                let sink = std::io::sink();
                let _ = taskwatt_traces::export_chrome(path, sink);
                let _ = taskwatt_traces::export_csv_tasks(path, std::io::sink());
                let _ = taskwatt_traces::export_csv_samples(path, std::io::sink());
                if let Ok(t) = &recovered {
                    let _ = taskwatt_traces::write_chrome(t, std::io::sink());
                    let _ = taskwatt_traces::write_csv_tasks(t, std::io::sink());
                    // What `report` and `fit` build from it.
                    attribute(t);
                }
                strict.map(drop).map_err(|e| e.to_string())
            }
            Target::Csv => {
                // The input as each of the four files, beside good ones.
                let (tasks, samples, workers) = (
                    scratch.join("tasks.csv"),
                    scratch.join("samples.csv"),
                    scratch.join("workers.csv"),
                );
                let _ =
                    std::fs::write(&tasks, "id,type,worker,start,end\n0,a,0,0,10\n1,b,1,0,20\n");
                let _ = std::fs::write(
                    &samples,
                    "time,domain,energy_j\n0,package-0,0\n10,package-0,1\n20,package-0,2\n",
                );
                let _ = std::fs::write(&workers, "worker,domain\n0,package-0\n1,package-0\n");
                let opts = ImportOptions::new(TimeUnit::Us);
                let run = |t: &Path, s: &Path, w: &Path| {
                    import_csv(t, &opts.clone().samples(s).workers(w)).map(|t| attribute(&t))
                };
                let a = run(path, &samples, &workers);
                let b = run(&tasks, path, &workers);
                let c = run(&tasks, &samples, path);
                // And as the domains file (`import --domains`), which declares each
                // domain's sensor.
                let d = import_csv(&tasks, &opts.clone().samples(&samples).domains(path))
                    .map(|t| attribute(&t));
                a.and(b).and(c).and(d).map_err(|e| e.to_string())
            }
            Target::Starpu => {
                let opts = ImportOptions::new(TimeUnit::Ms);
                import_starpu(path, &opts)
                    .map(|i| attribute(&i.trace))
                    .map_err(|e| e.to_string())
            }
            Target::Model => {
                let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
                taskwatt_energy::attribution::EnergyModel::from_json(&text, path)
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
            Target::Platform => {
                // `simulate --platform FILE`: loaded, then its workers laid out (what a
                // replay starts with: counts read from the file size vectors here).
                let p = taskwatt_whatif::Platform::load(path).map_err(|e| e.to_string())?;
                let _ = (p.workers(), p.worker_descs());
                Ok(())
            }
            Target::SimConfig => {
                // `run --sim-config FILE`: read (TOML or JSON, merged over the default).
                taskwatt_energy::SimConfig::from_file(path)
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
            Target::PerfModels => {
                // The performance models' directory, holding the input as models.json.
                let dir = as_file_in(scratch, "perfmodels", "models.json", path);
                taskwatt_runtime::PerfModels::load(&dir)
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
            Target::Bus => {
                // bus.json beside the models, read when a runtime with a GPU starts.
                let dir = as_file_in(scratch, "bus", "bus.json", path);
                taskwatt_runtime::Runtime::builder()
                    .workers(1)
                    .emulated_gpus(1)
                    .perf_models(dir)
                    .build()
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
        }
    }
}

/// `scratch/dir`, made if needed, holding the input `path` as `name`.
fn as_file_in(scratch: &Path, dir: &str, name: &str, path: &Path) -> PathBuf {
    let d = scratch.join(dir);
    let _ = std::fs::create_dir_all(&d);
    let _ = std::fs::copy(path, d.join(name));
    d
}

/// What `report` does with a trace that reads: its errors are clean, a panic is not.
fn attribute(t: &taskwatt_traces::Trace) {
    let _ = taskwatt_energy::attribution::attribute_trace(
        t,
        &taskwatt_energy::attribution::AttributionOptions::default(),
    );
}

/// The outcome's class: the message with digits removed, so that "offset 123" and
/// "offset 456" are one class.
fn class(outcome: &Result<(), String>) -> String {
    match outcome {
        Ok(()) => "ok".into(),
        Err(e) => {
            // Names and values (quoted, backticked, after `=`) vary with the input, the
            // words around them say which check fired.
            let mut out = String::new();
            let mut quoted = false;
            // The first line: parsers (TOML's) quote the offending input on the next ones.
            for c in e.lines().next().unwrap_or_default().chars() {
                match c {
                    '`' | '"' => quoted = !quoted,
                    _ if quoted || c.is_ascii_digit() => {}
                    _ if c.is_alphabetic() || c == ' ' => out.push(c),
                    _ => {}
                }
            }
            // The path of the input comes first in most messages; the rest names the check.
            out.split_whitespace()
                .filter(|w| !w.contains("current") && !w.contains("fuzz"))
                // Leftovers of hex numbers.
                .filter(|w| !(w.len() <= 8 && w.chars().all(|c| c.is_ascii_hexdigit())))
                .take_while(|w| !matches!(*w, "found" | "got" | "saw" | "read"))
                .take(8)
                .collect::<Vec<_>>()
                .join(" ")
        }
    }
}

fn mutate(rng: &mut StdRng, input: &[u8], corpus: &[Vec<u8>], text: bool) -> Vec<u8> {
    let mut v = input.to_vec();
    let rounds = 1 + rng.random_range(0..4);
    for _ in 0..rounds {
        let len = v.len();
        match rng.random_range(0..11) {
            0 if len > 0 => {
                let i = rng.random_range(0..len);
                v[i] ^= 1 << rng.random_range(0..8);
            }
            1 if len > 0 => {
                let i = rng.random_range(0..len);
                v[i] = *[0u8, 0xff, 0x7f, 0x80, 0x01, b'\n', b',', b':', b'-']
                    .get(rng.random_range(0..9))
                    .unwrap_or(&0);
            }
            2 if len > 0 => {
                // Truncate.
                v.truncate(rng.random_range(0..len));
            }
            3 if len > 0 => {
                // Delete a range.
                let a = rng.random_range(0..len);
                let b = (a + rng.random_range(1..64)).min(len);
                v.drain(a..b);
            }
            4 if len > 0 => {
                // Duplicate a range (whole chunks, records, lines).
                let a = rng.random_range(0..len);
                let b = (a + rng.random_range(1..512)).min(len);
                let piece = v[a..b].to_vec();
                let at = rng.random_range(0..=len);
                v.splice(at..at, piece);
            }
            5 if !corpus.is_empty() => {
                // Splice with another entry (concatenated files, mixed records).
                let other = &corpus[rng.random_range(0..corpus.len())];
                if !other.is_empty() {
                    let a = rng.random_range(0..other.len());
                    let at = rng.random_range(0..=len);
                    v.splice(at..at, other[a..].iter().copied());
                }
            }
            6 if len > 8 => {
                // A large little-endian integer, or a varint that claims a huge length.
                let i = rng.random_range(0..len - 8);
                let val: u64 = *[u64::MAX, 1 << 34, u32::MAX as u64, 1 << 31, 0]
                    .get(rng.random_range(0..5))
                    .unwrap_or(&0);
                if rng.random_bool(0.5) {
                    v[i..i + 8].copy_from_slice(&val.to_le_bytes());
                } else {
                    v[i..i + 5].copy_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
                }
            }
            7 if text => {
                // Replace a number with an extreme one.
                let numbers: Vec<usize> = (0..len)
                    .filter(|&i| v[i].is_ascii_digit() && (i == 0 || !v[i - 1].is_ascii_digit()))
                    .collect();
                if let Some(&start) = numbers.get(rng.random_range(0..numbers.len().max(1))) {
                    let end = (start..len)
                        .find(|&i| !v[i].is_ascii_digit())
                        .unwrap_or(len);
                    let with: &[u8] = [
                        b"4294967295".as_slice(),
                        b"18446744073709551615",
                        b"-1",
                        b"NaN",
                        b"inf",
                        b"1e308",
                        b"99999999999999999999999",
                        b"0",
                    ][rng.random_range(0..8)];
                    v.splice(start..end, with.iter().copied());
                }
            }
            8 if text && len > 0 => {
                // Invalid UTF-8.
                let i = rng.random_range(0..len);
                v.insert(i, 0xc3);
                v.insert(i + 1, 0x28);
            }
            9 => {
                let at = rng.random_range(0..=len);
                let n = rng.random_range(1..32);
                let bytes: Vec<u8> = (0..n).map(|_| rng.random()).collect();
                v.splice(at..at, bytes);
            }
            _ => {}
        }
    }
    v.truncate(MAX_LEN);
    if !text && rng.random_bool(0.6) {
        fix_crcs(&mut v);
    }
    v
}

/// Recomputes the CRC of every chunk whose framing is intact, so that mutations reach the
/// payload decoders instead of stopping at the checksum.
fn fix_crcs(v: &mut [u8]) {
    let mut o = 16;
    while o + 16 <= v.len() && &v[o..o + 4] == b"TWCK" {
        let len = u32::from_le_bytes([v[o + 8], v[o + 9], v[o + 10], v[o + 11]]) as usize;
        let Some(end) = (o + 16).checked_add(len).filter(|&e| e <= v.len()) else {
            return;
        };
        let crc = crc32fast::hash(&v[o + 16..end]);
        v[o + 12..o + 16].copy_from_slice(&crc.to_le_bytes());
        o = end;
    }
}

fn load(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .filter_map(|p| std::fs::read(&p).ok().map(|b| (p, b)))
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

struct Args {
    targets: Vec<Target>,
    seconds: f64,
    seed: u64,
    corpus: PathBuf,
    save_new: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let names = Target::ALL.map(Target::name);
    let which = it.next().ok_or(format!(
        "usage: taskwatt-fuzz <{}|all> [--seconds N] [--seed S] [--corpus DIR] [--save-new]",
        names.join("|")
    ))?;
    let targets = if which == "all" {
        Target::ALL.to_vec()
    } else {
        vec![Target::parse(&which).ok_or(format!(
            "unknown target `{which}`: expected {} or all",
            names.join(", ")
        ))?]
    };
    let mut a = Args {
        targets,
        seconds: 30.0,
        seed: 1,
        corpus: Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus"),
        save_new: false,
    };
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--seconds" => {
                a.seconds = value()?
                    .parse()
                    .map_err(|_| "--seconds: a number of seconds")?
            }
            "--seed" => a.seed = value()?.parse().map_err(|_| "--seed: an integer")?,
            "--corpus" => a.corpus = PathBuf::from(value()?),
            "--save-new" => a.save_new = true,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(a)
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("taskwatt-fuzz: {e}");
            std::process::exit(2);
        }
    };
    let findings = Path::new(env!("CARGO_MANIFEST_DIR")).join("findings");
    let _ = std::fs::create_dir_all(&findings);
    let scratch = std::env::temp_dir().join(format!("taskwatt-fuzz-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&scratch);
    // A panic while reading an input prints nothing here (the finding report says what
    // panicked, and where); any other panic is the fuzzer's own and prints as usual.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if ARMED.load(Ordering::Relaxed) {
            let at = info.location().map(|l| l.to_string()).unwrap_or_default();
            let _ = LAST_PANIC_AT.set(at);
        } else {
            default_hook(info);
        }
    }));
    let per_target = Duration::from_secs_f64(args.seconds / args.targets.len() as f64);
    let mut found = 0usize;
    for target in &args.targets {
        let dir = args.corpus.join(target.name());
        let entries = load(&dir);
        if entries.is_empty() {
            eprintln!(
                "taskwatt-fuzz: no corpus in {} (see fuzz/README.md)",
                dir.display()
            );
            std::process::exit(2);
        }
        let mut corpus: Vec<Vec<u8>> = entries.iter().map(|(_, b)| b.clone()).collect();
        let mut seen: HashSet<String> = HashSet::new();
        let mut rng = StdRng::seed_from_u64(args.seed ^ (*target as u64).wrapping_mul(0x9e37));
        let current = findings.join("current");
        let t0 = Instant::now();
        let (mut runs, mut saved, mut slowest) = (0u64, 0usize, Duration::ZERO);
        let mut i = 0usize;
        while t0.elapsed() < per_target {
            // The seeds as they are first, then mutations.
            let input = if i < entries.len() {
                entries[i].1.clone()
            } else {
                let base = &corpus[rng.random_range(0..corpus.len())];
                mutate(&mut rng, base, &corpus, !target.binary())
            };
            i += 1;
            if std::fs::write(&current, &input).is_err() {
                eprintln!("taskwatt-fuzz: cannot write {}", current.display());
                std::process::exit(2);
            }
            let start = Instant::now();
            ARMED.store(true, Ordering::Relaxed);
            let outcome = catch_unwind(AssertUnwindSafe(|| target.run(&current, &scratch)));
            ARMED.store(false, Ordering::Relaxed);
            let took = start.elapsed();
            slowest = slowest.max(took);
            runs += 1;
            let problem = match &outcome {
                Err(p) => Some(format!(
                    "panic: {} (at {})",
                    p.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default(),
                    LAST_PANIC_AT.get().map_or("?", |s| s.as_str())
                )),
                Ok(_) if took > MAX_INPUT_TIME => Some(format!("took {took:?}")),
                Ok(_) => None,
            };
            if let Some(problem) = problem {
                found += 1;
                let path = findings.join(format!("{}-{runs}", target.name()));
                let _ = std::fs::write(&path, &input);
                eprintln!(
                    "FINDING ({}): {problem}; input saved as {}",
                    target.name(),
                    path.display()
                );
                continue;
            }
            let Ok(result) = outcome else { continue };
            if seen.insert(class(&result)) && i > entries.len() {
                corpus.push(input.clone());
                if args.save_new && input.len() <= 16 << 10 {
                    let name = format!("{:016x}", crc32fast::hash(&input) as u64 ^ runs);
                    if std::fs::write(dir.join(name), &input).is_ok() {
                        saved += 1;
                    }
                }
            }
        }
        if std::env::var_os("TASKWATT_FUZZ_CLASSES").is_some() {
            let mut v: Vec<&String> = seen.iter().collect();
            v.sort();
            for c in v {
                eprintln!("class {}: {c}", target.name());
            }
        }
        println!(
            "{:>6}: {runs} inputs in {:.1} s, {} outcome classes, slowest {:.1} ms, {} kept{}",
            target.name(),
            t0.elapsed().as_secs_f64(),
            seen.len(),
            slowest.as_secs_f64() * 1e3,
            corpus.len() - entries.len(),
            if args.save_new {
                format!(" ({saved} saved)")
            } else {
                String::new()
            }
        );
    }
    let _ = std::fs::remove_dir_all(&scratch);
    let _ = std::fs::remove_file(findings.join("current"));
    if found > 0 {
        eprintln!(
            "taskwatt-fuzz: {found} finding(s) in {}",
            findings.display()
        );
        std::process::exit(1);
    }
}
