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
