//! The CUDA backend (cargo feature `cuda`): an NVIDIA GPU through the CUDA driver API and
//! cuBLAS, both loaded at run time by cudarc, so that a build with the feature runs (and
//! says what is missing) on a machine without them.
//!
//! - A replica is a device allocation of the value's bytes ([`super::DeviceData`]).
//! - Host memory is pinned in place (`cuMemHostRegister`) the first time a value is
//!   copied, and stays pinned while its device copy exists, so that copies are direct DMA;
//!   where that fails (a range that shares pages with one already pinned, a locked-memory
//!   limit), the copy goes through a pinned staging buffer of the device's.
//!   `TASKWATT_CUDA_STAGING=staging` or `pageable` forces the staging buffer or plain
//!   pageable copies, for comparison. Copies run on a stream of their own and are
//!   synchronous: a copy made before a task is complete when the task starts.
//! - Each GPU worker has its own stream and cuBLAS handle ([`CudaTask`]); a task's GPU
//!   implementation queues its work there, and the task ends when the worker has
//!   synchronised the stream, so that its start and end in the trace bracket the device
//!   work.

use std::any::Any;
use std::sync::Arc;

use cudarc::cublas::CudaBlas;
use cudarc::driver::{result, sys, CudaContext, CudaStream};
use parking_lot::Mutex;

use super::{Backend, DeviceBuffer, Replica, WorkerState};
use crate::handle::Copier;
use crate::inline::Value;

/// Environment variable choosing how host memory is copied: `register` (default: the
/// value pinned in place), `staging` (through a pinned buffer) or `pageable`.
pub const STAGING_ENV: &str = "TASKWATT_CUDA_STAGING";

/// How host memory takes part in copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HostMode {
    Register,
    Staging,
    Pageable,
}

impl HostMode {
    fn name(self) -> &'static str {
        match self {
            HostMode::Register => "host memory pinned in place",
            HostMode::Staging => "through a pinned staging buffer",
            HostMode::Pageable => "pageable",
        }
    }
}

/// What a task's GPU implementation gets on a CUDA worker ([`crate::TaskCtx::cuda`]).
pub struct CudaTask {
    stream: Arc<CudaStream>,
    blas: CudaBlas,
    ordinal: usize,
}

impl CudaTask {
    /// The worker's stream: queue the task's work here; the runtime synchronises it when
    /// the implementation returns.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The worker's cuBLAS handle, bound to its stream.
    pub fn blas(&self) -> &CudaBlas {
        &self.blas
    }

    /// The CUDA device ordinal.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }
}

/// Whether the CUDA driver library can be loaded (checked before any call that would
/// panic without it).
pub fn driver_present() -> bool {
    // SAFETY: only tries to load the library.
    unsafe { sys::is_culib_present() }
}

/// Whether cuBLAS can be loaded.
pub fn cublas_present() -> bool {
    // SAFETY: only tries to load the library.
    unsafe { cudarc::cublas::sys::is_culib_present() }
}

/// The CUDA driver API version this build calls (cudarc's `cuda-13000` feature).
pub const BUILT_FOR_CUDA: (u32, u32) = (13, 0);

/// The newest CUDA version the installed driver supports, as (major, minor).
pub fn driver_version() -> Result<(u32, u32), String> {
    let mut v: std::ffi::c_int = 0;
    // SAFETY: writes one int; cuDriverGetVersion needs no cuInit, and exists in every
    // driver.
    unsafe { sys::cuDriverGetVersion(&mut v) }
        .result()
        .map_err(|e| err("cuDriverGetVersion", e))?;
    Ok(((v / 1000) as u32, ((v % 1000) / 10) as u32))
}

/// The number of CUDA devices, or why there are none.
pub fn device_count() -> Result<usize, String> {
    if !driver_present() {
        return Err(
            "the CUDA driver library (libcuda.so.1) could not be loaded: install the \
             NVIDIA driver, or run with the emulated backend (--gpu-backend emulated)"
                .into(),
        );
    }
    let have = driver_version()?;
    if have < BUILT_FOR_CUDA {
        return Err(format!(
            "the NVIDIA driver supports CUDA {}.{}, and this build calls the CUDA {}.{} driver \
             API (cudarc's `cuda-13000` feature): install a driver for CUDA 13 (R580 or \
             later), or run with the emulated backend (--gpu-backend emulated)",
            have.0, have.1, BUILT_FOR_CUDA.0, BUILT_FOR_CUDA.1
        ));
    }
    CudaContext::device_count()
        .map(|n| n.max(0) as usize)
        .map_err(|e| format!("cuInit/cuDeviceGetCount failed: {e:?}"))
}

