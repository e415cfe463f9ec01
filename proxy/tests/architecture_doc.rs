//! docs/architecture.md must stay true: every `module::item` named in its "Where each rule
//! lives" list exists in proxy/src (a module file, a `fn`, or a type). A name followed by
//! "(*planned*" is being built elsewhere and is skipped until the marker goes.

use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The rule list's section of the doc.
fn rule_section() -> String {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/architecture.md");
    let text = std::fs::read_to_string(&doc).expect("docs/architecture.md");
    let start = text
        .find("## Where each rule lives")
        .expect("the doc has a 'Where each rule lives' section");
    let rest = &text[start + 3..];
    let end = rest.find("\n## ").map_or(rest.len(), |e| e);
    rest[..end].to_string()
}

/// Each backticked `a::b` path, with whether it is marked planned.
fn named_paths(section: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut parts = section.split('`');
    // Odd pieces are inside backticks.
    let _ = parts.next();
    while let Some(inside) = parts.next() {
        let after = parts.next().unwrap_or("");
        let is_path = inside.contains("::")
            && inside
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
        if is_path {
            out.push((inside.to_string(), after.starts_with(" (*planned*")));
        }
    }
    out
}

/// All `.rs` files under `dir`.
fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let p = entry.path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The files of module `segments` (its file, and everything under its folder), if it exists.
fn module_files(segments: &[&str]) -> Option<Vec<PathBuf>> {
    let mut base = src();
    if segments.is_empty() {
        let mut all = Vec::new();
        rs_files(&base, &mut all);
        return Some(all);
    }
    for s in &segments[..segments.len() - 1] {
        base = base.join(s);
    }
    let last = segments[segments.len() - 1];
    let file = base.join(format!("{last}.rs"));
    let dir = base.join(last);
    let mut files = Vec::new();
    if file.is_file() {
        files.push(file);
    }
    if dir.join("mod.rs").is_file() || (dir.is_dir() && !files.is_empty()) {
        rs_files(&dir, &mut files);
    }
    (!files.is_empty()).then_some(files)
}

fn defines(files: &[PathBuf], needles: &[String]) -> bool {
    files.iter().any(|f| {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        needles.iter().any(|n| text.contains(n.as_str()))
    })
}

fn fn_defined(files: &[PathBuf], name: &str) -> bool {
    defines(files, &[format!("fn {name}("), format!("fn {name}<")])
}

fn type_defined(files: &[PathBuf], name: &str) -> bool {
    ["struct", "enum", "trait", "type"].iter().any(|k| {
        defines(
            files,
            &[
                format!("{k} {name} "),
                format!("{k} {name}<"),
                format!("{k} {name}("),
            ],
        )
    })
}

/// Does `path` (e.g. `session::Session::release_if_possible`) name something that exists?
fn exists(path: &str) -> Result<(), String> {
    let segments: Vec<&str> = path.split("::").collect();
    // The longest prefix of lowercase segments that is a module.
    let lower = segments
        .iter()
        .take_while(|s| s.starts_with(|c: char| c.is_ascii_lowercase()))
        .count();
    let (mut files, mut used) = (None, 0);
    for n in (0..=lower).rev() {
        if let Some(f) = module_files(&segments[..n]) {
            files = Some(f);
            used = n;
            break;
        }
    }
    let files = files.ok_or_else(|| format!("{path}: no such module"))?;
    match &segments[used..] {
        [] => Ok(()),
        [item] if item.starts_with(|c: char| c.is_ascii_uppercase()) => type_defined(&files, item)
            .then_some(())
            .ok_or_else(|| format!("{path}: no type {item}")),
        [item] => fn_defined(&files, item)
            .then_some(())
            .ok_or_else(|| format!("{path}: no fn {item}")),
        [ty, item] => {
            let all = module_files(&[]).unwrap();
            if !type_defined(&all, ty) {
                return Err(format!("{path}: no type {ty}"));
            }
            fn_defined(&files, item)
                .then_some(())
                .ok_or_else(|| format!("{path}: no fn {item}"))
        }
        _ => Err(format!("{path}: not a module::item path")),
    }
}

#[test]
fn every_rule_home_named_in_the_architecture_doc_exists() {
    let paths = named_paths(&rule_section());
    let checked: Vec<&String> = paths.iter().filter(|(_, p)| !p).map(|(s, _)| s).collect();
    assert!(
        checked.len() >= 10,
        "the rule list names its homes: {paths:?}"
    );
    let missing: Vec<String> = checked.iter().filter_map(|p| exists(p).err()).collect();
    assert!(
        missing.is_empty(),
        "docs/architecture.md names what does not exist: {missing:#?}"
    );
}

#[test]
fn the_checker_finds_a_missing_name() {
    assert!(exists("pool::recycle::decide").is_ok());
    assert!(exists("session::state::Rules::of").is_ok());
    assert!(exists("pool::recycle::no_such_function").is_err());
    assert!(exists("no_such_module::decide").is_err());
    assert!(exists("session::NoSuchType::run").is_err());
}
