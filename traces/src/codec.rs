//! The binary payloads of the `.twt` format: Tasks and Samples chunks (codec 0).
//!
//! Both are row-oriented streams of LEB128 varints. Values that move together from one row
//! to the next (task ids, start times, sample times) are stored as zigzag-encoded
//! *wrapping* differences from the previous row, the first row from zero: the first row
//! thus carries the chunk's base and every later row a small delta. Wrapping arithmetic
//! makes every `u64` round-trip exactly, `u64::MAX` included, whatever the order of the
//! rows. docs/trace-format.md gives the layout field by field.

use crate::{Arch, EnergySample, FrequencySample, TaskChunk, TaskRecord, TaskStatus, Timestamp};

/// A decoding failure: where in the payload and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DecodeError {
    /// Byte offset within the payload.
    pub(crate) pos: usize,
    /// What is wrong, naming the field.
    pub(crate) reason: String,
}

// ---------------------------------------------------------------------------------------
// Varints
// ---------------------------------------------------------------------------------------

/// Appends `v` as an unsigned LEB128 varint (1 to 10 bytes).
#[inline]
pub(crate) fn put_uvar(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Zigzag: small magnitudes of either sign become small unsigned numbers.
#[inline]
pub(crate) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag`].
#[inline]
pub(crate) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Appends `now - prev` (wrapping) as a zigzag varint.
#[inline]
fn put_delta(out: &mut Vec<u8>, now: u64, prev: u64) {
    put_uvar(out, zigzag(now.wrapping_sub(prev) as i64));
}

/// A cursor over a payload that reports positions in its errors.
pub(crate) struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Decoder { buf, pos: 0 }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn err(&self, pos: usize, reason: String) -> DecodeError {
        DecodeError { pos, reason }
    }

    /// Reads an unsigned LEB128 varint; `field` names it in errors.
    ///
    /// The hot path of every trace read (about eleven per task): a one-byte varint, then
    /// a varint wholly inside the payload, are read without a bounds check per byte; the
    /// rest (a varint cut by the payload's end, or malformed) goes to [`Self::uvar_slow`],
    /// which names the fault.
    #[inline(always)]
    pub(crate) fn uvar(&mut self, field: &str) -> Result<u64, DecodeError> {
        let rest = &self.buf[self.pos.min(self.buf.len())..];
        if let Some(&b) = rest.first() {
            if b < 0x80 {
                self.pos += 1;
                return Ok(u64::from(b));
            }
        }
        if let Some(bytes) = rest.get(..10) {
            let mut v: u64 = 0;
            for (i, &b) in bytes.iter().enumerate().take(9) {
                v |= u64::from(b & 0x7f) << (7 * i);
                if b < 0x80 {
                    self.pos += i + 1;
                    return Ok(v);
                }
            }
            // The 10th byte may only carry the top bit of a u64.
            if bytes[9] <= 1 {
                self.pos += 10;
                return Ok(v | (u64::from(bytes[9]) << 63));
            }
        }
        self.uvar_slow(field)
    }

    #[cold]
    #[inline(never)]
    fn uvar_slow(&mut self, field: &str) -> Result<u64, DecodeError> {
        let start = self.pos;
        let mut v: u64 = 0;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(self.err(
                    start,
                    format!("bad varint in field `{field}`: the payload ends inside it"),
                ));
            };
            self.pos += 1;
            // The 10th byte may only carry the top bit of a u64.
            if i == 9 && b > 1 {
                return Err(self.err(
                    start,
                    format!("bad varint in field `{field}`: it overflows 64 bits"),
                ));
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.err(
            start,
            format!("bad varint in field `{field}`: longer than 10 bytes"),
        ))
    }

    /// Reads a varint that must fit in `u32`.
    #[inline(always)]
    fn u32var(&mut self, field: &str) -> Result<u32, DecodeError> {
        let start = self.pos;
        let v = self.uvar(field)?;
        u32::try_from(v).map_err(|_| self.err(start, format!("field `{field}` = {v} exceeds u32")))
    }

    /// Reads a wrapping zigzag delta and applies it to `prev`.
    #[inline(always)]
    fn delta(&mut self, prev: u64, field: &str) -> Result<u64, DecodeError> {
        Ok(prev.wrapping_add(unzigzag(self.uvar(field)?) as u64))
    }

    fn byte(&mut self, field: &str) -> Result<u8, DecodeError> {
        let b = *self.buf.get(self.pos).ok_or_else(|| {
            self.err(self.pos, format!("the payload ends before field `{field}`"))
        })?;
        self.pos += 1;
        Ok(b)
    }

    fn f64(&mut self, field: &str) -> Result<f64, DecodeError> {
        let bytes: [u8; 8] = self
            .buf
            .get(self.pos..self.pos + 8)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| {
                self.err(
                    self.pos,
                    format!("the payload ends inside the 8-byte float `{field}`"),
                )
            })?;
        self.pos += 8;
        Ok(f64::from_le_bytes(bytes))
    }

    /// Fails unless the whole payload was consumed.
    pub(crate) fn finish(&self, what: &str) -> Result<(), DecodeError> {
        if self.remaining() == 0 {
            Ok(())
        } else {
            Err(self.err(
                self.pos,
                format!("{} trailing bytes after the last {what}", self.remaining()),
            ))
        }
    }
}

// ---------------------------------------------------------------------------------------
// Accesses
// ---------------------------------------------------------------------------------------

/// Smallest encoding of one access: four one-byte fields.
const MIN_ACCESS_BYTES: usize = 4;

/// Appends an Accesses payload: `count:uvar`, then per access `task:delta handle:uvar
/// mode:u8 bytes:uvar` (the task as a zigzag delta from the previous access's, so that a
/// task's accesses after the first cost one byte for it).
pub(crate) fn encode_accesses(accesses: &[crate::TaskAccess], out: &mut Vec<u8>) {
    out.reserve(accesses.len() * 8 + 4);
    put_uvar(out, accesses.len() as u64);
    let mut prev = 0u64;
    for a in accesses {
        put_delta(out, a.task, prev);
        put_uvar(out, a.handle);
        out.push(a.mode.index());
        put_uvar(out, a.bytes);
        prev = a.task;
    }
}

/// Decodes an Accesses payload.
pub(crate) fn decode_accesses(payload: &[u8]) -> Result<Vec<crate::TaskAccess>, DecodeError> {
    let mut d = Decoder::new(payload);
    let n = d.uvar("access count")?;
    let mut out = Vec::with_capacity((d.remaining() / MIN_ACCESS_BYTES).min(n as usize));
    let mut prev = 0u64;
    for _ in 0..n {
        let task = d.delta(prev, "task")?;
        let handle = d.uvar("handle")?;
        let pos = d.pos;
        let m = d.byte("mode")?;
        let mode = *crate::AccessMode::ALL
            .get(usize::from(m))
            .ok_or_else(|| d.err(pos, format!("field `mode` = {m}: not an access mode (0-4)")))?;
        let bytes = d.uvar("bytes")?;
        out.push(crate::TaskAccess {
            task,
            handle,
            mode,
            bytes,
        });
        prev = task;
    }
    d.finish("access")?;
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// Tasks
// ---------------------------------------------------------------------------------------

/// Bits of a task record's flags byte.
const FLAG_ARCH_MASK: u8 = 0x0f;
const FLAG_FAILED: u8 = 0x10;
const FLAG_RESERVED: u8 = 0xe0;

/// Smallest encoding of one task record: 11 one-byte fields.
const MIN_TASK_BYTES: usize = 11;

/// Appends the Tasks payload of `chunk`.
///
/// Fails (without touching what `out` held before) when a record's predecessor range lies
/// outside the chunk's arena: such a chunk was not built with [`TaskChunk::push`].
pub(crate) fn encode_tasks(chunk: &TaskChunk, out: &mut Vec<u8>) -> Result<(), String> {
    let mark = out.len();
    out.reserve(chunk.records.len() * 24 + chunk.preds.len() * 2 + 8);
    put_uvar(out, chunk.records.len() as u64);
    put_uvar(out, chunk.preds.len() as u64);
    let (mut prev_id, mut prev_start) = (0u64, 0u64);
    for (i, r) in chunk.records.iter().enumerate() {
        let s = r.preds_start as usize;
        let Some(preds) = chunk.preds.get(s..s + r.preds_len as usize) else {
            out.truncate(mark);
            return Err(format!(
                "task record {i} (id {}) has predecessors {}..{} but the chunk's arena holds {}",
                r.id,
                s,
                s + r.preds_len as usize,
                chunk.preds.len()
            ));
        };
        put_delta(out, r.id, prev_id);
        put_uvar(out, u64::from(r.codelet));
        let mut flags = r.arch.index() as u8;
        if r.status == TaskStatus::Failed {
            flags |= FLAG_FAILED;
        }
        out.push(flags);
        put_uvar(out, u64::from(r.worker));
        put_uvar(out, zigzag(i64::from(r.priority)));
        put_uvar(out, r.footprint);
        put_delta(out, r.start.0, prev_start);
        put_delta(out, r.end.0, r.start.0);
        put_delta(out, r.start.0, r.ready.0);
        put_delta(out, r.ready.0, r.submit.0);
        put_uvar(out, preds.len() as u64);
        let mut prev_pred = r.id;
        for &p in preds {
            put_delta(out, prev_pred, p);
            prev_pred = p;
        }
        prev_id = r.id;
        prev_start = r.start.0;
    }
    Ok(())
}

/// Decodes a Tasks payload into `chunk` (cleared first, allocations kept).
pub(crate) fn decode_tasks(payload: &[u8], chunk: &mut TaskChunk) -> Result<(), DecodeError> {
    chunk.clear();
    let mut d = Decoder::new(payload);
    let n = d.uvar("record count")?;
    let n_preds = d.uvar("predecessor count")?;
    // Counts come from the file: cap the reservations by what the payload can hold.
    let cap = (d.remaining() / MIN_TASK_BYTES).min(n as usize);
    chunk.records.reserve(cap);
    chunk.preds.reserve((n_preds as usize).min(d.remaining()));
    let (mut prev_id, mut prev_start) = (0u64, 0u64);
    for _ in 0..n {
        let id = d.delta(prev_id, "id")?;
        let codelet = d.u32var("codelet")?;
        let flags_pos = d.pos;
        let flags = d.byte("flags")?;
        let arch = Arch::from_index(flags & FLAG_ARCH_MASK);
        let (Some(arch), 0) = (arch, flags & FLAG_RESERVED) else {
            return Err(d.err(
                flags_pos,
                format!(
                    "bad enum in field `flags` of task {id}: 0x{flags:02x} (arch must be 0 or 1, bits 5-7 zero)"
                ),
            ));
        };
        let status = if flags & FLAG_FAILED != 0 {
            TaskStatus::Failed
        } else {
            TaskStatus::Ok
        };
        let worker = d.u32var("worker")?;
        let prio_pos = d.pos;
        let priority = unzigzag(d.uvar("priority")?);
        let priority = i32::try_from(priority).map_err(|_| {
            d.err(
                prio_pos,
                format!("field `priority` of task {id} = {priority} exceeds i32"),
            )
        })?;
        let footprint = d.uvar("footprint")?;
        let start = d.delta(prev_start, "start")?;
        let end = d.delta(start, "end")?;
        let ready = start.wrapping_sub(d.delta(0, "ready")?);
        let submit = ready.wrapping_sub(d.delta(0, "submit")?);
        let len_pos = d.pos;
        let npreds = d.uvar("predecessor list length")?;
        if npreds > d.remaining() as u64 {
            return Err(d.err(
                len_pos,
                format!(
                    "task {id} claims {npreds} predecessors but only {} bytes remain",
                    d.remaining()
                ),
            ));
        }
        let preds_start = chunk.preds.len();
        let mut prev_pred = id;
        for _ in 0..npreds {
            let p = prev_pred.wrapping_sub(d.delta(0, "predecessor")?);
            chunk.preds.push(p);
            prev_pred = p;
        }
        let Ok(preds_start_u32) = u32::try_from(preds_start) else {
            return Err(d.err(len_pos, "predecessor arena exceeds u32".to_string()));
        };
        chunk.records.push(TaskRecord {
            id,
            codelet,
            arch,
            worker,
            status,
            priority,
            footprint,
            submit: Timestamp(submit),
            ready: Timestamp(ready),
            start: Timestamp(start),
            end: Timestamp(end),
            preds_start: preds_start_u32,
            preds_len: npreds as u32,
        });
        prev_id = id;
        prev_start = start;
    }
    if chunk.preds.len() as u64 != n_preds {
        return Err(d.err(
            0,
            format!(
                "predecessor count says {n_preds} but the records hold {}",
                chunk.preds.len()
            ),
        ));
    }
    d.finish("task record")
}

// ---------------------------------------------------------------------------------------
// Samples
// ---------------------------------------------------------------------------------------

/// Smallest encoding of one sample: three one-byte varints and two 8-byte floats.
const MIN_SAMPLE_BYTES: usize = 19;

/// Appends the Samples payload of `samples`.
pub(crate) fn encode_samples(samples: &[EnergySample], out: &mut Vec<u8>) {
    out.reserve(samples.len() * 26 + 4);
    put_uvar(out, samples.len() as u64);
    let (mut prev_t, mut prev_wall) = (0u64, 0u64);
    for s in samples {
        put_uvar(out, u64::from(s.domain));
        put_delta(out, s.t.0, prev_t);
        put_delta(out, s.wall_unix_ns, prev_wall);
        // Raw IEEE-754 bits: exact, NaN payloads included.
        out.extend_from_slice(&s.energy_j.to_le_bytes());
        out.extend_from_slice(&s.raw.to_le_bytes());
        prev_t = s.t.0;
        prev_wall = s.wall_unix_ns;
    }
}

/// Decodes a Samples payload.
pub(crate) fn decode_samples(payload: &[u8]) -> Result<Vec<EnergySample>, DecodeError> {
    let mut d = Decoder::new(payload);
    let n = d.uvar("sample count")?;
    let mut out = Vec::with_capacity((d.remaining() / MIN_SAMPLE_BYTES).min(n as usize));
    let (mut prev_t, mut prev_wall) = (0u64, 0u64);
    for _ in 0..n {
        let dom_pos = d.pos;
        let domain = d.uvar("domain")?;
        let domain = u16::try_from(domain)
            .map_err(|_| d.err(dom_pos, format!("field `domain` = {domain} exceeds u16")))?;
        let t = d.delta(prev_t, "t")?;
        let wall = d.delta(prev_wall, "wall_unix_ns")?;
        let energy_j = d.f64("energy_j")?;
        let raw = d.f64("raw")?;
        out.push(EnergySample {
            domain,
            t: Timestamp(t),
            wall_unix_ns: wall,
            energy_j,
            raw,
        });
        prev_t = t;
        prev_wall = wall;
    }
    d.finish("sample")?;
    Ok(out)
}

/// Smallest encoded frequency sample: domain (1) + t delta (1) + mhz (8).
const MIN_FREQUENCY_BYTES: usize = 10;

/// Encodes a Frequencies payload: count, then per sample the domain, the time's delta from
/// the previous sample's and the frequency's IEEE-754 bits.
pub(crate) fn encode_frequencies(samples: &[FrequencySample], out: &mut Vec<u8>) {
    out.reserve(samples.len() * 14 + 4);
    put_uvar(out, samples.len() as u64);
    let mut prev_t = 0u64;
    for s in samples {
        put_uvar(out, u64::from(s.domain));
        put_delta(out, s.t.0, prev_t);
        out.extend_from_slice(&s.mhz.to_le_bytes());
        prev_t = s.t.0;
    }
}

/// Decodes a Frequencies payload.
pub(crate) fn decode_frequencies(payload: &[u8]) -> Result<Vec<FrequencySample>, DecodeError> {
    let mut d = Decoder::new(payload);
    let n = d.uvar("frequency sample count")?;
    let mut out = Vec::with_capacity((d.remaining() / MIN_FREQUENCY_BYTES).min(n as usize));
    let mut prev_t = 0u64;
    for _ in 0..n {
        let dom_pos = d.pos;
        let domain = d.uvar("domain")?;
        let domain = u16::try_from(domain)
            .map_err(|_| d.err(dom_pos, format!("field `domain` = {domain} exceeds u16")))?;
        let t = d.delta(prev_t, "t")?;
        let mhz = d.f64("mhz")?;
        out.push(FrequencySample {
            domain,
            t: Timestamp(t),
            mhz,
        });
        prev_t = t;
    }
    d.finish("frequency sample")?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_varint_fast_path_agrees_with_the_slow_one_on_any_bytes() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 13) as usize;
            // Bytes with the continuation bit set more often than not, so that long and
            // overlong varints, and ones cut by the end, all come up.
            let bytes: Vec<u8> = (0..len)
                .map(|i| {
                    let b = (x >> (i * 5)) as u8;
                    if (x >> (i + 40)) & 3 != 0 {
                        b | 0x80
                    } else {
                        b & 0x7f
                    }
                })
                .collect();
            let (mut fast, mut slow) = (Decoder::new(&bytes), Decoder::new(&bytes));
            let (a, b) = (fast.uvar("f"), slow.uvar_slow("f"));
            assert_eq!(a.as_ref().ok(), b.as_ref().ok(), "{bytes:02x?}");
            assert_eq!(a.is_err(), b.is_err(), "{bytes:02x?}");
            if a.is_ok() {
                assert_eq!(fast.pos, slow.pos, "{bytes:02x?}");
            }
        }
    }

    use super::*;
    use proptest::prelude::*;

    #[test]
    fn varint_edges() {
        for v in [
            0,
            1,
            127,
            128,
            16_383,
            16_384,
            u64::MAX / 2,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut b = Vec::new();
            put_uvar(&mut b, v);
            assert!(b.len() <= 10);
            let mut d = Decoder::new(&b);
            assert_eq!(d.uvar("v").unwrap(), v);
            assert_eq!(d.remaining(), 0);
        }
        // 11 continuation bytes, and a 10th byte that overflows.
        let e = Decoder::new(&[0x80; 11]).uvar("id").unwrap_err();
        assert!(e.reason.contains("bad varint in field `id`"), "{e:?}");
        let mut over = vec![0xff; 9];
        over.push(0x02);
        let e = Decoder::new(&over).uvar("id").unwrap_err();
        assert!(e.reason.contains("overflows"), "{e:?}");
        let e = Decoder::new(&[0x80]).uvar("t").unwrap_err();
        assert!(e.reason.contains("ends inside"), "{e:?}");
    }

    #[test]
    fn bad_flags_are_reported_with_position() {
        let mut c = TaskChunk::default();
        c.push(
            TaskRecord {
                id: 5,
                codelet: 0,
                arch: Arch::Cpu,
                worker: 0,
                status: TaskStatus::Ok,
                priority: 0,
                footprint: 0,
                submit: Timestamp(1),
                ready: Timestamp(2),
                start: Timestamp(3),
                end: Timestamp(4),
                preds_start: 0,
                preds_len: 0,
            },
            &[],
        );
        let mut b = Vec::new();
        encode_tasks(&c, &mut b).unwrap();
        // count, preds count, id, codelet, then flags at byte 4.
        b[4] = 0x07;
        let e = decode_tasks(&b, &mut TaskChunk::default()).unwrap_err();
        assert_eq!(e.pos, 4);
        assert!(e.reason.contains("bad enum"), "{e:?}");
    }

    #[test]
    fn bad_preds_range_is_refused_without_output() {
        let mut c = TaskChunk::default();
        c.records.push(TaskRecord {
            id: 1,
            codelet: 0,
            arch: Arch::Gpu,
            worker: 0,
            status: TaskStatus::Failed,
            priority: -3,
            footprint: 9,
            submit: Timestamp(0),
            ready: Timestamp(0),
            start: Timestamp(0),
            end: Timestamp(0),
            preds_start: 2,
            preds_len: 5,
        });
        let mut b = vec![42];
        let e = encode_tasks(&c, &mut b).unwrap_err();
        assert!(e.contains("arena holds 0"), "{e}");
        assert_eq!(b, vec![42]);
    }

    #[test]
    fn trailing_bytes_are_corrupt() {
        let mut b = Vec::new();
        encode_samples(&[], &mut b);
        b.push(0);
        assert!(decode_samples(&b).unwrap_err().reason.contains("trailing"));
    }

    proptest! {
        #[test]
        fn zigzag_round_trips(v in any::<i64>()) {
            prop_assert_eq!(unzigzag(zigzag(v)), v);
        }

        #[test]
        fn tasks_round_trip_any_order(chunk in crate::testgen::task_chunk()) {
            let mut b = Vec::new();
            encode_tasks(&chunk, &mut b).unwrap();
            let mut back = TaskChunk::default();
            decode_tasks(&b, &mut back).unwrap();
            prop_assert_eq!(back, chunk);
        }

        #[test]
        fn truncated_task_payloads_fail_cleanly(chunk in crate::testgen::task_chunk(), cut in any::<prop::sample::Index>()) {
            let mut b = Vec::new();
            encode_tasks(&chunk, &mut b).unwrap();
            let cut = cut.index(b.len());
            prop_assert!(decode_tasks(&b[..cut], &mut TaskChunk::default()).is_err());
        }

        #[test]
        fn samples_round_trip_bitwise(samples in crate::testgen::samples()) {
            let mut b = Vec::new();
            encode_samples(&samples, &mut b);
            let back = decode_samples(&b).unwrap();
            prop_assert!(crate::testgen::samples_eq(&back, &samples));
        }
    }
}