/// The UUIDs of CUDA devices `0..n`, in CUDA's order, written as NVML writes them
/// (`GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`), so that energy meters can tell which
/// NVML device each is.
pub fn device_uuids() -> Result<Vec<String>, String> {
    let n = device_count()?;
    (0..n)
        .map(|i| {
            let dev =
                result::device::get(i as std::ffi::c_int).map_err(|e| err("cuDeviceGet", e))?;
            let u = result::device::get_uuid(dev).map_err(|e| err("cuDeviceGetUuid", e))?;
            Ok(super::format_uuid(u.bytes.map(|b| b as u8)))
        })
        .collect()
}

/// Pinned host memory, freed on drop.
struct Pinned {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: plain host memory, used under the backend's lock only.
unsafe impl Send for Pinned {}

impl Drop for Pinned {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: allocated by `malloc_host`, freed once.
            let _ = unsafe { result::free_host(self.ptr.cast()) };
        }
    }
}

struct Copies {
    stream: Arc<CudaStream>,
    staging: Option<Pinned>,
}

/// A device allocation, freed on drop, and the host range pinned for its copies.
struct Alloc {
    ptr: sys::CUdeviceptr,
    ctx: Arc<CudaContext>,
    pin: Mutex<Option<HostPin>>,
}

/// A host range pinned in place, unpinned on drop (before the value is freed: a handle
/// drops its replicas first).
struct HostPin {
    ptr: usize,
    len: usize,
    ctx: Arc<CudaContext>,
}

impl Drop for HostPin {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: registered by `cuMemHostRegister_v2` at this address, unregistered once.
        let _ = unsafe { sys::cuMemHostUnregister(self.ptr as *mut _) };
    }
}

impl Drop for Alloc {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: allocated by `malloc_sync` in this context, freed once.
        let _ = unsafe { result::free_sync(self.ptr) };
    }
}

/// One CUDA device.
pub(crate) struct CudaBackend {
    ordinal: usize,
    ctx: Arc<CudaContext>,
    name: String,
    host: HostMode,
    /// The device's memory, bytes (0 if the driver did not say).
    total_mem: u64,
    /// The devices whose memory this one was asked to read, and whether it can directly.
    peers: Mutex<Vec<(usize, bool)>>,
    copies: Mutex<Copies>,
}

fn err(what: &str, e: impl std::fmt::Debug) -> String {
    format!("CUDA: {what} failed: {e:?}")
}

impl CudaBackend {
    /// Opens device `ordinal`: its primary context, a copy stream; checks that cuBLAS
    /// loads.
    pub(crate) fn open(ordinal: usize) -> Result<CudaBackend, String> {
        let n = device_count()?;
        if ordinal >= n {
            return Err(format!(
                "CUDA device {ordinal} asked for, {n} found (CUDA_VISIBLE_DEVICES={})",
                std::env::var("CUDA_VISIBLE_DEVICES").unwrap_or_else(|_| "unset".into())
            ));
        }
        if !cublas_present() {
            return Err(
                "cuBLAS (libcublas.so) could not be loaded: put the directory that \
                 holds it (the CUDA toolkit's lib64, or the nvidia-cublas wheel's lib) on \
                 LD_LIBRARY_PATH"
                    .into(),
            );
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| err("creating the context", e))?;
        // The runtime orders all work itself (copies are synchronous, tasks synchronise
        // their stream): no events per allocation.
        // SAFETY: no allocation or stream of this context exists yet.
        unsafe { ctx.disable_event_tracking() };
        let name = ctx.name().unwrap_or_else(|_| "unknown".into());
        let (major, minor) = ctx.compute_capability().unwrap_or((0, 0));
        let mem = ctx.total_mem().unwrap_or(0);
        let stream = ctx.new_stream().map_err(|e| err("creating a stream", e))?;
        let host = match std::env::var(STAGING_ENV).as_deref() {
            Err(_) | Ok("register") | Ok("") => HostMode::Register,
            Ok("staging") => HostMode::Staging,
            Ok("pageable") => HostMode::Pageable,
            Ok(other) => {
                return Err(format!(
                    "{STAGING_ENV}={other}: use `register` (the default), `staging` or \
                     `pageable`"
                ))
            }
        };
        Ok(CudaBackend {
            ordinal,
            name: format!(
                "CUDA device {ordinal}: {name} (sm_{major}{minor}, {:.0} GiB)",
                mem as f64 / (1u64 << 30) as f64
            ),
            ctx,
            host,
            total_mem: mem as u64,
            peers: Mutex::new(Vec::new()),
            copies: Mutex::new(Copies {
                stream,
                staging: None,
            }),
        })
    }

