//! Compile errors carry libpcap's message and name the expression and link type.

use trawl_bpf::{Error, Filter};
use trawl_capture::LinkType;

fn compile_error(expr: &str, link_type: LinkType) -> (String, String) {
    match Filter::compile(expr, link_type, 0) {
        Err(e @ Error::Compile { .. }) => {
            let Error::Compile { ref message, .. } = e else {
                unreachable!()
            };
            (message.clone(), e.to_string())
        }
        other => panic!("{expr:?}: expected a compile error, got {other:?}"),
    }
}

/// libpcap's own message for `expr` on a dead handle of `dlt`, through the `pcap` crate.
fn libpcap_message(expr: &str, dlt: i32) -> String {
    let dead = pcap::Capture::dead(pcap::Linktype(dlt)).unwrap();
    match dead.compile(expr, true) {
        Err(pcap::Error::PcapError(m)) => m,
        other => panic!("{expr:?}: libpcap did not fail: {:?}", other.map(|_| ())),
    }
}

#[test]
fn bad_expressions_carry_libpcap_text() {
    for (expr, fragment) in [
        ("tcp port", "syntax error"),
        ("host 999.1.1.1", "999.1.1.1"),
        ("foo", "syntax error"),
        ("tcp port 80 and", "syntax error"),
        ("port 99999", "port"),
    ] {
        let (message, display) = compile_error(expr, LinkType::ETHERNET);
        assert_eq!(message, libpcap_message(expr, 1), "{expr:?}");
        assert!(message.contains(fragment), "{expr:?}: {message}");
        assert_eq!(
            display,
            format!("filter expression {expr:?} for link type 1: {message}")
        );
    }
}

#[test]
fn exact_messages_of_this_libpcap() {
    // libpcap 1.10's wording; a different libpcap may word them differently, which the test
    // above tolerates, so only check these where they hold.
    let (m, _) = compile_error("tcp port", LinkType::ETHERNET);
    if m.starts_with("can't parse") {
        assert_eq!(m, "can't parse filter expression: syntax error");
    } else {
        assert!(m.starts_with("syntax error"), "{m}");
    }
    let (m, _) = compile_error("host 999.1.1.1", LinkType::ETHERNET);
    assert!(m.contains("'999.1.1.1'"), "{m}");
}

#[test]
fn primitives_the_link_type_lacks() {
    let (m, d) = compile_error("ether host 00:11:22:33:44:55", LinkType::RAW);
    assert_eq!(m, libpcap_message("ether host 00:11:22:33:44:55", 12));
    assert!(m.contains("ethernet addresses supported only on"), "{m}");
    assert!(d.contains("link type 101"), "{d}");
    let (m, _) = compile_error("vlan", LinkType::RAW);
    assert!(m.contains("VLAN"), "{m}");
    // A link type libpcap has never heard of.
    let (m, _) = compile_error("tcp", LinkType(9999));
    assert!(m.contains("9999"), "{m}");
}

#[test]
fn nul_byte_is_an_error_not_a_panic() {
    let (m, _) = compile_error("tcp\0port 80", LinkType::ETHERNET);
    assert!(m.contains("NUL"), "{m}");
}
