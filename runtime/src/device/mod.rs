//! Device backends: what a GPU worker's memory node holds, how data gets there and back,
//! and what the worker does around each task.
//!
//! Two backends implement [`Backend`], one file each:
//! - [`emulated`]: always built. A device whose memory node holds separate allocations of
//!   the value (clones), so that every transfer really copies and a coherence bug really
//!   gives a wrong result. Its worker runs the codelet's GPU implementation (never its
//!   CPU one) on its own copies. It exists to test everything above a driver on machines
//!   without a GPU.
//! - `cuda` (cargo feature `cuda`): an NVIDIA GPU through the CUDA driver API (cudarc,
//!   loaded at run time). A replica is a device allocation holding the value's bytes
//!   ([`DeviceData`]); transfers go through a pinned staging buffer; each GPU worker has
//!   its own stream and cuBLAS handle, and a task ends when its stream is synchronised.
//!
//! One runtime uses one backend for all its devices.

use std::any::Any;

use crate::handle::Copier;
use crate::inline::Value;

pub(crate) mod emulated;
pub(crate) mod memory;

#[cfg(feature = "cuda")]
pub(crate) mod cuda;

/// A copy of a value on a memory node other than 0.
pub(crate) type Replica = Box<dyn Any + Send + Sync>;

/// A GPU worker's own state (its stream, its BLAS handle), made by [`Backend::worker`].
pub(crate) type WorkerState = Box<dyn Any + Send>;

/// The kind of device that GPU workers drive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum GpuBackend {
    /// A device emulated on the CPU (see the module docs of `device`): always available,
    /// for tests and for machines without a GPU. Its timings are CPU timings.
    #[default]
    Emulated,
    /// An NVIDIA GPU through CUDA (cargo feature `cuda`; the driver and cuBLAS are loaded
    /// at run time).
    Cuda,
}

impl GpuBackend {
    /// Every backend, in the order the CLI lists them.
    pub const ALL: [GpuBackend; 2] = [GpuBackend::Emulated, GpuBackend::Cuda];

    /// The name used by the CLI and in outputs.
    pub fn name(self) -> &'static str {
        match self {
            GpuBackend::Emulated => "emulated",
            GpuBackend::Cuda => "cuda",
        }
    }

    /// Whether this build can drive the backend at all (CUDA needs the cargo feature).
    pub fn compiled(self) -> bool {
        match self {
            GpuBackend::Emulated => true,
            GpuBackend::Cuda => cfg!(feature = "cuda"),
        }
    }
}

impl std::fmt::Display for GpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for GpuBackend {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl std::str::FromStr for GpuBackend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        GpuBackend::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| format!("unknown GPU backend `{s}`: use `emulated` or `cuda`"))
    }
}

/// What the runtime asks of a device backend. Copies are made under the handle's
/// transfer lock by the thread that needs the data (a GPU worker before a task, a CPU
/// worker or the application's thread when the data must come back to main memory).
pub(crate) trait Backend: Send + Sync {
    /// Whether a value copied by `copier` can live on this backend's nodes.
    fn holds(&self, copier: &Copier) -> bool;

    /// Makes `dst` (this device's replica, reused if it exists) a copy of `home`, the
    /// value in main memory.
    fn copy_in(
        &self,
        copier: &Copier,
        home: &Value,
        dst: &mut Option<Replica>,
    ) -> Result<(), String>;

    /// Makes `dst` a copy of `src`, another device's replica (held by `from`).
    fn copy_from(
        &self,
        copier: &Copier,
        from: &dyn Backend,
        src: &(dyn Any + Send + Sync),
        dst: &mut Option<Replica>,
    ) -> Result<(), String>;

    /// Copies `src`, this device's replica, into `home`, the value in main memory.
    fn copy_out(
        &self,
        copier: &Copier,
        src: &(dyn Any + Send + Sync),
        home: &mut Value,
    ) -> Result<(), String>;

    /// The state of one GPU worker of this device, made when the runtime is built.
    fn worker(&self) -> Result<Option<WorkerState>, String>;

    /// Called on the worker's thread before its first task.
    fn enter_thread(&self) {}

    /// Called after each task's implementation returned: waits for the work it queued on
    /// the device, so that the task's end bracket's it.
    fn finish_task(&self, _state: Option<&WorkerState>) -> Result<(), String> {
        Ok(())
    }

    /// The bytes of copies this device should hold at most, when nobody set a limit
    /// (see `memory.rs`): none for an emulated device.
    fn memory_limit(&self) -> Option<u64> {
        None
    }

    /// One line naming the device, for logs.
    fn describe(&self) -> String;

    /// As `Any`, to recognise a peer of the same backend.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    fn as_any(&self) -> &dyn Any;
}

/// What eviction of one copy did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Evicted {
    /// Dropped, after writing it back to main memory (`true`) or not.
    Dropped(bool),
    /// Left: its handle is being copied by another thread now.
    Busy,
    /// There was no copy (one that could not be made, say): nothing to drop.
    Absent,
}