    /// Whether this device can read `peer`'s memory directly, peer access enabled from
    /// this context on the first ask (`cuDeviceCanAccessPeer`, `cuCtxEnablePeerAccess`);
    /// said once in the log either way. Called with this context bound.
    fn peer_access(&self, peer: &CudaBackend) -> Result<bool, String> {
        let mut known = self.peers.lock();
        if let Some(&(_, can)) = known.iter().find(|(o, _)| *o == peer.ordinal) {
            return Ok(can);
        }
        let mut can: std::ffi::c_int = 0;
        // SAFETY: writes one int; both devices exist.
        unsafe { sys::cuDeviceCanAccessPeer(&mut can, self.ctx.cu_device(), peer.ctx.cu_device()) }
            .result()
            .map_err(|e| err("cuDeviceCanAccessPeer", e))?;
        let mut can = can != 0;
        if can {
            // SAFETY: this context is bound (the caller's contract); enabling twice is an
            // error CUDA names, taken as success.
            match unsafe { sys::cuCtxEnablePeerAccess(peer.ctx.cu_ctx(), 0) }.result() {
                Ok(()) => {}
                Err(e) if e.0 == sys::cudaError_enum::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {}
                Err(e) => {
                    log::warn!(
                        "CUDA devices {} and {}: enabling peer access failed ({e:?}): copies \
                         go through main memory",
                        self.ordinal,
                        peer.ordinal
                    );
                    can = false;
                }
            }
        }
        log::info!(
            "copies from CUDA device {} to {}: {}",
            peer.ordinal,
            self.ordinal,
            if can {
                "peer to peer"
            } else {
                "through main memory (no peer access between them)"
            }
        );
        known.push((peer.ordinal, can));
        Ok(can)
    }

