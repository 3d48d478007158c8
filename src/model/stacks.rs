//! Stack dumps of the job's processes (py-spy, Python's faulthandler): what
//! each process was doing when someone looked at the hung job.

use super::{EventIdx, FileId};

/// One process's dump: its threads, each with its frames.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StackDump {
    /// The line that opened it: the process header, else its first thread.
    pub header: EventIdx,
    pub file: FileId,
    pub pid: Option<u32>,
    pub host: Option<String>,
    pub rank: Option<u32>,
    /// py-spy lists the main thread first, faulthandler last.
    pub format: StackFormat,
    pub threads: Vec<StackThread>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StackFormat {
    #[default]
    PySpy,
    Faulthandler,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct StackThread {
    pub header: EventIdx,
    pub name: Option<String>,
    /// Frame events, innermost first.
    pub frames: Vec<EventIdx>,
}

impl StackDump {
    /// The thread that runs the program: py-spy names it `MainThread`;
    /// unnamed, it is the oldest thread, which py-spy prints first and
    /// faulthandler last.
    pub fn main_thread(&self) -> Option<&StackThread> {
        let named = self
            .threads
            .iter()
            .find(|t| t.name.as_deref() == Some("MainThread"));
        named.or(match self.format {
            StackFormat::PySpy => self.threads.first(),
            StackFormat::Faulthandler => self.threads.last(),
        })
    }
}
