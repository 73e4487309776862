//! The `.twt` container: file header, chunk framing, and which codec each chunk kind uses.
//!
//! ```text
//! file    = header chunk*
//! header  = "TWTRACE\0" major:u16 minor:u16 reserved:u32          (16 bytes, little-endian)
//! chunk   = "TWCK" kind:u8 codec:u8 reserved:u16 len:u32 crc:u32  (16 bytes)
//!           payload:[u8; len]                                     (crc = CRC-32 of payload)
//! ```
//!
//! Every chunk is self-delimiting and checksummed, so a file cut anywhere still holds every
//! chunk before the cut (see `recover_trace`). Task and sample chunks, the bulk of a trace,
//! are binary ([`crate::codec`]); the small metadata chunks are JSON, so that later minor
//! versions can add optional fields without a new layout. docs/trace-format.md is the
//! reference; keep the two in step.

use serde::{Deserialize, Serialize};

use crate::codec::{self, DecodeError};
use crate::{Chunk, DomainInfo, FormatVersion, MeterInfo, TaskChunk};

/// The format version this build writes, and the newest it reads.
pub const FORMAT_VERSION: FormatVersion = FormatVersion { major: 1, minor: 7 };

/// First 8 bytes of every trace file.
pub(crate) const FILE_MAGIC: [u8; 8] = *b"TWTRACE\0";
/// Length of the file header.
pub(crate) const FILE_HEADER_LEN: usize = 16;
/// First 4 bytes of every chunk: lets a reader (or a person with a hex dump) find chunk
/// boundaries and tell a damaged length from a damaged payload.
pub(crate) const CHUNK_MAGIC: [u8; 4] = *b"TWCK";
/// Length of a chunk header.
pub(crate) const CHUNK_HEADER_LEN: usize = 16;

/// Payload codec 0: the binary layouts of [`crate::codec`].
pub(crate) const CODEC_BINARY: u8 = 0;
/// Payload codec 1: UTF-8 JSON (serde_json) of the model type.
pub(crate) const CODEC_JSON: u8 = 1;

/// Chunk kinds of format 1.0, as stored in the chunk header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub(crate) enum ChunkKind {
    Meta = 1,
    Codelets = 2,
    Tasks = 3,
    Meters = 4,
    Samples = 5,
    Truth = 6,
    Markers = 7,
    End = 8,
    Transfers = 9,
    Accesses = 10,
    Comms = 11,
    Handles = 12,
    Frequencies = 13,
    Evictions = 14,
}

impl ChunkKind {
    /// The kind of a chunk.
    pub(crate) fn of(chunk: &Chunk) -> ChunkKind {
        match chunk {
            Chunk::Meta(_) => ChunkKind::Meta,
            Chunk::Codelets(_) => ChunkKind::Codelets,
            Chunk::Tasks(_) => ChunkKind::Tasks,
            Chunk::Meters { .. } => ChunkKind::Meters,
            Chunk::Samples(_) => ChunkKind::Samples,
            Chunk::Truth(_) => ChunkKind::Truth,
            Chunk::Markers(_) => ChunkKind::Markers,
            Chunk::End(_) => ChunkKind::End,
            Chunk::Transfers(_) => ChunkKind::Transfers,
            Chunk::Accesses(_) => ChunkKind::Accesses,
            Chunk::Comms(_) => ChunkKind::Comms,
            Chunk::Handles(_) => ChunkKind::Handles,
            Chunk::Frequencies(_) => ChunkKind::Frequencies,
            Chunk::Evictions(_) => ChunkKind::Evictions,
        }
    }