    fn bind(&self) -> Result<(), String> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| err("binding the context", e))
    }

    /// A device buffer of `len` bytes: `dst`'s if it has that size.
    fn buffer<'a>(
        &self,
        dst: &'a mut Option<Replica>,
        len: usize,
    ) -> Result<&'a DeviceBuffer, String> {
        let fits = dst
            .as_ref()
            .and_then(|r| r.downcast_ref::<DeviceBuffer>())
            .is_some_and(|b| b.len == len);
        if !fits {
            *dst = None;
            // SAFETY: the context is bound to this thread (callers bind first).
            let ptr = unsafe { result::malloc_sync(len.max(1)) }
                .map_err(|e| err(&format!("allocating {len} bytes"), e))?;
            *dst = Some(Box::new(DeviceBuffer {
                ptr,
                len,
                owner: Box::new(Alloc {
                    ptr,
                    ctx: self.ctx.clone(),
                    pin: Mutex::new(None),
                }),
            }));
        }
        Ok(dst
            .as_ref()
            .and_then(|r| r.downcast_ref::<DeviceBuffer>())
            .expect("made above"))
    }

    /// Whether `host` is pinned for the copies of `buf` (pinned now if it can be).
    fn pinned(&self, buf: &DeviceBuffer, host: &[u8]) -> bool {
        if self.host != HostMode::Register {
            return false;
        }
        let Some(alloc) = buf.owner.downcast_ref::<Alloc>() else {
            return false;
        };
        let mut pin = alloc.pin.lock();
        let (ptr, len) = (host.as_ptr() as usize, host.len());
        if pin.as_ref().is_some_and(|p| p.ptr == ptr && p.len == len) {
            return true;
        }
        // A value moved or replaced since: let go of the old range.
        *pin = None;
        if len == 0 {
            return false;
        }
        // SAFETY: the range is the value's memory, alive while the handle holds it; it is
        // unpinned when the replica is dropped, which the handle does before the value.
        let r = unsafe {
            sys::cuMemHostRegister_v2(ptr as *mut _, len, sys::CU_MEMHOSTREGISTER_PORTABLE)
        };
        if r != sys::CUresult::CUDA_SUCCESS {
            log::debug!("cuMemHostRegister of {len} bytes failed ({r:?}): staging instead");
            return false;
        }
        *pin = Some(HostPin {
            ptr,
            len,
            ctx: self.ctx.clone(),
        });
        true
    }

    fn upload(&self, src: &[u8], dst: sys::CUdeviceptr, direct: bool) -> Result<(), String> {
        let mut c = self.copies.lock();
        let stream = c.stream.cu_stream();
        if self.host != HostMode::Pageable && !direct {
            let staging = self.staging(&mut c, src.len())?;
            // SAFETY: the staging buffer holds at least `src.len()` bytes and is only used
            // under this lock; the copy is complete when the stream is synchronised.
            unsafe {
                std::ptr::copy_nonoverlapping(src.as_ptr(), staging, src.len());
                result::memcpy_htod_async(
                    dst,
                    std::slice::from_raw_parts(staging, src.len()),
                    stream,
                )
            }
            .map_err(|e| err("copying to the device", e))?;
        } else {
            // SAFETY: `src` outlives the synchronisation below.
            unsafe { result::memcpy_htod_async(dst, src, stream) }
                .map_err(|e| err("copying to the device", e))?;
        }
        c.stream
            .synchronize()
            .map_err(|e| err("synchronising a copy", e))
    }

    fn download(&self, src: sys::CUdeviceptr, dst: &mut [u8], direct: bool) -> Result<(), String> {
        let mut c = self.copies.lock();
        let stream = c.stream.cu_stream();
        if self.host != HostMode::Pageable && !direct {
            let staging = self.staging(&mut c, dst.len())?;
            // SAFETY: as in `upload`; the host copy is made after the synchronisation.
            unsafe {
                result::memcpy_dtoh_async(
                    std::slice::from_raw_parts_mut(staging, dst.len()),
                    src,
                    stream,
                )
                .map_err(|e| err("copying from the device", e))?;
                c.stream
                    .synchronize()
                    .map_err(|e| err("synchronising a copy", e))?;
                std::ptr::copy_nonoverlapping(staging, dst.as_mut_ptr(), dst.len());
            }
            Ok(())
        } else {
            // SAFETY: `dst` outlives the synchronisation below.
            unsafe { result::memcpy_dtoh_async(dst, src, stream) }
                .map_err(|e| err("copying from the device", e))?;
            c.stream
                .synchronize()
                .map_err(|e| err("synchronising a copy", e))
        }
    }

    /// The staging buffer, grown to at least `len` bytes.
    fn staging(&self, c: &mut Copies, len: usize) -> Result<*mut u8, String> {
        if c.staging.as_ref().is_none_or(|s| s.len < len) {
            c.staging = None;
            let size = len.next_power_of_two().max(1 << 20);
            // SAFETY: the context is bound; plain page-locked memory (not write-combined:
            // the host reads it back).
            let ptr = unsafe { result::malloc_host(size, 0) }
                .map_err(|e| err(&format!("allocating {size} bytes of pinned memory"), e))?;
            c.staging = Some(Pinned {
                ptr: ptr.cast(),
                len: size,
            });
        }
        Ok(c.staging.as_ref().expect("made above").ptr)
    }
}

fn bytes_view(copier: &Copier) -> Result<&crate::handle::BytesView, String> {
    copier.bytes.as_ref().ok_or_else(|| {
        "this value has no byte view: register it with `register_device` (its type must \
         implement DeviceData) to let CUDA workers hold it"
            .into()
    })
}

impl Backend for CudaBackend {
    fn holds(&self, copier: &Copier) -> bool {
        copier.bytes.is_some()
    }

