// The one import point of the event vocabulary for the UI.
//
// The vocabulary is defined in Rust (crates/mf-agent/src/events.rs); its
// TypeScript types are generated into ./generated/events.ts by mf-agent's test
// `typescript_types_are_current` (`MF_UPDATE_TS=1 cargo test -p mf-agent
// typescript`). Components import from here, never from a hand-written copy.
export * from './generated/events';
