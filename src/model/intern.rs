//! Interned names: field names and pattern ids live as long as the process.
//!
//! Every event carries its pattern id and field names. Sharing them through
//! reference counts made the two parser threads fight over the counters'
//! cache lines (a third of the CPU time went to it); plain `&'static str`
//! costs nothing to copy. The set of names is bounded by the grammars, so
//! leaking each distinct name once is the cheapest correct lifetime.

use std::collections::HashSet;
use std::sync::{LazyLock, Mutex};

static NAMES: LazyLock<Mutex<HashSet<&'static str>>> = LazyLock::new(|| Mutex::new(HashSet::new()));

/// The process-wide copy of `name`.
pub fn intern(name: &str) -> &'static str {
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&known) = names.get(name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.insert(leaked);
    leaked
}

#[cfg(test)]
mod tests {
    use super::intern;

    #[test]
    fn the_same_name_is_stored_once() {
        let a = intern(&String::from("peer_port"));
        let b = intern("peer_port");
        assert!(std::ptr::eq(a, b));
        assert_eq!(a, "peer_port");
    }
}
