//! The bus measures' file: one that cannot be parsed is logged and replaced (issue 29:
//! the failed read was silent though the code said it was logged). Its own test binary,
//! for its logger.

use std::sync::Mutex;

use taskwatt_runtime::Runtime;

static LOGGED: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Collect;

impl log::Log for Collect {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, r: &log::Record<'_>) {
        LOGGED
            .lock()
            .unwrap()
            .push(format!("{} {}", r.level(), r.args()));
    }
    fn flush(&self) {}
}

#[test]
fn an_unreadable_bus_file_is_logged_and_replaced() {
    log::set_logger(&Collect).unwrap();
    log::set_max_level(log::LevelFilter::Info);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bus.json");
    std::fs::write(&path, "{ not json").unwrap();
    let rt = Runtime::builder()
        .workers(1)
        .emulated_gpus(1)
        .perf_models(dir.path().to_path_buf())
        .build()
        .unwrap();
    drop(rt);
    let logged = LOGGED.lock().unwrap().join("\n");
    assert!(
        logged.contains("WARN") && logged.contains("bus.json") && logged.contains("not valid"),
        "{logged}"
    );
    // Measured again and saved over it.
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        serde_json::from_str::<serde_json::Value>(&text).is_ok(),
        "{text}"
    );
}
