//! The ground floor: the event and job types every stage shares.

pub mod event;
pub mod time;

pub use event::{Event, EventKind, Fields, FileId, Level, Origin, Value, Who};
pub use time::RawTime;
