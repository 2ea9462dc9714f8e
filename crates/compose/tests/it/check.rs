//! Validation: every kind of mistake gets an error that names the block, gate, pool or
//! connection, and every problem of a composition is reported at once.
use crate::{cpus, registry};

fn problems(text: &str) -> Vec<String> {
    match trawl_compose::plan(text, "comp.toml", &registry(), &cpus()) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => {
            assert_eq!(e.origin, "comp.toml");
            e.problems
        }
    }
}

fn one_problem(text: &str) -> String {
    let p = problems(text);
    assert_eq!(p.len(), 1, "{p:#?}");
    p.into_iter().next().unwrap()
}

const SRC_SINK: &str = r#"
    [[block]]
    name = "src"
    type = "numbers"
    count = 1
    [[block]]
    name = "out"
    type = "sink"
"#;

#[test]
fn a_valid_composition_is_described_with_its_placement() {
    let plan = trawl_compose::plan(
        &format!(
            "{SRC_SINK}
            [[block]]
            name = \"x\"
            type = \"scale\"
            [[connection]]
            from = \"src.out\"
            to = \"x.in\"
            [[connection]]
            from = \"x.out\"
            to = \"out.in\"
            policy = \"drop\"
            capacity = 8"
        ),
        "comp.toml",
        &registry(),
        &cpus(),
    )
    .unwrap();
    let d = plan.describe();
    assert!(d.contains("thread main[0] (not pinned):"), "{d}");
    assert!(d.contains("src.out -> x.in: numbers (direct call)"), "{d}");
    // Same thread: direct, whatever the queue settings say.
    assert!(d.contains("x.out -> out.in: numbers (direct call)"), "{d}");
    assert_eq!(plan.order, vec![0, 2, 1]);
}

#[test]
fn toml_syntax_errors_point_at_the_line() {
    let p = one_problem("[[block]]\nname = \"a\"\ntype = \n");
    assert!(p.contains("line 3"), "{p}");
}

#[test]
fn unknown_types_settings_and_keys_are_named() {
    let p = problems(
        r#"
        [[block]]
        name = "a"
        type = "numbrs"
        [[block]]
        name = "b"
        type = "numbers"
        cuont = 3
        [[block]]
        name = "c"
        type = "numbers"
        batch = 0
        [[block]]
        type = "sink"
        [[block]]
        name = "b"
        type = "sink"
        "#,
    );
    assert_eq!(p.len(), 5, "{p:#?}");
    assert!(p[0].starts_with("block `a`: unknown block type `numbrs` (known types: complainer, numbers, observer, scale, sink, talker, ticker, where)"), "{}", p[0]);
    assert!(
        p[1].starts_with("block `b` (numbers): unknown field `cuont`"),
        "{}",
        p[1]
    );
    assert_eq!(p[2], "block `c` (numbers): batch must be at least 1");
    assert_eq!(p[3], "block #4: needs a `name` (a string)");
    assert_eq!(p[4], "block `b` is defined twice");
    let p = one_problem("[[blocks]]\nname = \"a\"\n");
    assert!(p.contains("unknown field `blocks`"), "{p}");
}

#[test]
fn bad_connections_name_the_gate_and_what_exists() {
    let p = problems(&format!(
        r#"{SRC_SINK}
        [[block]]
        name = "t"
        type = "talker"
        [[connection]]
        from = "src.output"
        to = "out.in"
        [[connection]]
        from = "src.out"
        to = "nobody.in"
        [[connection]]
        from = "src.out"
        to = "src.out"
        [[connection]]
        from = "t.out"
        to = "out.in"
        [[connection]]
        from = "srcout"
        to = "out.in"
        [[connection]]
        from = "out.in"
        to = "src.out"
        "#
    ));
    assert_eq!(
        p,
        vec![
            "connection #1 from `src.output`: `src` (numbers) has no output gate `output` (outputs: out)",
            "connection #2 to `nobody.in`: no block is called `nobody`",
            "connection #3 to `src.out`: `out` is an output of `src` (numbers), used here as an input",
            "connection `t.out` -> `out.in`: type mismatch: `t.out` sends text, `out.in` takes numbers",
            "connection #5 from `srcout`: write endpoints as `block.gate`",
            "connection #6 from `out.in`: `in` is an input of `out` (sink), used here as an output",
            "connection #6 to `src.out`: `out` is an output of `src` (numbers), used here as an input",
            // The mismatched connection was refused, so `t.out` feeds nothing.
            "block `t`: output `t.out` (text) is required but is connected to nothing",
        ]
    );
}

#[test]
fn any_typed_inputs_take_every_type() {
    trawl_compose::plan(
        &format!("{SRC_SINK}\n[[block]]\nname = \"t\"\ntype = \"talker\"\n[[connection]]\nfrom = \"t.out\"\nto = \"out.anything\"\n"),
        "comp.toml",
        &registry(),
        &cpus(),
    )
    .unwrap();
}

#[test]
fn required_gates_must_be_connected() {
    let p = problems(
        r#"
        [[block]]
        name = "x"
        type = "scale"
        [[block]]
        name = "t"
        type = "talker"
        "#,
    );
    assert_eq!(
        p,
        vec![
            "block `x`: input `x.in` (numbers) is required but nothing is connected to it",
            "block `t`: output `t.out` (text) is required but is connected to nothing",
        ]
    );
}

