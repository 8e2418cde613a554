//! Tauri's build step: embeds tauri.conf.json (at the repository root), reads
//! the capabilities under src-tauri/capabilities, and generates one
//! `allow-<command>` permission per app command. The command names come from
//! ui/src/lib/commands.json, the list the UI invokes; the crate's sync test
//! checks it against the registered handlers and the capability.

use std::error::Error;

fn main() -> Result<(), Box<dyn Error>> {
    println!("cargo:rerun-if-changed=ui/src/lib/commands.json");
    println!("cargo:rerun-if-changed=src-tauri/capabilities");
    let text = std::fs::read_to_string("ui/src/lib/commands.json")?;
    let json: serde_json::Value = serde_json::from_str(&text)?;
    let names: Vec<&'static str> = json["commands"]
        .as_array()
        .ok_or("ui/src/lib/commands.json: `commands` must be an array")?
        .iter()
        .map(|v| v.as_str().map(|s| &*Box::leak(s.to_owned().into_boxed_str())).ok_or("ui/src/lib/commands.json: every command must be a string"))
        .collect::<Result<_, _>>()?;
    let names: &'static [&'static str] = Box::leak(names.into_boxed_slice());
    let attrs = tauri_build::Attributes::new()
        .capabilities_path_pattern("./src-tauri/capabilities/**/*")
        .app_manifest(tauri_build::AppManifest::new().commands(names));
    tauri_build::try_build(attrs)?;
    Ok(())
}
