//! The `taskwatt` command line.

mod cli;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    // A command whose output goes to a pipe closed early (`| head`) ends quietly, as
    // Unix tools do, rather than panicking in `eprintln!` (Rust ignores SIGPIPE, so the
    // write fails and the print panics: exit 101).
    #[cfg(unix)]
    // SAFETY: first thing in main, before any other thread exists; SIG_DFL is a valid
    // disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    cli::main()
}
