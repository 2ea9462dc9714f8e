//! docs/blocks.md stays true: every registered block has its section naming every gate.
#[test]
fn every_block_and_gate_is_documented() {
    let path = trawl_testkit::repo_root().join("docs/blocks.md");
    let doc = std::fs::read_to_string(&path).expect("docs/blocks.md");
    for b in trawl_blocks::registry().iter() {
        let heading = format!("\n## `{}`", b.type_name);
        let start = doc
            .find(&heading)
            .unwrap_or_else(|| panic!("docs/blocks.md has no section {heading:?}"));
        let end = doc[start + 1..]
            .find("\n## ")
            .map_or(doc.len(), |e| start + 1 + e);
        let section = &doc[start..end];
        for g in b.inputs.iter().chain(b.outputs) {
            assert!(
                section.contains(&format!("`{}`", g.name)) && section.contains(g.ty.name),
                "docs/blocks.md section of `{}` does not list gate `{}` ({})",
                b.type_name,
                g.name,
                g.ty.name
            );
        }
    }
}