/// A value that devices with memory of their own can hold: its bytes are its whole
/// state, and copying them copies it.
///
/// # Safety
/// `device_bytes` and `device_bytes_mut` return the same memory (the same length, for a
/// value that is not resized between the calls), and any bytes written there by a device
/// (a copy of another value's bytes, or a kernel's result) leave a valid value.
pub unsafe trait DeviceData: Clone + Send + Sync + 'static {
    /// The value's bytes.
    fn device_bytes(&self) -> &[u8];
    /// The value's bytes, to be overwritten.
    fn device_bytes_mut(&mut self) -> &mut [u8];
    /// How many bytes the value has once its storage exists: its bytes' length, unless
    /// the value can be without storage (see [`DeviceData::release_storage`]).
    fn device_len(&self) -> usize {
        self.device_bytes().len()
    }
    /// Drops the value's storage, keeping its shape, where the type can be without it: a
    /// distributed run's cached copy of another rank's datum, freed when the cache drops
    /// it. [`DeviceData::device_bytes_mut`] then makes it again (zeros) for the next copy
    /// into it, and [`DeviceData::device_bytes`] is empty meanwhile. Types that cannot
    /// keep their storage (the default).
    fn release_storage(&mut self) {}
}

/// A plain element type: every bit pattern is a value, and it holds no pointer.
///
/// # Safety
/// Implement only for types with no padding, for which every bit pattern is valid.
pub unsafe trait Element: Copy + Send + Sync + 'static {}

macro_rules! elements {
    ($($t:ty),*) => { $(
        // SAFETY: primitive numbers: no padding, every bit pattern valid.
        unsafe impl Element for $t {}
    )* };
}
elements!(f32, f64, u8, u16, u32, u64, i8, i16, i32, i64);

/// The bytes of a slice of plain elements.
pub fn bytes_of<E: Element>(s: &[E]) -> &[u8] {
    // SAFETY: `E: Element` has no padding; the length in bytes covers the slice exactly.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}

/// The bytes of a slice of plain elements, to be overwritten.
pub fn bytes_of_mut<E: Element>(s: &mut [E]) -> &mut [u8] {
    let len = std::mem::size_of_val(s);
    // SAFETY: as `bytes_of`; every bit pattern is a valid `E`, so any write leaves one.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<u8>(), len) }
}

// SAFETY: the bytes of the vector's elements; `Element` makes any bytes valid.
unsafe impl<E: Element> DeviceData for Vec<E> {
    fn device_bytes(&self) -> &[u8] {
        bytes_of(self)
    }
    fn device_bytes_mut(&mut self) -> &mut [u8] {
        bytes_of_mut(self)
    }
}

/// A replica in a device's own memory: its address there and its length in bytes.
pub(crate) struct DeviceBuffer {
    pub(crate) ptr: u64,
    pub(crate) len: usize,
    /// What frees it when dropped (held for its drop only).
    #[allow(dead_code)]
    pub(crate) owner: Box<dyn Any + Send + Sync>,
}

/// A device UUID as NVML writes it: `GPU-` and the 16 bytes in groups of 4, 2, 2, 2 and 6,
/// lower-case hex.
pub fn format_uuid(b: [u8; 16]) -> String {
    let hex =
        |r: std::ops::Range<usize>| b[r].iter().map(|x| format!("{x:02x}")).collect::<String>();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        hex(0..4),
        hex(4..6),
        hex(6..8),
        hex(8..10),
        hex(10..16)
    )
}

/// The UUIDs of the CUDA devices, in CUDA's order (see [`format_uuid`]); an error in a
/// build without the `cuda` feature, or where the driver cannot be used.
pub fn cuda_device_uuids() -> Result<Vec<String>, String> {
    #[cfg(feature = "cuda")]
    {
        cuda::device_uuids()
    }
    #[cfg(not(feature = "cuda"))]
    {
        Err("this build has no CUDA backend (rebuild with `--features cuda`)".into())
    }
}

/// The backends of a runtime's devices, by memory node (node `1 + i` is device `i`).
pub(crate) fn open(
    kind: GpuBackend,
    devices: usize,
) -> Result<Vec<std::sync::Arc<dyn Backend>>, String> {
    let mut v: Vec<std::sync::Arc<dyn Backend>> = Vec::with_capacity(devices);
    for i in 0..devices {
        match kind {
            GpuBackend::Emulated => v.push(std::sync::Arc::new(emulated::Emulated)),
            #[cfg(feature = "cuda")]
            GpuBackend::Cuda => v.push(std::sync::Arc::new(cuda::CudaBackend::open(i)?)),
            #[cfg(not(feature = "cuda"))]
            GpuBackend::Cuda => {
                let _ = i;
                return Err(
                    "this build has no CUDA backend: rebuild with `--features cuda` \
                     (cargo build --release --features cuda), or use the emulated backend"
                        .into(),
                );
            }
        }
    }
    Ok(v)
}

/// A device's link to main memory, both ways, as measured by [`measure`].
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct BusMeasure {
    /// Main memory to the device: bytes per second, and ns per copy.
    pub(crate) to_device_bytes_per_s: u64,
    pub(crate) to_device_latency_ns: u64,
    /// The device to main memory.
    pub(crate) from_device_bytes_per_s: u64,
    pub(crate) from_device_latency_ns: u64,
}

