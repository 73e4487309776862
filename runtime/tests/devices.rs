//! Emulated GPUs: GPU workers with memory nodes of their own, copies that are separate
//! allocations, transfers counted, and the errors of data that cannot be copied.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use taskwatt_runtime::{Codelet, Runtime, RuntimeError, Task, MAX_DEVICES};
use taskwatt_traces::Arch;

#[test]
fn gpu_only_tasks_run_on_gpu_workers_on_their_own_copies() {
    for policy in ["eager", "ws", "lws", "prio"] {
        let rt = Runtime::builder()
            .workers(2)
            .emulated_gpus(2)
            .policy(policy)
            .build()
            .unwrap();
        let archs: Vec<Arch> = rt.workers().iter().map(|w| w.arch).collect();
        assert_eq!(archs, [Arch::Cpu, Arch::Cpu, Arch::Gpu, Arch::Gpu]);
        assert_eq!(rt.workers()[3].device, Some(1));
        let on_gpu = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::<(usize, Arch)>::new()));
        let workers: Vec<Arch> = archs.clone();
        let (g, s) = (on_gpu.clone(), seen.clone());
        let add = Codelet::new("add").gpu(move |ctx| {
            let v = ctx.rw::<Vec<u64>>(0);
            v.iter_mut().for_each(|x| *x += 1);
            g.fetch_add(1, Ordering::Relaxed);
            s.lock()
                .unwrap()
                .push((v.as_ptr() as usize, workers[ctx.worker() as usize]));
        });
        let double = Codelet::new("double").cpu(|ctx| {
            ctx.rw::<Vec<u64>>(0).iter_mut().for_each(|x| *x *= 2);
        });
        let v = rt.register_replicated_bytes(vec![1u64; 256], 256 * 8);
        let mut expected = vec![1u64; 256];
        for i in 0..20 {
            if i % 2 == 0 {
                rt.submit(Task::new(&add).rw(&v)).unwrap();
                expected.iter_mut().for_each(|x| *x += 1);
            } else {
                rt.submit(Task::new(&double).rw(&v)).unwrap();
                expected.iter_mut().for_each(|x| *x *= 2);
            }
        }
        rt.wait_all().unwrap();
        let host_ptr = {
            let g = rt.acquire(&v).unwrap();
            assert_eq!(*g, expected, "{policy}");
            g.as_ptr() as usize
        };
        assert_eq!(on_gpu.load(Ordering::Relaxed), 10);
        for (ptr, arch) in seen.lock().unwrap().iter() {
            assert_eq!(
                *arch,
                Arch::Gpu,
                "{policy}: a GPU-only task ran on a CPU worker"
            );
            assert_ne!(
                *ptr, host_ptr,
                "{policy}: a device copy is main memory's allocation"
            );
        }
        let stats = rt.stats();
        // At least the first copy to a device and the copy back for the acquisition.
        assert!(stats.transfers >= 2, "{policy}: {stats:?}");
        assert_eq!(stats.transferred_bytes, stats.transfers * 256 * 8);
        assert_eq!(rt.unregister(v).unwrap(), expected);
    }
}

#[test]
fn a_codelet_runs_only_on_the_architectures_it_implements_emulated_gpus_included() {
    for policy in ["eager", "ws", "lws", "prio", "dmda", "dmdas", "dmdae"] {
        let rt = Runtime::builder()
            .workers(1)
            .emulated_gpus(2)
            .policy(policy)
            .build()
            .unwrap();
        let archs: Vec<Arch> = rt.workers().iter().map(|w| w.arch).collect();
        let seen = Arc::new(Mutex::new(Vec::<(&str, Arch)>::new()));
        let record = |name: &'static str| {
            let (s, archs) = (seen.clone(), archs.clone());
            move |ctx: &taskwatt_runtime::TaskCtx<'_>| {
                ctx.rw::<Vec<f64>>(0).iter_mut().for_each(|x| *x += 1.0);
                s.lock().unwrap().push((name, archs[ctx.worker() as usize]));
            }
        };
        // Data every device can hold, so that only the codelet decides.
        let data: Vec<_> = (0..8)
            .map(|_| rt.register_replicated(vec![0.0f64; 1024]))
            .collect();
        let cpu_only = Codelet::new("cpu_only").cpu(record("cpu_only"));
        let both = Codelet::new("both").cpu(record("both")).gpu(record("both"));
        for i in 0..400 {
            let cl = if i % 2 == 0 { &cpu_only } else { &both };
            rt.submit(Task::new(cl).rw(&data[i % 8])).unwrap();
        }
        rt.wait_all().unwrap();
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 400);
        let cpu_only_on_gpu = seen
            .iter()
            .filter(|(n, a)| *n == "cpu_only" && *a == Arch::Gpu)
            .count();
        assert_eq!(
            cpu_only_on_gpu, 0,
            "{policy}: a codelet with a CPU implementation only ran on an emulated GPU"
        );
        for h in data {
            assert_eq!(rt.unregister(h).unwrap(), vec![50.0; 1024]);
        }
    }
}

