//! The workspace's layout rules, checked on its sources: within a crate, no two sibling
//! modules import each other, directly or through others (a reader can then learn a module
//! from the ones below it, never needing the one being read); `selfhost-sim` never depends on
//! the engine or the pure core; and the CLI goes through the engine's front door only.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The workspace's crates directory.
fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crates/")
        .to_path_buf()
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a source file (`a/b.rs` and `a/b/mod.rs` → `["a", "b"]`; the crate
/// root → `[]`).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    // Binaries under src/bin are crates of their own.
    if parts.first().is_some_and(|p| p == "bin") {
        return Vec::new();
    }
    parts
}

/// The text without comments (line comments, doc comments).
fn without_comments(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Expands a `use` tree (`a::{b, c::{d, e}}`) into its paths.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let path = tree.split(" as ").next().unwrap_or(tree).trim();
        return vec![path.to_string()];
    };
    let prefix = tree[..open].trim_end_matches("::").trim();
    let close = tree.rfind('}').filter(|&c| c > open).unwrap_or(tree.len());
    let inner = &tree[open + 1..close];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(expand)
        .map(|p| {
            if p == "self" {
                prefix.to_string()
            } else {
                format!("{prefix}::{p}")
            }
        })
        .collect()
}

/// Every path a file names that starts at its own crate (`crate::`, `super::`, `self::`),
/// resolved to segments from the crate root.
fn crate_paths(module: &[String], text: &str) -> Vec<Vec<String>> {
    let text = without_comments(text);
    let mut paths = Vec::new();
    let mut rest = text.as_str();
    // `use` statements, whose trees may span lines.
    while let Some(at) = rest.find("use ") {
        let before = rest[..at].chars().last();
        rest = &rest[at + 4..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let Some(end) = rest.find(';') else { break };
        paths.extend(expand(&rest[..end]));
        rest = &rest[end..];
    }
    // Paths written in code.
    for word in text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')) {
        if word.starts_with("crate::") || word.starts_with("super::") {
            paths.push(word.trim_end_matches(':').to_string());
        }
    }
    paths
        .into_iter()
        .filter_map(|path| {
            let mut segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
            let mut resolved: Vec<String> = match segments.first() {
                Some(&"crate") => {
                    segments.remove(0);
                    Vec::new()
                }
                Some(&"super") | Some(&"self") => {
                    let mut base = module.to_vec();
                    while segments.first() == Some(&"super") {
                        segments.remove(0);
                        base.pop()?;
                    }
                    if segments.first() == Some(&"self") {
                        segments.remove(0);
                    }
                    base
                }
                _ => return None,
            };
            resolved.extend(segments.into_iter().map(str::to_string));
            Some(resolved)
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// The cycles between sibling modules of one crate, each as the modules on it.
fn sibling_cycles(src: &Path) -> Vec<Vec<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(src, f)).collect();
    // Edges between siblings: a file's import lifted to the children of the two modules'
    // closest common ancestor.
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for file in &files {
        if file.strip_prefix(src).is_ok_and(|r| r.starts_with("bin")) {
            continue;
        }
        let from = module_of(src, file);
        let text = std::fs::read_to_string(file).expect("readable source");
        for path in crate_paths(&from, &text) {
            // The longest prefix that is a module of this crate.
            let Some(to) = (0..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|p| modules.contains(p))
            else {
                continue;
            };
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common == from.len() || common == to.len() {
                // One contains the other: a module and its own parts.
                continue;
            }
            edges
                .entry(from[..=common].to_vec())
                .or_default()
                .insert(to[..=common].to_vec());
        }
    }
    // Strongly connected components of more than one module.
    let nodes: Vec<Vec<String>> = edges
        .iter()
        .flat_map(|(a, bs)| std::iter::once(a.clone()).chain(bs.iter().cloned()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let reaches = |from: &Vec<String>| -> BTreeSet<Vec<String>> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(node) = stack.pop() {
            for next in edges.get(&node).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reach: BTreeMap<_, _> = nodes.iter().map(|n| (n.clone(), reaches(n))).collect();
    let mut cycles: BTreeSet<Vec<String>> = BTreeSet::new();
    for node in &nodes {
        let mut cycle: Vec<String> = nodes
            .iter()
            .filter(|other| reach[node].contains(*other) && reach[*other].contains(node))
            .map(|m| m.join("::"))
            .collect();
        if cycle.len() > 1 {
            cycle.sort();
            cycles.insert(cycle);
        }
    }
    cycles.into_iter().collect()
}

/// Circles that remain, each to be broken by moving what both sides share to where it
/// belongs; the list only shrinks (a circle broken must leave it, a new one fails).
const REMAINING: &[&str] = &[];

#[test]
fn no_two_sibling_modules_of_a_crate_import_each_other() {
    let mut found = Vec::new();
    for krate in [
        "selfhost-core",
        "selfhost",
        "selfhost-sim",
        "selfhost-cli",
        "selfhost-e2e",
    ] {
        let src = crates_dir().join(krate).join("src");
        for cycle in sibling_cycles(&src) {
            found.push(format!("{krate}: {}", cycle.join(" <-> ")));
        }
    }
    let new: Vec<&String> = found
        .iter()
        .filter(|c| !REMAINING.contains(&c.as_str()))
        .collect();
    assert!(
        new.is_empty(),
        "import circles between sibling modules:\n{}",
        new.iter()
            .map(|c| c.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    let broken: Vec<&&str> = REMAINING
        .iter()
        .filter(|c| !found.iter().any(|f| f == *c))
        .collect();
    assert!(
        broken.is_empty(),
        "circles broken: remove them from REMAINING: {broken:?}"
    );
}

#[test]
fn the_simulator_depends_on_neither_the_engine_nor_the_core() {
    let manifest = std::fs::read_to_string(crates_dir().join("selfhost-sim/Cargo.toml"))
        .expect("the simulator's manifest");
    for line in manifest.lines().map(str::trim) {
        let dependency = line.split(['=', ' ', '.']).next().unwrap_or_default();
        assert!(
            dependency != "selfhost" && dependency != "selfhost-core",
            "selfhost-sim depends on {dependency}: {line}"
        );
    }
}

/// The engine's modules the CLI may name: the front door's own groups.
const FRONT_DOOR_MODULES: &[&str] = &["report"];

#[test]
fn the_cli_uses_only_the_engines_front_door() {
    let manifest = std::fs::read_to_string(crates_dir().join("selfhost-cli/Cargo.toml"))
        .expect("the CLI's manifest");
    let dependencies = manifest
        .split("[dev-dependencies]")
        .next()
        .unwrap_or_default();
    assert!(
        !dependencies
            .lines()
            .any(|l| l.trim_start().starts_with("selfhost-core")),
        "the CLI depends on selfhost-core directly; it is to use the engine's re-exports"
    );
    let src = crates_dir().join("selfhost-cli").join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut reached = BTreeSet::new();
    for file in &files {
        let text = without_comments(&std::fs::read_to_string(file).expect("readable"));
        for (at, _) in text.match_indices("selfhost::") {
            if at > 0 && text[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let rest = &text[at + "selfhost::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            // A lower-case name followed by `::` is a module path into the engine.
            let is_module = name.starts_with(|c: char| c.is_lowercase())
                && rest[name.len()..].starts_with("::");
            if is_module && !FRONT_DOOR_MODULES.contains(&name.as_str()) {
                reached.insert(format!(
                    "{}: selfhost::{name}::",
                    file.strip_prefix(&src).expect("under src").display()
                ));
            }
        }
    }
    assert!(
        reached.is_empty(),
        "the CLI reaches behind the engine's front door:\n{}",
        reached.into_iter().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn a_use_tree_expands_to_its_paths() {
    assert_eq!(
        expand("crate::a::{b, c::{d, self}, e as f}"),
        vec![
            "crate::a::b",
            "crate::a::c::d",
            "crate::a::c",
            "crate::a::e"
        ]
    );
    let module = vec!["x".to_string(), "y".to_string()];
    assert_eq!(
        crate_paths(&module, "use super::z::Item;\nfn f() { crate::w::g(); }"),
        vec![
            vec!["w".to_string(), "g".into()],
            vec!["x".to_string(), "z".into(), "Item".into()]
        ]
    );
}
