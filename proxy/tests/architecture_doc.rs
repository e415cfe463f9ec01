//! docs/architecture.md must stay true:
//! - every `module::item` named in its "Where each rule lives" list exists in proxy/src (a
//!   module file, a `fn`, or a type). A name followed by "(*planned*" is being built
//!   elsewhere and is skipped until the marker goes;
//! - its "Module map" has one row per module file of proxy/src (every `.rs` file but
//!   `tests.rs` and `*_tests.rs`, named by its path relative to proxy/src), and every row
//!   names a file that exists. A new module without a row fails with the row to add.

use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The doc's section under `heading` (a `## ` line), up to the next `## ` heading.
fn section(heading: &str) -> String {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/architecture.md");
    let text = std::fs::read_to_string(&doc).expect("docs/architecture.md");
    let start = text
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("docs/architecture.md has a '{heading}' section"));
    let rest = &text[start + 1 + heading.len()..];
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
    let paths = named_paths(&section("## Where each rule lives"));
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

// The module map: one row per module file of proxy/src.

/// A test module, which the map leaves out: `tests.rs` and `*_tests.rs`.
fn is_test_file(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    name == "tests.rs" || name.ends_with("_tests.rs")
}

/// Every module file under proxy/src, as a path relative to it with `/` separators.
fn module_tree() -> Vec<String> {
    let root = src();
    let mut files = Vec::new();
    rs_files(&root, &mut files);
    let mut rel: Vec<String> = files
        .iter()
        .map(|f| {
            let r = f.strip_prefix(&root).expect("under proxy/src");
            r.components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/")
        })
        .filter(|r| !is_test_file(r))
        .collect();
    rel.sort_by_key(|r| module_order(r));
    rel
}

/// The paths the module map names: the backticked first cell of each table row.
fn map_rows(section: &str) -> Vec<String> {
    section
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("| `"))
        .filter_map(|rest| rest.split_once('`').map(|(path, _)| path.to_string()))
        .filter(|p| p.ends_with(".rs"))
        .collect()
}

/// Where a file sits among its siblings: by module path, a folder's `mod.rs` first
/// (`admin/mod.rs` < `admin/actions.rs` < `app.rs`).
fn module_order(rel: &str) -> Vec<String> {
    let mut segments: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if segments.len() > 1 && segments.last().is_some_and(|s| s == "mod") {
        segments.pop();
    }
    segments
}

/// The row to add for a file the map leaves out, and where it goes.
fn missing_row_advice(rows: &[String], missing: &str) -> String {
    let after = rows
        .iter()
        .filter(|r| module_order(r) < module_order(missing))
        .max_by_key(|r| module_order(r));
    let place = match after {
        Some(r) => format!("right after the row for `{r}`"),
        None => "as its first row".to_string(),
    };
    format!(
        "proxy/src/{missing} has no line in docs/architecture.md's module map. Add this row \
         to the table under \"## Module map\", {place}:\n\
         | `{missing}` | <what the module is, in one line> | <what it must not do> |"
    )
}

#[test]
fn the_module_map_names_every_module_file_and_nothing_else() {
    let rows = map_rows(&section("## Module map"));
    let tree = module_tree();
    assert!(
        rows.len() >= 50,
        "the module map lists the module files: {rows:?}"
    );
    let mut problems: Vec<String> = tree
        .iter()
        .filter(|f| !rows.contains(f))
        .map(|f| missing_row_advice(&rows, f))
        .collect();
    let mut seen = std::collections::HashSet::new();
    for r in &rows {
        if !seen.insert(r) {
            problems.push(format!(
                "docs/architecture.md's module map names `{r}` twice: keep one row"
            ));
        }
        if !src().join(r).is_file() {
            problems.push(format!(
                "docs/architecture.md's module map has a row for `{r}`, but proxy/src/{r} \
                 does not exist: remove the row, or rename it to the file's new path"
            ));
        } else if is_test_file(r) {
            problems.push(format!(
                "docs/architecture.md's module map has a row for the test file `{r}`: \
                 remove it (tests.rs and *_tests.rs are left out)"
            ));
        }
    }
    assert!(problems.is_empty(), "\n{}\n", problems.join("\n\n"));
}

#[test]
fn the_module_map_check_says_which_row_to_add_and_where() {
    let rows: Vec<String> = ["admin/mod.rs", "admin/show.rs", "app.rs", "pool/mod.rs"]
        .map(String::from)
        .to_vec();
    assert!(module_order("admin/mod.rs") < module_order("admin/actions.rs"));
    assert!(module_order("admin/show.rs") < module_order("app.rs"));
    assert!(module_order("classify.rs") < module_order("classify/fast.rs"));
    let advice = missing_row_advice(&rows, "accounts/mod.rs");
    assert!(advice.contains("as its first row"), "{advice}");
    assert!(
        advice.contains("| `accounts/mod.rs` |"),
        "the advice holds the row to add: {advice}"
    );
    let advice = missing_row_advice(&rows, "admin/digest.rs");
    assert!(
        advice.contains("right after the row for `admin/mod.rs`"),
        "{advice}"
    );
    let advice = missing_row_advice(&rows, "pool/rules.rs");
    assert!(
        advice.contains("right after the row for `pool/mod.rs`"),
        "{advice}"
    );
    assert!(is_test_file("classify/tests.rs") && is_test_file("topology/roles_tests.rs"));
    assert!(!is_test_file("conn/stmts.rs"));
    assert_eq!(
        map_rows("| file | what |\n| --- | --- |\n| `a/b.rs` | x |\n| `C::d` | y |\n"),
        vec!["a/b.rs".to_string()]
    );
}