#[test]
fn tasks_on_data_that_cannot_be_copied_stay_on_cpus_or_are_refused() {
    let rt = Runtime::builder()
        .workers(1)
        .emulated_gpus(1)
        .build()
        .unwrap();
    let plain = rt.register(5u32);
    let cpu_seen = Arc::new(Mutex::new(Vec::new()));
    let c = cpu_seen.clone();
    let read = Codelet::new("read").cpu(move |ctx| {
        c.lock().unwrap().push(ctx.worker());
        assert_eq!(*ctx.r::<u32>(0), 5);
    });
    for _ in 0..50 {
        rt.submit(Task::new(&read).r(&plain)).unwrap();
    }
    rt.wait_all().unwrap();
    assert!(cpu_seen.lock().unwrap().iter().all(|&w| w == 0));
    let gpu_only = Codelet::new("gpu_only").gpu(|_| {});
    match rt.submit(Task::new(&gpu_only).r(&plain)) {
        Err(e @ RuntimeError::NotReplicated { .. }) => {
            assert!(e.to_string().contains("register_replicated"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    assert!(rt.stats().transfers == 0);
}

#[test]
fn too_many_devices_are_refused() {
    let e = Runtime::builder()
        .workers(1)
        .emulated_gpus(MAX_DEVICES + 1)
        .build()
        .err()
        .expect("refused");
    assert!(e.to_string().contains("emulated GPUs"), "{e}");
}

/// What a task would need copied to node 0 and to node 1: (copies, bytes) each.
type Needs = ((u32, u64), (u32, u64));

/// Records, at each push, what the task would need copied to node 0 and to node 1.
struct Recorder {
    inner: taskwatt_runtime::scheduler::Eager<taskwatt_runtime::ReadyTask>,
    log: Arc<Mutex<Vec<Needs>>>,
}

impl taskwatt_runtime::scheduler::Policy<taskwatt_runtime::ReadyTask> for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }
    fn local(&self, worker: usize) -> taskwatt_runtime::scheduler::Local {
        self.inner.local(worker)
    }
    fn push(
        &self,
        task: taskwatt_runtime::ReadyTask,
        origin: taskwatt_runtime::scheduler::Origin<'_>,
    ) {
        use taskwatt_runtime::scheduler::SchedTask;
        self.log
            .lock()
            .unwrap()
            .push((task.transfer_bytes(0), task.transfer_bytes(1)));
        self.inner.push(task, origin)
    }
    fn pop(
        &self,
        worker: usize,
        local: &mut taskwatt_runtime::scheduler::Local,
    ) -> Option<taskwatt_runtime::ReadyTask> {
        self.inner.pop(worker, local)
    }
}

#[test]
fn a_ready_task_says_what_it_would_need_copied_to_each_node() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let l = log.clone();
    let rt = Runtime::builder()
        .workers(1)
        .emulated_gpus(1)
        .custom_policy(move |w| {
            Box::new(Recorder {
                inner: taskwatt_runtime::scheduler::Eager::new(w),
                log: l,
            })
        })
        .build()
        .unwrap();
    let on_gpu = Codelet::new("on_gpu").gpu(|ctx| ctx.rw::<Vec<u8>>(0)[0] += 1);
    let on_cpu = Codelet::new("on_cpu").cpu(|ctx| ctx.rw::<Vec<u8>>(0)[0] += 1);
    let reads = Codelet::new("reads").gpu(|ctx| assert!(ctx.r::<Vec<u8>>(0)[0] > 0));
    let (a, b) = (
        rt.register_device(vec![0u8; 1000]),
        rt.register_device(vec![0u8; 24]),
    );
    // In main memory: the GPU would need it, the CPU nothing.
    rt.submit(Task::new(&on_gpu).rw(&a)).unwrap();
    rt.wait_all().unwrap();
    // `a` owned by the GPU: the CPU would need it back, the GPU only `b`.
    rt.submit(Task::new(&reads).r(&a).r(&b)).unwrap();
    rt.wait_all().unwrap();
    assert_eq!(rt.acquire(&a).unwrap()[0], 1);
    // Both nodes share `a` now: a write needs no copy on either.
    rt.submit(Task::new(&on_gpu).rw(&a)).unwrap();
    rt.wait_all().unwrap();
    // The GPU owns it: the CPU would need it back.
    rt.submit(Task::new(&on_cpu).rw(&a)).unwrap();
    rt.wait_all().unwrap();
    let got = log.lock().unwrap().clone();
    assert_eq!(
        got,
        [
            ((0, 0), (1, 1000)),
            ((1, 1000), (1, 24)),
            ((0, 0), (0, 0)),
            ((1, 1000), (0, 0)),
        ]
    );
}

#[test]
fn the_bus_is_measured_once_and_kept_beside_the_models() {
    let dir = tempfile::tempdir().unwrap();
    let descs = Arc::new(Mutex::new(Vec::new()));
    let build = || {
        let d = descs.clone();
        Runtime::builder()
            .workers(1)
            .emulated_gpus(1)
            .perf_models(dir.path().to_path_buf())
            .custom_policy(move |w| {
                *d.lock().unwrap() = w.to_vec();
                Box::new(taskwatt_runtime::scheduler::Eager::new(w))
            })
            .build()
            .unwrap()
    };
    drop(build());
    let path = dir.path().join("bus.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let (key, m) = v.as_object().unwrap().iter().next().unwrap();
    assert!(key.starts_with("emulated GPU"), "{key}");
    assert!(
        m["to_device_bytes_per_s"].as_u64().unwrap() > 1_000_000,
        "{m}"
    );
    {
        let d = descs.lock().unwrap();
        assert_eq!((d[0].memory_node, d[1].memory_node), (0, 1));
        assert!(d[0].bus.is_some() && d[1].bus.is_some());
    }
    // Kept: a second runtime reads the file (here, edited) instead of measuring again.
    let edited = serde_json::json!({ key.clone(): {
        "to_device_bytes_per_s": 7, "to_device_latency_ns": 11,
        "from_device_bytes_per_s": 13, "from_device_latency_ns": 17 } });
    std::fs::write(&path, edited.to_string()).unwrap();
    drop(build());
    let d = descs.lock().unwrap();
    let bus = |i: usize| d[i].bus.map(|b| (b.bytes_per_s, b.latency_ns));
    assert_eq!((bus(0), bus(1)), (Some((13, 17)), Some((7, 11))));
}

#[test]
fn every_task_s_accesses_are_in_the_trace_in_declaration_order() {
    use taskwatt_traces::{AccessMode, TraceSink};
    let cl = Codelet::new("k").cpu(|ctx| {
        let _ = ctx.r::<Vec<u8>>(0);
    });
    // Off by default.
    let (sink, memory) = TraceSink::memory();
    let rt = Runtime::builder().workers(1).trace(sink).build().unwrap();
    let a = rt.register_device(vec![0u8; 10]);
    rt.submit(Task::new(&cl).r(&a)).unwrap();
    rt.wait_all().unwrap();
    drop((a, rt));
    assert!(memory.into_trace().unwrap().accesses.is_empty());

    let (sink, memory) = TraceSink::memory();
    let rt = Runtime::builder()
        .workers(2)
        .emulated_gpus(1)
        .trace(sink)
        .trace_accesses(true)
        .build()
        .unwrap();
    let (a, b) = (rt.register_device(vec![0u8; 10]), rt.register(5u64));
    let t1 = rt.submit(Task::new(&cl).r(&a).rw(&b)).unwrap().id();
    let t2 = rt.submit(Task::new(&cl).r(&a).w(&b)).unwrap().id();
    rt.wait_all().unwrap();
    let (ida, idb) = (a.id(), b.id());
    drop((a, b));
    drop(rt);
    let trace = memory.into_trace().unwrap();
    let got: Vec<_> = trace
        .accesses
        .iter()
        .map(|x| (x.task, x.handle, x.mode, x.bytes))
        .collect();
    assert_eq!(
        got,
        [
            (t1, ida, AccessMode::R, 10),
            (t1, idb, AccessMode::RW, 8),
            (t2, ida, AccessMode::R, 10),
            (t2, idb, AccessMode::W, 8),
        ]
    );
}

/// Issue 29: a replicated value whose `Clone` panics while it is copied to an emulated
/// GPU killed that worker, and `wait_all` never returned. The task fails instead, with the
/// panic's message, and the runtime goes on.
#[test]
fn a_clone_that_panics_during_a_copy_fails_the_task_not_the_worker() {
    #[derive(Debug)]
    struct Fragile(u32);
    impl Clone for Fragile {
        fn clone(&self) -> Self {
            if self.0 == 13 {
                panic!("no copy of 13");
            }
            Fragile(self.0)
        }
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = Runtime::builder()
            .workers(1)
            .emulated_gpus(1)
            .build()
            .unwrap();
        // GPU only: it runs on the emulated GPU, its data copied there.
        let on_gpu = Codelet::new("on_gpu").gpu(|ctx| {
            let _ = ctx.r::<Fragile>(0).0;
        });
        let bad = rt.register_replicated_bytes(Fragile(13), 8);
        rt.submit(Task::new(&on_gpu).r(&bad)).unwrap();
        let first = rt.wait_all().map_err(|e| e.to_string());
        // The worker is alive: a task on data that copies runs.
        let good = rt.register_replicated_bytes(Fragile(1), 8);
        rt.submit(Task::new(&on_gpu).r(&good)).unwrap();
        let second = rt.wait_all().map_err(|e| e.to_string());
        tx.send((first, second)).unwrap();
    });
    let (first, second) = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("wait_all returned");
    let e = first.unwrap_err();
    assert!(e.contains("no copy of 13") && e.contains("Clone"), "{e}");
    second.unwrap();
}

/// Misuse of the device API (issue 29's campaign): a GPU-only codelet without GPU workers,
/// a GPU implementation that panics on an emulated GPU, and data whose copy to the GPU
/// panics: typed errors or failed tasks, and the workers go on.
#[test]
fn device_misuse_ends_in_errors_and_the_workers_go_on() {
    // No GPU worker: a GPU-only task cannot run anywhere.
    let rt = Runtime::builder().workers(1).pin(false).build().unwrap();
    let gpu_only = Codelet::new("gpu_only").gpu(|_| {});
    let x = rt.register(vec![0u32; 8]);
    let e = rt.submit(Task::new(&gpu_only).rw(&x));
    let msg = match e {
        Err(e) => e.to_string(),
        Ok(_) => rt
            .wait_all()
            .expect_err("a GPU-only task on a CPU-only runtime ran")
            .to_string(),
    };
    assert!(msg.contains("gpu_only"), "{msg}");
    drop(rt);

    // A GPU implementation that panics on an emulated GPU fails its task only.
    let rt = Runtime::builder()
        .workers(1)
        .emulated_gpus(1)
        .pin(false)
        .build()
        .unwrap();
    let boom = Codelet::new("boom_gpu").gpu(|_| panic!("a kernel panics"));
    let inc = Codelet::new("inc")
        .cpu(|ctx| ctx.rw::<Vec<u32>>(0).iter_mut().for_each(|v| *v += 1))
        .gpu(|ctx| ctx.rw::<Vec<u32>>(0).iter_mut().for_each(|v| *v += 1));
    let y = rt.register_replicated(vec![0u32; 8]);
    rt.submit(Task::new(&boom).rw(&y)).unwrap();
    let e = rt.wait_all().unwrap_err().to_string();
    assert!(e.contains("boom_gpu"), "{e}");
    // The GPU worker is alive: GPU-capable work still completes, on the data as it was.
    let z = rt.register_replicated(vec![1u32; 8]);
    for _ in 0..10 {
        rt.submit(Task::new(&inc).rw(&z)).unwrap();
    }
    rt.wait_all().unwrap();
    assert_eq!(rt.unregister(z).unwrap(), vec![11u32; 8]);
}

#[test]
fn the_trace_says_what_drives_the_gpu_workers() {
    // A what-if of the trace on another machine must know that emulated GPUs were threads
    // on the CPUs' cores; a library run's trace did not say so (only the CLI's did).
    let (sink, trace) = taskwatt_traces::TraceSink::memory();
    let rt = Runtime::builder()
        .workers(1)
        .emulated_gpus(1)
        .trace(sink)
        .build()
        .unwrap();
    rt.shutdown().unwrap();
    let params = trace
        .chunks()
        .into_iter()
        .find_map(|c| match c {
            taskwatt_traces::Chunk::Meta(m) => Some(m.params),
            _ => None,
        })
        .unwrap();
    assert_eq!(params.get("gpus").map(String::as_str), Some("1 emulated"));
}
