//! Reads the metadata header of a GGUF file without loading the model, so a
//! model list can say what each file is (architecture, training context,
//! whether it carries a chat template) in milliseconds.
//!
//! The key/value section is read (arrays such as the tokenizer's vocabulary
//! are skipped), then the tensor table, so the reader knows how many bytes
//! the file must have: every count and length is checked against the file's
//! size and the end of the last tensor's data must lie inside the file. A
//! file that is not a GGUF, or a truncated copy of one (an interrupted copy
//! or download), is reported with the reason before anything tries to load
//! it. Every length read from the file is bounded, so a corrupt or hostile
//! file yields an error, never a huge allocation.

use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use serde::Serialize;

/// What the header says about a model.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GgufInfo {
    /// GGUF format version (2 or 3 in practice).
    pub version: u32,
    /// Number of tensors in the file.
    pub tensor_count: u64,
    /// Number of metadata key/value entries.
    pub metadata_count: u64,
    /// Bytes the header and tensor table say the file needs (at most its size).
    pub bytes_needed: u64,
    /// `general.architecture` (`llama`, `qwen3`, `gemma3`, ...).
    pub architecture: Option<String>,
    /// `general.name`.
    pub name: Option<String>,
    /// `general.size_label` (`8B`, `135M`, ...).
    pub size_label: Option<String>,
    /// `<arch>.context_length`: the training context in tokens.
    pub context_length: Option<u64>,
    /// `general.file_type`: llama.cpp's quantisation code (15 is Q4_K_M).
    pub file_type: Option<u32>,
    /// Whether `tokenizer.chat_template` is present (the app needs one).
    pub has_chat_template: bool,
    /// The chat template itself (not serialised: lists only need the flag).
    #[serde(skip)]
    pub chat_template: Option<String>,
}

/// Why a header could not be read.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// The file could not be opened or read.
    #[error("cannot read {0}")]
    Io(#[from] std::io::Error),
    /// Not a GGUF file.
    #[error("not a GGUF file (it starts with {0:?})")]
    BadMagic(String),
    /// The header is malformed or claims sizes beyond the limits.
    #[error("malformed GGUF header: {0}")]
    Malformed(String),
    /// The file is shorter than its own header says: an interrupted copy or download.
    #[error("truncated GGUF file: {what} needs {needed} bytes but the file has {size}")]
    Truncated {
        /// What did not fit (the header, a metadata entry, the tensor data).
        what: String,
        /// Bytes needed.
        needed: u64,
        /// Bytes in the file.
        size: u64,
    },
}

const MAX_STRING: u64 = 16 << 20; // the largest chat templates are ~20 KB; vocab strings are short
const MAX_KV: u64 = 100_000;
const MAX_ARRAY: u64 = 10_000_000;
const MAX_TENSORS: u64 = 1_000_000;
const MAX_DIMS: u32 = 8; // ggml uses at most 4
/// Smallest possible metadata entry: key length (8), one key byte, value type (4), a one-byte value.
const MIN_KV_BYTES: u64 = 14;
/// Smallest possible tensor table entry: name length (8), dims count (4), type (4), offset (8).
const MIN_TENSOR_INFO_BYTES: u64 = 24;

/// Reads the header of the GGUF file at `path`.
///
/// # Errors
/// [`GgufError`] when the file cannot be read or is not a well-formed GGUF file.
pub fn read_info(path: &Path) -> Result<GgufInfo, GgufError> {
    let file = std::fs::File::open(path)?;
    let mut r = BufReader::with_capacity(1 << 16, file);
    read_info_from(&mut r)
}

