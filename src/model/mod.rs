//! The ground floor: the event and job types every stage shares, and the
//! model stage that joins events into a job.

pub mod build;
pub mod cause;
pub mod counter_store;
pub mod event;
pub mod fields;
pub mod intern;
pub mod job;
pub mod kernel;
pub mod rank_ranges;
pub mod stacks;
pub mod sym;
pub mod sys;
pub mod time;

pub use cause::CauseKind;
pub use event::{Event, EventKind, FileId, Level, Origin, Who};
pub use fields::{FieldList, FieldRef, Fields, FieldsBuilder, Value};
pub use intern::intern;
pub use job::{
    CallTrace, Death, DeathKind, EventIdx, FileInfo, HostInfo, Job, NetLink, NicInfo, PathHints,
    PeerLink, PgRankState, RankInfo, RayActorLines, Skipped,
};
pub use rank_ranges::rank_ranges;
pub use stacks::{StackDump, StackFormat, StackThread};
pub use sym::Sym;
pub use sys::{
    BondSlave, CounterDelta, CounterReading, CounterSource, FlightDump, FlightEntry,
    FlightPgConfig, FlightPgStatus, GidEntry, GpuFinding, GpuSnapshot, LinkNeighbor, Phase,
    PortSnapshot, SourceLine, SysRecord, SysTables,
};
pub use time::RawTime;