impl BusMeasure {
    pub(crate) fn towards_device(self) -> taskwatt_scheduler::Bus {
        taskwatt_scheduler::Bus {
            bytes_per_s: self.to_device_bytes_per_s,
            latency_ns: self.to_device_latency_ns,
        }
    }
    pub(crate) fn towards_host(self) -> taskwatt_scheduler::Bus {
        taskwatt_scheduler::Bus {
            bytes_per_s: self.from_device_bytes_per_s,
            latency_ns: self.from_device_latency_ns,
        }
    }
}

/// Times the backend's own copies, as the runtime makes them: 64 MiB each way (the
/// median of three, after one that allocates and pins), and 64-byte copies for the
/// latency (the median of 21).
pub(crate) fn measure(b: &dyn Backend) -> Result<BusMeasure, String> {
    use std::time::Instant;
    let copier = crate::handle::device_copier::<Vec<u8>>();
    let median = |mut v: Vec<u64>| {
        v.sort_unstable();
        v[v.len() / 2].max(1)
    };
    let time = |f: &mut dyn FnMut() -> Result<(), String>| -> Result<u64, String> {
        let t = Instant::now();
        f()?;
        Ok(t.elapsed().as_nanos() as u64)
    };
    let run = |len: usize, reps: usize| -> Result<(u64, u64), String> {
        let mut home = Value::new(vec![1u8; len]);
        let mut dst: Option<Replica> = None;
        b.copy_in(copier, &home, &mut dst)?;
        let (mut tin, mut tout) = (Vec::new(), Vec::new());
        for _ in 0..reps {
            tin.push(time(&mut || b.copy_in(copier, &home, &mut dst))?);
            let src = dst.as_deref().expect("copied in above");
            tout.push(time(&mut || b.copy_out(copier, src, &mut home))?);
        }
        // The replica (and any pin of `home`) before `home`.
        drop(dst);
        Ok((median(tin), median(tout)))
    };
    let big = 64usize << 20;
    let (tin, tout) = run(big, 3)?;
    let (lin, lout) = run(64, 21)?;
    let bw = |t: u64, lat: u64| (big as f64 * 1e9 / t.saturating_sub(lat).max(1) as f64) as u64;
    Ok(BusMeasure {
        to_device_bytes_per_s: bw(tin, lin),
        to_device_latency_ns: lin,
        from_device_bytes_per_s: bw(tout, lout),
        from_device_latency_ns: lout,
    })
}

/// The bus of `b`, from `dir/bus.json` (keyed by the device's description), measured and
/// saved there if it is not yet; a failure to read or write the file is logged, and the
/// measure used anyway.
pub(crate) fn bus_of(b: &dyn Backend, dir: &std::path::Path) -> Result<BusMeasure, String> {
    use std::collections::BTreeMap;
    let path = dir.join("bus.json");
    let key = b.describe();
    // A missing file is the first run; one that cannot be read or parsed is logged (and
    // re-measured, then replaced), as the doc says.
    let read = || -> BTreeMap<String, BusMeasure> {
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return BTreeMap::new(),
            Err(e) => {
                log::warn!("could not read the bus measures in {}: {e}", path.display());
                return BTreeMap::new();
            }
        };
        serde_json::from_str(&text).unwrap_or_else(|e| {
            log::warn!(
                "the bus measures in {} are not valid ({e}): measuring again",
                path.display()
            );
            BTreeMap::new()
        })
    };
    match read().get(&key) {
        // A saved bandwidth of 0 (edited, or written by a broken run) is measured again.
        Some(m) if m.to_device_bytes_per_s > 0 && m.from_device_bytes_per_s > 0 => return Ok(*m),
        Some(m) => log::warn!(
            "the bus of {key} in {} has a bandwidth of 0 ({m:?}): measuring again",
            path.display()
        ),
        None => {}
    }
    let m = measure(b)?;
    log::info!("measured the bus of {key}: {m:?}");
    let save = || -> Result<(), String> {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let _lock = crate::perfmodel::lock_dir(dir).map_err(|e| e.to_string())?;
        let mut all = read();
        all.insert(key.clone(), m);
        let tmp = dir.join(format!("bus.json.{}.tmp", std::process::id()));
        let text = serde_json::to_string_pretty(&all).map_err(|e| e.to_string())?;
        std::fs::write(&tmp, text).map_err(|e| e.to_string())?;
        std::fs::rename(&tmp, &path).map_err(|e| e.to_string())
    };
    if let Err(e) = save() {
        log::warn!("could not save the bus measure in {}: {e}", path.display());
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    #[test]
    fn uuids_are_written_as_nvml_writes_them() {
        let b: [u8; 16] = std::array::from_fn(|i| (i * 17) as u8);
        assert_eq!(
            super::format_uuid(b),
            "GPU-00112233-4455-6677-8899-aabbccddeeff"
        );
    }
}
