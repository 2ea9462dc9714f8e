//! Key files: raw and hex, and errors that name the file and what is wrong.

use std::net::Ipv4Addr;

use trawl_anon::{CryptoPan, Key};

#[test]
fn key_file_raw_and_hex_give_the_same_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let bytes: Vec<u8> = (100..132).collect();
    let raw = dir.path().join("raw.key");
    let hex = dir.path().join("hex.key");
    std::fs::write(&raw, &bytes).unwrap();
    let text: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    std::fs::write(&hex, format!("{text}\n")).unwrap();
    let a = CryptoPan::new(&Key::from_file(&raw).unwrap());
    let b = CryptoPan::new(&Key::from_file(&hex).unwrap());
    let addr = Ipv4Addr::new(198, 51, 100, 7);
    assert_eq!(a.v4(addr), b.v4(addr));
}

#[test]
fn key_file_errors_name_the_file_and_the_fault() {
    let dir = tempfile::tempdir().unwrap();
    let short = dir.path().join("short.key");
    std::fs::write(&short, b"0123456789abcdef\n").unwrap();
    let e = Key::from_file(&short).unwrap_err().to_string();
    assert!(e.contains("short.key") && e.contains("17 bytes"), "{e}");

    let bad = dir.path().join("bad.key");
    let mut text = "a".repeat(64);
    text.replace_range(10..11, "z");
    std::fs::write(&bad, text).unwrap();
    let e = Key::from_file(&bad).unwrap_err().to_string();
    assert!(
        e.contains("bad.key") && e.contains("byte 10") && e.contains("'z'"),
        "{e}"
    );

    let missing = dir.path().join("missing.key");
    let e = Key::from_file(&missing).unwrap_err().to_string();
    assert!(e.contains("missing.key"), "{e}");
}