    /// The kind stored as `b`, if this build knows it.
    pub(crate) fn from_u8(b: u8) -> Option<ChunkKind> {
        Some(match b {
            1 => ChunkKind::Meta,
            2 => ChunkKind::Codelets,
            3 => ChunkKind::Tasks,
            4 => ChunkKind::Meters,
            5 => ChunkKind::Samples,
            6 => ChunkKind::Truth,
            7 => ChunkKind::Markers,
            8 => ChunkKind::End,
            9 => ChunkKind::Transfers,
            10 => ChunkKind::Accesses,
            11 => ChunkKind::Comms,
            12 => ChunkKind::Handles,
            13 => ChunkKind::Frequencies,
            14 => ChunkKind::Evictions,
            _ => return None,
        })
    }

    /// Name used in error messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ChunkKind::Meta => "Meta",
            ChunkKind::Codelets => "Codelets",
            ChunkKind::Tasks => "Tasks",
            ChunkKind::Meters => "Meters",
            ChunkKind::Samples => "Samples",
            ChunkKind::Truth => "Truth",
            ChunkKind::Markers => "Markers",
            ChunkKind::End => "End",
            ChunkKind::Transfers => "Transfers",
            ChunkKind::Accesses => "Accesses",
            ChunkKind::Comms => "Comms",
            ChunkKind::Handles => "Handles",
            ChunkKind::Frequencies => "Frequencies",
            ChunkKind::Evictions => "Evictions",
        }
    }

    /// The codec format 1.0 uses for this kind.
    pub(crate) fn codec(self) -> u8 {
        match self {
            ChunkKind::Tasks
            | ChunkKind::Samples
            | ChunkKind::Accesses
            | ChunkKind::Frequencies => CODEC_BINARY,
            _ => CODEC_JSON,
        }
    }
}

/// The 16-byte file header of this build's version.
pub(crate) fn file_header() -> [u8; FILE_HEADER_LEN] {
    let mut h = [0u8; FILE_HEADER_LEN];
    h[..8].copy_from_slice(&FILE_MAGIC);
    h[8..10].copy_from_slice(&FORMAT_VERSION.major.to_le_bytes());
    h[10..12].copy_from_slice(&FORMAT_VERSION.minor.to_le_bytes());
    // 12..16: reserved, zero.
    h
}

/// The version in a complete file header, or `None` when the magic is wrong.
pub(crate) fn parse_file_header(h: &[u8; FILE_HEADER_LEN]) -> Option<FormatVersion> {
    if h[..8] != FILE_MAGIC {
        return None;
    }
    Some(FormatVersion {
        major: u16::from_le_bytes([h[8], h[9]]),
        minor: u16::from_le_bytes([h[10], h[11]]),
    })
}

/// A parsed chunk header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ChunkHeader {
    pub(crate) kind: u8,
    pub(crate) codec: u8,
    pub(crate) len: u32,
    pub(crate) crc: u32,
}

/// Parses a chunk header; the error says what is wrong with the magic.
pub(crate) fn parse_chunk_header(h: &[u8; CHUNK_HEADER_LEN]) -> Result<ChunkHeader, String> {
    if h[..4] != CHUNK_MAGIC {
        return Err(format!(
            "bad chunk magic {:02x?} where a chunk header should start (expected \"TWCK\")",
            &h[..4]
        ));
    }
    Ok(ChunkHeader {
        kind: h[4],
        codec: h[5],
        // 6..8: reserved, written as zero, ignored on read.
        len: u32::from_le_bytes([h[8], h[9], h[10], h[11]]),
        crc: u32::from_le_bytes([h[12], h[13], h[14], h[15]]),
    })
}

#[derive(Serialize)]
struct MetersOut<'a> {
    meters: &'a [MeterInfo],
    domains: &'a [DomainInfo],
}

#[derive(Deserialize)]
struct MetersIn {
    meters: Vec<MeterInfo>,
    domains: Vec<DomainInfo>,
}

