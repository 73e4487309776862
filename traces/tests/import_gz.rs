//! Imports read gzipped inputs as they read plain ones, and carry the meter's update
//! interval and resolution when given.

use std::io::Write;

use taskwatt_traces::{import_csv, import_starpu, ImportOptions, TimeUnit};

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

#[test]
fn gzipped_csv_and_tasks_rec_import_like_plain_ones() {
    let dir = tempfile::tempdir().unwrap();
    let tasks = "type,worker,start,end\ngemm,0,0.001,0.002\npotrf,1,0.0015,0.003\n";
    let samples =
        "time,domain,energy_j\n0,package-0,0\n0.002,package-0,0.05\n0.004,package-0,0.1\n";
    let (t, tg, s, sg) = (
        dir.path().join("t.csv"),
        dir.path().join("t.csv.gz"),
        dir.path().join("s.csv"),
        dir.path().join("s.csv.gz"),
    );
    std::fs::write(&t, tasks).unwrap();
    std::fs::write(&tg, gzip(tasks.as_bytes())).unwrap();
    std::fs::write(&s, samples).unwrap();
    std::fs::write(&sg, gzip(samples.as_bytes())).unwrap();
    let plain = import_csv(&t, &ImportOptions::new(TimeUnit::S).samples(&s)).unwrap();
    let opts = ImportOptions::new(TimeUnit::S)
        .samples(&sg)
        .update_interval_ns(1_000_000)
        .resolution_j(6.1e-5);
    let gz = import_csv(&tg, &opts).unwrap();
    let task_of = |tr: &taskwatt_traces::Trace| -> Vec<(u64, u64)> {
        tr.tasks().map(|(t, _)| (t.start.0, t.end.0)).collect()
    };
    assert_eq!(task_of(&plain), task_of(&gz));
    assert_eq!(plain.samples.len(), gz.samples.len());
    assert_eq!(gz.domains[0].update_interval_ns, Some(1_000_000));
    assert_eq!(gz.domains[0].resolution_j, 6.1e-5);
    assert_eq!(plain.domains[0].update_interval_ns, None);

    let rec = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/data/starpu-1.4.12-cholesky-lws/tasks.rec");
    if let Ok(bytes) = std::fs::read(&rec) {
        let recgz = dir.path().join("tasks.rec.gz");
        std::fs::write(&recgz, gzip(&bytes)).unwrap();
        let a = import_starpu(&rec, &ImportOptions::new(TimeUnit::Ms)).unwrap();
        let b = import_starpu(&recgz, &ImportOptions::new(TimeUnit::Ms)).unwrap();
        assert_eq!(a.trace.task_count(), 816);
        assert_eq!(task_of(&a.trace), task_of(&b.trace));
    }
}

#[test]
fn unsorted_samples_are_sorted_and_a_wrapping_counter_is_unwrapped() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.csv");
    std::fs::write(&t, "type,worker,start,end\ngemm,0,0.001,0.004\n").unwrap();
    // Rows out of order, and a raw counter that wraps at 10 J between 0.002 s and 0.003 s.
    let s = dir.path().join("s.csv");
    std::fs::write(
        &s,
        "time,domain,energy_j\n0.003,package-0,1.5\n0,package-0,8\n0.004,package-0,2.5\n0.002,package-0,9.5\n",
    )
    .unwrap();
    // Sorted, but without the wrap range the step back is refused with what to do.
    let e = import_csv(&t, &ImportOptions::new(TimeUnit::S).samples(&s)).unwrap_err();
    assert!(e.to_string().contains("--counter-wrap"), "{e}");
    let tr = import_csv(
        &t,
        &ImportOptions::new(TimeUnit::S)
            .samples(&s)
            .counter_wrap_j(10.0),
    )
    .unwrap();
    let got: Vec<(u64, f64)> = tr.samples.iter().map(|x| (x.t.0, x.energy_j)).collect();
    assert_eq!(
        got,
        [
            (0, 8.0),
            (2_000_000, 9.5),
            (3_000_000, 11.5),
            (4_000_000, 12.5)
        ]
    );
    assert_eq!(tr.domains[0].wrap_range_j, Some(10.0));
}
