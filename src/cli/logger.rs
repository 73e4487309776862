//! What the libraries report through `log` (a runtime dropped with unreported failures, a
//! task's data whose drop panicked, ...), printed on stderr as `taskwatt: <level>: <text>`.
//!
//! `TASKWATT_LOG` sets the level: `off`, `error`, `warn` (the default), `info`, `debug` or
//! `trace`. A library user installs a logger of their own (env_logger, tracing-log, ...).

use std::io::Write;

/// The environment variable that sets the level.
pub(crate) const LOG_ENV: &str = "TASKWATT_LOG";

struct Stderr;

impl log::Log for Stderr {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            let level = record.level().as_str().to_ascii_lowercase();
            // One write per message, so that lines from several threads do not mix.
            let line = format!("taskwatt: {level}: {}\n", record.args());
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
        }
    }

    fn flush(&self) {}
}

static LOGGER: Stderr = Stderr;

/// Installs the logger at the level `TASKWATT_LOG` names.
pub(crate) fn init() -> Result<(), String> {
    let level = match std::env::var(LOG_ENV) {
        Ok(v) => parse_level(&v)?,
        Err(_) => log::LevelFilter::Warn,
    };
    log::set_logger(&LOGGER).map_err(|e| format!("could not install the logger: {e}"))?;
    log::set_max_level(level);
    Ok(())
}

fn parse_level(v: &str) -> Result<log::LevelFilter, String> {
    v.trim().parse().map_err(|_| {
        format!(
            "{LOG_ENV}={v}: expected off, error, warn, info, debug or trace (unset it for warn)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::parse_level;

    #[test]
    fn levels_parse_and_a_typo_is_named() {
        assert_eq!(parse_level("debug"), Ok(log::LevelFilter::Debug));
        assert_eq!(parse_level(" OFF "), Ok(log::LevelFilter::Off));
        let e = parse_level("verbose").unwrap_err();
        assert!(
            e.contains("TASKWATT_LOG=verbose") && e.contains("warn"),
            "{e}"
        );
    }
}