/// Reads a GGUF header from any reader positioned at the start of the file,
/// and checks it against the reader's length (seeking to its end).
///
/// # Errors
/// As [`read_info`].
pub fn read_info_from<R: Read + Seek>(r: &mut R) -> Result<GgufInfo, GgufError> {
    let size = r.seek(SeekFrom::End(0))?;
    r.seek(SeekFrom::Start(0))?;
    // A read that runs off the end of the file means it was cut short.
    let eof = |what: &str, e: GgufError, r: &mut R| -> GgufError {
        match e {
            GgufError::Io(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
                let needed = r.stream_position().map_or(size + 1, |p| p.max(size + 1));
                GgufError::Truncated { what: what.into(), needed, size }
            }
            other => other,
        }
    };
    let mut magic = Vec::with_capacity(4);
    r.take(4).read_to_end(&mut magic)?;
    if magic != b"GGUF" {
        return Err(GgufError::BadMagic(String::from_utf8_lossy(&magic).escape_debug().to_string()));
    }
    if size < 24 {
        return Err(GgufError::Truncated { what: "the header".into(), needed: 24, size });
    }
    let version = u32_le(r)?;
    if !(2..=3).contains(&version) {
        return Err(GgufError::Malformed(format!("unsupported version {version}")));
    }
    let tensor_count = u64_le(r)?;
    let kv_count = u64_le(r)?;
    if kv_count > MAX_KV {
        return Err(GgufError::Malformed(format!("{kv_count} metadata entries")));
    }
    if tensor_count > MAX_TENSORS {
        return Err(GgufError::Malformed(format!("{tensor_count} tensors")));
    }
    let table = kv_count * MIN_KV_BYTES + tensor_count * MIN_TENSOR_INFO_BYTES;
    if 24 + table > size {
        return Err(GgufError::Truncated { what: format!("{kv_count} metadata entries and {tensor_count} tensors"), needed: 24 + table, size });
    }
    let mut info = GgufInfo { version, tensor_count, metadata_count: kv_count, ..GgufInfo::default() };
    let mut context_lengths: Vec<(String, u64)> = Vec::new();
    let mut alignment: u64 = 32;
    for i in 0..kv_count {
        read_entry(r, size, &mut info, &mut context_lengths, &mut alignment).map_err(|e| eof(&format!("metadata entry {} of {kv_count}", i + 1), e, r))?;
    }
    if alignment == 0 || !alignment.is_power_of_two() {
        return Err(GgufError::Malformed(format!("alignment {alignment}")));
    }
    // The tensor table: where each tensor's data starts (relative to the
    // aligned data section) and how large it is.
    let mut data_end: u64 = 0;
    for i in 0..tensor_count {
        let end = tensor_end(r).map_err(|e| eof(&format!("tensor {} of {tensor_count} in the table", i + 1), e, r))?;
        data_end = data_end.max(end);
    }
    let table_end = r.stream_position()?;
    let needed = if tensor_count == 0 {
        table_end
    } else {
        table_end
            .div_ceil(alignment)
            .checked_mul(alignment)
            .and_then(|start| start.checked_add(data_end))
            .ok_or_else(|| GgufError::Malformed("tensor data beyond any file size".into()))?
    };
    if needed > size {
        return Err(GgufError::Truncated { what: format!("the data of {tensor_count} tensors"), needed, size });
    }
    info.bytes_needed = needed;
    // The architecture may come after its context length in the file.
    info.context_length = context_lengths.iter().find(|(arch, _)| Some(arch) == info.architecture.as_ref()).map(|(_, v)| *v);
    Ok(info)
}

/// Reads one metadata entry, keeping the keys a model list shows.
fn read_entry<R: Read + Seek>(
    r: &mut R,
    size: u64,
    info: &mut GgufInfo,
    context_lengths: &mut Vec<(String, u64)>,
    alignment: &mut u64,
) -> Result<(), GgufError> {
    let key = string(r)?;
    let ty = u32_le(r)?;
    match (key.as_str(), ty) {
        ("general.architecture", 8) => info.architecture = Some(string(r)?),
        ("general.name", 8) => info.name = Some(string(r)?),
        ("general.size_label", 8) => info.size_label = Some(string(r)?),
        ("general.file_type", 4 | 5) => info.file_type = Some(u32_le(r)?),
        ("general.alignment", 4) => *alignment = u64::from(u32_le(r)?),
        ("tokenizer.chat_template", 8) => {
            info.chat_template = Some(string(r)?);
            info.has_chat_template = true;
        }
        (k, 4 | 5 | 10 | 11) if k.ends_with(".context_length") => {
            let v = if ty == 4 || ty == 5 { u64::from(u32_le(r)?) } else { u64_le(r)? };
            context_lengths.push((k.trim_end_matches(".context_length").to_string(), v));
        }
        _ => skip_value(r, ty)?,
    }
    // Skipping seeks, and a seek past the end is not an error by itself.
    let pos = r.stream_position()?;
    if pos > size {
        return Err(GgufError::Truncated { what: format!("metadata entry `{key}`"), needed: pos, size });
    }
    Ok(())
}

