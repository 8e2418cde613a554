//! The desktop app's binary: everything is in the library so tests can build
//! the same app over Tauri's mock runtime.

// No console window next to the app on Windows release builds.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

fn main() {
    mf_app::run();
}
