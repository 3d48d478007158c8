//! A name shared by many table readings of one file.
//!
//! A 16k-rank job's counter dumps hold 1.6 million readings, each naming
//! its host, device and counter; most IB counter names are longer than an
//! inline string holds (`port_rcv_remote_physical_errors`), so each reading
//! paid a heap copy of each. A file's parser hands out one shared copy per
//! distinct name instead (`parse::tables::common::TableCtx`). Shared only
//! within one parser thread, so no two threads contend for its count.
//!
//! The pointer is thin (8 bytes, the length lives with the text): a reading
//! holds three names, and 24 bytes a reading is 40 MB at that scale.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Serialize, Serializer};

#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Sym(Arc<Box<str>>);

impl Sym {
    pub fn new(s: &str) -> Sym {
        Sym(Arc::new(s.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for Sym {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

/// Hashes and compares as its text, so maps keyed by `Sym` are searched by `&str`.
impl Borrow<str> for Sym {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Sym {
    fn from(s: &str) -> Sym {
        Sym::new(s)
    }
}

impl PartialEq<str> for Sym {
    fn eq(&self, other: &str) -> bool {
        **self.0 == *other
    }
}

impl PartialEq<&str> for Sym {
    fn eq(&self, other: &&str) -> bool {
        **self.0 == **other
    }
}

impl fmt::Debug for Sym {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self.0, f)
    }
}

impl fmt::Display for Sym {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for Sym {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}