/// Reads one tensor table entry; returns where its data ends, relative to
/// the data section. For a tensor type whose size is not known here, the
/// end is its offset plus one byte (its first byte must be in the file).
fn tensor_end<R: Read>(r: &mut R) -> Result<u64, GgufError> {
    let _name = string(r)?;
    let n_dims = u32_le(r)?;
    if n_dims > MAX_DIMS {
        return Err(GgufError::Malformed(format!("a tensor with {n_dims} dimensions")));
    }
    let mut elements: u64 = 1;
    for _ in 0..n_dims {
        elements = elements.checked_mul(u64_le(r)?).ok_or_else(|| GgufError::Malformed("tensor size overflows".into()))?;
    }
    let ty = u32_le(r)?;
    let offset = u64_le(r)?;
    let bytes = match tensor_block(ty) {
        Some((per_block, block_bytes)) => elements.div_ceil(per_block).checked_mul(block_bytes),
        None => Some(1),
    };
    bytes.and_then(|b| offset.checked_add(b)).ok_or_else(|| GgufError::Malformed("tensor size overflows".into()))
}

/// (elements per block, bytes per block) of the ggml tensor types whose layout
/// is fixed and well known; `None` for the others.
fn tensor_block(ty: u32) -> Option<(u64, u64)> {
    Some(match ty {
        0 => (1, 4),       // F32
        1 => (1, 2),       // F16
        2 => (32, 18),     // Q4_0
        3 => (32, 20),     // Q4_1
        6 => (32, 22),     // Q5_0
        7 => (32, 24),     // Q5_1
        8 => (32, 34),     // Q8_0
        9 => (32, 36),     // Q8_1
        10 => (256, 84),   // Q2_K
        11 => (256, 110),  // Q3_K
        12 => (256, 144),  // Q4_K
        13 => (256, 176),  // Q5_K
        14 => (256, 210),  // Q6_K
        15 => (256, 292),  // Q8_K
        24 => (1, 1),      // I8
        25 => (1, 2),      // I16
        26 => (1, 4),      // I32
        27 | 28 => (1, 8), // I64, F64
        30 => (1, 2),      // BF16
        _ => return None,
    })
}