#[test]
fn cycles_are_refused_with_their_path() {
    let p = one_problem(
        r#"
        [[block]]
        name = "src"
        type = "numbers"
        [[block]]
        name = "a"
        type = "scale"
        [[block]]
        name = "b"
        type = "scale"
        [[block]]
        name = "c"
        type = "scale"
        [[connection]]
        from = "src.out"
        to = "a.in"
        [[connection]]
        from = "a.out"
        to = "b.in"
        [[connection]]
        from = "b.out"
        to = "c.in"
        [[connection]]
        from = "c.out"
        to = "a.in"
        "#,
    );
    assert!(
        ["a -> b -> c -> a", "b -> c -> a -> b", "c -> a -> b -> c"]
            .iter()
            .any(|c| p == format!("the connections form a cycle: {c}")),
        "{p}"
    );
    let p = problems("[[block]]\nname = \"a\"\ntype = \"scale\"\n[[connection]]\nfrom = \"a.out\"\nto = \"a.in\"\n");
    assert_eq!(
        p[0],
        "connection `a.out` -> `a.in`: a block cannot feed itself"
    );
}

#[test]
fn pools_cores_and_threads_are_checked() {
    let p = problems(&format!(
        r#"
        [[pool]]
        name = "p"
        cores = [0, 4096, 0]
        [[pool]]
        name = "q"
        cores = [0]
        threads = 2
        [[pool]]
        name = "p"
        [[pool]]
        name = "r"
        threads = 0
        {SRC_SINK}
        pool = "nowhere"
        [[block]]
        name = "z"
        type = "sink"
        pool = "p"
        thread = 3
        "#
    ));
    let cpus = cpus()
        .iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    assert_eq!(
        p,
        vec![
            format!("pool `p`: core 4096 is out of range (this process may run on cores {cpus})"),
            "pool `p`: core 0 is listed twice".to_string(),
            "pool `q`: give either `cores` (one pinned thread per core) or `threads` (unpinned), not both".to_string(),
            "pool `p` is defined twice".to_string(),
            "pool `r`: `threads` must be at least 1".to_string(),
            "block `out`: unknown pool `nowhere` (pools: p, q, p, r)".to_string(),
            "block `z`: thread 3 is out of range: pool `p` has 3 threads".to_string(),
        ]
    );
}

#[test]
fn threads_waiting_on_each_other_in_a_circle_are_refused() {
    let text = r#"
        [[pool]]
        name = "one"
        [[pool]]
        name = "two"
        [[block]]
        name = "src"
        type = "numbers"
        pool = "one"
        [[block]]
        name = "a"
        type = "scale"
        pool = "two"
        [[block]]
        name = "b"
        type = "sink"
        pool = "one"
        [[connection]]
        from = "src.out"
        to = "a.in"
        [[connection]]
        from = "a.out"
        to = "b.in"
    "#;
    let p = one_problem(text);
    assert!(
        p.starts_with("queued connections with policy \"wait\" go round the threads"),
        "{p}"
    );
    // With one side dropping instead of waiting there is no circle of waits.
    let dropping = text.replacen("to = \"b.in\"", "to = \"b.in\"\npolicy = \"drop\"", 1);
    trawl_compose::plan(&dropping, "comp.toml", &registry(), &cpus()).unwrap();
}

#[test]
fn chains_follow_their_source_across_a_pool_with_several_threads() {
    let plan = trawl_compose::plan(
        r#"
        [[pool]]
        name = "workers"
        threads = 2
        [[block]]
        name = "s0"
        type = "numbers"
        pool = "workers"
        [[block]]
        name = "s1"
        type = "numbers"
        pool = "workers"
        [[block]]
        name = "m0"
        type = "scale"
        pool = "workers"
        [[block]]
        name = "m1"
        type = "scale"
        pool = "workers"
        [[connection]]
        from = "s0.out"
        to = "m0.in"
        [[connection]]
        from = "s1.out"
        to = "m1.in"
        "#,
        "comp.toml",
        &registry(),
        &cpus(),
    )
    .unwrap();
    let thread = |n: &str| plan.blocks.iter().find(|b| b.name == n).unwrap().thread;
    assert_ne!(thread("s0"), thread("s1"));
    assert_eq!(thread("s0"), thread("m0"));
    assert_eq!(thread("s1"), thread("m1"));
    assert!(plan.connections.iter().all(|c| !c.queued));
    let m1 = plan.blocks.iter().find(|b| b.name == "m1").unwrap();
    assert_eq!((m1.env.instance, m1.env.instances), (1, 2));
    // The composition-wide index tells apart blocks of different types too (stream numbers).
    let indices: Vec<usize> = plan.blocks.iter().map(|b| b.env.index).collect();
    assert_eq!(indices, vec![0, 1, 2, 3]);
}

/// `[runtime]` run controls are checked like everything else: each problem named.
#[test]
fn issue_19_runtime_controls_are_checked() {
    let text = r#"
        [runtime]
        duration = "soon"
        count = 0
        stats_interval = "10ms"
        user = " "
        [[block]]
        name = "src"
        type = "numbers"
        [[block]]
        name = "s"
        type = "sink"
        [[connection]]
        from = "src.out"
        to = "s.in"
    "#;
    let e = match trawl_compose::plan(text, "test", &crate::registry(), &crate::cpus()) {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    };
    for want in [
        "`duration` = `soon` is not a duration",
        "`count` must be at least 1",
        "`stats_interval` must be from 100ms to 1d",
        "`user` is empty",
    ] {
        assert!(e.contains(want), "{want}: {e}");
    }
}
