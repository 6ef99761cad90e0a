//! What a Rust source file names, read with `syn` as a reader follows it: every path
//! (`use` trees flattened, `self`/`super`/`crate` kept as segments) and every identifier,
//! outside test-only code. The layering tests build on it: the module graph of every
//! crate (`tests/architecture.rs`) and the appliance's own rules
//! (`appliance/tests/module_layers.rs`).

use std::collections::BTreeSet;
use std::path::Path;

use syn::visit::Visit;

/// `path` parsed; panics naming the file when it cannot be read or parsed.
pub fn parse(path: &Path) -> syn::File {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    syn::parse_file(&text).unwrap_or_else(|e| panic!("cannot parse {}: {e}", path.display()))
}

/// Whether `attrs` carry a `cfg` that mentions `test` (`#[cfg(test)]`,
/// `#[cfg(any(test, feature = "testing"))]`): code that is not the product's.
pub fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string().contains("test"))
    })
}

/// Flattens a `use` tree into paths of identifiers; a glob gives its prefix.
pub fn flatten_use(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten_use(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => out.push([prefix.as_slice(), &[n.ident.to_string()]].concat()),
        syn::UseTree::Rename(r) => out.push([prefix.as_slice(), &[r.ident.to_string()]].concat()),
        syn::UseTree::Glob(_) => out.push(prefix.clone()),
        syn::UseTree::Group(g) => {
            for item in &g.items {
                flatten_use(item, prefix, out);
            }
        }
    }
}

/// Every path a file names outside test-only code, and every identifier in them.
#[derive(Debug, Default)]
pub struct Names {
    pub paths: Vec<Vec<String>>,
    pub idents: BTreeSet<String>,
}

impl<'ast> Visit<'ast> for Names {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Struct(s) => &s.attrs,
            syn::Item::Enum(e) => &e.attrs,
            syn::Item::Const(c) => &c.attrs,
            syn::Item::Static(s) => &s.attrs,
            _ => &[],
        };
        if is_test_only(attrs) {
            return;
        }
        if let syn::Item::Use(u) = item {
            let mut paths = Vec::new();
            flatten_use(&u.tree, &mut Vec::new(), &mut paths);
            for path in paths {
                self.idents.extend(path.last().cloned());
                self.paths.push(path);
            }
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.idents.extend(segments.iter().cloned());
        self.paths.push(segments);
        syn::visit::visit_path(self, path);
    }
}

/// What the file at `path` names.
pub fn names_in(path: &Path) -> Names {
    let mut names = Names::default();
    names.visit_file(&parse(path));
    names
}

/// What Rust source `text` names (a test's snippet); panics if it does not parse.
pub fn names_in_text(text: &str) -> Names {
    let mut names = Names::default();
    names.visit_file(&syn::parse_file(text).expect("the snippet parses"));
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_identifiers_outside_test_code_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("m.rs");
        std::fs::write(
            &file,
            "use crate::a::{b, c as d};\nfn f() { super::x::y(); }\n\
             #[cfg(test)] mod tests { use crate::hidden; }\n\
             #[cfg(any(test, feature = \"testing\"))] fn g() { crate::also_hidden(); }\n",
        )
        .unwrap();
        let names = names_in(&file);
        let paths: Vec<String> = names.paths.iter().map(|p| p.join("::")).collect();
        assert!(paths.contains(&"crate::a::b".to_owned()), "{paths:?}");
        assert!(paths.contains(&"crate::a::c".to_owned()), "{paths:?}");
        assert!(paths.contains(&"super::x::y".to_owned()), "{paths:?}");
        assert!(!paths.iter().any(|p| p.contains("hidden")), "{paths:?}");
        assert!(names.idents.contains("y") && !names.idents.contains("hidden"));
    }
}
