//! Generates one test per grammar pattern (`tests/grammar_patterns.rs`
//! includes the output), named after the pattern id — which carries the
//! version it was seen in (`nccl_ib_completion_v2_20`) — so a failing
//! sample points at one pattern and one version.

use std::fmt::Write;
use std::path::Path;

fn main() {
    let dir = Path::new("grammars");
    println!("cargo:rerun-if-changed=grammars");
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .expect("grammars/ exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    names.sort();
    let mut out = String::new();
    for path in names {
        println!("cargo:rerun-if-changed={}", path.display());
        let text = std::fs::read_to_string(&path).expect("grammar readable");
        let Ok(doc) = text.parse::<toml::Table>() else {
            continue;
        };
        let Some(patterns) = doc.get("pattern").and_then(|p| p.as_array()) else {
            continue;
        };
        for p in patterns {
            let Some(id) = p.get("id").and_then(|i| i.as_str()) else {
                continue;
            };
            let fn_name: String = id
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() {
                        c.to_ascii_lowercase()
                    } else {
                        '_'
                    }
                })
                .collect();
            writeln!(
                out,
                "#[test]\nfn {fn_name}() {{\n    check_pattern({id:?});\n}}\n"
            )
            .unwrap();
        }
    }
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("grammar_pattern_tests.rs");
    std::fs::write(dest, out).unwrap();
}
