//! Parse: lines to typed events. One module per source format's prefix; the
//! messages themselves are grammar data (`grammars/`).

pub mod archive;
pub mod clock_file;
pub mod frame;
mod keep_last;
pub mod kernel;
pub mod lint;
pub mod nccl;
pub mod ompi;
pub mod paste;
mod repeat_key;
pub mod restarts;
mod run_memo;
pub mod scan;
pub mod selftest;
pub mod split;
pub mod stamps;
pub mod tables;
pub mod torch;
pub mod ucx;
pub mod unwrap;
mod wrapped;

pub use keep_last::EARLIER;
pub use scan::{FileParse, parse_file, parse_stream};
