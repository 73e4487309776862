//! Task-type keys: what one column of the attribution system stands for.
//!
//! A column groups task executions whose power we assume equal. The coarsest grouping is
//! the codelet; StarPU-style codelets with a CPU and a GPU implementation usually need
//! codelet + architecture; kernels whose power depends on the tile size can be split by
//! footprint class (log2 buckets of the bytes a task touched). Keys carry codelet *names*,
//! never ids, because ids are dense per run and a model must match types across traces.

use std::collections::HashMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use taskwatt_traces::{Arch, CodeletInfo, TaskRecord};

/// How tasks are grouped into types (columns of the system).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyKind {
    /// One type per codelet.
    Codelet,
    /// One type per (codelet, architecture that ran it). The default: a GPU and a CPU
    /// implementation of one codelet rarely draw the same power.
    #[default]
    CodeletArch,
    /// One type per (codelet, footprint class), footprint class = ceil-log2 bucket of the
    /// task's footprint in bytes (see [`footprint_class`]).
    CodeletFootprint,
}

impl KeyKind {
    /// Every key kind, for CLI help and tests.
    pub const ALL: [KeyKind; 3] = [
        KeyKind::Codelet,
        KeyKind::CodeletArch,
        KeyKind::CodeletFootprint,
    ];

    /// Short name as accepted by [`KeyKind::parse`]: `codelet`, `codelet-arch`, `codelet-footprint`.
    pub fn name(self) -> &'static str {
        match self {
            KeyKind::Codelet => "codelet",
            KeyKind::CodeletArch => "codelet-arch",
            KeyKind::CodeletFootprint => "codelet-footprint",
        }
    }

    /// Inverse of [`KeyKind::name`] (also accepts `_` for `-`).
    pub fn parse(s: &str) -> Option<KeyKind> {
        let s = s.replace('_', "-");
        KeyKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// Number of dense slots per codelet id: the build pass maps `codelet * slots + sub`
    /// to a column through a flat table, so that no task needs a hash lookup.
    pub(crate) fn slots_per_codelet(self) -> usize {
        match self {
            KeyKind::Codelet => 1,
            KeyKind::CodeletArch => Arch::COUNT,
            KeyKind::CodeletFootprint => 65,
        }
    }

    /// The dense slot of a task (see [`KeyKind::slots_per_codelet`]).
    #[inline]
    pub(crate) fn slot(self, t: &TaskRecord) -> usize {
        let base = t.codelet as usize * self.slots_per_codelet();
        match self {
            KeyKind::Codelet => base,
            KeyKind::CodeletArch => base + t.arch.index(),
            KeyKind::CodeletFootprint => base + footprint_class(t.footprint) as usize,
        }
    }

    /// The key of a task, with the codelet name looked up in `names` (by id).
    pub(crate) fn key_of(self, t: &TaskRecord, names: &CodeletNames<'_>) -> TypeKey {
        let codelet = match names.get(t.codelet) {
            Some(n) => n.to_owned(),
            // A task whose codelet the trace never described: keep it apart by id rather
            // than folding it into another type.
            None => format!("codelet#{}", t.codelet),
        };
        TypeKey {
            codelet,
            arch: (self == KeyKind::CodeletArch).then_some(t.arch),
            footprint_class: (self == KeyKind::CodeletFootprint)
                .then(|| footprint_class(t.footprint)),
        }
    }
}

impl fmt::Display for KeyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Codelet names by codelet id. Ids are usually dense but a trace file may hold any `u32`
/// (4294967295 included): a map, so that no id sizes an array.
pub(crate) struct CodeletNames<'a>(HashMap<u32, &'a str>);

impl<'a> CodeletNames<'a> {
    /// The name of codelet `id`, if the trace described it.
    pub(crate) fn get(&self, id: u32) -> Option<&'a str> {
        self.0.get(&id).copied()
    }
}

/// The codelets' names by id (the last description of an id wins).
pub(crate) fn names_by_id(codelets: &[CodeletInfo]) -> CodeletNames<'_> {
    CodeletNames(codelets.iter().map(|c| (c.id, c.name.as_str())).collect())
}

/// Footprint class of a footprint in bytes: 0 for 0 bytes, else `c` such that
/// `2^(c-1) <= bytes < 2^c` (1 for 1 byte, 21 for 1 MiB..2 MiB).
#[inline]
pub fn footprint_class(bytes: u64) -> u8 {
    (64 - bytes.leading_zeros()) as u8
}

/// One task type: a column of the system and a line of the report.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TypeKey {
    /// Codelet name.
    pub codelet: String,
    /// Architecture, for [`KeyKind::CodeletArch`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<Arch>,
    /// Footprint class (see [`footprint_class`]), for [`KeyKind::CodeletFootprint`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub footprint_class: Option<u8>,
}

impl TypeKey {
    /// A key that names a codelet only.
    pub fn codelet(name: impl Into<String>) -> TypeKey {
        TypeKey {
            codelet: name.into(),
            arch: None,
            footprint_class: None,
        }
    }

    /// A key that names a codelet and an architecture.
    pub fn codelet_arch(name: impl Into<String>, arch: Arch) -> TypeKey {
        TypeKey {
            arch: Some(arch),
            ..TypeKey::codelet(name)
        }
    }
}

/// `gemm`, `gemm@gpu`, `gemm/fp<2MiB` (footprint in [1 MiB, 2 MiB)).
impl fmt::Display for TypeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.codelet)?;
        if let Some(a) = self.arch {
            write!(f, "@{a}")?;
        }
        if let Some(c) = self.footprint_class {
            if c == 0 {
                f.write_str("/fp0")?;
            } else {
                write!(f, "/fp<{}", pow2_bytes(c))?;
            }
        }
        Ok(())
    }
}

/// `2^c` bytes in binary units: `512B`, `2KiB`, `1MiB`, `2^70B`.
fn pow2_bytes(c: u8) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let unit = (c / 10) as usize;
    if unit < UNITS.len() {
        format!("{}{}", 1u64 << (c % 10), UNITS[unit])
    } else {
        format!("2^{c}B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footprint_classes_are_log2_buckets() {
        assert_eq!(footprint_class(0), 0);
        assert_eq!(footprint_class(1), 1);
        assert_eq!(footprint_class(2), 2);
        assert_eq!(footprint_class(3), 2);
        assert_eq!(footprint_class(1 << 20), 21);
        assert_eq!(footprint_class((2 << 20) - 1), 21);
        assert_eq!(footprint_class(u64::MAX), 64);
    }

    #[test]
    fn keys_display_compactly() {
        assert_eq!(TypeKey::codelet("gemm").to_string(), "gemm");
        assert_eq!(
            TypeKey::codelet_arch("gemm", Arch::Gpu).to_string(),
            "gemm@gpu"
        );
        let k = TypeKey {
            footprint_class: Some(21),
            ..TypeKey::codelet("potrf")
        };
        assert_eq!(k.to_string(), "potrf/fp<2MiB");
    }

    #[test]
    fn key_kind_names_round_trip() {
        for k in KeyKind::ALL {
            assert_eq!(KeyKind::parse(k.name()), Some(k));
        }
        assert_eq!(KeyKind::parse("codelet_arch"), Some(KeyKind::CodeletArch));
        assert_eq!(KeyKind::parse("nope"), None);
    }
}
