//! A user's own application, written as a new user would: plain `Vec` data and a type of
//! their own, one codelet with a GPU version and one without, on 2 emulated GPUs. The
//! trace must carry the data's real sizes in every copy and access, a CPU-only codelet
//! must never run on a GPU worker, and the names the user gave are what exports show.

use taskwatt::traces::{Arch, TraceSink};
use taskwatt::{Codelet, DataSize, Runtime, Task, TaskCtx};

/// A user type: a row-major grid with its width.
#[derive(Clone)]
struct Grid {
    cells: Vec<f64>,
    width: usize,
}

impl DataSize for Grid {
    fn data_bytes(&self) -> u64 {
        self.cells.data_bytes() + self.width.data_bytes()
    }
}

#[test]
fn copies_and_accesses_carry_the_data_s_real_sizes_and_placement_follows_the_codelet() {
    let (sink, memory) = TraceSink::memory();
    let rt = Runtime::builder()
        .workers(1)
        .emulated_gpus(2)
        .policy("eager")
        .trace(sink)
        .trace_accesses(true)
        .build()
        .unwrap();
    let lens = [1000usize, 4096, 10_000, 3];
    let vecs: Vec<_> = lens
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let h = rt.register_replicated(vec![1.0f64; n]);
            rt.set_name(&h, format!("v{i}"));
            h
        })
        .collect();
    let grid = rt.register_replicated(Grid {
        cells: vec![0.0; 64 * 64],
        width: 64,
    });
    rt.set_name(&grid, "grid");

    let scale = |ctx: &TaskCtx<'_>| ctx.rw::<Vec<f64>>(0).iter_mut().for_each(|x| *x *= 1.5);
    let on_both = Codelet::new("scale").cpu(scale).gpu(scale);
    let cpu_only = Codelet::new("smooth").cpu(|ctx| {
        let g = ctx.rw::<Grid>(1);
        let s: f64 = ctx.r::<Vec<f64>>(0).iter().sum();
        g.cells.iter_mut().for_each(|c| *c += s / g.width as f64);
    });
    // One GPU-only pass over each vector, so that copies happen whatever the timing.
    let gpu_only = Codelet::new("gpu_scale").gpu(scale);
    for v in &vecs {
        rt.submit(Task::new(&gpu_only).rw(v)).unwrap();
    }
    for round in 0..30 {
        for v in &vecs {
            rt.submit(Task::new(&on_both).rw(v)).unwrap();
        }
        if round % 3 == 0 {
            rt.submit(Task::new(&cpu_only).r(&vecs[round % 4]).rw(&grid))
                .unwrap();
        }
    }
    rt.wait_all().unwrap();
    let stats = rt.stats();
    drop((vecs, grid));
    drop(rt);
    let trace = memory.into_trace().unwrap();

    let size_of_handle = |id: u64| {
        let name = trace.handle_name(id).expect("every handle is named");
        match name.strip_prefix('v') {
            Some(i) => 8 * lens[i.parse::<usize>().unwrap()] as u64,
            None => 64 * 64 * 8 + 8,
        }
    };
    assert!(trace.transfers.len() >= 4, "each vector went to a GPU once");
    assert_eq!(trace.transfers.len() as u64, stats.transfers);
    for t in &trace.transfers {
        assert_eq!(t.bytes, size_of_handle(t.handle), "{t:?}");
    }
    let copied: u64 = trace.transfers.iter().map(|t| t.bytes).sum();
    assert_eq!(copied, stats.transferred_bytes);
    assert!(!trace.accesses.is_empty());
    for a in &trace.accesses {
        assert_eq!(a.bytes, size_of_handle(a.handle), "{a:?}");
    }
    // Footprints: the sum of the task's handles' sizes.
    let smooth = trace
        .codelets
        .iter()
        .find(|c| c.name == "smooth")
        .unwrap()
        .id;
    let mut smooth_tasks = 0;
    for chunk in &trace.tasks {
        for (r, _) in chunk.iter() {
            if r.codelet == smooth {
                smooth_tasks += 1;
                assert_eq!(r.arch, Arch::Cpu, "a CPU-only codelet ran on a GPU worker");
            }
        }
    }
    assert_eq!(smooth_tasks, 10);

    // The names are what the exports show.
    let mut json = Vec::new();
    taskwatt::traces::write_chrome(&trace, &mut json).unwrap();
    let json = String::from_utf8(json).unwrap();
    assert!(
        json.contains("\"copy v"),
        "copies named by the user's names"
    );
    assert!(!json.contains("\"copy h"), "no copy shown by id");
}