/// Appends `value` as JSON and checks that it reads back: serde_json writes NaN and
/// infinities as `null`, which would make the file unreadable later; better to refuse the
/// chunk now, naming it.
fn put_json<T, U>(out: &mut Vec<u8>, value: &T, kind: ChunkKind) -> Result<(), String>
where
    T: Serialize + ?Sized,
    U: for<'de> Deserialize<'de>,
{
    let start = out.len();
    serde_json::to_writer(&mut *out, value)
        .map_err(|e| format!("cannot serialise the {} chunk: {e}", kind.name()))?;
    if let Err(e) = serde_json::from_slice::<U>(&out[start..]) {
        out.truncate(start);
        return Err(format!(
            "the {} chunk would not read back ({e}): a float field is NaN or infinite",
            kind.name()
        ));
    }
    Ok(())
}

/// Appends `chunk`, header and payload, to `out`. On error `out` is left as it was.
pub(crate) fn encode_chunk(chunk: &Chunk, out: &mut Vec<u8>) -> Result<(), String> {
    let kind = ChunkKind::of(chunk);
    let head = out.len();
    out.extend_from_slice(&[0u8; CHUNK_HEADER_LEN]);
    let body = out.len();
    let res = match chunk {
        Chunk::Meta(m) => put_json::<_, crate::RunMeta>(out, m, kind),
        Chunk::Codelets(c) => put_json::<_, Vec<crate::CodeletInfo>>(out, c, kind),
        Chunk::Tasks(t) => codec::encode_tasks(t, out),
        Chunk::Meters { meters, domains } => {
            put_json::<_, MetersIn>(out, &MetersOut { meters, domains }, kind)
        }
        Chunk::Samples(s) => {
            codec::encode_samples(s, out);
            Ok(())
        }
        Chunk::Truth(t) => put_json::<_, crate::GroundTruth>(out, t, kind),
        Chunk::Markers(m) => put_json::<_, Vec<crate::Marker>>(out, m, kind),
        Chunk::Transfers(t) => put_json::<_, Vec<crate::Transfer>>(out, t, kind),
        Chunk::Accesses(a) => {
            codec::encode_accesses(a, out);
            Ok(())
        }
        Chunk::Comms(c) => put_json::<_, crate::CommChunk>(out, c, kind),
        Chunk::Handles(h) => put_json::<_, Vec<crate::HandleInfo>>(out, h, kind),
        Chunk::Frequencies(f) => {
            codec::encode_frequencies(f, out);
            Ok(())
        }
        Chunk::Evictions(e) => put_json::<_, Vec<crate::Eviction>>(out, e, kind),
        Chunk::End(e) => put_json::<_, crate::RunEnd>(out, e, kind),
    };
    if let Err(e) = res {
        out.truncate(head);
        return Err(e);
    }
    let Ok(len) = u32::try_from(out.len() - body) else {
        let n = out.len() - body;
        out.truncate(head);
        return Err(format!(
            "the {} chunk's payload is {n} bytes, over the format's 4 GiB chunk limit; send smaller chunks",
            kind.name()
        ));
    };
    let crc = crc32fast::hash(&out[body..]);
    let h = &mut out[head..body];
    h[..4].copy_from_slice(&CHUNK_MAGIC);
    h[4] = kind as u8;
    h[5] = kind.codec();
    h[8..12].copy_from_slice(&len.to_le_bytes());
    h[12..16].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

fn json<T: for<'de> Deserialize<'de>>(payload: &[u8], kind: ChunkKind) -> Result<T, DecodeError> {
    serde_json::from_slice(payload).map_err(|e| DecodeError {
        // Payloads are single-line JSON: the column is the byte position (1-based).
        pos: e.column().saturating_sub(1).min(payload.len()),
        reason: format!("bad JSON in the {} chunk: {e}", kind.name()),
    })
}

/// Decodes the payload of a chunk of a known kind with its format-1.0 codec.
pub(crate) fn decode_payload(kind: ChunkKind, payload: &[u8]) -> Result<Chunk, DecodeError> {
    Ok(match kind {
        ChunkKind::Meta => Chunk::Meta(json(payload, kind)?),
        ChunkKind::Codelets => Chunk::Codelets(json(payload, kind)?),
        ChunkKind::Tasks => {
            let mut t = TaskChunk::default();
            codec::decode_tasks(payload, &mut t).map_err(|e| DecodeError {
                reason: format!("in the Tasks chunk: {}", e.reason),
                ..e
            })?;
            Chunk::Tasks(t)
        }
        ChunkKind::Meters => {
            let m: MetersIn = json(payload, kind)?;
            Chunk::Meters {
                meters: m.meters,
                domains: m.domains,
            }
        }
        ChunkKind::Samples => {
            Chunk::Samples(codec::decode_samples(payload).map_err(|e| DecodeError {
                reason: format!("in the Samples chunk: {}", e.reason),
                ..e
            })?)
        }
        ChunkKind::Truth => Chunk::Truth(json(payload, kind)?),
        ChunkKind::Markers => Chunk::Markers(json(payload, kind)?),
        ChunkKind::Transfers => Chunk::Transfers(json(payload, kind)?),
        ChunkKind::Accesses => {
            Chunk::Accesses(codec::decode_accesses(payload).map_err(|e| DecodeError {
                reason: format!("in the Accesses chunk: {}", e.reason),
                ..e
            })?)
        }
        ChunkKind::Comms => Chunk::Comms(json(payload, kind)?),
        ChunkKind::Handles => Chunk::Handles(json(payload, kind)?),
        ChunkKind::Frequencies => {
            Chunk::Frequencies(codec::decode_frequencies(payload).map_err(|e| DecodeError {
                reason: format!("in the Frequencies chunk: {}", e.reason),
                ..e
            })?)
        }
        ChunkKind::Evictions => Chunk::Evictions(json(payload, kind)?),
        ChunkKind::End => Chunk::End(json(payload, kind)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testgen;
    use crate::{GroundTruth, Marker, RunEnd, RunMeta, Timestamp};
    use proptest::prelude::*;

    /// Encodes, checks the framing and the CRC, decodes.
    fn round_trip(chunk: &Chunk) -> Chunk {
        let mut b = vec![0xAA]; // something before: encode must append
        encode_chunk(chunk, &mut b).unwrap();
        let h: [u8; CHUNK_HEADER_LEN] = b[1..17].try_into().unwrap();
        let h = parse_chunk_header(&h).unwrap();
        let payload = &b[17..];
        assert_eq!(h.len as usize, payload.len());
        assert_eq!(h.crc, crc32fast::hash(payload));
        let kind = ChunkKind::from_u8(h.kind).unwrap();
        assert_eq!(kind, ChunkKind::of(chunk));
        assert_eq!(h.codec, kind.codec());
        decode_payload(kind, payload).unwrap()
    }

    #[test]
    fn header_round_trips_and_rejects_magic() {
        let h = file_header();
        assert_eq!(&h[..8], b"TWTRACE\0");
        assert_eq!(parse_file_header(&h), Some(FORMAT_VERSION));
        let mut bad = h;
        bad[0] = b'X';
        assert_eq!(parse_file_header(&bad), None);
        let mut ch = [0u8; CHUNK_HEADER_LEN];
        assert!(parse_chunk_header(&ch)
            .unwrap_err()
            .contains("bad chunk magic"));
        ch[..4].copy_from_slice(b"TWCK");
        assert_eq!(parse_chunk_header(&ch).unwrap().len, 0);
    }

    #[test]
    fn empty_chunks_of_every_kind_round_trip() {
        let empties = [
            Chunk::Meta(RunMeta::default()),
            Chunk::Codelets(vec![]),
            Chunk::Tasks(TaskChunk::default()),
            Chunk::Meters {
                meters: vec![],
                domains: vec![],
            },
            Chunk::Samples(vec![]),
            Chunk::Truth(GroundTruth::default()),
            Chunk::Markers(vec![]),
            Chunk::Comms(crate::CommChunk::default()),
            Chunk::Handles(vec![]),
            Chunk::Frequencies(vec![]),
            Chunk::Evictions(vec![]),
            Chunk::End(RunEnd::default()),
        ];
        for c in &empties {
            assert_eq!(&round_trip(c), c);
        }
    }

    #[test]
    fn max_timestamps_round_trip() {
        let end = Chunk::End(RunEnd {
            tasks: u64::MAX,
            failed: u64::MAX,
            samples: u64::MAX,
            first_start: Timestamp(u64::MAX),
            last_end: Timestamp(u64::MAX),
            wall_end_unix_ns: u64::MAX,
            outcome: crate::RunOutcome::Interrupted,
        });
        assert_eq!(round_trip(&end), end);
        let m = Chunk::Markers(vec![Marker {
            name: "idle".into(),
            start: Timestamp(u64::MAX),
            end: Timestamp(0),
        }]);
        assert_eq!(round_trip(&m), m);
    }

    #[test]
    fn nan_in_a_json_chunk_is_refused_not_written() {
        let t = GroundTruth {
            noise_sigma_w: f64::NAN,
            ..GroundTruth::default()
        };
        let mut b = vec![1, 2, 3];
        let e = encode_chunk(&Chunk::Truth(t), &mut b).unwrap_err();
        assert!(e.contains("Truth") && e.contains("NaN"), "{e}");
        assert_eq!(b, vec![1, 2, 3]);
    }

    #[test]
    fn bad_json_reports_a_position() {
        let e = decode_payload(ChunkKind::End, br#"{"tasks": "x"}"#).unwrap_err();
        assert!(e.reason.contains("bad JSON in the End chunk"), "{e:?}");
        assert!(e.pos > 0 && e.pos < 15, "{e:?}");
    }

    #[test]
    fn kinds_and_codecs_are_stable() {
        // These numbers are the file format: changing one is a major version.
        let want = [
            (ChunkKind::Meta, 1, 1),
            (ChunkKind::Codelets, 2, 1),
            (ChunkKind::Tasks, 3, 0),
            (ChunkKind::Meters, 4, 1),
            (ChunkKind::Samples, 5, 0),
            (ChunkKind::Truth, 6, 1),
            (ChunkKind::Markers, 7, 1),
            (ChunkKind::End, 8, 1),
            (ChunkKind::Transfers, 9, 1),
            (ChunkKind::Accesses, 10, 0),
            (ChunkKind::Comms, 11, 1),
            (ChunkKind::Handles, 12, 1),
            (ChunkKind::Frequencies, 13, 0),
            (ChunkKind::Evictions, 14, 1),
        ];
        for (k, n, codec) in want {
            assert_eq!(k as u8, n);
            assert_eq!(ChunkKind::from_u8(n), Some(k));
            assert_eq!(k.codec(), codec);
        }
        assert_eq!(ChunkKind::from_u8(0), None);
        assert_eq!(ChunkKind::from_u8(15), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn every_chunk_kind_round_trips(chunk in testgen::chunk()) {
            let back = round_trip(&chunk);
            prop_assert!(testgen::chunk_eq(&back, &chunk), "{:?}\n!=\n{:?}", back, chunk);
        }

        #[test]
        fn any_flipped_payload_byte_fails_the_crc(chunk in testgen::chunk(), at in any::<prop::sample::Index>(), bit in 0u8..8) {
            let mut b = Vec::new();
            encode_chunk(&chunk, &mut b).unwrap();
            prop_assume!(b.len() > CHUNK_HEADER_LEN);
            let i = CHUNK_HEADER_LEN + at.index(b.len() - CHUNK_HEADER_LEN);
            b[i] ^= 1 << bit;
            let h = parse_chunk_header(&b[..CHUNK_HEADER_LEN].try_into().unwrap()).unwrap();
            prop_assert_ne!(h.crc, crc32fast::hash(&b[CHUNK_HEADER_LEN..]));
        }
    }
}