fn u32_le<R: Read>(r: &mut R) -> Result<u32, GgufError> {
    let mut b = [0u8; 4];
    r.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

fn u64_le<R: Read>(r: &mut R) -> Result<u64, GgufError> {
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

fn string<R: Read>(r: &mut R) -> Result<String, GgufError> {
    let len = u64_le(r)?;
    if len > MAX_STRING {
        return Err(GgufError::Malformed(format!("string of {len} bytes")));
    }
    let mut buf = Vec::new();
    r.take(len).read_to_end(&mut buf)?;
    if buf.len() as u64 != len {
        return Err(GgufError::Io(std::io::ErrorKind::UnexpectedEof.into()));
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// Size in bytes of a fixed-size value type, `None` for strings and arrays.
fn fixed_size(ty: u32) -> Result<Option<i64>, GgufError> {
    Ok(match ty {
        0 | 1 | 7 => Some(1),
        2 | 3 => Some(2),
        4..=6 => Some(4),
        10..=12 => Some(8),
        8 | 9 => None,
        other => return Err(GgufError::Malformed(format!("unknown value type {other}"))),
    })
}

fn skip_value<R: Read + Seek>(r: &mut R, ty: u32) -> Result<(), GgufError> {
    if let Some(n) = fixed_size(ty)? {
        r.seek(SeekFrom::Current(n))?;
        return Ok(());
    }
    if ty == 8 {
        let len = u64_le(r)?;
        if len > MAX_STRING {
            return Err(GgufError::Malformed(format!("string of {len} bytes")));
        }
        r.seek(SeekFrom::Current(len as i64))?;
        return Ok(());
    }
    // Array: element type, count, elements.
    let elem = u32_le(r)?;
    let count = u64_le(r)?;
    if count > MAX_ARRAY {
        return Err(GgufError::Malformed(format!("array of {count} elements")));
    }
    if elem == 9 {
        return Err(GgufError::Malformed("nested arrays".into()));
    }
    match fixed_size(elem)? {
        Some(n) => {
            r.seek(SeekFrom::Current(n * count as i64))?;
        }
        None => {
            for _ in 0..count {
                skip_value(r, 8)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
pub(super) mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::io::Cursor;

    fn kv_string(out: &mut Vec<u8>, key: &str, value: &str) {
        out.extend((key.len() as u64).to_le_bytes());
        out.extend(key.as_bytes());
        out.extend(8u32.to_le_bytes());
        out.extend((value.len() as u64).to_le_bytes());
        out.extend(value.as_bytes());
    }

    /// A GGUF v3 header with no tensors and `kvs` metadata entries to follow
    /// (`header(0)` alone is the smallest well-formed GGUF file).
    pub(crate) fn header(kvs: u64) -> Vec<u8> {
        let mut v = b"GGUF".to_vec();
        v.extend(3u32.to_le_bytes());
        v.extend(0u64.to_le_bytes());
        v.extend(kvs.to_le_bytes());
        v
    }

    #[test]
    fn reads_a_synthetic_header_with_arrays_before_the_keys() {
        let mut f = header(5);
        // A string array (vocabulary) first, to be skipped.
        let key = "tokenizer.ggml.tokens";
        f.extend((key.len() as u64).to_le_bytes());
        f.extend(key.as_bytes());
        f.extend(9u32.to_le_bytes());
        f.extend(8u32.to_le_bytes());
        f.extend(2u64.to_le_bytes());
        for t in ["<s>", "hello"] {
            f.extend((t.len() as u64).to_le_bytes());
            f.extend(t.as_bytes());
        }
        // Context length before the architecture.
        let key = "qwen3.context_length";
        f.extend((key.len() as u64).to_le_bytes());
        f.extend(key.as_bytes());
        f.extend(4u32.to_le_bytes());
        f.extend(40_960u32.to_le_bytes());
        kv_string(&mut f, "general.architecture", "qwen3");
        kv_string(&mut f, "general.name", "Qwen3 8B");
        kv_string(&mut f, "tokenizer.chat_template", "{{ messages }}");
        let info = read_info_from(&mut Cursor::new(f)).unwrap();
        assert_eq!(info.architecture.as_deref(), Some("qwen3"));
        assert_eq!(info.name.as_deref(), Some("Qwen3 8B"));
        assert_eq!(info.context_length, Some(40_960));
        assert!(info.has_chat_template);
        assert_eq!(info.chat_template.as_deref(), Some("{{ messages }}"));
        assert_eq!(info.version, 3);
    }

    #[test]
    fn refuses_bad_magic_truncation_and_absurd_sizes() {
        let read = |b: Vec<u8>| read_info_from(&mut Cursor::new(b));
        assert!(matches!(read(b"PK\x03\x04rest".to_vec()), Err(GgufError::BadMagic(_))));
        assert!(matches!(read(b"GG".to_vec()), Err(GgufError::BadMagic(_))));
        assert!(matches!(read(b"GGUF\x03\0\0\0".to_vec()), Err(GgufError::Truncated { needed: 24, size: 8, .. })));
        // A key length far beyond the file.
        let mut f = header(1);
        f.extend(u64::MAX.to_le_bytes());
        f.extend([0u8; 16]);
        assert!(matches!(read(f), Err(GgufError::Malformed(_))));
        // Second entry cut off.
        let mut f = header(2);
        kv_string(&mut f, "general.name", "x");
        f.extend(5u64.to_le_bytes());
        f.extend(b"gen");
        let e = read(f).unwrap_err();
        assert!(matches!(e, GgufError::Truncated { .. }), "{e}");
        assert!(e.to_string().contains("metadata entry 2 of 2"), "{e}");
        // More entries (or tensors) than the file could hold.
        assert!(matches!(read(header(u64::MAX)), Err(GgufError::Malformed(_))));
        let mut f = header(1_000);
        kv_string(&mut f, "general.name", "x");
        assert!(matches!(read(f), Err(GgufError::Truncated { .. })));
        // A skipped string value whose length runs past the end.
        let mut f = header(1);
        f.extend(4u64.to_le_bytes());
        f.extend(b"junk");
        f.extend(8u32.to_le_bytes());
        f.extend(1_000u64.to_le_bytes());
        f.extend(b"short");
        let e = read(f).unwrap_err();
        assert!(matches!(e, GgufError::Truncated { .. }), "{e}");
    }

    /// One F32 tensor of `n` elements at offset 0, with `data` bytes of data.
    fn one_tensor_file(n: u64, data: usize) -> Vec<u8> {
        let mut f = b"GGUF".to_vec();
        f.extend(3u32.to_le_bytes());
        f.extend(1u64.to_le_bytes());
        f.extend(1u64.to_le_bytes());
        kv_string(&mut f, "general.architecture", "llama");
        f.extend(4u64.to_le_bytes());
        f.extend(b"w.in");
        f.extend(1u32.to_le_bytes());
        f.extend(n.to_le_bytes());
        f.extend(0u32.to_le_bytes()); // F32
        f.extend(0u64.to_le_bytes());
        while !f.len().is_multiple_of(32) {
            f.push(0);
        }
        f.extend(vec![0u8; data]);
        f
    }

    #[test]
    fn tensor_data_must_fit_in_the_file() {
        let info = read_info_from(&mut Cursor::new(one_tensor_file(100, 400))).unwrap();
        assert_eq!((info.tensor_count, info.metadata_count), (1, 1));
        assert_eq!(info.bytes_needed, one_tensor_file(100, 400).len() as u64);
        let e = read_info_from(&mut Cursor::new(one_tensor_file(100, 399))).unwrap_err();
        assert!(matches!(e, GgufError::Truncated { .. }), "{e}");
        assert!(e.to_string().contains("the data of 1 tensors"), "{e}");
    }

    fn real_model() -> Option<std::path::PathBuf> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/SmolLM2-135M-Instruct.Q4_1.gguf");
        if path.exists() {
            Some(path)
        } else {
            assert!(std::env::var("MF_REQUIRE_MODELS").as_deref() != Ok("1"), "{} is missing and MF_REQUIRE_MODELS=1", path.display());
            eprintln!("skipped: {} missing (run scripts/setup.sh)", path.display());
            None
        }
    }

    #[test]
    fn truncated_copies_of_the_real_test_model_are_refused() {
        let Some(path) = real_model() else { return };
        let whole = std::fs::read(&path).unwrap();
        let info = read_info_from(&mut Cursor::new(&whole)).unwrap();
        assert_eq!(info.bytes_needed, whole.len() as u64, "the test model has no trailing bytes");
        let dir = tempfile::tempdir().unwrap();
        // Cut in the vocabulary, in the tensor table, in the data, one byte short.
        for cut in [200_000, info.bytes_needed as usize / 2, whole.len() - 1] {
            let copy = dir.path().join("cut.gguf");
            std::fs::write(&copy, &whole[..cut]).unwrap();
            let e = read_info(&copy).unwrap_err();
            assert!(matches!(e, GgufError::Truncated { size, .. } if size == cut as u64), "cut at {cut}: {e}");
        }
    }

    #[test]
    fn reads_the_real_test_model_when_present() {
        let Some(path) = real_model() else { return };
        let info = read_info(&path).unwrap();
        assert_eq!(info.architecture.as_deref(), Some("llama"));
        assert_eq!(info.context_length, Some(8192));
        assert!(info.has_chat_template);
        assert!(info.tensor_count > 0 && info.bytes_needed <= std::fs::metadata(&path).unwrap().len());
        let gemma = path.with_file_name("gemma-3-270m-q4_k_m.gguf");
        if gemma.exists() {
            let g = read_info(&gemma).unwrap();
            assert!(g.tensor_count > 0 && g.bytes_needed <= std::fs::metadata(&gemma).unwrap().len());
        }
    }
}
