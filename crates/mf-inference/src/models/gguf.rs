//! Reads the metadata header of a GGUF file without loading the model, so a
//! model list can say what each file is (architecture, training context,
//! whether it carries a chat template) in milliseconds.
//!
//! Only the key/value section is read; arrays (the tokenizer's vocabulary) are
//! skipped. Every length read from the file is bounded, so a corrupt or hostile
//! file yields an error, never a huge allocation.

use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use serde::Serialize;

/// What the header says about a model.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GgufInfo {
    /// GGUF format version (2 or 3 in practice).
    pub version: u32,
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
}

const MAX_STRING: u64 = 16 << 20; // the largest chat templates are ~20 KB; vocab strings are short
const MAX_KV: u64 = 100_000;
const MAX_ARRAY: u64 = 10_000_000;

/// Reads the header of the GGUF file at `path`.
///
/// # Errors
/// [`GgufError`] when the file cannot be read or is not a well-formed GGUF file.
pub fn read_info(path: &Path) -> Result<GgufInfo, GgufError> {
    let file = std::fs::File::open(path)?;
    let mut r = BufReader::with_capacity(1 << 16, file);
    read_info_from(&mut r)
}

/// Reads a GGUF header from any reader positioned at the start of the file.
///
/// # Errors
/// As [`read_info`].
pub fn read_info_from<R: Read + Seek>(r: &mut R) -> Result<GgufInfo, GgufError> {
    let mut magic = [0u8; 4];
    r.read_exact(&mut magic)?;
    if &magic != b"GGUF" {
        return Err(GgufError::BadMagic(String::from_utf8_lossy(&magic).escape_debug().to_string()));
    }
    let version = u32_le(r)?;
    if !(2..=3).contains(&version) {
        return Err(GgufError::Malformed(format!("unsupported version {version}")));
    }
    let _tensors = u64_le(r)?;
    let kv_count = u64_le(r)?;
    if kv_count > MAX_KV {
        return Err(GgufError::Malformed(format!("{kv_count} metadata entries")));
    }
    let mut info = GgufInfo { version, ..GgufInfo::default() };
    let mut context_lengths: Vec<(String, u64)> = Vec::new();
    for _ in 0..kv_count {
        let key = string(r)?;
        let ty = u32_le(r)?;
        match (key.as_str(), ty) {
            ("general.architecture", 8) => info.architecture = Some(string(r)?),
            ("general.name", 8) => info.name = Some(string(r)?),
            ("general.size_label", 8) => info.size_label = Some(string(r)?),
            ("general.file_type", 4 | 5) => info.file_type = Some(u32_le(r)?),
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
    }
    // The architecture may come after its context length in the file.
    info.context_length = context_lengths
        .iter()
        .find(|(arch, _)| Some(arch) == info.architecture.as_ref())
        .map(|(_, v)| *v);
    Ok(info)
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
        return Err(GgufError::Malformed("truncated string".into()));
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
mod tests {
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

    fn header(kvs: u64) -> Vec<u8> {
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
        assert!(matches!(read_info_from(&mut Cursor::new(b"PK\x03\x04rest".to_vec())), Err(GgufError::BadMagic(_))));
        let mut f = header(1);
        f.extend(u64::MAX.to_le_bytes()); // key length
        assert!(matches!(read_info_from(&mut Cursor::new(f)), Err(GgufError::Malformed(_))));
        let mut f = header(2);
        kv_string(&mut f, "general.name", "x");
        // Second entry cut off.
        f.extend(5u64.to_le_bytes());
        assert!(matches!(read_info_from(&mut Cursor::new(f)), Err(GgufError::Malformed(_) | GgufError::Io(_))));
        assert!(matches!(read_info_from(&mut Cursor::new(header(u64::MAX))), Err(GgufError::Malformed(_))));
    }

    #[test]
    fn reads_the_real_test_model_when_present() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/SmolLM2-135M-Instruct.Q4_1.gguf");
        if !path.exists() {
            eprintln!("skipped: {} missing (run scripts/setup.sh)", path.display());
            return;
        }
        let info = read_info(&path).unwrap();
        assert_eq!(info.architecture.as_deref(), Some("llama"));
        assert_eq!(info.context_length, Some(8192));
        assert!(info.has_chat_template);
    }
}