    fn copy_in(
        &self,
        copier: &Copier,
        home: &Value,
        dst: &mut Option<Replica>,
    ) -> Result<(), String> {
        let bytes = (bytes_view(copier)?.get)(home).ok_or("the value was unregistered")?;
        self.bind()?;
        let buf = self.buffer(dst, bytes.len())?;
        let direct = self.pinned(buf, bytes);
        self.upload(bytes, buf.ptr, direct)
    }

    fn copy_from(
        &self,
        copier: &Copier,
        from: &dyn Backend,
        src: &(dyn Any + Send + Sync),
        dst: &mut Option<Replica>,
    ) -> Result<(), String> {
        let _ = bytes_view(copier)?;
        let src = src
            .downcast_ref::<DeviceBuffer>()
            .ok_or("the source replica is not in CUDA memory")?;
        let peer = from
            .as_any()
            .downcast_ref::<CudaBackend>()
            .ok_or("a copy between backends of different kinds")?;
        self.bind()?;
        let ptr = self.buffer(dst, src.len)?.ptr;
        if peer.ordinal == self.ordinal {
            let c = self.copies.lock();
            // SAFETY: both buffers hold `src.len` bytes in this context.
            unsafe { result::memcpy_dtod_async(ptr, src.ptr, src.len, c.stream.cu_stream()) }
                .map_err(|e| err("copying on the device", e))?;
            return c
                .stream
                .synchronize()
                .map_err(|e| err("synchronising a copy", e));
        }
        if self.peer_access(peer)? {
            let c = self.copies.lock();
            // SAFETY: `src` holds `src.len` bytes in the peer's context, `ptr` as many in
            // this one; the copy is waited for before the lock is released.
            unsafe {
                result::memcpy_peer_async(
                    self.ctx.cu_ctx(),
                    ptr,
                    peer.ctx.cu_ctx(),
                    src.ptr,
                    src.len,
                    c.stream.cu_stream(),
                )
            }
            .map_err(|e| err("copying between devices (peer to peer)", e))?;
            return c
                .stream
                .synchronize()
                .map_err(|e| err("synchronising a copy", e));
        }
        // Through main memory: the devices cannot reach each other.
        let mut host = vec![0u8; src.len];
        peer.bind()?;
        peer.download(src.ptr, &mut host, false)?;
        self.bind()?;
        self.upload(&host, ptr, false)
    }

    fn copy_out(
        &self,
        copier: &Copier,
        src: &(dyn Any + Send + Sync),
        home: &mut Value,
    ) -> Result<(), String> {
        let view = bytes_view(copier)?;
        let src = src
            .downcast_ref::<DeviceBuffer>()
            .ok_or("the source replica is not in CUDA memory")?;
        let dst = (view.get_mut)(home).ok_or("the value was unregistered")?;
        if dst.len() != src.len {
            return Err(format!(
                "the value in main memory has {} bytes, its device copy {}: a DeviceData \
                 value must not change size while registered",
                dst.len(),
                src.len
            ));
        }
        self.bind()?;
        let direct = self.pinned(src, dst);
        self.download(src.ptr, dst, direct)
    }

    fn worker(&self) -> Result<Option<WorkerState>, String> {
        self.bind()?;
        let stream = self
            .ctx
            .new_stream()
            .map_err(|e| err("creating a worker stream", e))?;
        let blas = CudaBlas::new(stream.clone()).map_err(|e| err("creating a cuBLAS handle", e))?;
        Ok(Some(Box::new(CudaTask {
            stream,
            blas,
            ordinal: self.ordinal,
        })))
    }

    fn enter_thread(&self) {
        if let Err(e) = self.bind() {
            log::warn!("{e}");
        }
    }

    fn finish_task(&self, state: Option<&WorkerState>) -> Result<(), String> {
        let Some(task) = state.and_then(|s| s.downcast_ref::<CudaTask>()) else {
            return Ok(());
        };
        task.stream
            .synchronize()
            .map_err(|e| err("synchronising the task's stream", e))
    }

    fn memory_limit(&self) -> Option<u64> {
        // Room is left for cuBLAS's workspaces and the context.
        (self.total_mem > 0).then(|| self.total_mem / 10 * 9)
    }

    fn describe(&self) -> String {
        format!("{} (copies: {})", self.name, self.host.name())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
